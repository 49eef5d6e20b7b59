"""Tidy the saved outputs of notebooks: each progress bar once, in its final state, and no local paths.

A text progress bar (tqdm) in a Jupyter kernel sends one stream fragment per refresh, each starting with a carriage
return; a notebook keeps them all, and a page shows them all. `tidy_notebook` applies what a terminal does with them:
consecutive stream outputs of the same stream are merged, and every line keeps only what was written after its last
carriage return. It also drops tqdm's "IProgress not found" warning and any other output line that shows a local
absolute path (a virtual environment, a home or work folder), which mean nothing to a reader and leak the machine.

Usage: python scripts/tidy_outputs.py NOTEBOOK ...  (rewrites each notebook in place when something changed)
"""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def _local_roots() -> list[str]:
    "Absolute folders of this machine whose names must not reach a page: the checkout, a virtual environment, home."
    roots = {str(ROOT), str(Path.home())} | ({sys.prefix} if sys.prefix != sys.base_prefix else set())
    return sorted((r.rstrip('/') + '/' for r in roots if r and r != '/'), key=len, reverse=True)

# A path into an installed package or a virtual environment, wherever it lives, and the usual top-level folders
# of a machine's own files. Paths inside a URL (https://host/...) are not local and are kept.
_LOCAL_PATH = re.compile(r'(?<![\w.:/])/(?:[^\s/:]+/)*(?:site-packages|dist-packages|\.venv|venv|lib/python3\.\d+)/'
                         r'|(?<![\w.:/])/(?:work|home|Users|root|var/folders)/[^\s]'
                         r'|(?<![\w.:/])/tmp/ipykernel_')  # a kernel's cell file, quoted by warnings
# The first line of a Python warning: "path:lineno: SomeWarning: message"
_WARNING = re.compile(r'^\s*\S+:\d+: \w*Warning: ')
_TQDM_WARNING = 'TqdmWarning: IProgress not found'

def has_local_path(text: str) -> bool:
    "Whether `text` shows an absolute path of this machine (or of any machine's environment or home)."
    return any(r in text for r in _local_roots()) or bool(_LOCAL_PATH.search(text))

def apply_carriage_returns(text: str) -> str:
    "What a terminal shows for `text`: each line keeps what was written after its last carriage return."
    lines = []
    for line in text.split('\n'):
        kept = [p for p in line.split('\r') if p]
        lines.append(kept[-1] if kept else '')
    return '\n'.join(lines)

def drop_local_lines(text: str) -> str:
    "Remove tqdm's IProgress warning and every line showing a local path; a dropped warning takes its source line."
    out, lines, i = [], text.split('\n'), 0
    while i < len(lines):
        line = lines[i]
        if _TQDM_WARNING in line or has_local_path(line):
            # a warning prints the offending source line, indented, on the next line: it goes with it
            if (_TQDM_WARNING in line or _WARNING.match(line)) and i + 1 < len(lines) and lines[i + 1].startswith('  '):
                i += 1
            i += 1
            continue
        out.append(line)
        i += 1
    return '\n'.join(out)

def tidy_stream(text: str) -> str:
    "One stream's text as a reader should see it."
    return drop_local_lines(apply_carriage_returns(text))

def _text(output) -> str:
    t = output.get('text', '')
    return ''.join(t) if isinstance(t, list) else t

def _is_stream(output, name=None) -> bool:
    return output.get('output_type') == 'stream' and (name is None or output.get('name') == name)

def tidy_outputs(outputs: list) -> list:
    "A cell's outputs with consecutive outputs of one stream merged and tidied, and emptied streams removed."
    merged = []
    for o in outputs:
        if _is_stream(o) and merged and _is_stream(merged[-1], o.get('name')):
            merged[-1]['text'] += _text(o)
        elif _is_stream(o):
            merged.append(type(o)(o, text=_text(o)))  # a copy: the caller's outputs are not changed
        else: merged.append(o)
    tidy = []
    for o in merged:
        if _is_stream(o):
            text = tidy_stream(o['text'])
            if not text.strip('\n'): continue
            o['text'] = text.splitlines(keepends=True)  # as nbformat stores multi-line text
        tidy.append(o)
    return tidy

def tidy_notebook(nb: dict) -> bool:
    "Tidy the outputs of every code cell of the notebook `nb` (a dict or nbformat node) in place; True if any changed."
    changed = False
    for cell in nb['cells']:
        if cell.get('cell_type') != 'code' or not cell.get('outputs'): continue
        after = tidy_outputs(cell['outputs'])
        if _normal(after) != _normal(cell['outputs']):
            cell['outputs'] = after
            changed = True
    return changed

def _normal(outputs: list) -> list:
    return [dict(o, text=_text(o)) if _is_stream(o) else o for o in outputs]

def tidy_file(path) -> bool:
    "Tidy the notebook file at `path` in place, keeping its JSON layout; True if it changed (only then is it written)."
    path = Path(path)
    nb = json.loads(path.read_text(encoding='utf-8'))
    if not tidy_notebook(nb): return False
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')
    return True

if __name__ == '__main__':
    for p in sys.argv[1:]: print(f'{p}: {"tidied" if tidy_file(p) else "already tidy"}')
