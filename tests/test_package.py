"""The package's top level: the main names importable from `contrastive_nb`, loaded lazily (issue 28)."""
import importlib
import subprocess
import sys

import pytest

import contrastive_nb
from conftest import ROOT

TOP_LEVEL = [(name, module) for module, names in contrastive_nb._TOP_LEVEL.items() for name in names]


@pytest.mark.parametrize('name, module', TOP_LEVEL, ids=[n for n, _ in TOP_LEVEL])
def test_each_top_level_name_is_its_modules_public_name(name, module):
    source = importlib.import_module(f'contrastive_nb.{module}')
    assert name in source.__all__, f"{name} is not a public name of contrastive_nb.{module}"
    assert getattr(contrastive_nb, name) is getattr(source, name)


def test_the_table_lists_each_name_once_and_all_is_sorted():
    names = [n for n, _ in TOP_LEVEL]
    assert len(names) == len(set(names))
    assert contrastive_nb.__all__ == sorted(names)
    assert set(contrastive_nb.__all__) <= set(dir(contrastive_nb))


def _modules_after(code: str) -> set[str]:
    "The package's modules in sys.modules after running `code` in a fresh interpreter."
    out = subprocess.run([sys.executable, '-c', code + "\nimport sys\nprint(' '.join(sorted("
                          "m for m in sys.modules if m.startswith('contrastive_nb'))))"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=True).stdout
    return set(out.split())


def test_importing_the_package_or_a_lesson_loads_no_other_lesson():
    assert _modules_after('import contrastive_nb') == {'contrastive_nb'}
    assert _modules_after('import contrastive_nb.data') == {'contrastive_nb', 'contrastive_nb._checks',
                                                            'contrastive_nb.data'}


def test_a_top_level_name_loads_its_lesson_and_not_the_later_ones():
    loaded = _modules_after('from contrastive_nb import nt_xent')
    assert 'contrastive_nb.infonce' in loaded
    assert not loaded & {'contrastive_nb.clip', 'contrastive_nb.text', 'contrastive_nb.training',
                         'contrastive_nb.debiased', 'contrastive_nb.hard_negatives'}


def test_an_unknown_name_says_where_the_others_are():
    with pytest.raises(AttributeError, match=r"no attribute 'nt_xnet'.*top-level names are"):
        contrastive_nb.nt_xnet
    with pytest.raises(ImportError):
        exec('from contrastive_nb import nt_xnet', {})


def test_submodules_still_import_by_name():
    from contrastive_nb import clip, data  # submodules, not table entries
    assert data.make_shapes is contrastive_nb.make_shapes and clip.clip_loss is contrastive_nb.clip_loss
