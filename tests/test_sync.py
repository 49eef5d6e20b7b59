"""The package is exactly what the notebooks export, and the notebooks are clean (nbdev-export + nbdev-clean change
nothing)."""
import filecmp, shutil, subprocess, sys
from pathlib import Path

from conftest import ROOT

def test_export_and_clean_change_nothing(tmp_path):
    # Work on a copy so that a failing check leaves the working tree untouched.
    for name in ('pyproject.toml', 'nbs', 'contrastive_nb', 'data'):
        src = ROOT / name
        (shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns('__pycache__', '.ipynb_checkpoints'))
         if src.is_dir() else shutil.copy(src, tmp_path / name))
    bin_dir = Path(sys.executable).parent
    for cmd in ('nbdev-export', 'nbdev-clean'):
        subprocess.run([str(bin_dir / cmd)], cwd=tmp_path, check=True, capture_output=True)
    stale = []
    for folder, fix in (('contrastive_nb', 'run nbdev-export and commit the module'),
                        ('nbs', 'run nbdev-clean and commit the notebook')):
        ours, fresh = ROOT / folder, tmp_path / folder
        names = {p.relative_to(fresh) for p in fresh.rglob('*') if p.is_file() and '__pycache__' not in p.parts}
        names |= {p.relative_to(ours) for p in ours.rglob('*') if p.is_file() and '__pycache__' not in p.parts
                  and '.ipynb_checkpoints' not in p.parts}
        for rel in sorted(names):
            a, b = ours / rel, fresh / rel
            if not b.exists(): stale.append(f"{folder}/{rel}: no notebook exports it any more (delete it)")
            elif not a.exists(): stale.append(f"{folder}/{rel}: exported but missing from the repository ({fix})")
            elif not filecmp.cmp(a, b, shallow=False): stale.append(f"{folder}/{rel}: out of date ({fix})")
    assert not stale, "Notebooks and package are out of sync:\n  " + "\n  ".join(stale)
