"""Bad-input registry of the datasets page (contrastive_nb.datasets): datasets and recipes by name."""
import torch
from test_bad_input import Case, _mod

CONSTANTS = {'DATASETS', 'RECIPES', 'RECIPE_FOLDER', 'SPLITS'}

def cases():
    d, data = _mod('datasets'), _mod('data')

    def registered(name, replace):
        "register_dataset, then the table as it was: every call sees the same table."
        existed = name in d.DATASETS if isinstance(name, str) else True
        try: return d.register_dataset(name, lambda *args: None, replace)
        finally:
            if not existed: d.DATASETS.pop(name, None)

    grey = data.ImageDataset(torch.rand(4, 1, 6, 6), torch.tensor([0, 1, 0, 1]), ('a', 'b'))
    return {
        'register_dataset': [Case(registered, dict(name='toy_dataset', replace=False))],
        'three_channels': [Case(lambda ds: d.three_channels(ds).images, dict(ds=grey))],
        'check_splits': [Case(lambda datasets, batch_size: len(d.check_splits(datasets, batch_size)['train']),
                              dict(datasets={'train': grey, 'val': grey, 'test': grey}, batch_size=2))],
        'read_recipes': [Case(lambda folder: list(d.read_recipes(folder)), dict(folder=str(d.RECIPE_FOLDER)),
                              os_errors=True)],
        'recipe': [Case(d.recipe, dict(name='fast', dataset='shapes'), choices=('dataset', 'name'))],
    }
