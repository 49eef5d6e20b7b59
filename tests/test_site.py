"""The offline documentation site: built, served on 127.0.0.1 and read in headless Chromium as a visitor would.

Every tab runs as if offline: it records every request, and any request that leaves the local server is aborted and
fails the test. The pages are measured, not looked at: formulas are MathML that the browser lays out, each progress
bar appears once, tables have padding, a header rule and right-aligned numbers, and code fits at a 1 400 px window.
"""
import json, re, subprocess, sys
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlparse

import pytest
from nbdev.config import nbpath2html

from conftest import ARTIFACTS, ROOT, free_port, lesson_notebooks, stop, wait_for_http

pytestmark = pytest.mark.browser
SITE = ROOT / '_site'
HIDE = re.compile(r'^\s*#\s*\|\s*hide\s*$', re.M)

def page_name(notebook) -> str: return nbpath2html(notebook).name

def cells(notebook) -> list[dict]:
    return json.loads(notebook.read_text())['cells']

def notebook_title(notebook) -> str:
    first = ''.join(cells(notebook)[0]['source'])
    return re.search(r'^#\s+(.+)$', first, re.M).group(1).strip()

@pytest.fixture(scope='module')
def site():
    "Build the site with the documented command's script, serve it on a free local port, stop the server after."
    built = subprocess.run([sys.executable, str(ROOT / 'scripts' / 'build_site.py')], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    port = free_port()
    server = subprocess.Popen([sys.executable, '-m', 'http.server', str(port), '--bind', '127.0.0.1',
                               '--directory', str(SITE)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f'http://127.0.0.1:{port}/'
    try:
        wait_for_http(base, 15, server)
        yield base
    finally: stop(server, signals=(15,))

@pytest.fixture
def page(chromium, site):
    "A fresh offline tab: it records failed requests to our own server and every request that leaves it (aborted)."
    tab = chromium.new_page()
    tab.local_failures, tab.remote_requests = [], []
    def failed(url, why):
        if url.startswith(site) and not url.endswith('/favicon.ico'): tab.local_failures.append(f'{url}: {why}')
    def requested(request):
        if not request.url.startswith((site, 'data:', 'blob:', 'about:')): tab.remote_requests.append(request.url)
    def offline(route):
        if route.request.url.startswith(site): route.continue_()
        else: route.abort('internetdisconnected')
    tab.on('request', requested)
    tab.route('**/*', offline)
    tab.on('requestfailed', lambda r: failed(r.url, r.failure))
    tab.on('response', lambda r: r.status >= 400 and failed(r.url, r.status))
    yield tab
    tab.close()

def open_page(page, url):
    response = page.goto(url, wait_until='load')
    assert response and response.status == 200, f'{url} answered {response and response.status}'
    return page

def test_home_and_every_lesson_are_in_the_sidebar_and_load(page, site, artifacts):
    open_page(page, site + 'index.html')
    page.screenshot(path=str(artifacts / 'site-home.png'))
    links = page.eval_on_selector_all('#quarto-sidebar a.sidebar-link[href]',
                                      'els => els.map(e => e.getAttribute("href"))')
    for nb in lesson_notebooks():
        name = page_name(nb)
        assert name in links, f'{nb.name} ({name}) is missing from the sidebar: add it to nbs/sidebar.yml'
        open_page(page, site + name)
        assert page.locator('h1').first.inner_text().strip() == notebook_title(nb)
    assert not page.local_failures, page.local_failures
    assert not page.remote_requests, f'the site asked the network for: {page.remote_requests}'

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_page_renders_its_notebook(page, site, notebook, artifacts):
    "Figures are real images, callouts are rendered, hidden cells are absent, and nothing local fails to load."
    open_page(page, site + page_name(notebook))
    page.screenshot(path=str(artifacts / f'site-{page_name(notebook)}.png'), full_page=False)
    text = page.locator('main').inner_text()

    figures = sum('image/png' in o.get('data', {}) for c in cells(notebook) for o in c.get('outputs', []))
    sizes = page.eval_on_selector_all('main img', 'els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])')
    real = [s for s in sizes if s[0] and s[1] > 50 and s[2] > 50]
    assert len(real) >= figures, f'{figures} figures in the notebook, {len(real)} rendered images: {sizes}'

    callouts = sum(''.join(c['source']).count('::: {.callout') for c in cells(notebook) if c['cell_type'] == 'markdown')
    assert ':::' not in text, 'raw callout fences in the page'
    assert page.locator('main .callout').count() == callouts

    code = page.eval_on_selector_all('main pre', 'els => els.map(e => e.innerText)')
    shown = {l.strip() for block in code for l in block.splitlines() if l.strip()}
    visible = {l.strip() for c in cells(notebook) if c['cell_type'] == 'code' and not HIDE.search(''.join(c['source']))
               for l in ''.join(c['source']).splitlines()}
    for c in cells(notebook):
        if c['cell_type'] != 'code' or not HIDE.search(src := ''.join(c['source'])): continue
        leaked = [l.strip() for l in src.splitlines()
                  if l.strip() and not l.lstrip().startswith('#|') and l.strip() not in visible and l.strip() in shown]
        assert not leaked, f'hidden cell source shown on the page: {leaked}'
    assert not page.local_failures, page.local_failures
    assert not page.remote_requests, f'{page_name(notebook)} asked the network for: {page.remote_requests}'

def test_search_finds_a_lesson_term(page, site, artifacts):
    open_page(page, site + 'index.html')
    page.fill('.smalldocs-search input', 'paraphrases')
    hits = page.locator('.smalldocs-search-results a.search-result')
    hits.first.wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts / 'site-search.png'))
    hrefs = hits.evaluate_all('els => els.map(e => e.getAttribute("href"))')
    assert any('data.html' in h for h in hrefs), hrefs
    page.locator('.smalldocs-search-results a.search-result[href*="data.html"]').first.click()
    page.wait_for_url('**/data.html*')
    assert 'The data we contrast' in page.locator('h1').first.inner_text()
    assert not page.remote_requests, f'the search asked the network for: {page.remote_requests}'

def test_search_works_from_disk(chromium, site, artifacts):
    """Opened from disk (file://, with Chromium's default file-access rules), the search box still finds a lesson
    and its result opens the page."""
    tab = chromium.new_page()
    remote = []
    tab.on('request', lambda r: r.url.startswith(('http:', 'https:')) and remote.append(r.url))
    try:
        tab.goto((SITE / 'index.html').as_uri(), wait_until='load')
        tab.fill('.smalldocs-search input', 'paraphrases')
        hit = tab.locator('.smalldocs-search-results a.search-result[href*="data.html"]').first
        hit.wait_for(timeout=10_000)
        tab.screenshot(path=str(artifacts / 'site-search-from-disk.png'))
        hit.click()
        tab.wait_for_url('file://**/data.html*')
        assert 'The data we contrast' in tab.locator('h1').first.inner_text()
        assert not remote, f'the page asked the network for: {remote}'
    finally: tab.close()

def test_every_figure_has_alt_text(site):
    "Every picture in the pages (the notebooks' figures, inlined by the build) has a non-empty alt attribute."
    missing = []
    for page in sorted(SITE.rglob('*.html')):
        if 'site_libs' in page.parts: continue
        for tag in re.findall(r'<img\b[^>]*>', page.read_text()):
            if not re.search(r'\balt="[^"]*\S[^"]*"', tag):
                short = re.sub(r'base64,[^"]*', 'base64,…', tag)[:120]
                missing.append(f'{page.relative_to(SITE)}: {short}')
    assert not missing, f'{len(missing)} pictures without alt text:\n' + '\n'.join(missing[:20])

class _Links(HTMLParser):
    "Collects ids and every href/src of one HTML page."
    def __init__(self):
        super().__init__()
        self.ids, self.urls = set(), []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get('id'): self.ids.add(a['id'])
        for key in ('href', 'src'):
            if a.get(key) and not a[key].startswith(('data:', 'mailto:', 'javascript:')): self.urls.append(a[key])

def test_no_internal_link_is_broken(chromium, site):
    "Crawl every page reachable from the home page; every local link, asset and #anchor must exist."
    request = chromium.request
    seen, queue, broken, anchors = set(), deque([site + 'index.html']), [], []
    parsed = {}
    while queue:
        url = queue.popleft()
        if url in seen: continue
        seen.add(url)
        response = request.get(url)
        if response.status != 200:
            broken.append(f'{url} -> {response.status}')
            continue
        if not urlparse(url).path.endswith(('.html', '/')): continue
        links = _Links()
        links.feed(response.text())
        parsed[url] = links
        for ref in links.urls:
            target, fragment = urldefrag(urljoin(url, ref))
            if not target.startswith(site): continue
            if fragment: anchors.append((url, target, fragment))
            queue.append(target)
    for source, target, fragment in anchors:
        if target in parsed and fragment not in parsed[target].ids:
            broken.append(f'{source}: #{fragment} not found in {target}')
    assert len(parsed) >= len(lesson_notebooks()), f'only reached {sorted(parsed)}'
    assert not broken, '\n'.join(broken)

# ---- Formulas: MathML written at build time, laid out by the browser, no TeX left for a script to find.

RAW_TEX = re.compile(r'\\\(|\\\[|\$\$|\$[^$\n]*[\\^_{}][^$\n]*\$|\\[A-Za-z]{2,}')  # delimiters or a command

def prose_text(page) -> str:
    "The page's text (body, table of contents, navigation) outside code, outputs and formulas: where raw TeX shows."
    return page.evaluate('''() => { const m = document.body.cloneNode(true);
        m.querySelectorAll('pre, code, math, script, style, .cell-output').forEach(e => e.remove());
        return m.textContent; }''')

def has_formulas(notebook) -> bool:
    return any(c['cell_type'] == 'markdown' and re.search(r'\$[^$\s]', ''.join(c['source'])) for c in cells(notebook))

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_formulas_are_rendered_offline(page, site, notebook):
    "No raw TeX in the text, every formula is a MathML element with a box (unless folded away), no remote request."
    open_page(page, site + page_name(notebook))
    raw = sorted({m.group(0)[:60] for m in RAW_TEX.finditer(prose_text(page))})
    assert not raw, f'{page_name(notebook)} shows raw TeX: {raw[:10]}'
    maths = page.evaluate('''() => [...document.querySelectorAll('main span.math')].map(s => {
        const m = s.querySelector('math'), r = m ? m.getBoundingClientRect() : {width: 0, height: 0};
        return {html: s.outerHTML.slice(0, 120), mathml: m instanceof MathMLElement, width: r.width, height: r.height,
                hidden: !!s.closest('details:not([open]), .collapse:not(.show)')}; })''')
    if has_formulas(notebook): assert maths, f'{notebook.name} has formulas but its page has no math element'
    unrendered = [m['html'] for m in maths
                  if not m['mathml'] or (not m['hidden'] and (m['width'] <= 0 or m['height'] <= 0))]
    assert not unrendered, f'{len(unrendered)} of {len(maths)} formulas not rendered as MathML: {unrendered[:5]}'
    assert not page.remote_requests, f'{page_name(notebook)} asked the network for: {page.remote_requests}'

def test_a_display_formula_screenshot(page, site, artifacts):
    "A display formula is laid out as a formula (taller than a line), in the site's own math font; saved to look at."
    for nb in lesson_notebooks():  # the first page with a display formula (InfoNCE's loss, today)
        if page.goto(site + page_name(nb)) and page.locator('main span.math.display math').count(): break
    else: pytest.fail('no page has a display formula')
    formula = page.locator('main span.math.display math').first
    formula.scroll_into_view_if_needed()
    box = formula.bounding_box()
    assert box and box['width'] > 100 and box['height'] > 30, box
    fonts = page.evaluate('''() => document.fonts.ready.then(() =>
        [...document.fonts].filter(f => f.family.includes('Noto Sans Math')).map(f => f.status))''')
    assert fonts == ['loaded'], f'the math font that ships with the site did not load: {fonts}'
    formula.screenshot(path=str(artifacts / 'site-formula.png'))
    page.locator('main p:has(span.math.inline)').first.screenshot(path=str(artifacts / 'site-inline-formulas.png'))
    assert not page.remote_requests, page.remote_requests

# ---- Training output: each progress bar once, in its final state; no local paths.

BAR = re.compile(r'^(?P<label>.*?)\s*\d+%\|.*?\|\s*(?P<n>[\d.]+[kMG]?)/(?P<total>[\d.]+[kMG]?)\b')
LOCAL_PATH = re.compile(r'/work/|/\.venv/|\.venv/lib|site-packages|/home/\w|/Users/\w|TqdmWarning')

def repeated_bars(block: str) -> list[str]:
    "Progress-bar lines of one output block that a later line of the same bar replaces (refresh fragments)."
    bars = [(m.group('label'), m.group('total'), m.group('n'), line)
            for line in block.splitlines() if (m := BAR.search(line.strip()))]
    return [line for i, (label, total, n, line) in enumerate(bars)
            if n != total and any((l, t) == (label, total) for l, t, _, _ in bars[i + 1:])]

def test_repeated_bars_catches_refresh_fragments():
    start = 'SimCLR:  10%|█    | 1/10 [00:01<00:09, 1it/s]'
    end = 'SimCLR: 100%|█████| 10/10 [00:10<00:00, 1it/s]'
    assert repeated_bars(f'{start}\n{end}') == [start]  # a refresh, then the final state
    assert repeated_bars(f'{end}\n{end}') == []  # two runs, each shown once in its final state
    other = 'other: 100%|█████| 10/10 [00:10<00:00, 1it/s]'
    assert repeated_bars(f'{start}\n{other}') == []  # a bar stopped early, then another bar

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_progress_bars_once_and_no_local_paths(page, site, notebook):
    open_page(page, site + page_name(notebook))
    blocks = page.eval_on_selector_all('main .cell-output', 'els => els.map(e => e.innerText)')
    fragments = [line for block in blocks for line in repeated_bars(block)]
    assert not fragments, f'{page_name(notebook)}: {len(fragments)} progress-bar refreshes shown, e.g. {fragments[:3]}'
    bar_lines = [l for b in blocks for l in b.splitlines() if 'it/s]' in l or 's/it]' in l or '%|' in l]
    complete = [l for l in bar_lines if (m := BAR.search(l.strip())) and m.group('n') == m.group('total')]
    assert len(bar_lines) - len(complete) <= len(blocks), f'{page_name(notebook)}: unfinished bars {bar_lines[:5]}'
    text = page.locator('main').inner_text()
    leaks = sorted({l.strip()[:120] for l in text.splitlines() if LOCAL_PATH.search(l)})
    assert not leaks, f'{page_name(notebook)} shows local paths or warnings: {leaks[:5]}'

# ---- Tables: padding (at least 4 px a side), a rule under the header, numbers right-aligned, no overflow or overlap.

_NUMBER_JS = r'[-+\u2212]?(\d[\d,]*\.?\d*|\.\d+)(e[-+]?\d+)?%?'
NUMBER_JS = rf'^{_NUMBER_JS}(\s*±\s*{_NUMBER_JS})?$'  # a number, or a mean ± its error
TABLES_JS = '''(numberPattern) => { const isNumber = new RegExp(numberPattern, 'i');
  const px = v => parseFloat(v) || 0;
  return [...document.querySelectorAll('main table')].map((t, k) => {
    const cells = [...t.querySelectorAll('th, td')], head = [...t.querySelectorAll('thead th')];
    const style = c => getComputedStyle(c);
    const rows = [...t.rows].map(r => [...r.cells].map(c => c.getBoundingClientRect()));
    return {
      table: k, first: (t.innerText || '').slice(0, 60).replace(/\\s+/g, ' '), shown: t.getClientRects().length > 0,
      head: head.length,
      unpadded: cells.filter(c => px(style(c).paddingLeft) < 4 || px(style(c).paddingRight) < 4)
                     .map(c => c.innerText).slice(0, 5),
      noRule: head.filter(c => px(style(c).borderBottomWidth) <= 0 || style(c).borderBottomStyle === 'none')
                  .map(c => c.innerText).slice(0, 5),
      numbersNotRight: [...t.querySelectorAll('td')].filter(c => isNumber.test(c.innerText.trim()))
                  .filter(c => !['right', 'end'].includes(style(c).textAlign)).map(c => c.innerText).slice(0, 5),
      overflowing: cells.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText).slice(0, 5),
      overlapping: rows.flatMap((r, i) => r.slice(1).filter((b, j) => b.left < r[j].right - 1).map(() => i)),
    }; }); }'''

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_tables_are_readable(page, site, notebook):
    page.set_viewport_size({'width': 1400, 'height': 900})
    open_page(page, site + page_name(notebook))
    tables = page.evaluate(TABLES_JS, NUMBER_JS)
    n_tables = sum('<table' in ''.join(o.get('data', {}).get('text/html', '')) for c in cells(notebook)
                   for o in c.get('outputs', []))
    assert len(tables) >= n_tables, f'{n_tables} HTML tables in the notebook, {len(tables)} on the page'
    problems = [f"table {t['table']} ({t['first']!r}): " + ', '.join(f'{k} {t[k]}' for k in
                ('unpadded', 'noRule', 'numbersNotRight', 'overflowing', 'overlapping') if t[k])
                for t in tables if any(t[k] for k in ('unpadded', 'noRule', 'numbersNotRight', 'overflowing',
                                                      'overlapping'))]
    problems += [f"table {t['table']} ({t['first']!r}) has no header row" for t in tables if not t['head']]
    assert not problems, f'{page_name(notebook)}:\n' + '\n'.join(problems)

# ---- Code fits the column at a common laptop width.

WIDE_CODE_JS = '''() => [...document.querySelectorAll('main div.sourceCode pre, main .cell-output pre')]
  .filter(e => e.getClientRects().length > 0 && e.scrollWidth > e.clientWidth + 1)
  .map(e => ({scroll: e.scrollWidth, client: e.clientWidth,
              lines: e.textContent.split('\\n').filter(l => l.length > 100).slice(0, 3),
              longest: e.textContent.split('\\n').reduce((a, l) => l.length > a.length ? l : a, '')}))'''

def test_a_100_character_line_fits_the_code_column(page, site):
    "The layout itself: a 100-character line of code, in the page's code style, fits at 1 400 px."
    page.set_viewport_size({'width': 1400, 'height': 900})
    open_page(page, site + 'infonce.html')
    fits = page.evaluate('''() => { const pre = document.querySelector('main div.sourceCode pre').cloneNode(false);
        pre.appendChild(document.createElement('code')).textContent = 'x'.repeat(99) + ')';
        document.querySelector('main').appendChild(pre);
        const r = [pre.scrollWidth, pre.clientWidth]; pre.remove(); return r; }''')
    assert fits[0] <= fits[1] + 1, f'a 100-character line needs {fits[0]} px, the code column has {fits[1]} px'

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_code_fits_at_1400px(page, site, notebook):
    "No code block or output scrolls sideways at a 1 400 px window (code lines of at most 100 characters)."
    page.set_viewport_size({'width': 1400, 'height': 900})
    open_page(page, site + page_name(notebook))
    wide = page.evaluate(WIDE_CODE_JS)
    report = [f"{w['scroll']} px > {w['client']} px: {len(w['longest'])} chars: {w['longest'].strip()[:110]}"
              for w in wide]
    if wide: pytest.fail(f'{page_name(notebook)} ({notebook.name}): {len(wide)} code blocks or outputs scroll '
                         'sideways at 1400 px (keep lines of code to 100 characters; outputs wrap):\n'
                         + '\n'.join(report), pytrace=False)

# ---- The measurements above can fail: the same checks on a bare page without the site's build step and CSS.

BARE = '''<main><p>Loss <span class="math inline">\\(\\log(K+1)\\)</span> and $$x^2$$.</p>
<table><thead><tr><th>name</th><th>value</th></tr></thead><tbody><tr><td>a</td><td>0.75</td></tr></tbody></table>
<div class="sourceCode" style="width: 400px"><pre style="overflow: auto"><code>''' + 'x' * 100 + '''</code></pre></div>
</main>'''

def test_the_page_checks_catch_a_bare_page(chromium):
    page = chromium.new_page()
    try:
        page.set_content(BARE)
        assert RAW_TEX.search(prose_text(page))
        (table,) = page.evaluate(TABLES_JS, NUMBER_JS)
        assert table['unpadded'] and table['noRule'] and table['numbersNotRight'] == ['0.75']
        assert page.evaluate(WIDE_CODE_JS)
    finally: page.close()

# ---- The build steps, on small inputs.

def test_tidy_outputs_keeps_each_bar_once_and_drops_local_paths():
    from tidy_outputs import tidy_notebook
    warning = (f'{sys.prefix}/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found. '
               'Please update jupyter and ipywidgets.\n  from .autonotebook import tqdm as notebook_tqdm\n')
    stream = lambda name, text: {'output_type': 'stream', 'name': name, 'text': text}
    outputs = [stream('stderr', warning), stream('stdout', 'epoch 1\n'), stream('stdout', ['epoch ', '2\n']),
               stream('stderr', '\rtrain:   0%|     | 0/4'), stream('stderr', '\rtrain:  50%|██   | 2/4'),
               stream('stderr', '\rtrain: 100%|█████| 4/4\n'), stream('stderr', 'saved to /work/x/model.pt\n'),
               {'output_type': 'display_data', 'data': {'text/plain': ['1']}, 'metadata': {}},
               stream('stdout', 'not found in /tmp/tmpab12/cifar\n')]
    nb = {'cells': [{'cell_type': 'code', 'source': '', 'outputs': outputs, 'metadata': {}}]}
    assert tidy_notebook(nb)
    tidy = [(o['output_type'], o.get('name'), ''.join(o.get('text', ''))) for o in nb['cells'][0]['outputs']]
    assert tidy == [('stream', 'stdout', 'epoch 1\nepoch 2\n'), ('stream', 'stderr', 'train: 100%|█████| 4/4\n'),
                    ('display_data', None, ''), ('stream', 'stdout', 'not found in /tmp/tmpab12/cifar\n')]
    assert not tidy_notebook(nb)  # tidy already: nothing changes

def test_build_steps_on_small_inputs():
    from build_site import drop_remote_assets, mark_numbers, mathml, tex_delimiters_to_dollars
    md = 'Inline \\(a_i\\), code `\\(kept\\)`,\n\\[\n\\sum_i a_i\n\\]\n```\n\\(kept too\\)\n```'
    assert tex_delimiters_to_dollars(md) == ('Inline $a_i$, code `\\(kept\\)`,\n$$\\sum_i a_i$$\n'
                                             '```\n\\(kept too\\)\n```')
    errors = []
    out = mathml('<span class="math inline">\\(\\log p_+ &lt; 1\\)</span>'
                 '<span class="math display">\\[\\frac{1}{2}\\]</span>', errors, 'page')
    assert not errors and out.count('<math') == 2 and '<mfrac>' in out and 'display="block"' in out
    assert '\\(' not in out and '&#x0003C;' in out
    mathml('<span class="math inline">\\(\\nosuchcommand x\\)</span>', errors, 'page')
    assert errors and 'nosuchcommand' in errors[0]
    head = ('<link rel="stylesheet" href="https://cdn.example/katex.min.css">'
            '<script src="https://cdn.example/katex.min.js" defer></script><link rel="stylesheet" href="site.css">')
    assert drop_remote_assets(head) == '<link rel="stylesheet" href="site.css">'
    table = ('<table><thead><tr><th></th><th>acc</th><th>name</th></tr></thead><tbody>'
             '<tr><th>a</th><td>0.75</td><td>x</td></tr><tr><th>b</th><td>0.50 ± 0.02</td><td>2 cats</td></tr>'
             '</tbody></table>')
    marked = mark_numbers(table)
    assert marked.count('class="num"') == 3 and '<th class="num">acc</th>' in marked and '<td>2 cats</td>' in marked

def test_search_index_ships_as_a_script(tmp_path):
    from build_site import _FETCH_INDEX, search_from_disk
    (tmp_path / 'site_libs').mkdir()
    script = tmp_path / 'site_libs' / 'smalldocs.js'
    script.write_text('const loadIndex = async () => {\n' + _FETCH_INDEX + '\n};')
    entries = [{'title': 'Pairs', 'href': 'pairs.html', 'text': 'positives – and “negatives”'}]
    (tmp_path / 'search.json').write_text(json.dumps(entries, ensure_ascii=False), encoding='utf-8')
    assert search_from_disk(tmp_path) == []
    assert 'fetch(' not in script.read_text() and '"search-index.js"' in script.read_text()
    shipped = (tmp_path / 'search-index.js').read_text(encoding='utf-8')
    prefix = 'window.smalldocsSearchIndex = '
    assert shipped.startswith(prefix) and json.loads(shipped[len(prefix):].rstrip().rstrip(';')) == entries
    problems = search_from_disk(tmp_path)  # smalldocs' search changed: the build says so instead of shipping it
    assert len(problems) == 1 and '_FETCH_INDEX' in problems[0]

@pytest.mark.parametrize('notebook', lesson_notebooks(), ids=lambda p: p.name)
def test_committed_outputs_are_tidy(notebook):
    "The saved outputs show each progress bar once and no local path (scripts/run_lessons.py tidies what it runs)."
    from tidy_outputs import tidy_notebook
    nb = json.loads(notebook.read_text())
    assert not tidy_notebook(nb), (f'{notebook.name} has progress-bar refreshes or local paths in its outputs: '
                                   f'python scripts/tidy_outputs.py nbs/{notebook.name}')
