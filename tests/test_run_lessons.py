"""The course's time budget (scripts/run_lessons.py): shares of the whole run, each notebook against its own."""
from conftest import ROOT
from run_lessons import BUDGET_SHARE, budget_table

def test_budget_names_real_notebooks_and_fits_in_the_whole():
    notebooks = {p.stem for p in (ROOT / 'nbs').glob('*.ipynb')}
    assert set(BUDGET_SHARE) <= notebooks, set(BUDGET_SHARE) - notebooks
    assert sum(BUDGET_SHARE.values()) <= 100

def test_budget_table_flags_only_what_is_over_its_share():
    seconds = {'00_data': 500.0, '07_hard_negatives': 100.0, 'index': 400.0}
    lines = {line.split()[0]: line for line in budget_table(seconds).splitlines()[1:]}
    assert 'over its share' in lines['00_data']                # 50 % of the run against 1 %
    assert 'over its share' not in lines['07_hard_negatives']  # 10 % against 14 %
    assert 'over its share' in lines['index']                  # 40 % against what is left
    assert '1000' in lines['all']
