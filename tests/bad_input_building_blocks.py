"""Bad-input registry of the building blocks that later lessons reuse (issue 24), for the modules of lessons 00-06,
whose own entries live in tests/test_bad_input.py: `BLOCKS[module]()` gives `{name: [Case, ...]}`.

A check is called directly. A kernel trusts its input by design (NaN in, NaN out), so it is registered behind the
door that feeds it in the lessons: `row_logsumexp` on `nt_xent_inputs`' output, `reduce_loss` on a
loss. `name` arguments only name the argument in the messages, so they are not corrupted."""
import pandas as pd
from test_bad_input import Case, feats, images, _mod

CONSTANTS: dict[str, set[str]] = {}

def _infonce():
    i = _mod('infonce')
    views = dict(z1=feats(), z2=feats(seed=1))

    def row_logsumexp(z1, z2, chunk_size):
        z, t, bound = i.nt_xent_inputs(z1, z2, 0.5, 'mean', chunk_size)
        return i.row_logsumexp(z / t, z, bound, skip_diagonal=True, chunk_size=chunk_size)

    return {
        'unit_rows': [Case(i.unit_rows, dict(x=feats(), name='anchors', ndim=2), fixed=('name', 'ndim'),
                           aliases={'x': ('anchors',)})],
        'check_two_views': [Case(i.check_two_views, dict(views), nan_ok=('z1', 'z2'))],  # shapes only
        'check_loss_options': [Case(i.check_loss_options, dict(temperature=0.5, reduction='mean', chunk_size=2),
                                    choices=('reduction',))],
        'info_nce_inputs': [Case(i.info_nce_inputs, dict(query=feats(), positive=feats(seed=1),
                                                         negatives=feats(5, 4, seed=2), temperature=0.5,
                                                         reduction='mean', chunk_size=2),
                                 choices=('reduction',))],
        'nt_xent_inputs': [Case(i.nt_xent_inputs, dict(**views, temperature=0.5, reduction='mean', chunk_size=2),
                                choices=('reduction',))],
        'row_logsumexp': [Case(row_logsumexp, dict(**views, chunk_size=2))],
        'reduce_loss': [Case(lambda z1, z2, reduction: i.reduce_loss(i.nt_xent(z1, z2, reduction='none'),
                                                                      reduction),
                             dict(**views, reduction='sum'), choices=('reduction',))],
    }

def _moco():
    mo, models = _mod('moco'), _mod('models')
    return {
        'output_dim': [Case(mo.output_dim, dict(head=models.ProjectionHead(8, 8, 4)))],
        'check_views': [Case(mo.check_views, dict(view1=images(4), view2=images(4, seed=1), bn_splits=2,
                                                  like=None), fixed=('like',))],
    }

def _data():
    frame = pd.DataFrame(dict(ticket_id=[0, 1], problem_id=[5, 5], intent=['a', 'a'], text=['x', 'y']))
    return {'check_tickets': [Case(_mod('data').check_tickets, dict(df=frame, name='tickets'), fixed=('name',),
                                   aliases={'df': ('tickets',)})]}

def _augment():
    a = _mod('augment')
    return {'check_image_batch': [Case(a.check_image_batch, dict(images=images(), name='views', rgb=True,
                                                                  unit=True, check_values=True),
                                       fixed=('name',), aliases={'images': ('views',)})]}

BLOCKS = {'infonce': _infonce, 'moco': _moco, 'data': _data, 'augment': _augment}

def cases(module: str) -> dict:
    "The building blocks' entries of `module` ({} when it has none)."
    return BLOCKS[module]() if module in BLOCKS else {}
