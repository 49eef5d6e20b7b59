"""The benchmark scripts still run (smoke mode). Their timings are measurements for benchmarks/NOTES.md, not
assertions; the chunked loss's memory bound is asserted."""
import json, subprocess, sys

import pytest

from conftest import ROOT

def quick_ratios(script: str) -> dict[str, float]:
    "Run a benchmark script in --quick mode; the ratios its last line prints as JSON."
    out = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / script), '--quick'],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])

@pytest.mark.slow
def test_infonce_benchmark_runs_and_reports_ratios():
    ratios = quick_ratios('infonce_bench.py')
    assert set(ratios) == {'nt_xent_vs_floor', 'chunked_vs_dense', 'chunked_peak_gib'}
    assert all(v > 0 for v in ratios.values())
    # What the chunking is for, and what a bug in it would lose: at 2N = 4096 (--quick) the dense 2N × 2N float32
    # logits alone take 64 MiB; the chunked loss's forward and backward together must peak below that.
    assert ratios['chunked_peak_gib'] < 4096 ** 2 * 4 / 2 ** 30

@pytest.mark.slow
def test_augment_benchmark_runs_and_reports_ratios():
    ratios = quick_ratios('augment_bench.py')
    assert set(ratios) == {'batched_vs_torchvision', 'batched_views_per_s', 'torchvision_views_per_s'}
    assert all(v > 0 for v in ratios.values())

@pytest.mark.slow
def test_recipes_benchmark_runs_each_cpu_recipe_through_the_command_line():
    out = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'recipes_bench.py'), '--quick'],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(result['recipes']) == {'shapes:default', 'shapes:fast', 'shapes:best'}
    for recipe in result['recipes'].values():
        run, = recipe['runs']
        assert 0.1 <= run['chance'] <= 1 and 0 <= run['test_knn'] <= 1  # ten classes
        assert 0 <= run['training_s'] < run['wall_s'] and run['steps'] == 5  # 96 images, batch 16

@pytest.mark.slow
def test_fashion_benchmark_runs_every_arm_on_shared_seeds():
    "Label efficiency at tiny sizes (the Debian package's first images, or a fixture where it is missing)."
    result = quick_ratios('fashion_bench.py')
    assert result['quick'] and result['seeds'] == [0, 1] and [r['seed'] for r in result['runs']] == [0, 1]
    assert 0.1 <= result['summary']['raw_knn'] <= 1
    for run in result['runs']:
        assert run['method'] == result['method'] and run['steps'] > 0
        assert 0 <= run['pretrained_knn'] <= 1 and 0 <= run['untrained_knn'] <= 1
        n_labels = [run['probe'][f]['n_labels'] for f in ('0.01', '0.1', '1.0')]
        assert n_labels[0] < n_labels[1] < n_labels[2] and n_labels[0] >= 10  # at least one label per class
        for fraction in ('0.01', '0.1', '1.0'):
            for arm in ('probe', 'untrained_probe'):  # the control: the same probe on the untrained encoder
                assert 0 <= run[arm][fraction]['test_acc'] <= 1 and run[arm][fraction]['weight_decay'] > 0
        for fraction in ('0.01', '0.1'):  # from scratch: a setting of the grid, chosen on validation
            scratch = run['scratch'][fraction]
            assert 0 <= scratch['test_acc'] <= 1 and scratch['n_labels'] == run['probe'][fraction]['n_labels']
            assert len(scratch['val_by_setting']) == 2 and 0 < scratch['steps'] <= scratch['of_steps']
            assert abs(scratch['val_acc'] - max(scratch['val_by_setting'].values())) < 1e-4  # rounded
    assert set(result['summary']['probe_minus_scratch']) == {'0.01', '0.1'}
    assert set(result['summary']['probe_minus_untrained_probe']) == {'0.01', '0.1', '1.0'}

@pytest.mark.slow
@pytest.mark.parametrize('mode', ['--quick', '--estimate'])
def test_siglip_benchmark_runs_every_arm(mode):
    args = [sys.executable, str(ROOT / 'benchmarks' / 'siglip_bench.py'), '--quick']
    args += [mode] if mode != '--quick' else []
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if mode == '--estimate':
        assert result['estimate_s'] > 0 and len(result['per_arm_s']) == 6  # 2 losses x 2 batches, 2 prior-bias arms
        return
    arms = {key.rsplit('|', 1)[0] for key in result['results']}
    assert arms == {'clip|8', 'siglip|8', 'clip|16', 'siglip|16', 'siglip, prior bias|8', 'siglip, prior bias|16',
                    'untrained|0'}
    for scores in result['results'].values():
        assert all(0 <= v <= 1 for v in scores.values())
    assert any(k.startswith('siglip - clip, batch 8') for k in result['verdicts'])
    assert any(k.startswith('clip - untrained, batch 16') for k in result['verdicts'])

@pytest.mark.slow
def test_methods_benchmark_measures_each_method_at_its_recipe(tmp_path):
    "Issue 43's table at tiny sizes: each method's run, its probe and baselines, and the paired column against SimCLR."
    methods = ['simclr', 'simsiam', 'supervised']
    out = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'methods_bench.py'), '--quick', '--methods',
                          *methods], capture_output=True, text=True, timeout=600,
                         env={**__import__('os').environ, 'METHODS_BENCH_CACHE': str(tmp_path)})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert list(result['runs']) == methods and not list(tmp_path.iterdir())  # --quick caches nothing
    for method in methods:
        run, = result['runs'][method]
        assert run['method'] == method and run['steps'] > 0 and run['pixels_vote_k'] in (1, 3, 5, 7, 9)
        assert all(0 <= run[k] <= 1 for k in ('test_knn', 'probe', 'untrained_knn', 'raw_pixels_knn', 'pixels_vote'))
        assert all(0 <= run[f'{k}_all'] <= 1 for k in ('test_knn', 'untrained_knn', 'raw_pixels_knn'))  # whole bank
    assert result['runs']['simsiam'][0]['views'] == 4  # SimSiam's own recipe, not SimCLR's
    assert '| supervised (labels) |' in out.stdout

def test_methods_benchmark_takes_the_four_best_label_free_methods_of_shapes_to_other_datasets(tmp_path, monkeypatch):
    "On Fashion-MNIST: SimCLR, the four label-free methods best on Shapes (mean test kNN, seeds 0-2), supervised."
    monkeypatch.syspath_prepend(str(ROOT / 'benchmarks'))
    import methods_bench as bench
    monkeypatch.setattr(bench, 'CACHE', tmp_path)  # a cache of made-up results
    label_free = [m for m in bench.BUILTIN_METHODS if m not in bench.SUPERVISED]
    score = {m: 0.3 + 0.01 * i for i, m in enumerate(label_free)}  # the later a method, the better
    score.update(simclr=0.99, simclr_global=0.98, hcl=0.2)  # SimCLR and its copy are not candidates
    for method in [*label_free, 'supcon']:
        for seed in (0, 1, 2):
            if method == label_free[-1] and seed == 2: continue  # a method without every seed is not ranked
            values = bench.settings('shapes', method, seed, 'best', False, 2)
            run = {'test_knn': score.get(method, 0.99) + 0.001 * seed}
            (tmp_path / f"shapes-{method}-{seed}-{bench.key_of(values)}.json").write_text(json.dumps(run))
    expected = [m for m in label_free[-2::-1] if m not in ('simclr', 'simclr_global')][:4]  # the last: no seed 2
    assert bench.best_label_free(4) == expected and 'hcl' not in expected
    assert bench.methods_of('fashion_mnist') == ['simclr', *expected, 'supervised']
    assert bench.methods_of('shapes') == list(bench.BUILTIN_METHODS)
    assert (bench.default_recipe('shapes'), bench.default_recipe('fashion_mnist')) == ('best', 'default')
