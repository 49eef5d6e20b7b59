"""Execute notebooks at full size through a Jupyter kernel, as a learner would, saving their outputs.

This is how the committed outputs are made; their progress bars and warnings are tidied by scripts/tidy_outputs.py.
Usage: python scripts/run_lessons.py [NOTEBOOK ...] (default: all of nbs/).
A lesson that fails is reported (its outputs up to the failing cell are saved) and the others still run; the exit
status is 1 when any failed.
"""
import os, subprocess, sys, tempfile, time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tidy_outputs import tidy_notebook  # noqa: E402

NBS = Path(__file__).resolve().parent.parent / 'nbs'

# Each notebook's budget, as a share (%) of the whole run at full size. Shares, not seconds, so that the table means
# the same on a slow machine as on a fast one. A notebook over its share is reported, not failed: timings on a shared
# machine are noisy. Notebooks not named share what is left (the tools pages take about 3 %).
# The whole command's budget is 1.4 x its time before issue 25 (785e557). Measured on one idle 2-core machine,
# fresh clones, set-up and site included: before 2 097 s (2026-12-04 07:30); after, at 1dbeed3 with lesson 13, 3 239 s
# (1.54 x, over the line). Lessons 05 and 06 then ran their grids on both cores (map_runs: a batch of 32 at 16 px
# trains no faster on two threads than on one) and lesson 08 loaded lesson 07's SimCLR runs instead of training
# them again (shared_run): at a46ca30, 2 691 s (2 552 s of notebooks, site 27 s), 1.28 x. Lesson 07 missed lesson
# 04's runs there (the key named the function's module, and lesson 04 defines it in the notebook; now the key reads
# the function's source). Lesson 12 then gained its SigLIP experiment (213 s against 147 s, measured alone, idle).
# The shares below are that run's, lesson 07's lower by those six runs and lesson 12's higher, to the half percent:
# about 2 700 s in all, 1.29 x.
BUDGET_SHARE = {'00_data': 1, '01_pairs': 1, '02_similarity': 1, '03_infonce': 8.5, '04_temperature': 9,
                '05_memory_bank': 4.5, '06_moco': 6, '07_hard_negatives': 11, '08_debiased': 15,
                '09_training': 7, '10_distributed': 10, '11_text_retrieval': 5, '12_clip': 8.5,
                '13_without_negatives': 10}

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

def budget_table(seconds: dict[str, float]) -> str:
    "Each notebook's time and its share of the run, against its budgeted share."
    total = sum(seconds.values())
    others = [n for n in seconds if n not in BUDGET_SHARE]
    rest = max(0, 100 - sum(BUDGET_SHARE.values())) / max(1, len(others))
    lines = [f"{'notebook':<22}{'seconds':>8}{'share':>8}{'budget':>8}"]
    for name, s in seconds.items():
        share, allowed = 100 * s / total if total else 0, BUDGET_SHARE.get(name, rest)
        flag = '  over its share' if share > allowed else ''
        lines.append(f"{name:<22}{s:>8.0f}{share:>7.1f}%{allowed:>7.1f}%{flag}")
    lines.append(f"{'all':<22}{total:>8.0f}  ({total / 60:.1f} min)")
    return '\n'.join(lines)

def main(paths: list[str]) -> int:
    os.environ.pop('IN_TEST', None)  # full size: the committed outputs are the real run
    notebooks = ([Path(p).resolve() for p in paths] or
                 sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_')))
    failed, seconds = [], {}
    # Lessons 04, 07 and 08 train the same SimCLR runs: shared_run (the experiments page) keeps each result in this
    # folder, made afresh for this run (the package cannot change under it) and removed at the end.
    with tempfile.TemporaryDirectory(prefix='contrastive_nb_runs_') as shared:
        os.environ['CONTRASTIVE_NB_SHARED_RUNS'] = shared  # the kernels inherit it
        for nb in notebooks:
            seconds[nb.stem], error = run(nb)
            print(f'{nb.name}: {seconds[nb.stem]:.0f} s' + (f'  FAILED: {error}' if error else ''), flush=True)
            if error: failed.append(nb.name)
        os.environ.pop('CONTRASTIVE_NB_SHARED_RUNS')
    if not paths: print(budget_table(seconds), flush=True)  # shares mean something for the whole run
    clean = str(Path(sys.executable).parent / 'nbdev-clean')
    for nb in notebooks: subprocess.run([clean, '--fname', str(nb)], check=True, cwd=NBS.parent)
    if failed: print(f'{len(failed)} of {len(notebooks)} notebooks failed: {", ".join(failed)}', file=sys.stderr)
    return 1 if failed else 0

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))
