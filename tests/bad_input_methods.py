"""Bad-input registry of contrastive_nb.methods (read by tests/test_bad_input.py).

`Batch` is a plain record that the trainer (or a lesson's loop) fills with what it has checked: a step's hot path
checks nothing, so its valid call is registered with every argument fixed."""
import dataclasses

import torch
from test_bad_input import Case, gen, images, _mod

from contrastive_nb.methods import MethodOptions, TwoViewMethod

CONSTANTS = {'METHODS', 'BUILTIN_METHODS', 'Monitor'}

@dataclasses.dataclass(frozen=True)
class ToyOptions(MethodOptions):
    "A user's method's settings."
    temperature: float = 0.5 # τ of NT-Xent

    def __post_init__(self):
        self._store(temperature=float(_mod('_checks').check_temperature(self.temperature)))

class ToyMethod(TwoViewMethod):
    "SimCLR written outside the package."
    Options = ToyOptions

    def pair_loss(self, z1, z2, batch):
        return _mod('infonce').nt_xent(z1, z2, self.options.temperature)

def _encoder_head():
    torch.manual_seed(0)
    models = _mod('models')
    encoder = models.SmallCNN(width=4, blocks=2, norm='group')
    return encoder, models.ProjectionHead(encoder.feature_dim, 8, 4, norm='group')

def _setup(m):
    return m.MethodSetup(n_train=8, batch_size=4, embed_dim=4, seed=0, world_size=1)

def cases():
    m = _mod('methods')
    labels = torch.tensor([0, 1, 0, 1])
    view_names = ('views', 'x', 'z1', 'z2', 'h')

    def batch(view1, view2):
        return m.Batch([view1, view2], torch.arange(4), labels, gen())

    def toy(**options):
        encoder, head = _encoder_head()
        return ToyMethod(encoder, head, ToyOptions(**options), _setup(m))

    def precision(device_type, dtype):
        method = toy()
        method.set_precision(device_type, dtype)
        encoder, head = _encoder_head()
        return method.embed(encoder, head, images())

    def registered(name, builder, options):
        "register_method, undone afterwards: every call registers anew."
        existed = name in m.METHODS if isinstance(name, str) else True
        try: return register(name, builder, options)
        finally:
            if not existed: m.METHODS.pop(name, None)
    register = m.register_method

    spec = m.MethodSpec('toy', ToyMethod, ToyOptions)
    return {
        'Batch': [Case(m.Batch, dict(views=[images(), images(seed=1)], indices=torch.arange(4), labels=labels,
                                     generator=gen()), fixed=('views', 'indices', 'labels', 'generator'))],
        'MethodOptions': [Case(lambda: m.MethodOptions().to_dict(), {}, 'to_dict'),
                          Case(m.MethodOptions.from_dict, dict(values={}), 'from_dict',
                               aliases={'values': ('settings',)})],
        'settings_from_dict': [Case(m.settings_from_dict, dict(cls=ToyOptions, values={'temperature': 0.2},
                                                               base=ToyOptions()),
                                    aliases={'values': ('settings',)})],
        'MethodSetup': [Case(m.MethodSetup, dict(n_train=8, batch_size=4, embed_dim=4, seed=0, world_size=1,
                                                 n_views=2))],
        'ContrastiveMethod': [Case(lambda: m.ContrastiveMethod().after_step(), {}),
                              Case(precision, dict(device_type='cpu', dtype=torch.bfloat16), 'set_precision',
                                   choices=('device_type',)),
                              Case(lambda x: toy().embed(*_encoder_head(), x), dict(x=images()), 'embed'),
                              Case(lambda: len(toy().parameters_to_train()), {}, 'parameters_to_train')],
        'TwoViewMethod': [Case(lambda encoder, head, options: ToyMethod(encoder, head, options, _setup(m)),
                               dict(encoder=_encoder_head()[0], head=_encoder_head()[1], options=ToyOptions())),
                          Case(lambda view1, view2: toy().loss(batch(view1, view2)),
                               dict(view1=images(), view2=images(seed=1)), 'loss',
                               aliases={'view1': view_names, 'view2': view_names}),
                          Case(lambda view1, view2: toy().loss_backward(batch(view1, view2)),
                               dict(view1=images(), view2=images(seed=1)), 'loss_backward',
                               aliases={'view1': view_names, 'view2': view_names})],
        'mean_over_pairs': [Case(m.mean_over_pairs, dict(loss=lambda i, j: torch.tensor(float(i + j)), n_views=3))],
        'check_options': [Case(m.check_options, dict(options=ToyOptions(), cls=ToyOptions))],
        'MethodSpec': [Case(lambda encoder, head, options: spec.build(encoder, head, options, _setup(m)),
                            dict(encoder=_encoder_head()[0], head=_encoder_head()[1], options=ToyOptions()),
                            'build')],
        'register_method': [Case(registered, dict(name='toy_method', builder=ToyMethod, options=ToyOptions),
                                 aliases={'name': ('method',)})],
        'method_names': [Case(m.method_names, {})],
        'method_spec': [Case(m.method_spec, dict(name='simclr'), choices=('name',), aliases={'name': ('method',)})],
    }
