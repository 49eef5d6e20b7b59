"""README.md is generated from nbs/index.ipynb and must not be stale."""
import sys

from conftest import ROOT
sys.path.insert(0, str(ROOT / 'scripts'))
from make_readme import render_readme  # noqa: E402

def test_readme_matches_index_notebook():
    assert (ROOT / 'README.md').read_text() == render_readme(), \
        "README.md is stale: edit nbs/index.ipynb, then run python scripts/make_readme.py"

def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / 'README.md').read_text()
    assert 'scripts/course' in readme and 'scripts/test' in readme
    ci = [l.strip() for l in (ROOT / '.ci' / 'run').read_text().splitlines() if l.strip() and not l.startswith('#')]
    assert 'scripts/test' in ci, ".ci/run must call the README's test command"
