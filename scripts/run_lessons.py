"""Execute notebooks at full size through a Jupyter kernel, as a learner would, saving their outputs.

This is how the committed outputs are made; their progress bars and warnings are tidied by scripts/tidy_outputs.py.
Usage: python scripts/run_lessons.py [NOTEBOOK ...] (default: all of nbs/).
A lesson that fails is reported (its outputs up to the failing cell are saved) and the others still run; the exit
status is 1 when any failed.
"""
import os, subprocess, sys, time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tidy_outputs import tidy_notebook  # noqa: E402

NBS = Path(__file__).resolve().parent.parent / 'nbs'

def run(path: Path) -> tuple[float, str | None]:
    "Execute `path` in place in its own folder; return the seconds it took and the error, if a cell failed."
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=3600, kernel_name='python3',
                            resources={'metadata': {'path': str(path.parent)}})
    start, error = time.perf_counter(), None
    try: client.execute()
    except CellExecutionError as e: error = str(e).strip().splitlines()[-1]
    tidy_notebook(nb)  # each progress bar once, in its final state; no local paths in the outputs
    nbformat.write(nb, path)
    return time.perf_counter() - start, error

def main(paths: list[str]) -> int:
    os.environ.pop('IN_TEST', None)  # full size: the committed outputs are the real run
    notebooks = ([Path(p).resolve() for p in paths] or
                 sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_')))
    failed = []
    for nb in notebooks:
        seconds, error = run(nb)
        print(f'{nb.name}: {seconds:.0f} s' + (f'  FAILED: {error}' if error else ''), flush=True)
        if error: failed.append(nb.name)
    clean = str(Path(sys.executable).parent / 'nbdev-clean')
    for nb in notebooks: subprocess.run([clean, '--fname', str(nb)], check=True, cwd=NBS.parent)
    if failed: print(f'{len(failed)} of {len(notebooks)} notebooks failed: {", ".join(failed)}', file=sys.stderr)
    return 1 if failed else 0

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))
