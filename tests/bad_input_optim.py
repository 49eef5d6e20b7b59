"""Bad-input registry of the optimisers page (contrastive_nb.optim): the schedule's factor and LARS."""
import torch
from test_bad_input import Case, _mod

CONSTANTS = {'SCHEDULES'}

def cases():
    o = _mod('optim')

    def lars_step(lr, momentum, weight_decay, trust, clip, exclude_bias_norm):
        w, b = torch.nn.Parameter(torch.ones(2, 2)), torch.nn.Parameter(torch.ones(2))
        w.grad, b.grad = torch.full((2, 2), 0.5), torch.full((2,), 0.5)
        o.LARS([w, b], lr, momentum, weight_decay, trust, clip, exclude_bias_norm).step()
        return torch.cat([w.detach().flatten(), b.detach()])

    return {
        'lr_factor': [Case(o.lr_factor, dict(step=3, total=10, warmup=2, schedule='cosine'), choices=('schedule',))],
        'LARS': [Case(lars_step, dict(lr=0.1, momentum=0.9, weight_decay=1e-4, trust=1e-3, clip=True,
                                     exclude_bias_norm=False))],
    }
