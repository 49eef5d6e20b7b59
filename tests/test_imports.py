"""No module imports a private name from another, and no test imports a private name from the package (issue 24).

What a later lesson reuses has a public name, documented on the page that defines it ("building blocks the later
lessons reuse"); a private name (`_x`) is free to change with its own module. `_checks` is a private *module*: its
public names are the course's argument checks and are meant to be imported. The walk is `ast`, so a name imported
inside a function or under `if` counts too."""
import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = 'contrastive_nb'
MODULES = sorted(p for p in (ROOT / PACKAGE).glob('*.py') if p.name != '_modidx.py')  # nbdev's index
TESTS = sorted((ROOT / 'tests').glob('*.py'))
# (test file, name): a private name a test may import, and why. Keep it short: test through public names.
ALLOWED_IN_TESTS: dict[tuple[str, str], str] = {}

def _source_module(node: ast.ImportFrom, here: str | None) -> str | None:
    "The package module a `from ... import` reads from (None: outside the package)."
    if node.level == 1: return node.module  # `from . import _checks` imports a module: None
    if node.level == 0 and node.module and node.module.split('.')[0] == PACKAGE:
        return node.module.split('.', 1)[1] if '.' in node.module else None
    return None

def private_imports(path: Path, here: str | None) -> list[str]:
    "`from .x import _y` (or `contrastive_nb.x`) where x is not `here`: 'line: x._y' for each."
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom): continue
        module = _source_module(node, here)
        if module is None or module == here: continue
        found += [f"{node.lineno}: {module}.{a.name}" for a in node.names if a.name.startswith('_')]
    return found

@pytest.mark.parametrize('path', MODULES, ids=lambda p: p.name)
def test_no_module_imports_a_private_name_of_another(path):
    found = private_imports(path, path.stem)
    assert not found, (f"{path.name} imports private names of other modules: {found}; give them a public "
                       "name with docments in the notebook of the module that defines them")

@pytest.mark.parametrize('path', TESTS, ids=lambda p: p.name)
def test_no_test_imports_a_private_name_of_the_package(path):
    found = [f for f in private_imports(path, None)
             if (path.name, f.rsplit('.', 1)[1]) not in ALLOWED_IN_TESTS]
    assert not found, (f"{path.name} imports private names of the package: {found}; test through a public "
                       "name, or move the test into the notebook that defines the name")

def test_the_check_sees_a_private_import(tmp_path):
    "It finds `from .x import _y` and `from contrastive_nb.x import _y`, also inside a function."
    f = tmp_path / 'm.py'
    f.write_text("from .a import b, _c\nfrom ._checks import check_int\nfrom . import _d\n"
                 "def g():\n    from contrastive_nb.e import _f\nfrom .m import _own\n")
    assert private_imports(f, 'm') == ['1: a._c', '5: e._f']  # `from . import _d` is a module

def test_private_modules_public_names_are_fine(tmp_path):
    f = tmp_path / 'm.py'
    f.write_text("from contrastive_nb._checks import check_bool\nfrom ._checks import check_int\n")
    assert private_imports(f, 'm') == []
