"""Every notebook in nbs/ runs top to bottom through nbdev's test machinery (cell flags honoured, heavy cells
shrunk)."""
import pytest
from nbdev.config import get_config
from nbdev.test import test_nb as run_notebook

from conftest import ROOT, lesson_notebooks

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_notebook_runs(notebook, capsys):
    flags = get_config(ROOT).tst_flags.split()
    ok, _ = run_notebook(notebook, skip_flags=flags, basepath=ROOT)
    assert ok, f"{notebook.name} failed; the traceback is in the captured stderr above"
