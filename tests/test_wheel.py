"""The built wheel installs into a fresh virtual environment and works there: course data included, and its
`contrastive-nb train` command trains in one process and under torchrun."""
import os, shutil, socket, subprocess, sys, sysconfig, zipfile
from pathlib import Path

import pytest

from conftest import ROOT

@pytest.mark.slow
def test_wheel_installs_and_imports(tmp_path):
    src = tmp_path / 'src'  # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    src.mkdir()
    for name in ('pyproject.toml', 'README.md', 'LICENSE', 'contrastive_nb', 'data'):
        (shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns('__pycache__'))
         if (ROOT / name).is_dir() else shutil.copy(ROOT / name, src / name))
    subprocess.run([sys.executable, '-m', 'build', '--wheel', '--no-isolation', '--outdir', str(tmp_path / 'dist'),
                    str(src)], check=True, capture_output=True)
    wheel = next((tmp_path / 'dist').glob('contrastive_nb-*.whl'))
    names = zipfile.ZipFile(wheel).namelist()
    assert 'contrastive_nb/data.py' in names and 'contrastive_nb/course_data/tickets.csv' in names

    venv = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True)
    py = venv / 'bin' / 'python'
    subprocess.run([str(py), '-m', 'pip', 'install', '--quiet', '--no-deps', '--no-index', str(wheel)], check=True)
    # The heavy dependencies (torch, ...) come from the dev environment, after the fresh venv's own site-packages.
    site = subprocess.run([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / 'zz-dev-deps.pth').write_text(sysconfig.get_paths()['purelib'] + '\n')
    script = ("import contrastive_nb, contrastive_nb.data as d; from pathlib import Path; "
              "assert Path(contrastive_nb.__file__).is_relative_to(Path(r'%s')), contrastive_nb.__file__; "
              "t = d.load_tickets(); s = d.make_shapes(4); print(contrastive_nb.__version__, len(t), len(s))" % venv)
    out = subprocess.run([str(py), '-c', script], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    version, n_tickets, n_shapes = out.stdout.split()
    assert int(n_tickets) >= 300 and n_shapes == '4'

    # the installed command, in one process and under torchrun (2 gloo processes on 127.0.0.1)
    tiny = ['--n-train', '96', '--n-test', '16', '--augment.size', '16', '--width', '4', '--blocks', '2',
            '--head-hidden', '16', '--embed-dim', '8', '--batch-size', '16', '--epochs', '1', '--threads', '1',
            '--progress', 'false']
    out = subprocess.run([str(venv / 'bin' / 'contrastive-nb'), 'train', *tiny, '--run-dir', 'one'], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert '"step": 5' in out.stdout and (tmp_path / 'one' / 'report.json').exists()
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    out = subprocess.run([str(py), '-m', 'torch.distributed.run', '--nproc-per-node=2', '--master-addr=127.0.0.1',
                          f'--master-port={port}', '-m', 'contrastive_nb.cli', 'train', *tiny, '--run-dir', 'two',
                          '--method', 'simclr_global', '--norm', 'group', '--options.grad-cache-chunk', '4'],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count('"step": 5') == 1 and (tmp_path / 'two' / 'report.json').exists()
