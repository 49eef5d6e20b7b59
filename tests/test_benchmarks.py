"""The benchmark scripts still run (smoke mode). Their numbers are measurements for benchmarks/NOTES.md, not assertions."""
import json, subprocess, sys

import pytest

from conftest import ROOT

@pytest.mark.slow
def test_infonce_benchmark_runs_and_reports_ratios():
    out = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'infonce_bench.py'), '--quick'],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    ratios = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(ratios) == {'nt_xent_vs_floor', 'chunked_vs_dense', 'chunked_peak_gib'}
    assert all(v > 0 for v in ratios.values())
