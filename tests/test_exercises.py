"""Exercises work where learners work (JupyterLab): solutions are folded, at the end, and never replace the
learner's function; every lesson has a "predict, then run" exercise."""
import ast, json

import pytest

from conftest import lesson_notebooks

def sections(nb: dict) -> dict[str, list[dict]]:
    "The cells of a notebook grouped under their `## ` heading."
    out, current = {}, None
    for cell in nb['cells']:
        source = ''.join(cell['source'])
        if cell['cell_type'] == 'markdown' and source.startswith('## '):
            current = source.splitlines()[0][3:].strip()
        out.setdefault(current, []).append(cell)
    return out

def defined_names(cells: list[dict]) -> set[str]:
    "Names bound at the top level of the code cells (functions, classes, assignments)."
    names = set()
    for cell in cells:
        if cell['cell_type'] != 'code': continue
        source = '\n'.join(l for l in ''.join(cell['source']).splitlines() if not l.lstrip().startswith(('%', '!')))
        try: tree = ast.parse(source)
        except SyntaxError: continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)): names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names

with_exercises = [p for p in lesson_notebooks() if '## Exercises' in p.read_text()]

@pytest.mark.parametrize('notebook', with_exercises, ids=lambda p: p.name)
def test_solutions_are_folded_last_and_never_replace_the_learners_function(notebook):
    nb = json.loads(notebook.read_text())
    parts = sections(nb)
    headings = list(parts)
    assert 'Solutions' in parts, f"{notebook.name}: the answers belong in a '## Solutions' section at the end"
    assert headings.index('Solutions') > headings.index('Exercises'), f"{notebook.name}: Solutions before Exercises"
    solution_code = [c for c in parts['Solutions'] if c['cell_type'] == 'code'
                     and not ''.join(c['source']).startswith('#| hide')]
    assert solution_code, f"{notebook.name}: the Solutions section has no code"
    unfolded = [''.join(c['source']).splitlines()[:3] for c in solution_code
                if not c.get('metadata', {}).get('jupyter', {}).get('source_hidden')]
    assert not unfolded, f"{notebook.name}: solution cells visible in JupyterLab (no jupyter.source_hidden): {unfolded}"
    stubs = [c for c in parts['Exercises'] if 'raise NotImplementedError' in ''.join(c['source'])]
    assert stubs, f"{notebook.name}: no exercise stub for the learner to fill in"
    clash = defined_names(stubs) & defined_names(parts['Solutions'])
    assert not clash, f"{notebook.name}: Run All would replace the learner's {sorted(clash)} with the solution"

@pytest.mark.parametrize('notebook', [p for p in with_exercises if p.name[:2].isdigit()], ids=lambda p: p.name)
def test_every_lesson_has_a_predict_then_run_exercise(notebook):
    text = ' '.join(''.join(c['source']) for c in sections(json.loads(notebook.read_text()))['Exercises']
                    if c['cell_type'] == 'markdown')
    assert 'predict' in text.lower(), f"{notebook.name}: no 'predict, then run' exercise"
