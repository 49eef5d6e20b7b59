"""A notebook-first course on contrastive learning: pairs, similarity, InfoNCE, temperature, memory banks, MoCo, hard and false negatives, GPU training."""

__version__ = "0.0.1"

# The names most programs need, importable from the top level: `from contrastive_nb import nt_xent`.
# This table is written by hand here (nbdev-export only rewrites this file's docstring and the
# __version__ line). Each name is imported from its lesson's module on first use (PEP 562), so
# `import contrastive_nb.data` still loads no later lesson. tests/test_package.py checks that every
# entry is its module's public name and that nothing is imported before it is asked for.
_TOP_LEVEL = {
    'data': ('ImageDataset', 'load_cifar10', 'load_digits', 'load_stl10', 'load_tickets',
             'make_shapes'),
    'pairs': ('instance_ids', 'pair_masks'),
    'augment': ('AugmentationPolicy', 'augment_batch'),
    'similarity': ('alignment', 'cosine_similarity', 'similarity_matrix', 'uniformity'),
    'infonce': ('SimCLR', 'info_nce', 'nt_xent', 'train_method'),
    'temperature': ('LearnableTemperature',),
    'memory_bank': ('MemoryBank',),
    'moco': ('MoCo', 'MoCoQueue', 'momentum_update'),
    'models': ('ProjectionHead', 'SmallCNN', 'resnet18_small'),
    'evaluate': ('covariance_spectrum', 'effective_rank', 'embed', 'knn_accuracy', 'linear_probe',
                 'normalized_std', 'retrieval_metrics'),
    'hard_negatives': ('CrossBatchMemory', 'hard_negative_loss', 'importance_weighted_nt_xent',
                       'in_batch_hard_negative_loss'),
    'debiased': ('debiased_nt_xent', 'hcl_loss', 'supcon_loss'),
    'methods': ('Batch', 'ContrastiveMethod', 'TwoViewMethod', 'register_method'),
    'training': ('TrainConfig', 'Trainer', 'resume', 'train'),
    'distributed': ('all_gather_with_grad', 'global_nt_xent'),
    'text': ('TextEncoder', 'TicketSearch', 'mnrl_loss', 'train_text_encoder'),
    'clip': ('TinyCLIP', 'clip_loss', 'train_clip', 'zero_shot_predict'),
    'experiments': ('paired_difference',),
    'without_negatives': ('BYOL', 'BarlowTwins', 'SimSiam', 'VICReg', 'barlow_twins_loss',
                          'byol_loss', 'simsiam_loss', 'vicreg_loss'),
}
_MODULE_OF = {name: module for module, names in _TOP_LEVEL.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    "A top-level name, imported from its module the first time it is asked for."
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'contrastive_nb' has no attribute {name!r}; the top-level "
                             f"names are {__all__}, the rest live in the modules "
                             "(contrastive_nb.infonce, ...)")
    from importlib import import_module
    value = getattr(import_module(f'{__name__}.{module}'), name)
    globals()[name] = value  # the next lookup finds it without calling __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
