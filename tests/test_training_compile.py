"""The trainer's `compile=True` path on the CPU: torch.compile (inductor) must train the same model as eager mode.

Inductor builds C++ kernels on the CPU, so the test needs a C compiler; without one it is skipped (it never needs a
GPU). Compiled kernels may reorder floating-point sums, so losses are compared with a tolerance, not bit for bit."""
import shutil

import pytest
import torch

from contrastive_nb.launch import cpu_threads
from contrastive_nb.training import TrainConfig, Trainer

pytestmark = pytest.mark.skipif(shutil.which('cc') is None and shutil.which('gcc') is None,
                                reason="torch.compile on the CPU needs a C compiler")

def run(compile: bool) -> Trainer:
    config = TrainConfig(n_train=32, n_test=16, augment={'size': 16}, width=4, blocks=2, head_hidden=16, embed_dim=8,
                         batch_size=8, epochs=1, knn_every=0, val_fraction=0.0, progress=False, compile=compile)
    trainer = Trainer(config)
    with cpu_threads(1): trainer.fit()
    return trainer

def test_compiled_encoder_trains_like_eager_mode():
    eager, compiled = run(False), run(True)
    # The compiled module is wrapped (its forward goes through torch._dynamo), its weights keep their names.
    assert compiled.method.encoder._compiled_call_impl is not None
    assert eager.method.encoder._compiled_call_impl is None
    assert compiled.method.encoder.state_dict().keys() == eager.method.encoder.state_dict().keys()
    eager_losses = torch.tensor([row[2] for row in eager.history])
    compiled_losses = torch.tensor([row[2] for row in compiled.history])
    assert len(eager_losses) == 4
    torch.testing.assert_close(compiled_losses, eager_losses, rtol=1e-4, atol=1e-5)
    for name, weight in eager.method.encoder.state_dict().items():
        torch.testing.assert_close(compiled.method.encoder.state_dict()[name], weight, rtol=1e-3, atol=1e-4)
