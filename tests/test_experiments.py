"""The experiments machinery under faults: a kept run that cannot lie, keys that cannot collide, workers that
cannot hang. The tools page (nbs/experiments.ipynb) shows each behaviour once; these tests break it on purpose."""
import dataclasses, multiprocessing, os, shutil, signal, subprocess, sys, textwrap, warnings, zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from conftest import ROOT
from contrastive_nb import experiments as ex
from contrastive_nb.experiments import SHARED_RUNS_VARIABLE, map_runs, run_fingerprint, shared_run

CALLS: list = []

def weights(n: int, scale: float = 1.0) -> dict:
    "A run whose result is kept: tensors, numbers, strings, lists and dicts of them."
    CALLS.append(n)
    return {'w': torch.arange(n, dtype=torch.float32) * scale, 'n': n, 'name': 'w', 'parts': [1.5, None]}

@pytest.fixture
def shared(tmp_path, monkeypatch):
    "A folder for shared runs, named by the environment variable, and an empty call log."
    monkeypatch.setenv(SHARED_RUNS_VARIABLE, str(tmp_path))
    CALLS.clear()
    return tmp_path

def only_kept(folder: Path) -> Path:
    files = sorted(folder.iterdir())
    assert len(files) == 1 and files[0].suffix == '.pt', files
    return files[0]

# --- the paired interval ---------------------------------------------------------------------------------------

def test_paired_difference_by_hand():
    "Differences 0.19, 0.17, 0.20: mean 0.18667, sd 0.015275, se 0.0088192, t(0.975, 2) = 4.302653."
    d = ex.paired_difference([0.40, 0.37, 0.42], [0.21, 0.20, 0.22])
    assert d.n == 3 and d.level == 0.95
    assert d.mean == pytest.approx(0.186667, abs=1e-6) and d.se == pytest.approx(0.0088192, abs=1e-6)
    assert (d.low, d.high) == pytest.approx((0.186667 - 0.037946, 0.186667 + 0.037946), abs=1e-5)
    assert d.excludes_zero and format(d) == '+0.187 [+0.149, +0.225]'
    level_90 = ex.paired_difference([0.40, 0.37, 0.42], [0.21, 0.20, 0.22], level=0.9)
    assert level_90.high - level_90.low < d.high - d.low and level_90.level == 0.9

@pytest.mark.parametrize('low, high, excludes', [(0.2, 0.5, True), (0.5, 1.5, True), (-0.1, 0.3, False),
                                                 (-0.4, -0.2, True), (-1.5, -0.5, True), (0.0, 0.3, False)])
def test_excludes_zero(low, high, excludes):
    assert ex.PairedDifference(0.1, low, high, 0.05, 3, 0.95).excludes_zero is excludes

def test_two_seeds_are_enough_and_one_is_not():
    assert ex.paired_difference([0.4, 0.5], [0.2, 0.2]).n == 2
    with pytest.raises(ValueError, match='at least 2 seeds'): ex.paired_difference([0.4], [0.2])

def test_arms_of_other_lengths_and_levels_at_the_ends_are_refused():
    "[1, 2, 3] - [1] would broadcast to a silent interval; level 0 or 1 is no interval."
    for b in ([0.2], [0.2, 0.3]):
        with pytest.raises(ValueError, match='entries for 3 seeds in a'): ex.paired_difference([0.4, 0.5, 0.6], b)
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match='level'): ex.paired_difference([0.4, 0.5], [0.2, 0.2], level=level)

@pytest.mark.parametrize('a', ['0.4 0.5', b'\x01\x02', {0: 0.4, 1: 0.5}, (x for x in (0.4, 0.5))],
                         ids=['str', 'bytes', 'dict', 'generator'])
def test_what_is_not_a_sequence_of_numbers_is_named_so(a):
    with pytest.raises(TypeError, match='a must be a sequence of per-seed numbers'):
        ex.paired_difference(a, [0.2, 0.2])

def test_series_are_paired_by_seed_and_lists_by_position():
    a = pd.Series([0.40, 0.37, 0.42], index=[0, 1, 2])
    b = pd.Series([0.22, 0.21, 0.20], index=[2, 0, 1])  # seeds 2, 0, 1: aligned to 0.21, 0.20, 0.22
    assert ex.paired_difference(a, b).se == pytest.approx(0.0088192, abs=1e-6)  # differences 0.19, 0.17, 0.20
    positional = ex.paired_difference(a, [0.22, 0.21, 0.20])  # a list pairs by position: 0.18, 0.16, 0.22
    assert positional.se == pytest.approx(0.0176383, abs=1e-6)
    with pytest.raises(ValueError, match='indexed by the same seeds'):
        ex.paired_difference(a, pd.Series([0.2, 0.2, 0.2], index=[0, 1, 5]))

# --- the claims a notebook carries ------------------------------------------------------------------------------

def claims_cell(*outputs, source='show_claims(rows)'):
    return {'cell_type': 'code', 'source': source, 'metadata': {}, 'outputs': list(outputs)}

def claims_output(rows):
    return {'output_type': 'execute_result', 'data': {ex.CLAIMS_MIME: {'claims': rows}}}

ROW = {'claim': 'a claim', 'source': 'Someone 2020', 'lesson': '03', 'measured': '0.4', 'verdict': 'reproduced'}

def test_claims_are_read_from_the_marked_output():
    plain = {'output_type': 'stream', 'name': 'stdout', 'text': 'rows ready'}
    nb = {'cells': [{'cell_type': 'markdown', 'source': 'show_claims(', 'metadata': {}},
                    claims_cell(plain, claims_output([ROW, {**ROW, 'claim': 'another'}]))]}
    assert [c.claim for c in ex._claims_in(nb, 'lesson')] == ['a claim', 'another']
    assert ex._claims_in({'cells': [claims_cell(source='print(1)')]}, 'lesson') == []

@pytest.mark.parametrize('cells, error', [
    ([claims_cell()], 'has a show_claims cell without its output: run it'),
    ([claims_cell(claims_output([ROW])), claims_cell(claims_output([ROW]))], 'has 2 claims outputs'),
    ([claims_cell(claims_output([{'claim': 'x'}]))], 'its claims output is not a list of claims'),
    ([claims_cell(claims_output([{**ROW, 'verdict': ''}]))], 'its claims output is not a list of claims')])
def test_a_notebook_with_bad_claims_is_named(cells, error):
    with pytest.raises(ValueError, match=f'lesson 05 {error}|lesson 05: {error}'):
        ex._claims_in({'cells': cells}, 'lesson 05')

# --- a kept result that cannot lie ---------------------------------------------------------------------------

def flip_a_data_byte(path: Path) -> None:
    "Flip one bit inside the stored bytes of the first tensor (the zip's directory stays intact)."
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if '/data/' in i.filename)
    raw, h = bytearray(path.read_bytes()), info.header_offset  # the record's local header
    name_len, extra_len = (int.from_bytes(raw[h + i:h + i + 2], 'little') for i in (26, 28))
    raw[h + 30 + name_len + extra_len + 5] ^= 0x10  # stored uncompressed: a byte of the weights
    path.write_bytes(bytes(raw))

@pytest.mark.parametrize('damage', ['flipped bit', 'truncated', 'empty'])
def test_a_damaged_kept_run_is_named_and_computed_again(shared, damage):
    first = shared_run(weights, 64)
    path = only_kept(shared)
    if damage == 'flipped bit': flip_a_data_byte(path)
    elif damage == 'truncated': path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    else: path.write_bytes(b'')
    if damage == 'flipped bit':  # what torch.load alone would have returned: the damaged value
        assert not torch.equal(torch.load(path, weights_only=True)['w'], first['w'])
    with pytest.warns(UserWarning, match=rf"{path.name} is damaged .*computing the run again"):
        again = shared_run(weights, 64)
    assert CALLS == [64, 64] and torch.equal(again['w'], first['w'])
    assert only_kept(shared) == path and ex.zip_damage(path) is None  # replaced by a good one
    assert torch.equal(shared_run(weights, 64)['w'], first['w']) and CALLS == [64, 64]

def frame_run(n: int): CALLS.append(n); return pd.DataFrame({'loss': [1.0, 0.5][:n]})
def module_run(n: int): CALLS.append(n); return nn.Linear(n, 1)
def numpy_run(n: int): CALLS.append(n); return {'score': np.float64(0.5) * n}
def graph_run(n: int): CALLS.append(n); return torch.ones(n, requires_grad=True) * 2
def key_run(n: int): CALLS.append(n); return {(n, 1): 1.0}

@pytest.mark.parametrize('fn, what', [(frame_run, 'the result is a pandas.*DataFrame'),
                                      (module_run, r"the result is a torch.nn.*Linear"),
                                      (numpy_run, r"the result\['score'\] is a numpy.float64"),
                                      (graph_run, 'the result is a tensor with a graph: detach it'),
                                      (key_run, r'the result has the key \(2, 1\), neither a str nor an int')])
def test_a_result_it_cannot_read_back_is_returned_not_kept(shared, fn, what):
    for call in (1, 2):  # never a poisoned file: the second call computes again, without an error
        with pytest.warns(UserWarning, match=f"does not keep {fn.__name__}'s result: {what}; it keeps tensors"):
            result = shared_run(fn, 2)
        assert result is not None
    assert CALLS == [2, 2] and list(shared.iterdir()) == []

def kept_value(value): CALLS.append(1); return value

def test_what_it_keeps_comes_back_exactly(shared):
    value = {'t': torch.tensor([1.0, float('nan')]), 'p': nn.Parameter(torch.ones(2)), 'i': torch.arange(3),
             'od': OrderedDict(a=torch.zeros(1)), 'tuple': (1, 2.5, 'x', None, True), 'list': [[], {}, -0.0],
             7: 'int key', 'big': 2 ** 70}
    shared_run(kept_value, value)
    back = shared_run(kept_value, value)
    assert CALLS == [1]
    def same(a, b):
        assert type(a) is type(b), (a, b)
        if isinstance(a, torch.Tensor): assert torch.equal(a.nan_to_num(), b.nan_to_num()) and a.dtype == b.dtype
        elif isinstance(a, dict): assert list(a) == list(b) and all(same(a[k], b[k]) is None for k in a)
        elif isinstance(a, (list, tuple)): assert len(a) == len(b) and all(same(x, y) is None for x, y in zip(a, b))
        else: assert repr(a) == repr(b)
    same(value, back)

def test_a_failed_write_leaves_no_part_file_and_returns_the_run(shared, monkeypatch):
    real_save = torch.save
    def full_disk(obj, f, *a, **k):
        real_save(obj, f, *a, **k)
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(torch, 'save', full_disk)
    with pytest.warns(UserWarning, match='could not keep weights.s result .*No space left'):
        assert shared_run(weights, 8)['n'] == 8
    assert list(shared.iterdir()) == []
    def interrupted(obj, f, *a, **k):
        real_save(obj, f, *a, **k)
        raise KeyboardInterrupt
    monkeypatch.setattr(torch, 'save', interrupted)
    with pytest.raises(KeyboardInterrupt): shared_run(weights, 9)
    assert list(shared.iterdir()) == []

def test_a_write_that_fails_before_its_file_exists_still_returns_the_run(shared, monkeypatch):
    def refused(obj, f, *a, **k): raise PermissionError(13, 'Permission denied')
    monkeypatch.setattr(torch, 'save', refused)
    with pytest.warns(UserWarning, match='could not keep weights.s result .*Permission denied'):
        assert shared_run(weights, 8)['n'] == 8
    assert list(shared.iterdir()) == []

def test_keyword_arguments_are_part_of_the_key(shared):
    two, three = shared_run(weights, 4, scale=2.0), shared_run(weights, 4, scale=3.0)
    assert CALLS == [4, 4] and torch.equal(three['w'], torch.arange(4.0) * 3)
    assert torch.equal(shared_run(weights, 4, 2.0)['w'], two['w']) and CALLS == [4, 4]  # spelt otherwise

# --- keys that cannot collide ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Setting:
    table: torch.Tensor
    hidden: float = dataclasses.field(default=0.0, repr=False)

def setting_run(setting: Setting) -> float: return float(setting.table.sum()) + setting.hidden

def test_dataclasses_are_keyed_field_by_field():
    a = torch.zeros(5000)
    b = a.clone(); b[2500] = 1.0  # torch's repr shows the ends of a long tensor only
    assert repr(Setting(a)) == repr(Setting(b))
    assert run_fingerprint(setting_run, Setting(a)) != run_fingerprint(setting_run, Setting(b))
    assert run_fingerprint(setting_run, Setting(a, 1.0)) != run_fingerprint(setting_run, Setting(a, 0.0))
    assert run_fingerprint(setting_run, Setting(a)) == run_fingerprint(setting_run, Setting(a.clone()))

class Scaled(nn.Module):
    "A module whose forward depends on a plain attribute, in neither its repr nor its state_dict."
    def __init__(self, scale: float):
        super().__init__()
        self.linear, self.scale = nn.Linear(2, 2), scale
    def forward(self, x): return self.linear(x) * self.scale

def module_out(model: nn.Module) -> torch.Tensor: return model(torch.ones(1, 2))

def test_modules_are_keyed_by_their_plain_attributes_too():
    torch.manual_seed(0)
    one = Scaled(1.0)
    two = Scaled(2.0)
    two.load_state_dict(one.state_dict())
    assert repr(one) == repr(two)
    assert run_fingerprint(module_out, one) != run_fingerprint(module_out, two)
    twin = Scaled(1.0); twin.load_state_dict(one.state_dict())
    assert run_fingerprint(module_out, one) == run_fingerprint(module_out, twin)
    twin.eval()
    assert run_fingerprint(module_out, one) != run_fingerprint(module_out, twin)

def load_module(folder: Path, name: str, source: str):
    import importlib.util
    (folder / f'{name}.py').write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, folder / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

CALLER = '''
    LIMIT = {limit}
    def helper(x): return x * {factor}
    class Tool:
        def apply(self, x): return helper(x) + {offset}
    def run(x): return Tool().apply(min(x, LIMIT))
'''

def test_a_function_is_keyed_with_the_helpers_classes_and_constants_it_uses(tmp_path):
    key = lambda name, **s: run_fingerprint(load_module(tmp_path, name, CALLER.format(**s)).run, 3)
    base = dict(limit=10, factor=2, offset=0)
    assert key('a', **base) == key('b', **base)  # the same code in another module: the same run
    assert key('c', **{**base, 'factor': 3}) != key('a', **base)   # an edited helper
    assert key('d', **{**base, 'offset': 1}) != key('a', **base)   # an edited class it uses
    assert key('e', **{**base, 'limit': 11}) != key('a', **base)   # a constant it reads

DECORATED = '''
    import functools
    def logged(f):
        @functools.wraps(f)
        def wrapper(*args): return f(*args)
        return wrapper
    def inner(x): return x * {factor}
    @logged
    def helper(x): return inner(x)
    def run(x): return helper(x)
'''

def test_a_decorated_helper_is_followed_into_what_it_wraps(tmp_path):
    key = lambda name, factor: run_fingerprint(load_module(tmp_path, name, DECORATED.format(factor=factor)).run, 3)
    assert key('a', 2) == key('b', 2) and key('c', 3) != key('a', 2)

TABLE_DECORATED = '''
    import functools
    TABLE = {{}}
    def via_table(f):
        TABLE[f.__name__] = f
        @functools.wraps(f)
        def wrapper(*args): return TABLE[wrapper.__name__](*args)  # f is not in its closure
        return wrapper
    @via_table
    def helper(x): return x * {factor}
    def run(x): return helper(x)
'''

CACHED = '''
    import functools
    @functools.cache
    def helper(x): return x * {factor}
    def run(x): return helper(x)
'''

METHODS = '''
    class Tool:
        @staticmethod
        def scale(x): return x * {factor}
        @classmethod
        def make(cls): return cls()
    def run(x): return Tool.make().scale(x)
'''

PROPERTY = '''
    class Tool:
        @property
        def factor(self): return {factor}
    def run(x): return x * Tool().factor
'''

@pytest.mark.parametrize('source', [TABLE_DECORATED, CACHED, METHODS, PROPERTY],
                         ids=['wrapped', 'cache', 'static', 'property'])
def test_what_a_wrapper_or_a_class_hides_is_followed(tmp_path, source):
    "A wrapper whose closure lacks what it wraps, functools.cache, a staticmethod, a property: edited, a new key."
    key = lambda name, factor: run_fingerprint(load_module(tmp_path, name, source.format(factor=factor)).run, 3)
    assert key('a', 2) == key('b', 2) and key('c', 3) != key('a', 2)

def test_a_module_imported_by_name_from_the_users_folder_is_user_code(tmp_path, monkeypatch):
    "Registered in sys.modules with a file outside every library: its helpers are followed as a notebook's are."
    import importlib
    monkeypatch.syspath_prepend(str(tmp_path))
    def key(name: str, factor: int) -> str:
        (tmp_path / f'{name}.py').write_text(textwrap.dedent(CALLER.format(limit=10, factor=factor, offset=0)))
        try: return run_fingerprint(importlib.import_module(name).run, 3)
        finally: sys.modules.pop(name, None)
    assert key('user_a', 2) == key('user_b', 2) and key('user_c', 3) != key('user_a', 2)

def test_an_edited_package_is_another_key(tmp_path):
    "The package's sources are in every key: a cache folder that outlives a code change is not trusted."
    shutil.copytree(Path(ex.__file__).parent, tmp_path / 'contrastive_nb',  # the package under test
                    ignore=shutil.ignore_patterns('__pycache__'))
    script = ('from contrastive_nb.experiments import run_fingerprint\n'
              'def f(x): return x\nprint(run_fingerprint(f, 1))')
    def key():
        env = {**os.environ, 'PYTHONPATH': str(tmp_path)}
        out = subprocess.run([sys.executable, '-c', script], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()
    before = key()
    assert key() == before
    with open(tmp_path / 'contrastive_nb' / 'pairs.py', 'a') as f: f.write('\n# an edit\n')
    assert key() != before

def countdown(n: int) -> int: return 0 if n == 0 else countdown(n - 1)

def identity(x): return x

def test_sets_are_keyed_by_their_members_in_any_order():
    assert run_fingerprint(identity, {1, 2, 'a'}) == run_fingerprint(identity, {'a', 2, 1})
    assert run_fingerprint(identity, {1, 2}) != run_fingerprint(identity, {1, 3})
    assert run_fingerprint(identity, frozenset({1})) != run_fingerprint(identity, {1})

def make_adder(y: int):
    def add(x: int): return x + y  # y is not in add's code
    return add

@pytest.mark.parametrize('value, kind', [(torch.Generator(), 'Generator'), (lambda x: x, 'function'),
                                         (make_adder(1), 'function'), (object(), 'object')])
def test_what_cannot_be_identified_is_refused(value, kind):
    with pytest.raises(TypeError, match=f'shared_run cannot fingerprint a {kind}'):
        run_fingerprint(identity, value)

def test_a_recursive_function_is_named_once():
    assert run_fingerprint(countdown, 3) == run_fingerprint(countdown, 3) != run_fingerprint(countdown, 4)

# --- workers that cannot hang ----------------------------------------------------------------------------------

@pytest.fixture
def watchdog():
    "Fail the test instead of hanging: SIGALRM after 60 s."
    def expired(signum, frame): raise TimeoutError('map_runs hung: a lost worker was never noticed')
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)

def killed_at(x: int, victim: int = 2) -> int:
    if x == victim: os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer does
    return x

@pytest.mark.skipif(not ex._fork_available(), reason='workers are forked')
def test_a_killed_worker_is_named_not_waited_for(watchdog):
    with pytest.raises(RuntimeError, match=r"killed_at\(2,\) its worker process was killed by SIGKILL "
                                           r"\(the out-of-memory killer sends it\).*did not finish") as error:
        map_runs(killed_at, [(i,) for i in range(6)], processes=2, progress=False)
    assert 'killed_at(5,)' in str(error.value) or 'more' in str(error.value)
    assert multiprocessing.active_children() == []  # the other workers are stopped, none left behind
    assert map_runs(killed_at, [(1,), (3,)], processes=2, progress=False) == [1, 3]  # usable after

def exits(x: int) -> int:
    if x == 1: sys.exit(3)
    return x

def unsendable(x: int): return lambda: x  # pickle cannot carry a lambda back

@pytest.mark.parametrize('processes', [1, 2])
def test_a_run_that_exits_is_named(watchdog, processes):
    with pytest.raises(RuntimeError, match=r"exits\(1,\) failed: SystemExit: 3"):
        map_runs(exits, [(0,), (1,)], processes=processes, progress=False)

@pytest.mark.skipif(not ex._fork_available(), reason='workers are forked')
def test_a_result_pickle_cannot_carry_is_named(watchdog):
    with pytest.raises(RuntimeError, match=r"unsendable\(0,\) failed: its result cannot be sent back"):
        map_runs(unsendable, [(0,), (1,)], processes=2, progress=False)

def fails_first(x: int) -> int:
    if x == 0: raise ValueError('the first job fails')
    return x

@pytest.mark.parametrize('n_left, end', [(3, r'fails_first\(3,\)$'), (4, r'fails_first\(3,\) and 1 more$')])
def test_the_jobs_left_are_named_three_at_most(n_left, end):
    with pytest.raises(RuntimeError, match=rf"fails_first\(0,\) failed: .*; {n_left} job\(s\) did not finish: "
                                           rf"fails_first\(1,\), fails_first\(2,\), {end}"):
        map_runs(fails_first, [(i,) for i in range(n_left + 1)], processes=1, progress=False)

def fails_on_long(values: list, x: int = 0) -> int:
    raise ValueError('x' * 100_000)

@pytest.mark.parametrize('processes', [1, 2])
def test_messages_cut_long_arguments_short(watchdog, processes):
    long = list(range(300_000))
    with pytest.raises(RuntimeError) as error:
        map_runs(fails_on_long, [(long,), (long, 1)], processes=processes, progress=False)
    message = str(error.value)
    assert len(message) < 800 and message.startswith('fails_on_long([0, 1, 2, 3, 4, 5, ...],) failed: ValueError')
    with pytest.raises(TypeError) as error: map_runs(fails_on_long, [long])
    assert len(str(error.value)) < 300

def square(x: int) -> int: return x * x

@pytest.mark.parametrize('processes', [1, 2])
def test_the_progress_bar_counts_every_run(capsys, processes):
    assert map_runs(square, [(1,), (2,), (3,)], processes=processes, desc='grid') == [1, 4, 9]
    assert 'grid: 100%' in capsys.readouterr().err

def trained_like(n: int) -> dict:
    "What a lesson's run returns: tensors, a module, a frame."
    torch.manual_seed(n)
    return {'weights': torch.randn(n, 1000), 'model': nn.Linear(3, n), 'history': pd.DataFrame({'loss': [0.5] * n})}

@pytest.mark.skipif(not ex._fork_available(), reason='workers are forked')
def test_tensors_modules_and_frames_come_back_from_workers(watchdog):
    "A worker exits after sending: its result must travel whole in the message, not in shared memory it owns."
    parallel = map_runs(trained_like, [(300,), (2,), (5,)], processes=2, progress=False)
    alone = map_runs(trained_like, [(300,), (2,), (5,)], processes=1, progress=False)
    for a, b in zip(parallel, alone):
        assert torch.equal(a['weights'], b['weights']) and a['history'].equals(b['history'])
        assert all(torch.equal(x, y)
                   for x, y in zip(a['model'].state_dict().values(), b['model'].state_dict().values()))

def process_id() -> int: return os.getpid()

def test_one_process_runs_here_and_more_run_in_workers():
    "processes=1 (or one job) runs in this process: a debugger stops in it, its prints show up here."
    here = os.getpid()
    assert map_runs(process_id, [(), ()], processes=1, progress=False) == [here, here]
    assert map_runs(process_id, [()], processes=2, progress=False) == [here]
    if 'fork' in multiprocessing.get_all_start_methods():  # Linux and macOS: workers are forked
        assert here not in map_runs(process_id, [(), ()], processes=2, progress=False)

def vanishes(x: int) -> int:
    if x == 1: os._exit(0)  # ends its process without an exception: nothing to report
    return x

@pytest.mark.skipif(not ex._fork_available(), reason='workers are forked')
def test_a_worker_that_exits_quietly_is_named_with_its_code(watchdog):
    with pytest.raises(RuntimeError, match=r"vanishes\(1,\) its worker process exited with code 0 before"):
        map_runs(vanishes, [(0,), (1,)], processes=2, progress=False)

@pytest.mark.skipif(not (ex._fork_available() and Path('/proc/self/fd').is_dir()), reason='Linux: /proc')
def test_workers_leave_no_open_pipe_behind(watchdog):
    "Each job opens a pipe: a course runs thousands of jobs in one kernel, so every end must be closed."
    map_runs(square, [(1,)] * 2, processes=2, progress=False)  # whatever the first call opens once
    before = len(os.listdir('/proc/self/fd'))
    map_runs(square, [(i,) for i in range(12)], processes=2, progress=False)
    assert len(os.listdir('/proc/self/fd')) == before

def test_a_shared_folder_that_does_not_exist_yet_is_made(tmp_path, monkeypatch):
    folder = tmp_path / 'course' / 'runs'
    monkeypatch.setenv(SHARED_RUNS_VARIABLE, str(folder))
    CALLS.clear()
    shared_run(weights, 3); shared_run(weights, 3)
    assert CALLS == [3] and len(list(folder.glob('*.pt'))) == 1

def test_containers_are_keyed_with_their_lengths():
    "Without a dict's length, [{'a': 1, 'b': 2}, {}] would read as [{'a': 1}, ('b', 2)]."
    assert run_fingerprint(identity, [{'a': 1, 'b': 2}, {}]) != run_fingerprint(identity, [{'a': 1}, ('b', 2)])
    assert run_fingerprint(identity, [[1, 2], []]) != run_fingerprint(identity, [[1], [2]])

def test_an_argument_that_contains_itself_is_refused_by_name():
    "A list or module that holds itself was a RecursionError; the same object twice is no loop."
    loop = [1]; loop.append(loop)
    with pytest.raises(TypeError, match='a list that contains itself'): run_fingerprint(identity, loop)
    net = nn.Linear(2, 2); net.me = [net]
    with pytest.raises(TypeError, match='a Linear that contains itself'): run_fingerprint(identity, net)
    shared = [3]
    assert run_fingerprint(identity, [shared, shared]) == run_fingerprint(identity, [[3], [3]])

def test_map_runs_progress_must_be_a_bool():
    with pytest.raises(TypeError, match="progress must be True or False, got 'no'"):
        map_runs(square, [(1,)], progress='no')
