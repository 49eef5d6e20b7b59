"""Render the documentation site offline, without Quarto, into _site/.

nbdev processes the notebooks exactly as for Quarto (`_proc/`); smalldocs then renders that folder from the same
`_quarto.yml`, `nbdev.yml` and `sidebar.yml`. A small staging step bridges the two: smalldocs names pages after
their notebooks and ignores nbdev's `output-file`, and nbdev writes links to the published site as absolute URLs.
"""
import json, re, shutil, subprocess, sys
from pathlib import Path

import yaml
from nbdev.config import get_config
from nbdev.doclinks import _build_modidx
from nbdev.quarto import refresh_quarto_yml
from nbdev.serve import proc_nbs

ROOT = Path(__file__).resolve().parent.parent
STAGE, SITE = ROOT / '.stage', ROOT / '_site'

def output_name(nb_path: Path) -> str:
    "The page name nbdev gives a processed notebook: its frontmatter `output-file`, else the notebook's stem."
    nb = json.loads(nb_path.read_text())
    raw = next((c for c in nb['cells'] if c['cell_type'] == 'raw'), None)
    front = yaml.safe_load(''.join(raw['source']).strip().strip('-')) if raw else None
    return Path(front['output-file']).stem if front and 'output-file' in front else nb_path.stem

def stage(proc: Path) -> dict[str, str]:
    "Copy nbdev's processed notebooks to STAGE under their page names; return {notebook name: page notebook name}."
    shutil.rmtree(STAGE, ignore_errors=True)
    shutil.copytree(proc, STAGE)
    renames = {}
    for nb in sorted(STAGE.glob('*.ipynb')):
        target = STAGE / f'{output_name(nb)}.ipynb'
        if target != nb: nb.rename(target)
        renames[nb.name] = target.name
    return renames

def relink(renames: dict[str, str]) -> None:
    "Point the navigation at the renamed pages, make links to the published site relative, send output to SITE."
    doc_url = get_config().doc_url.rstrip('/') + '/'
    for nav in (STAGE / 'sidebar.yml', STAGE / '_quarto.yml'):
        text = nav.read_text()
        for old, new in renames.items(): text = re.sub(rf'(?<![\w.]){re.escape(old)}\b', new, text)
        nav.write_text(text)
    for nb in STAGE.glob('*.ipynb'): nb.write_text(nb.read_text().replace(doc_url, ''))
    nbdev_yml = STAGE / 'nbdev.yml'
    meta = yaml.safe_load(nbdev_yml.read_text())
    meta['project']['output-dir'] = str(SITE)
    nbdev_yml.write_text(yaml.safe_dump(meta, sort_keys=False))

def main() -> int:
    refresh_quarto_yml()
    _build_modidx()
    proc = proc_nbs(str(ROOT / 'nbs'), n_workers=0)
    relink(stage(proc))
    smalldocs = [sys.executable, '-m', 'smalldocs.cli']
    subprocess.run(smalldocs + ['render', '--quiet', str(STAGE)], check=True)
    check = subprocess.run(smalldocs + ['check', str(STAGE)], capture_output=True, text=True)
    broken = [l for l in (check.stdout + check.stderr).splitlines() if 'broken link' in l]
    if broken:
        print('Broken links in the site:', *broken, sep='\n  ', file=sys.stderr)
        return 1
    print(f'Site written to {SITE}')
    return 0

if __name__ == '__main__': sys.exit(main())
