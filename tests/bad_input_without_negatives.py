"""Bad-input registry of contrastive_nb.without_negatives (read by tests/test_bad_input.py)."""
from test_bad_input import Case, feats, images, _mod
from bad_input_hard_negatives import VIEW_ALIASES, _encoder_head, two_view_loss

CONSTANTS = set()

def cases():
    w = _mod('without_negatives')
    methods = _mod('methods')
    four = dict(p1=feats(), z1=feats(seed=1), p2=feats(seed=2), z2=feats(seed=3))
    pair = dict(z1=feats(), z2=feats(seed=1))
    huge = dict(z1=1e30 * feats(), z2=1e36 * feats(seed=1))  # float32: squares past its limit (3.4e38)
    setup = methods.MethodSetup(n_train=16, batch_size=4, embed_dim=4, total_steps=10)

    def method(cls, options):
        "A method of lesson 13 built from its options' arguments."
        return lambda encoder, **values: cls(encoder, _encoder_head()[1], options(**values), setup)

    def loss(cls):
        return Case(lambda view1, view2: two_view_loss(cls(*_encoder_head(), None, setup), view1, view2),
                    dict(view1=images(4), view2=images(4, seed=1)), 'loss', aliases=VIEW_ALIASES)

    return {
        'byol_momentum': [Case(w.byol_momentum, dict(step=3, total_steps=10, base=0.99, final=1.0))],
        'simsiam_loss': [Case(w.simsiam_loss, dict(**four, stop_gradient=True)),
                         Case(w.simsiam_loss, {k: 1e30 * v for k, v in four.items()}, 'huge')],
        'byol_loss': [Case(w.byol_loss, dict(p1=feats(), t1=feats(seed=1), p2=feats(seed=2), t2=feats(seed=3))),
                      Case(w.byol_loss, dict(p1=1e30 * feats(), t1=1e30 * feats(seed=1), p2=feats(seed=2),
                                             t2=1e30 * feats(seed=3)), 'huge')],
        'cross_correlation': [Case(w.cross_correlation, pair), Case(w.cross_correlation, huge, 'huge')],
        'barlow_twins_loss': [Case(w.barlow_twins_loss, dict(**pair, lambda_=0.0051, eps=1e-5)),
                              Case(w.barlow_twins_loss, dict(**huge, lambda_=0.0051, eps=1e-5), 'huge')],
        'vicreg_terms': [Case(w.vicreg_terms, dict(**pair, gamma=1.0, eps=1e-4))],
        'vicreg_loss': [Case(w.vicreg_loss, dict(**pair, invariance=25.0, variance=25.0, covariance=1.0,
                                                 gamma=1.0, eps=1e-4))],
        'PredictionHead': [Case(w.PredictionHead, dict(dim=4, hidden=2))],
        'SimSiamOptions': [Case(w.SimSiamOptions, dict(predictor_hidden=2, predictor=True, stop_gradient=True,
                                                       fixed_predictor_lr=True, projector_bn=False))],
        'BYOLOptions': [Case(w.BYOLOptions, dict(predictor_hidden=8, base_momentum=0.99, final_momentum=1.0))],
        'BarlowTwinsOptions': [Case(w.BarlowTwinsOptions, dict(lambda_=0.0051))],
        'VICRegOptions': [Case(w.VICRegOptions, dict(invariance=25.0, variance=25.0, covariance=1.0, gamma=1.0))],
        'SimSiam': [Case(method(w.SimSiam, w.SimSiamOptions), dict(encoder=_encoder_head()[0], predictor_hidden=2)),
                    loss(w.SimSiam)],
        'BYOL': [Case(method(w.BYOL, w.BYOLOptions), dict(encoder=_encoder_head()[0], base_momentum=0.99)),
                 loss(w.BYOL)],
        'BarlowTwins': [Case(method(w.BarlowTwins, w.BarlowTwinsOptions),
                             dict(encoder=_encoder_head()[0], lambda_=0.0051)), loss(w.BarlowTwins)],
        'VICReg': [Case(method(w.VICReg, w.VICRegOptions), dict(encoder=_encoder_head()[0], variance=25.0)),
                   loss(w.VICReg)],
    }
