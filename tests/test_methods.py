"""contrastive_nb.methods beyond the bad-input registry: what a method keeps (its setup, its precision), what its
spec checks before and after building, which loss a class defines, and how names and files are looked up. Each
test here killed a mutant that the other tests let through (issue 41, mutation testing)."""
import dataclasses
import subprocess
import sys

import pytest
import torch
from torch import nn

from contrastive_nb.methods import (METHODS, Batch, ContrastiveMethod, MethodOptions, MethodSetup, MethodSpec,
                                    TwoViewMethod, method_names, method_spec, register_method, settings_from_dict)

@dataclasses.dataclass(frozen=True)
class Opts(MethodOptions):
    "A toy method's settings."
    weight: float = 1.0 # a factor

class Pairs(TwoViewMethod):
    "The mean squared distance of the two views' embeddings."
    Options = Opts
    def pair_loss(self, z1, z2, batch): return (z1 - z2).pow(2).mean() * self.options.weight

def networks():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 6)), nn.Linear(6, 4)

def setup(**changes): return MethodSetup(**{'n_train': 8, 'batch_size': 4, 'embed_dim': 4, **changes})

def test_a_two_view_method_keeps_its_setup_and_options():
    s = setup(seed=3)
    m = Pairs(*networks(), Opts(2.0), s)
    assert m.setup is s and m.options.weight == 2.0

def test_set_precision_turns_autocast_on_for_half_types_only():
    m = Pairs(*networks())
    with m.autocast(): assert not torch.is_autocast_enabled('cpu')  # off until asked
    m.set_precision('cpu', torch.bfloat16)
    with m.autocast(): assert torch.is_autocast_enabled('cpu') and torch.get_autocast_dtype('cpu') == torch.bfloat16
    z = m.embed(m.encoder, m.head, torch.randn(2, 3, 2, 2))
    assert z.dtype == torch.float32  # losses run in full precision
    m.set_precision('cpu', torch.float32)
    with m.autocast(): assert not torch.is_autocast_enabled('cpu')
    with pytest.raises(ValueError, match='device_type must be one of'): m.set_precision('tpu', torch.float32)

def test_loss_backward_fills_the_gradients_and_refuses_a_plain_number():
    m = Pairs(*networks())
    batch = Batch([torch.randn(4, 3, 2, 2), torch.randn(4, 3, 2, 2)], torch.arange(4), torch.zeros(4), None)
    loss = m.loss_backward(batch)
    assert not loss.requires_grad and all(p.grad is not None for p in m.parameters())
    assert m.encoder[1].weight.grad.abs().sum() > 0  # (the head's bias cancels in z1 - z2)
    class Number(Pairs):
        def pair_loss(self, z1, z2, batch): return 1.0
    with pytest.raises(ValueError, match='got float'): Number(*networks()).loss_backward(batch)

def test_a_spec_checks_the_options_before_calling_a_builder_that_does_not():
    made = []
    def builder(encoder, head, options, setup):
        made.append(options)
        return Pairs(encoder, head, None, setup)
    spec = MethodSpec('toy', builder, Opts)
    assert isinstance(spec.build(*networks(), Opts(), setup()), Pairs)
    with pytest.raises(TypeError, match='options must be a Opts, got MethodOptions'):
        spec.build(*networks(), MethodOptions(), setup())
    assert len(made) == 1

def test_a_two_view_method_that_defines_loss_itself_defines_a_loss():
    class OwnLoss(TwoViewMethod):
        def loss(self, batch): return sum(p.sum() for p in self.parameters())
    assert isinstance(MethodSpec('own', OwnLoss, MethodOptions).build(*networks(), MethodOptions(), setup()), OwnLoss)

def test_settings_from_dict_refuses_an_instance_or_a_plain_class_as_cls():
    assert Opts.from_dict({'weight': 2.0}) == Opts(2.0) and Opts.from_dict({}) == Opts()
    for cls in (Opts(), int):
        with pytest.raises(TypeError, match='cls must be a dataclass of settings'): settings_from_dict(cls, {})

@pytest.mark.parametrize('name', ['n_train', 'batch_size', 'embed_dim', 'world_size'])
def test_method_setup_refuses_a_count_below_one(name):
    with pytest.raises(ValueError, match=name): setup(**{name: 0})
    assert getattr(setup(**{name: 5}), name) == 5

def test_register_a_new_name_and_refuse_a_builtin_name():
    class Registered(Pairs): pass
    assert register_method('toy_registered_41', Registered) is Registered
    assert method_spec('toy_registered_41').builder is Registered and 'toy_registered_41' in method_names()
    assert register_method('toy_registered_41', Registered) is Registered  # the same definition again
    for step in ('maybe imported', 'imported'):  # the same refusal before and after its lesson is imported
        with pytest.raises(ValueError, match="'simclr' is the name of the course's own method"):
            register_method('simclr', Pairs)
        method_spec('simclr')

METHOD_FILE = ('from contrastive_nb.methods import TwoViewMethod\n'
               'class Mine(TwoViewMethod):\n'
               '    def pair_loss(self, z1, z2, batch): return (z1 - z2).pow(2).mean()\n')

def test_a_file_method_is_read_once_and_is_not_listed_by_name(tmp_path):
    (tmp_path / 'mine.py').write_text(METHOD_FILE)
    name = f'{tmp_path / "mine.py"}:Mine'
    spec = method_spec(name)
    assert method_spec(name) is spec  # unchanged file: not read again
    assert name not in method_names() and all(':' not in n for n in method_names())

@pytest.mark.parametrize('name', ['mine.py:not-a-class', 'mine.py:x.txt:Mine'])
def test_a_file_method_name_that_is_not_file_py_class_is_refused(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'mine.py').write_text(METHOD_FILE)
    with pytest.raises(ValueError, match='a method from a file is named FILE.py:CLASS'): method_spec(name)

def test_a_builtin_method_is_imported_from_its_lesson_the_first_time_it_is_asked_for(tmp_path):
    code = ("from contrastive_nb.methods import method_spec\n"
            "print(*(method_spec(n).builder.__module__ for n in ('byol', 'moco')))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['contrastive_nb.without_negatives', 'contrastive_nb.moco']

def _course_methods():
    "Every course method whose loss reads a fixed number of views, built small: (id, builder of the method)."
    from contrastive_nb.methods import BUILTIN_METHODS
    from contrastive_nb.models import ProjectionHead, SmallCNN

    def built(name, **options):
        torch.manual_seed(0)
        encoder = SmallCNN(width=4, blocks=2, norm='group')
        spec = method_spec(name)
        return spec.build(encoder, ProjectionHead(encoder.feature_dim, 8, 4, norm='group'), spec.options(**options),
                          setup(n_train=512))  # room for a memory bank's 256 negatives

    def image_text(cls_name):
        from contrastive_nb import clip
        torch.manual_seed(0)
        return getattr(clip, cls_name)(clip.TinyCLIP(width=4, blocks=2, embed_dim=8))

    def pair_loss():
        from contrastive_nb.infonce import PairLoss, nt_xent
        encoder, head = networks()
        return PairLoss(lambda v1, v2, g: nt_xent(head(encoder(v1)), head(encoder(v2)), 0.5),
                        [*encoder.parameters(), *head.parameters()])

    cases = [(name, lambda name=name: built(name)) for name in sorted(BUILTIN_METHODS)]
    return cases + [('simclr_global-grad_cache', lambda: built('simclr_global', grad_cache_chunk=2)),
                    ('clip', lambda: image_text('CLIP')), ('siglip', lambda: image_text('SigLIP')),
                    ('PairLoss', pair_loss)]

@pytest.mark.parametrize('make', [m for _, m in _course_methods()], ids=[n for n, _ in _course_methods()])
def test_a_course_method_refuses_a_batch_with_another_number_of_views_than_n_views(make):
    # not Python's unpacking error, an IndexError, or a third view silently left out (issue 41)
    method = make()
    n, name = method.n_views, type(method).__name__
    for got in (n - 1, n + 1):
        views = [torch.rand(4, 3, 8, 8) for _ in range(got)]
        batch = Batch(views, torch.arange(4), torch.tensor([0, 1, 0, 1]), torch.Generator().manual_seed(0),
                      texts=['a red circle'] * 4)
        with pytest.raises(ValueError, match=rf"^{name} takes {n} views? per batch, got {got}$"):
            method.loss_backward(batch)

# --- survivors of a second sample (seed 7) ------------------------------------------------------------------------

def test_a_lesson_notebooks_copy_of_its_method_is_returned_and_the_packages_stays():
    "Running lesson 03 in Jupyter registers __main__.SimCLR: the package's class stays registered."
    package = method_spec('simclr').builder
    copy = type('SimCLR', (package,), {'__module__': '__main__', '__qualname__': 'SimCLR'})
    assert register_method('simclr', copy) is copy
    assert method_spec('simclr').builder is package

def test_another_builder_under_a_registered_name_is_refused_by_name():
    class First(Pairs): pass
    class Second(Pairs): pass
    register_method('toy_taken_41', First)
    try:
        with pytest.raises(ValueError, match="method 'toy_taken_41' is already registered"):
            register_method('toy_taken_41', Second)
        assert method_spec('toy_taken_41').builder is First
    finally: METHODS.pop('toy_taken_41')

@pytest.mark.parametrize('name', ['nosuch', 'nosuch:Class', 'mine.txt:Mine'])
def test_a_name_that_is_neither_registered_nor_file_py_class_lists_the_methods(name):
    with pytest.raises(ValueError, match=r"method must be one of \(.*'simclr'.*\), or FILE.py:CLASS"):
        method_spec(name)

def test_a_method_file_that_fails_on_import_fails_the_same_way_the_next_time(tmp_path):
    "A half-run module is not kept: the second read runs the file again and names the same error."
    (tmp_path / 'broken.py').write_text(METHOD_FILE + 'raise RuntimeError("half way")\n')
    name = f'{tmp_path / "broken.py"}:Mine'
    for attempt in range(2):
        with pytest.raises(ValueError, match='RuntimeError: half way'): method_spec(name)

def test_method_setup_takes_total_steps_of_zero_or_more():
    assert setup(total_steps=0).total_steps == 0 and setup(total_steps=12).total_steps == 12
    with pytest.raises(ValueError, match='total_steps'): setup(total_steps=-1)
    with pytest.raises(TypeError, match='total_steps'): setup(total_steps=1.5)
