"""A learner's path: JupyterLab on 127.0.0.1, lesson 00 opened in headless Chromium, Run All, outputs and figures appear."""
import json, os, secrets, shutil, subprocess, sys, time, urllib.request

import nbformat

import pytest

from conftest import NBS, free_port, stop, wait_for_http

pytestmark = pytest.mark.browser
LESSON = '00_data.ipynb'

@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    "A JupyterLab server on a copy of the lessons (autosave must not touch the repository), stopped by its own pid."
    root = tmp_path_factory.mktemp('lab')
    shutil.copytree(NBS, root / 'nbs', ignore=shutil.ignore_patterns('.ipynb_checkpoints', '_*'))
    # Without the committed outputs, every output the test sees must come from this run.
    lesson = nbformat.read(root / 'nbs' / LESSON, as_version=4)
    for cell in lesson.cells:
        if cell.cell_type == 'code': cell.outputs, cell.execution_count = [], None
    nbformat.write(lesson, root / 'nbs' / LESSON)
    settings = root / 'settings' / '@jupyterlab'
    for extension, name, values in (('apputils-extension', 'notification', {'fetchNews': 'false'}),
                                    ('notebook-extension', 'tracker', {'autoStartDefaultKernel': True})):
        (settings / extension).mkdir(parents=True)
        (settings / extension / f'{name}.jupyterlab-settings').write_text(json.dumps(values))
    token, port = secrets.token_hex(16), free_port()
    # The kernel inherits IN_TEST, so the lesson's heavy cells shrink as they do under nbdev's test runner.
    env = {**os.environ, 'IN_TEST': '1', 'JUPYTER_CONFIG_DIR': str(root / 'config'),
           'JUPYTER_RUNTIME_DIR': str(root / 'runtime'), 'IPYTHONDIR': str(root / 'ipython')}
    log = open(root / 'server.log', 'w')
    server = subprocess.Popen(
        [sys.executable, '-m', 'jupyterlab', '--no-browser', '--ip=127.0.0.1', f'--port={port}', '--ServerApp.port_retries=0',
         f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root / "nbs"}', '--allow-root',
         f'--LabApp.user_settings_dir={root / "settings"}', f'--LabApp.workspaces_dir={root / "workspaces"}'],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f'http://127.0.0.1:{port}'
    try:
        wait_for_http(f'{base}/api/status?token={token}', 60, server)
        yield base, token
    finally:
        stop(server, signals=(2, 2), timeout=20)  # SIGINT twice: Jupyter asks for confirmation, then shuts kernels down
        log.close()

def wait_for_connected_kernel(base: str, token: str, timeout: float = 60) -> None:
    "Run All before the page's kernel connects would run nothing: wait until the server reports it idle and connected."
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f'{base}/api/kernels?token={token}') as r: kernels = json.load(r)
        if any(k['execution_state'] == 'idle' and k['connections'] > 0 for k in kernels): return
        time.sleep(0.5)
    raise TimeoutError(f'no connected idle kernel after {timeout} s: {kernels}')

def test_lesson_runs_all_in_jupyterlab(chromium, lab, artifacts):
    base, token = lab
    page = chromium.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f'{base}/lab/tree/{LESSON}?token={token}')
        page.locator('.jp-Notebook .jp-Cell').first.wait_for()
        wait_for_connected_kernel(base, token)
        page.locator('#jp-MainMenu .lm-MenuBar-itemLabel', has_text='Run').first.click()
        page.locator("li.lm-Menu-item[data-command='runmenu:run-all']").click()
        outputs = page.locator('.jp-OutputArea-output')
        assert outputs.count() == 0
        # The answers to the three exercises come last: once all three pass, every cell above has run.
        outputs.filter(has_text='✓ matches the reference').nth(2).wait_for(state='attached', timeout=300_000)
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for()
        assert outputs.filter(has_text='generated in').count() == 1
        figures = page.locator('.jp-OutputArea-output img')
        assert figures.count() >= 3
        figures.first.evaluate('e => e.scrollIntoView({block: "center"})')
        size = figures.first.evaluate('e => [e.naturalWidth, e.naturalHeight]')
        assert min(size) > 100, size
        page.screenshot(path=str(artifacts / 'jupyterlab-figure.png'))
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", has_text='Traceback')
        assert errors.count() == 0, errors.first.inner_text()
        outputs.filter(has_text='✓ matches the reference').nth(2).scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / 'jupyterlab-exercises.png'))
    finally:
        page.screenshot(path=str(artifacts / 'jupyterlab-last.png'))
        page.close()
