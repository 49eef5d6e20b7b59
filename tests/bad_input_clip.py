"""Bad-input registry of contrastive_nb.clip (read by tests/test_bad_input.py)."""
import torch
from test_bad_input import Case, feats, gen, images, _mod

CONSTANTS = {'CAPTION_FACTORS', 'SIZE_SPLIT', 'TEMPLATES', 'VIEWS'}

def cases():
    c = _mod('clip')
    data = _mod('data').make_shapes(8, size=8, seed=0)
    factors = data.factors.iloc[:4].reset_index(drop=True)
    captions = ['a red circle', 'there is a blue star in the centre', 'a photo of a ring', 'a small shape']

    def model():
        torch.manual_seed(0)
        return c.TinyCLIP(width=4, blocks=2, embed_dim=8, text_dim=8)

    trained = model().eval()
    tokens = c.CaptionTokenizer()(captions)
    encoder = c.CaptionEncoder(len(c.CaptionTokenizer()), 8, 4)
    prompts = c.class_prompts('colour', c.TEMPLATES[:2])
    ids = torch.tensor([0, 1, 0, 2, 3, 1])

    def train_clip(images, factors, detail, views, epochs, batch_size, lr, weight_decay, seed, loss='clip',
                   bias=None):
        return c.train_clip(model(), images, factors, detail, views, epochs, batch_size, lr, weight_decay,
                            loss=loss, bias=bias, seed=seed, progress=False)

    return {
        'factor_classes': [Case(c.factor_classes, dict(factor='shape'), choices=('factor',))],
        'factor_labels': [Case(c.factor_labels, dict(factors=factors, factor='position'), choices=('factor',)),
                          Case(c.factor_labels, dict(factors=factors, factor='size'), 'size',
                               choices=('factor',))],
        'describe': [Case(c.describe, dict(factors=factors, detail=('colour', 'shape'), templates=c.TEMPLATES,
                                           rng=0))],
        'caption_ids': [Case(c.caption_ids, dict(factors=factors, detail=('shape', 'position')))],
        'class_prompts': [Case(c.class_prompts, dict(factor='colour', templates=c.TEMPLATES[:2]),
                               choices=('factor',))],
        'CaptionTokenizer': [Case(c.CaptionTokenizer, dict(templates=c.TEMPLATES)),
                             Case(lambda captions: c.CaptionTokenizer()(captions), dict(captions=captions),
                                  '__call__')],
        'CaptionEncoder': [Case(c.CaptionEncoder, dict(vocab_size=10, dim=8, out_dim=4)),
                           Case(lambda tokens: encoder(tokens), dict(tokens=tokens), 'forward')],
        'TinyCLIP': [Case(c.TinyCLIP, dict(width=4, blocks=2, embed_dim=8, text_dim=8, init_temperature=0.07,
                                           max_scale=100.0)),
                     Case(lambda images: trained.encode_images(images), dict(images=images(4)), 'encode_images',
                          aliases={'images': ('x',)}),
                     Case(lambda captions: trained.encode_text(captions), dict(captions=captions), 'encode_text'),
                     Case(lambda images, captions: trained(images, captions),
                          dict(images=images(4), captions=captions), 'forward', aliases={'images': ('x',)})],
        'clip_loss': [Case(c.clip_loss, dict(image_embeddings=feats(), text_embeddings=feats(seed=1),
                                             temperature=0.07, caption_ids=ids, reduction='mean'),
                           choices=('reduction',)),
                      Case(c.clip_loss, dict(image_embeddings=feats(), text_embeddings=feats(seed=1),
                                             temperature=0.1, reduction='none'), 'no mask',
                           choices=('reduction',))],
        'siglip_loss': [Case(c.siglip_loss, dict(image_embeddings=feats(), text_embeddings=feats(seed=1),
                                                 log_scale=2.3, bias=-10.0, caption_ids=ids)),
                        Case(c.siglip_loss, dict(image_embeddings=feats(), text_embeddings=feats(seed=1),
                                                 log_scale=torch.tensor([0.5]), bias=torch.tensor([-1.0])),
                             'tensor parameters')],
        'prior_bias': [Case(c.prior_bias, dict(batch_size=16))],
        'SigLIPLoss': [Case(c.SigLIPLoss, dict(log_scale=2.3, bias=-10.0)),
                       Case(lambda image_embeddings, text_embeddings, caption_ids: c.SigLIPLoss()(
                                image_embeddings, text_embeddings, caption_ids),
                            dict(image_embeddings=feats(), text_embeddings=feats(seed=1), caption_ids=ids),
                            'forward')],
        'crop_views': [Case(c.crop_views, dict(images=images(4), factors=factors, scale=(0.5, 1.0), flip_p=0.5,
                                               generator=gen()), deterministic=False)],
        'train_clip': [Case(train_clip, dict(images=data.images, factors=data.factors, detail=('colour', 'shape'),
                                             views='crop', epochs=1, batch_size=4, lr=1e-3, weight_decay=1e-5,
                                             seed=0), choices=('views',)),
                       Case(train_clip, dict(images=data.images, factors=data.factors, detail=('shape',), views='none',
                                             epochs=1, batch_size=4, lr=1e-3, weight_decay=1e-5, seed=0,
                                             loss='siglip', bias=-2.0), 'siglip', choices=('views', 'loss'))],
        'CLIPOptions': [Case(c.CLIPOptions, dict(mask_duplicates=True))],
        'CLIP': [Case(lambda model, mask_duplicates: c.CLIP(model, c.CLIPOptions(mask_duplicates)),
                      dict(model=trained, mask_duplicates=False)),
                 Case(lambda view, texts: c.CLIP(model()).loss(
                          _mod('methods').Batch([view], torch.arange(4), ids[:4], gen(), texts=texts)),
                      dict(view=images(), texts=captions), 'loss', fixed=('texts',),
                      aliases={'view': ('x', 'images', 'image_embeddings', 'h')})],
        'SigLIPOptions': [Case(c.SigLIPOptions, dict(log_scale=2.3, bias=-10.0, mask_duplicates=True))],
        'SigLIP': [Case(lambda model, bias, mask_duplicates: c.SigLIP(model, c.SigLIPOptions(
                            bias=bias, mask_duplicates=mask_duplicates)),
                        dict(model=trained, bias=-5.0, mask_duplicates=False)),
                   Case(lambda view, texts: c.SigLIP(model()).loss(
                            _mod('methods').Batch([view], torch.arange(4), ids[:4], gen(), texts=texts)),
                        dict(view=images(), texts=captions), 'loss', fixed=('texts',),
                        aliases={'view': ('x', 'images', 'image_embeddings', 'h')})],
        'class_embeddings': [Case(c.class_embeddings, dict(model=trained, prompts=prompts))],
        'zero_shot_predict': [Case(c.zero_shot_predict, dict(image_embeddings=feats(), class_embeddings=feats(3)))],
        'recall_at_k': [Case(c.recall_at_k, dict(queries=feats(), keys=feats(seed=1), query_ids=ids,
                                                 key_ids=ids.flip(0), ks=(1, 3)))],
    }
