"""Re-run a lesson at full size with other seeds and another thread count: do its assertions still hold?

A lesson's full-size assertions must state only what holds across seeds and machines. This runs a copy of the
notebook (the original is never touched) with its `seeds = ...` line replaced and torch limited to a number of
threads (thread scheduling changes the floating-point order, so results move with it), and reports whether every
cell ran. The executed copy is saved for reading its numbers.

Usage: python scripts/check_lesson.py NOTEBOOK [--seeds 3 4 5] [--threads 1] [--out FOLDER]
"""
import argparse, os, re, sys, time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

SEEDS_LINE = re.compile(r'^seeds = .*$', re.MULTILINE)
THREADS_CALL = re.compile(r'torch\.set_num_threads\(\d+\)')

def patched(nb, seeds: list[int], threads: int):
    "The notebook with its seeds replaced and its thread count fixed; raises if it names no seeds."
    code = [c for c in nb.cells if c.cell_type == 'code']
    hits = [c for c in code if SEEDS_LINE.search(c.source)]
    if not hits: raise SystemExit("no line starting with 'seeds = ' in the notebook: nothing to vary")
    for cell in hits: cell.source = SEEDS_LINE.sub(f'seeds = {tuple(seeds)!r}', cell.source)
    for cell in code: cell.source = THREADS_CALL.sub(f'torch.set_num_threads({threads})', cell.source)
    first = nbformat.v4.new_code_cell(f'import torch\ntorch.set_num_threads({threads})')
    nb.cells.insert(0, first)
    return nb

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('notebook', type=Path)
    parser.add_argument('--seeds', type=int, nargs='+', default=[3, 4, 5])
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--out', type=Path, default=Path('/tmp'))
    args = parser.parse_args()
    os.environ.pop('IN_TEST', None)
    path = args.notebook.resolve()
    nb = patched(nbformat.read(path, as_version=4), args.seeds, args.threads)
    client = NotebookClient(nb, timeout=3600, kernel_name='python3',
                            resources={'metadata': {'path': str(path.parent)}})
    start, error = time.perf_counter(), None
    try: client.execute()
    except CellExecutionError as e: error = str(e).strip().splitlines()[-1]
    seeds = '-'.join(map(str, args.seeds))
    out = args.out / f'{path.stem}_seeds{seeds}_threads{args.threads}.ipynb'
    out.parent.mkdir(parents=True, exist_ok=True)  # before this, a missing folder lost the verdict
    nbformat.write(nb, out)
    status = f'FAILED: {error}' if error else 'every cell ran'
    print(f'{path.name}, seeds {args.seeds}, {args.threads} thread(s): {status} '
          f'in {time.perf_counter() - start:.0f} s; executed copy: {out}')
    return 1 if error else 0

if __name__ == '__main__': sys.exit(main())
