"""Write README.md from nbs/index.ipynb with nbconvert (no Quarto needed). `--check` exits 1 when README.md is stale."""
import re, sys
from pathlib import Path

import nbformat
from nbconvert import MarkdownExporter

ROOT = Path(__file__).resolve().parent.parent
HEADER = '<!-- Generated from nbs/index.ipynb by scripts/make_readme.py: edit the notebook, not this file. -->\n\n'
_directive = re.compile(r'^\s*#\s*\|\s*([\w-]+)\s*:?\s*(.*)$')

def _directives(source: str) -> tuple[dict[str, str], str]:
    "Split nbdev's leading `#|` lines from the rest of a cell."
    lines, found = source.splitlines(), {}
    while lines and (m := _directive.match(lines[0])):
        found[m.group(1)] = m.group(2).strip()
        lines.pop(0)
    return found, '\n'.join(lines)

def render_readme(index: Path = ROOT / 'nbs' / 'index.ipynb') -> str:
    "The README text: index.ipynb without hidden cells and directives, outputs included."
    nb = nbformat.read(index, as_version=4)
    kept = []
    for cell in nb.cells:
        if cell.cell_type == 'code':
            found, cell.source = _directives(cell.source)
            if 'hide' in found or found.get('include') == 'false': continue
            if found.get('echo') == 'false':  # the output without its code, as on the site
                cell.source = ''
                cell.metadata['transient'] = {'remove_source': True}
            if not cell.source and not cell.outputs: continue
        kept.append(cell)
    nb.cells = kept
    nb.metadata['language_info'] = {'name': 'python'}  # nbdev-clean strips it; it tags the code blocks
    body, _ = MarkdownExporter().from_notebook_node(nb)
    return HEADER + re.sub(r'\n{3,}', '\n\n', body).strip() + '\n'

if __name__ == '__main__':
    readme, text = ROOT / 'README.md', render_readme()
    if '--check' in sys.argv:
        fresh = readme.exists() and readme.read_text() == text
        print('README.md is up to date' if fresh else 'README.md is stale: run python scripts/make_readme.py')
        sys.exit(0 if fresh else 1)
    readme.write_text(text)
    print(f'wrote {readme}')
