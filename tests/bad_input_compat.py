"""Bad-input registry of the compatibility page (contrastive_nb.compat)."""
import warnings

from test_bad_input import Case, _mod

CONSTANTS = {'MOVED'}

def cases():
    c = _mod('compat')

    def quietly(module, name):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            # an unknown name must raise AttributeError (Python's module __getattr__ protocol: hasattr,
            # `from m import x`); that is this function's clear error, so the registry reads it as one
            try: return c.moved(module, name).__name__
            except AttributeError as e: raise ValueError(str(e)) from None

    return {'moved': [Case(quietly, dict(module='training', name='save_checkpoint'),
                           aliases={'module': ('has no attribute',), 'name': ('has no attribute',)})]}
