"""Bad-input registry of the pretrained-models page (contrastive_nb.pretrained): the loader and the saver."""
import tempfile
from pathlib import Path

import torch
from test_bad_input import Case, _mod

CONSTANTS = {'PRETRAINED_PACKAGE', 'PRETRAINED_VERSION', 'PRETRAINED_EXTRA', 'MINILM_ZIP', 'MINILM_SHA256',
             'TUNED_FORMAT', 'MINILM_NAME', 'MINILM_STATE_SHA256'}

def cases():
    p = _mod('pretrained')
    folder = Path(tempfile.gettempdir()) / 'contrastive_nb_bad_input_cache'  # extracted once
    def embed_one(cache, device, weights):
        return p.load_pretrained(cache, device, weights).encode(['a printer that will not print'],
                                                                convert_to_tensor=True)
    release = {'model': p.MINILM_NAME, 'files': dict(p.MINILM_SHA256), 'state': None}
    model = p.load_record(release, folder, 'cpu')
    return {
        'weights_digest': [Case(p.weights_digest, dict(model=torch.nn.Linear(2, 2)))],
        'is_pretrained': [Case(p.is_pretrained, dict(model=torch.nn.Linear(2, 2)), fixed=('model',))],  # any object
        'pretrained_record': [Case(lambda model: p.pretrained_record(model)['model'], dict(model=model))],
        'load_record': [Case(lambda record: p.load_record(record, folder, 'cpu').encode(['a printer']),
                             dict(record=release))],
        'load_pretrained': [Case(embed_one, dict(cache=str(folder), device='cpu', weights=None),
                                 choices=('device',), os_errors=True)],
        'save_tuned': [Case(lambda model, path: p.save_tuned(model, path).name,
                            dict(model=torch.nn.Linear(2, 2), path=str(folder / 'tuned.pt')),
                            os_errors=True)],
    }
