"""Execute notebooks at full size through a Jupyter kernel, as a learner would, saving their outputs.

This is how the committed outputs are made. Usage: python scripts/run_lessons.py [NOTEBOOK ...] (default: all of nbs/).
"""
import os, subprocess, sys, time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NBS = Path(__file__).resolve().parent.parent / 'nbs'

def run(path: Path) -> float:
    "Execute `path` in place in its own folder; return the seconds it took."
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=3600, kernel_name='python3', resources={'metadata': {'path': str(path.parent)}}).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start

def main(paths: list[str]) -> None:
    os.environ.pop('IN_TEST', None)  # full size: the committed outputs are the real run
    notebooks = [Path(p).resolve() for p in paths] or sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_'))
    for nb in notebooks: print(f'{nb.name}: {run(nb):.0f} s', flush=True)
    subprocess.run([str(Path(sys.executable).parent / 'nbdev-clean')], check=True, cwd=NBS.parent)

if __name__ == '__main__': main(sys.argv[1:])
