"""benchmarks/gpu_check.py runs its code paths on the CPU (--dry-run), so that it works the day a GPU is lent."""
import json, subprocess, sys

import pytest

from conftest import ROOT

@pytest.mark.slow
def test_gpu_check_dry_run_writes_every_section(tmp_path):
    out = tmp_path / 'gpu_check.json'
    r = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'gpu_check.py'), '--dry-run', '--out', str(out)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads(out.read_text())
    assert results['ok'] and results['dry_run']
    sections = results['sections']
    assert list(sections) == ['env', 'parity', 'layout', 'compile', 'nccl', 'ladder']
    assert sections['parity']['trainer_bfloat16']['ok'] and sections['nccl']['world'] == [1, 0]
    rungs = sections['ladder']
    assert len(rungs) == 6 and all(r['source_images_per_s'] > 0 for k, r in rungs.items() if k != 'seconds')

def test_gpu_check_without_a_gpu_says_so(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'gpu_check.py'), '--only', 'env'],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and '--dry-run' in r.stderr

def test_a_failing_check_fails_the_run_and_is_named(tmp_path):
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    import gpu_check
    assert gpu_check.verdict({'a': {'ok': True}, 'b': {'c': {'ok': False}}}) is False
    assert gpu_check.verdict({'a': {'error': 'RuntimeError: ...'}}) is False
    assert gpu_check.verdict({'a': {'ok': True, 'x': 1.0}, 'skipped': 'why'}) is True
    assert gpu_check.close(gpu_check.torch.ones(3), gpu_check.torch.ones(3) * 1.1, 'float32')['ok'] is False
    assert gpu_check.close(gpu_check.torch.ones(3), gpu_check.torch.ones(3) * (1 + 1e-6), 'float32')['ok'] is True
