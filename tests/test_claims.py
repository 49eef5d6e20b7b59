"""The home page's claims table is the lessons' own output (issue 25).

Each lesson that tests a claim from the literature ends one cell with `show_claims(...)`, built from its variables;
nbs/index.ipynb reads those committed outputs and README.md is rendered from it. These tests read the committed files
only (nothing is run or written), so they hold on any machine and in parallel workers."""
import json
import re

import pytest

from conftest import ROOT
from contrastive_nb.experiments import claims_markdown, read_claims, read_course_claims

NBS = ROOT / 'nbs'
LESSONS = sorted(NBS.glob('[0-9][0-9]_*.ipynb'))

def index_claims_output() -> str:
    "The committed output of the home page's cell that builds the table."
    cells = [c for c in json.loads((NBS / 'index.ipynb').read_text())['cells']
             if c['cell_type'] == 'code' and 'read_course_claims(' in ''.join(c['source'])]
    assert len(cells) == 1, "nbs/index.ipynb must build its claims table in exactly one cell"
    outputs = [o for o in cells[0]['outputs'] if 'text/markdown' in o.get('data', {})]
    assert len(outputs) == 1, "the claims cell of nbs/index.ipynb has no table output: run it"
    return ''.join(outputs[0]['data']['text/markdown'])

def test_home_page_table_is_the_lessons_claims():
    assert index_claims_output() == claims_markdown(read_course_claims(NBS)), \
        "the home page's claims table differs from the lessons' show_claims outputs: rerun nbs/index.ipynb, " \
        "then python scripts/make_readme.py"

def test_readme_carries_the_table():
    assert index_claims_output() in (ROOT / 'README.md').read_text()

@pytest.mark.parametrize('lesson', LESSONS, ids=lambda p: p.stem)
def test_a_lesson_claims_under_its_own_number(lesson):
    number = lesson.name[:2]
    for claim in read_claims(lesson):
        assert number in re.findall(r'\d\d', claim.lesson), \
            f"{lesson.name}: the claim {claim.claim!r} names lesson {claim.lesson!r}"

def test_the_lessons_that_test_claims_show_them():
    # the lessons with experiments on claims from the literature (the table had rows for each before it was built)
    claiming = {p.name[:2] for p in LESSONS if read_claims(p)}
    assert {'03', '04', '05', '06', '07', '08', '09', '10', '11', '12'} <= claiming

def test_no_claim_is_shown_twice():
    claims = [c.claim for c in read_course_claims(NBS)]
    assert len(claims) == len(set(claims)), "a claim appears in two lessons: keep it in one (lesson '05, 06')"
