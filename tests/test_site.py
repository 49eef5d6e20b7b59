"""The offline documentation site: built, served on 127.0.0.1 and read in headless Chromium as a visitor would."""
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
    server = subprocess.Popen([sys.executable, '-m', 'http.server', str(port), '--bind', '127.0.0.1', '--directory', str(SITE)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f'http://127.0.0.1:{port}/'
    try:
        wait_for_http(base, 15, server)
        yield base
    finally: stop(server, signals=(15,))

@pytest.fixture
def page(chromium, site):
    "A fresh tab that records every failed request to our own server."
    tab = chromium.new_page()
    tab.local_failures = []
    def failed(url, why):
        if url.startswith(site) and not url.endswith('/favicon.ico'): tab.local_failures.append(f'{url}: {why}')
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
    links = page.eval_on_selector_all('#quarto-sidebar a.sidebar-link[href]', 'els => els.map(e => e.getAttribute("href"))')
    for nb in lesson_notebooks():
        name = page_name(nb)
        assert name in links, f'{nb.name} ({name}) is missing from the sidebar: add it to nbs/sidebar.yml'
        open_page(page, site + name)
        assert page.locator('h1').first.inner_text().strip() == notebook_title(nb)
    assert not page.local_failures, page.local_failures

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
