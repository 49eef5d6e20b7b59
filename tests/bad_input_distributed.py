"""Bad-input registry of contrastive_nb.distributed (read by tests/test_bad_input.py).

Without a process group every function runs on one process: the gathers return their input, global_nt_xent is
nt_xent. `launch` starts one real process in its valid call; its corrupted integers are refused before any start."""
import torch
from test_bad_input import Case, feats, images, _mod, _small_policy

CONSTANTS = {'GATHERS', 'ANCHORS'}

def _encoder():
    torch.manual_seed(0)
    models = _mod('models')
    cnn = models.SmallCNN(width=4, blocks=2, norm='group')
    return torch.nn.Sequential(cnn, models.ProjectionHead(cnn.feature_dim, 8, 4, norm='group'))

def _global_simclr_loss(d, temperature, cache_chunk, loss_chunk):
    torch.manual_seed(0)
    cnn, head = _encoder()
    options = d.GlobalSimCLROptions(temperature=temperature, grad_cache_chunk=cache_chunk, chunk_size=loss_chunk)
    method = d.GlobalSimCLR(cnn, head, options)
    batch = _mod('methods').Batch([images(), images(seed=1)], torch.arange(4), torch.zeros(4, dtype=torch.long),
                                  torch.Generator().manual_seed(0))
    return method.loss_backward(batch, lambda loss: loss)

def cases():
    d = _mod('distributed')
    nt_xent = _mod('infonce').nt_xent
    return {
        'GlobalSimCLR': [Case(lambda temperature, cache_chunk, loss_chunk:
                              _global_simclr_loss(d, temperature, cache_chunk, loss_chunk),
                              dict(temperature=0.5, cache_chunk=3, loss_chunk=2),
                              aliases={'cache_chunk': ('grad_cache_chunk',), 'loss_chunk': ('chunk_size',)}),
                         Case(lambda encoder: d.GlobalSimCLR(encoder, _encoder()[1],
                                                             d.GlobalSimCLROptions(grad_cache_chunk=3)),
                              dict(encoder=_encoder()[0]), 'constructor')],
        'GlobalSimCLROptions': [Case(d.GlobalSimCLROptions, dict(temperature=0.5, grad_cache_chunk=3, chunk_size=2))],
        'all_gather_rows': [Case(d.all_gather_rows, dict(x=feats(), gather='exact'), choices=('gather',),
                                 nan_ok=('x',))],
        'all_gather_with_grad': [Case(d.all_gather_with_grad, dict(x=feats()), nan_ok=('x',))],
        'global_nt_xent': [Case(d.global_nt_xent, dict(z1=feats(), z2=feats(seed=1), temperature=0.5,
                                                       chunk_size=3, gather='exact', anchors='local'),
                                choices=('gather', 'anchors'))],
        'ddp_gradient_check': [Case(d.ddp_gradient_check, dict(gather='exact', anchors='local', batch_size=4,
                                                               temperature=0.5, seed=0, dtype=torch.float64),
                                    choices=('gather', 'anchors'))],
        'enqueue_from_all': [Case(d.enqueue_from_all, dict(queue=_mod('moco').MoCoQueue(8, 4), keys=feats(3)))],
        'shuffled_across': [Case(d.shuffled_across, dict(encode=lambda v: 2 * v, x=feats()), fixed=('encode',))],
        'grad_cache_step': [Case(d.grad_cache_step, dict(encoder=_encoder(), x1=images(), x2=images(seed=1),
                                                         loss_fn=nt_xent, chunk_size=3, approximate_batchnorm=False),
                                 aliases={'x1': ('x',), 'x2': ('x',)})],
        'train_simclr_ddp': [Case(d.train_simclr_ddp, dict(images=images(8), policy=_small_policy(), steps=1,
                                                           batch_size=4, gather='exact', temperature=0.5, lr=1e-3,
                                                           seed=0, width=4, blocks=2), choices=('gather',),
                                  aliases={'images': ('x',)})],
        'grad_cache_benchmark': [Case(d.grad_cache_benchmark, dict(batch_size=4, chunk_size=3, image_size=8, width=4,
                                                                   blocks=2, steps=1, seed=0), deterministic=False)],
    }
