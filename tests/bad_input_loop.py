"""Bad-input registry of the loop tools page (contrastive_nb.loop): the loop, its image data and first callbacks.

A loop is built once and checks its arguments then; its valid calls build a tiny loop and fit it."""
import torch
from test_bad_input import Case, gen, images, _mod

CONSTANTS = {'EVENTS', 'StopFit'}

def _method():
    torch.manual_seed(0)
    models, infonce = _mod('models'), _mod('infonce')
    encoder = models.SmallCNN(width=4, blocks=2, norm='group')
    return infonce.SimCLR(encoder, models.ProjectionHead(encoder.feature_dim, 8, 4, norm='group'))

def cases():
    lp, aug = _mod('loop'), _mod('augment')
    policy = aug.AugmentationPolicy(size=8)

    def data(**kw):
        return lp.ImageBatches(images(8), policy, 4, generator=gen(), **kw)

    def fit(method, optimizers, data, epochs, callbacks):
        loop = lp.Loop(method, optimizers, data, epochs, callbacks)
        return loop.fit().method.state_dict()

    def fitted(callbacks):
        method = _method()
        lp.Loop(method, torch.optim.SGD(method.parameters_to_train(), lr=0.1), data(), 1,
                callbacks).fit()
        return [cb.state_dict() for cb in callbacks]

    def method_and_optimiser():
        method = _method()
        return method, torch.optim.SGD(method.parameters_to_train(), lr=0.1)

    method, optimiser = method_and_optimiser()
    return {
        'ImageBatches': [Case(lambda **kw: lp.ImageBatches(**kw).batch(1).views,
                              dict(images=images(8), policy=policy, batch_size=4, n_views=2,
                                   labels=torch.tensor([0, 1] * 4), generator=gen(), view_generator=gen(1),
                                   rank=1, world_size=2, channels_last=False, draw=None),
                              fixed=('draw',), indices=('labels',))],
        'Loop': [Case(fit, dict(method=method, optimizers=optimiser, data=data(), epochs=1, callbacks=[]),
                      fixed=('method', 'optimizers', 'data'), deterministic=False)],
        'Callback': [Case(lambda: fitted([lp.Callback()]), {})],
        'History': [Case(lambda: fitted([lp.History()]), {}, deterministic=False)],
        'Progress': [Case(lambda desc, show: fitted([lp.Progress(desc, show)]), dict(desc='x', show=False))],
        'OnStep': [Case(lambda f: fitted([lp.OnStep(f)]), dict(f=print), fixed=('f',))],
        'SkipValueChecks': [Case(lambda: fitted([lp.SkipValueChecks()]), {})],
        'Monitors': [Case(lambda monitors, subject: fitted([lp.Monitors(monitors, subject)]),
                          dict(monitors={'one': lambda subject: 1.0}, subject=None), fixed=('subject',),
                          deterministic=False)],
        'format_seconds': [Case(lp.format_seconds, dict(seconds=187.0))],
    }
