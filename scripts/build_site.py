"""Render the documentation site offline, without Quarto, into _site/.

nbdev processes the notebooks exactly as for Quarto (`_proc/`); smalldocs then renders that folder from the same
`_quarto.yml`, `nbdev.yml` and `sidebar.yml`. A small staging step bridges the two: smalldocs names pages after
their notebooks and ignores nbdev's `output-file`, and nbdev writes links to the published site as absolute URLs.
The staged notebooks' outputs are tidied (each progress bar once, no local paths: scripts/tidy_outputs.py).

A finishing step makes the site self-contained, so that it reads the same with no network: formulas become MathML
at build time (latex2mathml; browsers render MathML natively, as Quarto's `html-math-method: mathml` does), the
math renderer's CDN links and the theme's web-font import are removed, a math font ships with the site
(scripts/site_assets/), and the build fails if any page or style sheet still asks for something outside the site
folder. It also marks numeric table cells (class `num`) so that
nbs/styles.css can right-align them.
"""
import html, json, re, shutil, subprocess, sys, time, warnings
from pathlib import Path
from xml.etree import ElementTree

import yaml
from latex2mathml.converter import convert as tex_to_mathml
from nbdev.config import get_config
from nbdev.doclinks import _build_modidx
from nbdev.quarto import refresh_quarto_yml
from nbdev.serve import proc_nbs

ROOT = Path(__file__).resolve().parent.parent
STAGE, SITE = ROOT / '.stage', ROOT / '_site'
sys.path.insert(0, str(ROOT / 'scripts'))
from tidy_outputs import tidy_file  # noqa: E402

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
        tidy_file(target)
        dollar_math(target)
    return renames

_CODE_SPAN = re.compile(r'(`+).*?\1', re.S)
_FENCE = re.compile(r'^(```|~~~).*?^\1', re.S | re.M)

def tex_delimiters_to_dollars(md: str) -> str:
    "Markdown with `\\(x\\)` as `$x$` and a display `\\[x\\]` on lines of its own as `$$x$$`, outside code."
    def convert(text: str) -> str:
        text = re.sub(r'\\\((.+?)\\\)', lambda m: f'${m.group(1).strip()}$', text, flags=re.S)
        return re.sub(r'^([ \t]*)\\\[(.+?)\\\][ \t]*$', lambda m: f'{m.group(1)}$${m.group(2).strip()}$$', text,
                      flags=re.S | re.M)
    out, last = [], 0
    code = sorted([m.span() for m in _FENCE.finditer(md)] + [m.span() for m in _CODE_SPAN.finditer(md)])
    for start, end in code:
        if start < last: continue
        out += [convert(md[last:start]), md[start:end]]
        last = end
    return ''.join(out + [convert(md[last:])])

def dollar_math(nb_path: Path) -> None:
    "Write `\\(..\\)` and `\\[..\\]` maths of markdown cells with dollars, which the site's Markdown reader knows."
    nb = json.loads(nb_path.read_text())
    changed = False
    for cell in nb['cells']:
        if cell['cell_type'] != 'markdown': continue
        src = ''.join(cell['source'])
        new = tex_delimiters_to_dollars(src)
        if new != src:
            cell['source'] = new
            changed = True
    if changed: nb_path.write_text(json.dumps(nb, indent=1, ensure_ascii=False))

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

_MATH = re.compile(r'<span class="math (inline|display)">\\[(\[](.*?)\\[)\]]</span>', re.S)
_UNKNOWN_COMMAND = re.compile(r'>[^<]*\\[A-Za-z]')  # latex2mathml writes a command it does not know as text

def mathml(page: str, errors: list, where: str) -> str:
    "Replace the TeX that smalldocs leaves for a JavaScript renderer by MathML; record what cannot be converted."
    def one(m):
        tex = html.unescape(m.group(2))
        try:
            out = tex_to_mathml(tex, display='block' if m.group(1) == 'display' else 'inline')
        except Exception as e:
            errors.append(f'{where}: cannot convert ${tex}$ to MathML ({type(e).__name__}: {e})')
            return m.group(0)
        if _UNKNOWN_COMMAND.search(out): errors.append(f'{where}: unknown TeX command in ${tex}$')
        out = polish_mathml(out)
        if (wrong := misshapen(out)): errors.append(f'{where}: ${tex}$ gives a {wrong} with a wrong number of parts')
        return f'<span class="math {m.group(1)}">{out}</span>'
    return _MATH.sub(one, page)

_PARTS = {'msub': 2, 'msup': 2, 'msubsup': 3, 'munder': 2, 'mover': 2, 'munderover': 3, 'mfrac': 2, 'mroot': 2}

def misshapen(mathml: str) -> str | None:
    "The first MathML element with a wrong number of children (a browser would not lay it out), if any."
    for el in ElementTree.fromstring(mathml).iter():
        tag = el.tag.rpartition('}')[2]
        if tag in _PARTS and len(el) != _PARTS[tag]: return tag
    return None

_OPEN = '<mo stretchy="false">&#x00028;</mo>'

def polish_mathml(mathml: str) -> str:
    "Typeset as TeX does what latex2mathml leaves loose: `\\log p` gets a thin space, `= -x` a tight minus."
    # \operatorname{sim} or \max comes out as an operator with wide spacing: it is a function name, like \log
    mathml = re.sub(r'<mo>([A-Za-z]{2,})</mo>', r'<mi>\1</mi>', mathml)
    # a function name (log, exp, sim, ...) is followed by a thin space, except before its parenthesis, at the end
    # of a group, or as the base of a sub- or superscript (whose elements take exactly two or three children)
    mathml = re.sub(rf'(?<!<msub>)(?<!<msup>)(?<!<msubsup>)(?<!<munder>)(?<!<mover>)(?<!<munderover>)'
                    rf'(<mi>[A-Za-z]{{2,}}</mi>)(?!{re.escape(_OPEN)}|</)', r'\1<mspace width="0.1667em"></mspace>',
                    mathml)
    # a minus or plus that starts a group or follows a relation, a comma or an opening bracket is a sign: tight
    return re.sub(rf'(<mrow>|<mo[^>]*>(?:{_BEFORE_SIGN})</mo>)<mo>(&#x02212;|&#x0002B;)</mo>',
                  r'\1<mo form="prefix">\2</mo>', mathml)

# = < > ≤ ≥ ≈ ≠ , ← → ∈ ( [ { × ⋅ ·
_BEFORE_SIGN = '|'.join([f'&#x{c:05X};' for c in map(ord, '=<>≤≥≈≠,←→∈([{×⋅·')] + [r'\(', r'\[', r'\{', ','])

_REMOTE = r'"(?:https?:)?//[^"]*"'
_LOADING_LINK = r'<link\b(?=[^>]*\brel="(?:stylesheet|preconnect|preload|modulepreload|icon)")[^>]*\bhref='
_REMOTE_ASSET = re.compile(rf'<script\b[^>]*\bsrc={_REMOTE}[^>]*>\s*</script>\s*|{_LOADING_LINK}{_REMOTE}[^>]*>\s*')
_REMOTE_LOAD = re.compile(rf'<(?:script|img|iframe|source|video|audio|embed|input)\b[^>]*?\bsrc=({_REMOTE})'
                          rf'|{_LOADING_LINK}({_REMOTE})')

def drop_remote_assets(page: str) -> str:
    "Remove the scripts and style sheets that smalldocs links from a CDN (KaTeX): with MathML the site needs none."
    return _REMOTE_ASSET.sub('', page)

_NUMBER = r'[-+\u2212]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*%?'
NUMERIC = re.compile(rf'^\s*(?:{_NUMBER}(?:\s*(?:±|\+/-|\+-)\s*{_NUMBER})?|nan|NaN|inf|-inf)\s*$')

_CELL = re.compile(r'<(td|th)\b([^>]*)>(.*?)</\1>', re.S)
_ROW = re.compile(r'(<tr\b[^>]*>)(.*?)</tr>', re.S)

def _cell_text(cell_html: str) -> str:
    return html.unescape(re.sub(r'<[^>]+>', '', cell_html)).strip()

def _with_num_class(tag: str, attrs: str, inner: str) -> str:
    if 'class="' in attrs: attrs = attrs.replace('class="', 'class="num ', 1)
    else: attrs += ' class="num"'
    return f'<{tag}{attrs}>{inner}</{tag}>'

def _mark_table(table: str) -> str:
    "One table with `num` on each number cell, and on the header cells of columns holding only numbers."
    rows = [_CELL.findall(r) for _, r in _ROW.findall(table)]
    body = [r for r in rows if any(tag == 'td' for tag, _, _ in r)]
    numeric_cols = set()
    if body and 'colspan' not in table and 'rowspan' not in table:  # columns line up only in a simple grid
        for j in range(max(map(len, body))):
            col = [_cell_text(r[j][2]) for r in body if j < len(r) and r[j][0] == 'td']
            col = [v for v in col if v]
            if col and all(NUMERIC.match(v) for v in col): numeric_cols.add(j)
    def row(m):
        cells = list(_CELL.finditer(m.group(2)))
        header_row = all(c.group(1) == 'th' for c in cells)
        out, last = [m.group(1)], 0
        for j, c in enumerate(cells):
            tag, attrs, inner = c.groups()
            numeric = NUMERIC.match(_cell_text(inner)) if tag == 'td' else header_row and j in numeric_cols
            out += [m.group(2)[last:c.start()], _with_num_class(tag, attrs, inner) if numeric else c.group(0)]
            last = c.end()
        return ''.join(out) + m.group(2)[last:] + '</tr>'
    return _ROW.sub(row, table)

def mark_numbers(page: str) -> str:
    "Add the class `num` to table cells holding a number (and to the header of a column of numbers)."
    return re.sub(r'<table\b.*?</table>', lambda m: _mark_table(m.group(0)), page, flags=re.S)

_HEADING = re.compile(r'<h[1-6]\b[^>]*\bdata-anchor-id="([^"]+)"[^>]*>(.*?)</h[1-6]>', re.S)

def toc_with_maths(page: str) -> str:
    "Entries of the table of contents show a heading's formulas as the heading does (smalldocs writes bare TeX)."
    headings = {i: re.sub(r'<a\b[^>]*class="anchorjs-link[^>]*>.*?</a>', '', inner, flags=re.S).strip()
                for i, inner in _HEADING.findall(page) if '<math' in inner}
    def entry(m):
        return m.group(1) + headings[m.group(2)] + '</a>' if m.group(2) in headings else m.group(0)
    return re.sub(r'(<a\b[^>]*\bid="toc-([^"]+)"[^>]*>).*?</a>', entry, page, flags=re.S)

ASSETS = ROOT / 'scripts' / 'site_assets'  # the math font and its style sheet, shipped with the site

def link_assets(page: str, depth: int) -> str:
    "Link the site's own math style sheet (and through it the math font) from a page that has formulas."
    if '<math' not in page: return page
    href = '../' * depth + 'site_libs/site_assets/math.css'
    return page.replace('</head>', f'<link rel="stylesheet" href="{href}"></head>', 1)

def self_contained() -> list[str]:
    "Make SITE work offline (maths, CDN links, web fonts, number cells); return what still leaves the site folder."
    errors = []
    shutil.copytree(ASSETS, SITE / 'site_libs' / 'site_assets', dirs_exist_ok=True)
    for css in SITE.rglob('*.css'):
        text = css.read_text()
        text2 = re.sub(r'@import\s+url\((["\']?)(?:https?:)?//[^)]*\1\)\s*;?', '', text)
        if text2 != text: css.write_text(text2)
        remote = re.findall(r'url\(["\']?((?:https?:)?//[^)"\']*)', text2)
        errors += [f'{css.relative_to(SITE)}: asks {u}' for u in remote]
    for page in SITE.rglob('*.html'):
        where = str(page.relative_to(SITE))
        text = page.read_text()
        new = mark_numbers(toc_with_maths(mathml(drop_remote_assets(text), errors, where)))
        new = link_assets(new, len(page.relative_to(SITE).parts) - 1)
        if new != text: page.write_text(new)
        errors += [f'{where}: loads {a or b}' for a, b in _REMOTE_LOAD.findall(new)]
    return errors

_FETCH_INDEX = '''      const r = await fetch(offset + "search.json");
      index = await r.json();'''
_SCRIPT_INDEX = '''      index = await new Promise((resolve) => {  // a script loads over file://, where fetch may not
        const s = document.createElement("script");
        s.src = offset + "search-index.js";
        s.onload = () => resolve(window.smalldocsSearchIndex || []);
        s.onerror = () => resolve([]);
        document.head.appendChild(s);
      });'''

def search_from_disk(site: Path = SITE) -> list[str]:
    """Let the search box work on pages opened from disk: Chromium refuses `fetch` of a file:// URL, but runs a
    script from one. The index also ships as `search-index.js`, which the search loads on its first query only (so
    its size never slows a page down); return what went wrong."""
    script = site / 'site_libs' / 'smalldocs.js'
    text = script.read_text()
    if _FETCH_INDEX not in text:
        return [f'{script.relative_to(site)}: its search no longer fetches search.json as expected (smalldocs '
                'changed?): update _FETCH_INDEX in scripts/build_site.py']
    script.write_text(text.replace(_FETCH_INDEX, _SCRIPT_INDEX))
    index = (site / 'search.json').read_text(encoding='utf-8')
    (site / 'search-index.js').write_text(f'window.smalldocsSearchIndex = {index};\n', encoding='utf-8')
    return []

# smalldocs' warnings that every build of this site gives, each harmless: the staging step above names each page
# itself (output-file), and the maths (html-math-method), keep-md and the commonmark format are Quarto's concerns.
_EXPECTED = re.compile(r'^warning: (\S+\.ipynb: output-file is not read by smalldocs|unknown key format-links'
                       r'|format commonmark is not built|format\.html\.(keep-md|html-math-method) is ignored)')

def summary(seconds: float) -> str:
    "One line on what the build wrote: pages, figures (all with alt text?), the search index, the time."
    pages = [p for p in SITE.rglob('*.html') if 'site_libs' not in p.parts]
    images = [m for p in pages for m in re.findall(r'<img\b[^>]*>', p.read_text()) if 'data:image' in m]
    no_alt = sum(1 for m in images if not re.search(r'\balt="[^"]+"', m))
    index_kb = (SITE / 'search-index.js').stat().st_size / 1024
    return (f"Site written to {SITE} in {seconds:.0f} s: {len(pages)} pages, {len(images)} figures"
            + (f" ({no_alt} without alt text)" if no_alt else "") + f", search index {index_kb:.0f} kB; "
            "open index.html, from disk or served")

def main() -> int:
    start = time.perf_counter()
    # nbdev warns about every cell that imports and also assigns (each lesson's first cell sets FAST beside its
    # imports); it runs such cells for show_doc all the same, so the warning says nothing about this build.
    warnings.filterwarnings('ignore', message='Found cells containing imports and other code')
    refresh_quarto_yml()
    _build_modidx()
    proc = proc_nbs(str(ROOT / 'nbs'), n_workers=0)
    relink(stage(proc))
    smalldocs = [sys.executable, '-m', 'smalldocs.cli']
    rendered = subprocess.run(smalldocs + ['render', '--quiet', str(STAGE)], capture_output=True, text=True)
    for line in (rendered.stdout + rendered.stderr).splitlines():
        if not _EXPECTED.search(line): print(line, file=sys.stderr)  # warnings that matter still show
    if rendered.returncode: return rendered.returncode
    problems = self_contained() + search_from_disk()
    if problems:
        print('The site is not self-contained or its search would fail:', *problems, sep='\n  ',
              file=sys.stderr)
        return 1
    check = subprocess.run(smalldocs + ['check', str(STAGE)], capture_output=True, text=True)
    broken = [l for l in (check.stdout + check.stderr).splitlines() if 'broken link' in l]
    if broken:
        print('Broken links in the site:', *broken, sep='\n  ', file=sys.stderr)
        return 1
    print(summary(time.perf_counter() - start))
    return 0

if __name__ == '__main__': sys.exit(main())
