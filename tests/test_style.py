"""Code fits the page: lines of at most 100 characters in the package and in the notebooks' code cells."""
import json

import pytest

from conftest import ROOT, lesson_notebooks

LIMIT = 100

# A figure's alt text is one Quarto option line (`#| fig-alt: "..."`): metadata the site reads and never shows as
# code, kept on one line because a YAML string split over `#|` lines is not safe through nbdev's directive parser.
OPTION_LINE = '#| fig-alt: '

def long_lines(lines: list[str]) -> list[str]:
    return [f'{len(l)}: {l.strip()[:70]}' for l in lines if len(l) > LIMIT and not l.startswith(OPTION_LINE)]

modules = sorted(p for p in (ROOT / 'contrastive_nb').glob('*.py') if p.name != '_modidx.py')  # nbdev's index

@pytest.mark.parametrize('module', modules, ids=lambda p: p.name)
def test_package_lines_fit(module):
    lines = module.read_text().splitlines()
    # nbdev writes the module docstring's first line and the __all__ list itself, wider than 100
    ours, generated = [], False
    for i, line in enumerate(lines):
        generated = line.startswith('__all__') or (generated and line.startswith(' '))
        if i > 0 and not generated: ours.append(line)
    too_long = long_lines(ours)
    assert not too_long, f"{module.name}: lines over {LIMIT} characters:\n" + '\n'.join(too_long)

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_notebook_code_lines_fit(notebook):
    cells = json.loads(notebook.read_text())['cells']
    lines = [l for c in cells if c['cell_type'] == 'code' for l in ''.join(c['source']).splitlines()]
    too_long = long_lines(lines)
    assert not too_long, f"{notebook.name}: code lines over {LIMIT} characters:\n" + '\n'.join(too_long)
