"""The learner's own copies of the lessons, in `my_lessons/` (git ignores it), so that JupyterLab edits and saves never
touch `nbs/`, the notebooks the package, the tests and the site are built from.

    python scripts/lesson_copies.py sync           make the copies on first use; then copy new lessons, update the
                                                   copies whose cells the learner has not edited, and name the others
    python scripts/lesson_copies.py reset LESSON   back the learner's copy up to my_lessons/.backup/, copy it afresh

`scripts/course` runs `sync` before it opens JupyterLab, and `scripts/course --reset LESSON` runs `reset`.
`my_lessons/.copies.json` records, for each copy, the version of the lesson it came from and its cells as copied.
"""
import hashlib, json, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS, COPIES = ROOT / 'nbs', ROOT / 'my_lessons'
RECORD = '.copies.json'

def lessons(nbs: Path = NBS) -> list[Path]:
    "The notebooks a learner works through: every page of `nbs/` but the `_`-prefixed ones."
    return sorted(p for p in nbs.glob('*.ipynb') if not p.name.startswith('_'))

def learner_version(notebook: dict) -> dict:
    """The lesson as the learner gets it: without the hidden `nbdev_export()` cell, a build step that would write the
    package from `nbs/` whenever the learner ran the whole notebook."""
    cells = [c for c in notebook['cells'] if 'nbdev_export()' not in ''.join(c['source'])]
    return {**notebook, 'cells': cells}

def cells_digest(notebook: dict) -> str:
    "A digest of the cells' types and sources: what the learner edits (outputs and metadata change on every run)."
    text = '\x00'.join(c['cell_type'] + '\x01' + ''.join(c['source']) for c in notebook['cells'])
    return hashlib.sha256(text.encode()).hexdigest()

def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

def read_record(copies: Path) -> dict:
    path = copies / RECORD
    if not path.exists(): return {}
    try: return json.loads(path.read_text())['lessons']
    except (ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path} is damaged ({e}); delete it and run `scripts/course` again: your copies stay, "
                         "and lessons that changed upstream will be named as edited")

def write_record(copies: Path, record: dict) -> None:
    tmp = copies / (RECORD + '.tmp')
    tmp.write_text(json.dumps({'version': 1, 'lessons': record}, indent=1, sort_keys=True) + '\n')
    tmp.replace(copies / RECORD)  # atomic: an interrupted write never leaves half a record

def copy_lesson(source: Path, copies: Path) -> dict:
    "Write the learner's version of `source` into `copies`; return its record entry."
    notebook = learner_version(json.loads(source.read_text(encoding='utf-8')))
    target = copies / source.name
    tmp = target.with_name(target.name + '.tmp')
    tmp.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')
    tmp.replace(target)
    return {'upstream': file_digest(source), 'cells': cells_digest(notebook)}

def learner_cells(path: Path) -> str | None:
    "The digest of the learner's copy's cells, or None when it cannot be read (then it counts as edited)."
    try: return cells_digest(json.loads(path.read_text(encoding='utf-8')))
    except (OSError, ValueError, KeyError, TypeError): return None

def sync(nbs: Path = NBS, copies: Path = COPIES) -> list[str]:
    """Bring `copies` up to date with `nbs` without losing an edit; return what to tell the learner."""
    first = not copies.exists()
    copies.mkdir(exist_ok=True)
    record, notices, added, updated = read_record(copies), [], [], []
    for source in lessons(nbs):
        entry, target = record.get(source.name), copies / source.name
        if not target.exists():
            record[source.name] = copy_lesson(source, copies)
            added.append(source.stem)
        elif entry is None:  # a copy the record does not know (the record was deleted): never overwrite it
            upstream = cells_digest(learner_version(json.loads(source.read_text(encoding='utf-8'))))
            if learner_cells(target) == upstream:
                record[source.name] = {'upstream': file_digest(source), 'cells': upstream}
            else:
                notices.append(f"{target.name} differs from nbs/ and has no record; it is kept. "
                               f"`scripts/course --reset {source.stem}` backs it up and copies nbs/'s version.")
        elif entry['upstream'] != file_digest(source):
            if learner_cells(target) == entry['cells']:   # not edited: nothing of the learner's is lost
                record[source.name] = copy_lesson(source, copies)
                updated.append(source.stem)
            else:
                notices.append(f"{source.stem} changed in nbs/ since you copied it; your edited copy is kept. "
                               f"`scripts/course --reset {source.stem}` backs it up to {copies.name}/.backup/ "
                               "and copies the new version.")
        write_record(copies, record)  # after each lesson: an interrupted sync keeps what it did
    if first: notices.insert(0, f"Your own copies of the lessons are in {copies.name}/ (git ignores it): edit and "
                                "save them freely; nbs/ stays as it is.")
    elif added: notices.insert(0, f"New in {copies.name}/: {', '.join(added)}.")
    if updated: notices.append(f"Updated (changed in nbs/, not edited by you): {', '.join(updated)}.")
    return notices

def find_lesson(name: str, nbs: Path = NBS) -> Path:
    "The lesson `name` names: its file name, its stem, or a unique prefix such as '07'."
    pages = lessons(nbs)
    hits = [p for p in pages if name in (p.name, p.stem)] or [p for p in pages if p.stem.startswith(name)]
    if len(hits) == 1: return hits[0]
    known = ', '.join(p.stem for p in pages)
    raise SystemExit(f"LESSON {name!r} " + ("matches " + ', '.join(p.stem for p in hits) if hits
                     else "names no lesson") + f"; the lessons: {known}")

def reset(name: str, nbs: Path = NBS, copies: Path = COPIES) -> str:
    "Back the learner's copy of lesson `name` up (never deleted) and copy the lesson afresh."
    source = find_lesson(name, nbs)
    copies.mkdir(exist_ok=True)
    record, target, note = read_record(copies), copies / source.name, ''
    if target.exists():
        backups = copies / '.backup'
        backups.mkdir(exist_ok=True)
        stamp, n = time.strftime('%Y%m%d-%H%M%S'), 1
        backup = backups / f"{source.stem}-{stamp}.ipynb"
        while backup.exists():  # two resets within a second keep both backups
            n += 1
            backup = backups / f"{source.stem}-{stamp}-{n}.ipynb"
        target.replace(backup)
        note = f"; your previous copy is {backup.relative_to(copies.parent)}"
    record[source.name] = copy_lesson(source, copies)
    write_record(copies, record)
    return f"{copies.name}/{source.name} is a fresh copy of nbs/{source.name}{note}"

def main(argv: list[str]) -> int:
    if argv == ['sync']:
        for notice in sync(): print(notice)
    elif len(argv) == 2 and argv[0] == 'reset': print(reset(argv[1]))
    else: raise SystemExit(__doc__)
    return 0

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))
