"""The learner's copies of the lessons (scripts/lesson_copies.py, run by scripts/course): made once, updated only where
the learner edited nothing, never overwritten or deleted otherwise, and reset into a backup."""
import json

import pytest

from lesson_copies import find_lesson, reset, sync

def notebook(*sources: str, output: str = '') -> dict:
    cells = [{'cell_type': 'code', 'source': s, 'metadata': {}, 'execution_count': None,
              'outputs': [{'output_type': 'stream', 'name': 'stdout', 'text': output}] if output else []}
             for s in sources]
    return {'cells': cells, 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}

def write(path, nb: dict) -> None: path.write_text(json.dumps(nb, indent=1))
def read(path) -> dict: return json.loads(path.read_text())
def sources(path) -> list[str]: return [c['source'] for c in read(path)['cells']]

@pytest.fixture
def course(tmp_path):
    nbs, copies = tmp_path / 'nbs', tmp_path / 'my_lessons'
    nbs.mkdir()
    write(nbs / '00_data.ipynb', notebook('x = 1', '#| hide\nimport nbdev; nbdev.nbdev_export()'))
    write(nbs / '07_hard_negatives.ipynb', notebook('y = 2'))
    write(nbs / '_draft.ipynb', notebook('z = 3'))
    return nbs, copies

def test_first_sync_copies_every_lesson_without_the_export_cell(course):
    nbs, copies = course
    notices = sync(nbs, copies)
    assert 'my_lessons/' in notices[0] and 'git ignores it' in notices[0]
    assert sorted(p.name for p in copies.glob('*.ipynb')) == ['00_data.ipynb', '07_hard_negatives.ipynb']
    assert sources(copies / '00_data.ipynb') == ['x = 1']   # running it all never rewrites the package
    assert sync(nbs, copies) == []                         # nothing changed: nothing to say

def test_an_unedited_copy_follows_the_lesson_an_edited_one_is_kept(course):
    nbs, copies = course
    sync(nbs, copies)
    run = read(copies / '00_data.ipynb')
    run['cells'][0]['outputs'] = [{'output_type': 'stream', 'name': 'stdout', 'text': '1'}]
    write(copies / '00_data.ipynb', run)                   # run and saved, cells not edited
    write(copies / '07_hard_negatives.ipynb', notebook('y = 2  # my note'))
    write(nbs / '00_data.ipynb', notebook('x = 10'))       # both lessons change upstream (a git pull)
    write(nbs / '07_hard_negatives.ipynb', notebook('y = 20'))
    notices = sync(nbs, copies)
    assert sources(copies / '00_data.ipynb') == ['x = 10']
    assert sources(copies / '07_hard_negatives.ipynb') == ['y = 2  # my note']
    assert any('07_hard_negatives changed' in n and '--reset 07_hard_negatives' in n for n in notices)
    assert any(n.startswith('Updated') and '00_data' in n for n in notices)
    assert sync(nbs, copies)[0].startswith('07_hard_negatives changed')  # said again until reset

def test_reset_keeps_every_previous_copy(course):
    nbs, copies = course
    sync(nbs, copies)
    for text in ('first edit', 'second edit'):
        write(copies / '07_hard_negatives.ipynb', notebook(text))
        assert 'previous copy' in reset('07', nbs, copies)
    backups = sorted((copies / '.backup').glob('07_hard_negatives-*.ipynb'))
    assert sorted(sources(b)[0] for b in backups) == ['first edit', 'second edit']
    assert sources(copies / '07_hard_negatives.ipynb') == ['y = 2']
    write(nbs / '07_hard_negatives.ipynb', notebook('y = 20'))
    assert sync(nbs, copies) == [f"Updated (changed in nbs/, not edited by you): 07_hard_negatives."]

def test_a_copy_without_a_record_is_never_overwritten(course):
    nbs, copies = course
    sync(nbs, copies)
    write(copies / '07_hard_negatives.ipynb', notebook('mine'))
    (copies / '.copies.json').unlink()
    notices = sync(nbs, copies)
    assert sources(copies / '07_hard_negatives.ipynb') == ['mine']
    assert any('07_hard_negatives.ipynb differs' in n for n in notices)

def test_new_lessons_arrive_and_deleted_copies_come_back(course):
    nbs, copies = course
    sync(nbs, copies)
    write(nbs / '13_without_negatives.ipynb', notebook('w = 4'))
    (copies / '00_data.ipynb').unlink()
    assert sync(nbs, copies) == ['New in my_lessons/: 00_data, 13_without_negatives.']

def test_bad_lesson_names_and_a_damaged_record_say_what_to_do(course):
    nbs, copies = course
    assert find_lesson('07', nbs).name == '07_hard_negatives.ipynb'
    assert find_lesson('00_data.ipynb', nbs).name == '00_data.ipynb'
    with pytest.raises(SystemExit, match="LESSON '99' names no lesson; the lessons: 00_data, 07"):
        find_lesson('99', nbs)
    with pytest.raises(SystemExit, match="LESSON '0' matches 00_data, 07_hard_negatives"):
        find_lesson('0', nbs)
    sync(nbs, copies)
    (copies / '.copies.json').write_text('{not json')
    with pytest.raises(SystemExit, match='damaged.*delete it'):
        sync(nbs, copies)
