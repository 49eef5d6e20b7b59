"""One line-length rule for the whole repository:

- at most 100 characters in what a learner reads: the package (`contrastive_nb/*.py`) and the notebooks' code cells;
- at most 120 characters in every Python file under `tests/`, `scripts/`, `benchmarks/` and `examples/`.

`scripts/course`, `scripts/test` and `scripts/site` are bash, not Python, and are not checked."""
import json

import pytest

from conftest import ROOT, lesson_notebooks

LIMIT = 100        # the package and the notebooks' code cells
TOOLS_LIMIT = 120  # tests/, scripts/, benchmarks/, examples/
TOOL_DIRS = ('tests', 'scripts', 'benchmarks', 'examples')

# A figure's alt text is one Quarto option line (`#| fig-alt: "..."`): metadata the site reads and never shows as
# code, kept on one line because a YAML string split over `#|` lines is not safe through nbdev's directive parser.
# Only notebooks have such lines, so only the notebook test exempts them.
OPTION_LINE = '#| fig-alt: '

def long_lines(lines: list[str], limit: int = LIMIT) -> list[str]:
    return [f'{len(l)}: {l.strip()[:70]}' for l in lines if len(l) > limit]

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
    lines = [l for c in cells if c['cell_type'] == 'code' for l in ''.join(c['source']).splitlines()
             if not l.startswith(OPTION_LINE)]
    too_long = long_lines(lines)
    assert not too_long, f"{notebook.name}: code lines over {LIMIT} characters:\n" + '\n'.join(too_long)

tool_files = sorted(p for d in TOOL_DIRS for p in (ROOT / d).rglob('*.py'))

@pytest.mark.parametrize('path', tool_files, ids=lambda p: str(p.relative_to(ROOT)))
def test_tool_lines_fit(path):
    lines = path.read_text().splitlines()
    too_long = [f'line {i}: {m}' for i, l in enumerate(lines, 1) for m in long_lines([l], TOOLS_LIMIT)]
    assert not too_long, f"{path.relative_to(ROOT)}: lines over {TOOLS_LIMIT} characters:\n" + '\n'.join(too_long)
