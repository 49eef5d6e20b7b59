"""Every committed `show_doc` output shows the code as it is: a signature or docstring that changed without its
notebook being run again leaves the page documenting code that no longer exists (issue 42 found seven)."""
import importlib, json, re

import pytest
from nbdev.showdoc import show_doc

from conftest import lesson_notebooks

def exported_module(nb: dict) -> str | None:
    "The module a notebook exports to (its `default_exp`), if any."
    for cell in nb['cells']:
        m = re.search(r'#\|\s*default_exp\s+(\w+)', ''.join(cell['source']))
        if m: return m.group(1)
    return None

def normalised(markdown: str) -> str:
    "What the page says, not how it is laid out: no source link, no parameter comments, one space between words."
    markdown = re.sub(r'\[source\]\([^)]*\)(\{[^}]*\})?', '', markdown)
    markdown = re.sub(r'(?<=\S) +#[^\n]*', '', markdown)  # comments come from the source, where there is one
    return re.sub(r',? \)', ')', ' '.join(markdown.split()))  # one parameter per line ends with a comma

def showdoc_cells(nb: dict) -> list[tuple[str, str, str]]:
    "(cell id, dotted name, the committed markdown) of every `show_doc(NAME)` cell that has an output."
    out = []
    for cell in nb['cells']:
        m = re.fullmatch(r'(?:#\|[^\n]*\n)*show_doc\(([\w.]+)\)', ''.join(cell['source']).strip())
        shown = [o for o in cell.get('outputs', []) if 'text/markdown' in o.get('data', {})]
        if cell['cell_type'] == 'code' and m and shown:
            out.append((cell['id'], m.group(1), ''.join(shown[0]['data']['text/markdown'])))
    return out

EXPORTING = [p for p in lesson_notebooks() if exported_module(json.loads(p.read_text()))]

@pytest.mark.parametrize('notebook', EXPORTING, ids=lambda p: p.name)
def test_committed_show_doc_outputs_show_todays_signatures_and_docstrings(notebook):
    nb = json.loads(notebook.read_text())
    module = importlib.import_module(f'contrastive_nb.{exported_module(nb)}')
    stale = []
    for cell_id, name, committed in showdoc_cells(nb):
        obj = module
        for part in name.split('.'): obj = getattr(obj, part)
        if normalised(committed) != normalised(show_doc(obj)._repr_markdown_()): stale.append(f'{name} ({cell_id})')
    assert not stale, f"{notebook.name}: run these show_doc cells again: {stale}"
