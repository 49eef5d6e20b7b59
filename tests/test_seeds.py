"""Every public function that seeds a generator refuses a seed torch cannot take, naming it (issue 23).

torch's generators take [-2**63, 2**64 - 1] and numpy's none below 0; past that both raised 'Overflow when unpacking
long long' or a numpy error, naming nothing. `check_seed` (the checks page) gives every caller the same range and
message."""
import tempfile

import pytest
import torch
from torch import nn

from contrastive_nb._checks import SEED_MAX, check_seed
from contrastive_nb.augment import AugmentationPolicy
from contrastive_nb.clip import TinyCLIP, train_clip
from contrastive_nb.data import (load_tickets, make_moving_shapes, make_shapes, render_shapes, split_tickets,
                                 write_fashion_mnist_fixture)
from contrastive_nb.distributed import ddp_gradient_check, grad_cache_benchmark
from contrastive_nb.evaluate import linear_probe
from contrastive_nb.infonce import train_on_pairs
from contrastive_nb.memory_bank import MemoryBank, train_memory_bank
from contrastive_nb.moco import MoCoQueue
from contrastive_nb.text import bootstrap_ci, train_text_encoder
from contrastive_nb.training import TrainConfig

shapes = make_shapes(8, size=8, seed=0)
x, y = torch.randn(8, 4), torch.arange(8) % 2
CALLS = {
    'make_shapes': lambda s: make_shapes(3, size=8, seed=s),
    'make_moving_shapes': lambda s: make_moving_shapes(2, 2, size=8, seed=s),
    'render_shapes': lambda s: render_shapes(shapes.factors, size=8, noise=0.1, seed=s),
    'MemoryBank': lambda s: MemoryBank(8, 4, seed=s),
    'MoCoQueue': lambda s: MoCoQueue(4, 3, seed=s),
    'linear_probe': lambda s: linear_probe(x, y, x, y, epochs=1, seed=s),
    'train_on_pairs': lambda s: train_on_pairs(lambda a, b, g: a.sum(), [nn.Parameter(torch.ones(()))],
                                               shapes.images, epochs=1, batch_size=4, seed=s, progress=False),
    'train_memory_bank': lambda s: train_memory_bank(nn.Flatten(), nn.Linear(192, 4), shapes.images,  # a weight
                                                     MemoryBank(8, 4), k=2, epochs=1, batch_size=4,
                                                     policy=AugmentationPolicy(size=8), seed=s,
                                                     progress=False),
    'train_text_encoder': lambda s: train_text_encoder(['a b', 'a c', 'd e', 'd f'], torch.tensor([0, 0, 1, 1]),
                                                       epochs=1, batch_size=2, seed=s),
    'train_clip': lambda s: train_clip(TinyCLIP(width=4, blocks=2), shapes.images, shapes.factors, epochs=1,
                                       batch_size=4, seed=s, progress=False),
    'ddp_gradient_check': lambda s: ddp_gradient_check(seed=s),
    'grad_cache_benchmark': lambda s: grad_cache_benchmark(4, seed=s),
    # numpy's generators alone, yet one rule: 2**70 was taken here and refused everywhere else
    'split_tickets': lambda s: split_tickets(load_tickets(), seed=s),
    'bootstrap_ci': lambda s: bootstrap_ci([0.0, 1.0, 1.0], n_boot=10, seed=s),
    'write_fashion_mnist_fixture': lambda s: write_fashion_mnist_fixture(tempfile.mkdtemp(), seed=s),
    'TrainConfig(seed)': lambda s: TrainConfig(seed=s),
    'TrainConfig(data_seed)': lambda s: TrainConfig(data_seed=s),
}

@pytest.mark.parametrize('name', CALLS)
@pytest.mark.parametrize('seed', [2 ** 70, SEED_MAX + 1, -1])
def test_a_seed_torch_cannot_take_is_named(name, seed):
    with pytest.raises(ValueError, match=r'seed must lie in \[0, 18446744073709551615\]'):
        CALLS[name](seed)

def test_the_largest_seed_works_with_torch_and_numpy():
    import numpy as np
    torch.Generator().manual_seed(check_seed(SEED_MAX))
    np.random.default_rng(check_seed(SEED_MAX))
    assert make_shapes(2, size=8, seed=SEED_MAX).images.shape == (2, 3, 8, 8)
    assert len(bootstrap_ci([0.0, 1.0, 1.0], n_boot=10, seed=SEED_MAX)) == 3  # numpy's generator alone
