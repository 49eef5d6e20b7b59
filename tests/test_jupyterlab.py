"""A learner's path in the real JupyterLab (headless Chromium, server on 127.0.0.1, a copy of the notebooks):
lesson 00 runs all its cells with outputs and figures; on the Self-checks page an exercise works as a learner meets
it — the solution is folded, a wrong answer fails with a hint, a right one passes, and Run All leaves the learner's
cell and function alone."""
import json, os, secrets, shutil, subprocess, sys, time, urllib.request

import nbformat

import pytest

from conftest import NBS, ROOT, free_port, stop, wait_for_http
from lesson_copies import learner_version

pytestmark = pytest.mark.browser
LESSON = '00_data.ipynb'
EXERCISES = 'selfcheck.ipynb'  # the page that explains the exercise pattern, with an exercise of its own

@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    "A JupyterLab server on a copy of the lessons (autosave must not touch the repository), stopped by its own pid."
    root = tmp_path_factory.mktemp('lab')
    shutil.copytree(NBS, root / 'nbs', ignore=shutil.ignore_patterns('.ipynb_checkpoints', '_*'))
    for name in (LESSON, EXERCISES):
        # Without the committed outputs, every output the test sees must come from this run. The hidden last cell
        # (nbdev_export) needs the repository's nbdev configuration, which the copy does not have: it is a build
        # step, not part of the learner's notebook, so the copy drops it.
        notebook = nbformat.from_dict(learner_version(nbformat.read(root / 'nbs' / name, as_version=4)))
        for cell in notebook.cells:
            if cell.cell_type == 'code': cell.outputs, cell.execution_count = [], None
        nbformat.write(notebook, root / 'nbs' / name)
    settings = root / 'settings' / '@jupyterlab'
    # windowingMode 'none': every cell is in the page, so a locator finds cells below the fold.
    for extension, name, values in (('apputils-extension', 'notification', {'fetchNews': 'false'}),
                                    ('notebook-extension', 'tracker', {'autoStartDefaultKernel': True,
                                                                       'windowingMode': 'none'})):
        (settings / extension).mkdir(parents=True)
        (settings / extension / f'{name}.jupyterlab-settings').write_text(json.dumps(values))
    token, port = secrets.token_hex(16), free_port()
    # The kernel inherits IN_TEST, so the lesson's heavy cells shrink as they do under nbdev's test runner.
    env = {**os.environ, 'IN_TEST': '1', 'JUPYTER_CONFIG_DIR': str(root / 'config'),
           'JUPYTER_RUNTIME_DIR': str(root / 'runtime'), 'IPYTHONDIR': str(root / 'ipython')}
    log = open(root / 'server.log', 'w')
    server = subprocess.Popen(
        [sys.executable, '-m', 'jupyterlab', '--no-browser', '--ip=127.0.0.1', f'--port={port}',
         '--ServerApp.port_retries=0', f'--IdentityProvider.token={token}',
         f'--ServerApp.root_dir={root / "nbs"}', '--allow-root',
         f'--LabApp.user_settings_dir={root / "settings"}', f'--LabApp.workspaces_dir={root / "workspaces"}'],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f'http://127.0.0.1:{port}'
    try:
        wait_for_http(f'{base}/api/status?token={token}', 60, server)
        yield base, token
    finally:
        stop(server, signals=(2, 2), timeout=20)  # SIGINT twice: Jupyter asks for confirmation, then shuts kernels down
        log.close()

def wait_for_connected_kernel(base: str, token: str, path: str, timeout: float = 60) -> None:
    """Run All before the page's kernel connects would run nothing: wait until the server reports the kernel of the
    notebook at `path` idle and connected."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f'{base}/api/sessions?token={token}') as r: sessions = json.load(r)
        kernels = [s['kernel'] for s in sessions if s.get('path') == path and s.get('kernel')]
        if any(k['execution_state'] == 'idle' and k['connections'] > 0 for k in kernels): return
        time.sleep(0.5)
    raise TimeoutError(f'no connected idle kernel for {path} after {timeout} s: {sessions}')

def run_all(page) -> None:
    page.locator('#jp-MainMenu .lm-MenuBar-itemLabel', has_text='Run').first.click()
    page.locator("li.lm-Menu-item[data-command='runmenu:run-all']").click()

def wait_until_run(page, timeout: float = 120_000) -> None:
    """After Run All: wait until some cell is queued ([*]), then until every code cell with a visible editor shows
    an execution count and the kernel indicator is idle: the page's own record of a finished run, not a sleep."""
    cells = "document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell')"
    numbered = f"""() => [...{cells}].filter(c => c.querySelector('.cm-content'))
                        .every(c => /^\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt').textContent.trim()))"""
    queued = f"() => [...{cells}].some(c => c.querySelector('.jp-InputPrompt')?.textContent.includes('*'))"
    try: page.wait_for_function(queued, timeout=10_000)
    except Exception: pass  # a run faster than the poll: the checks below still hold
    page.wait_for_function(numbered, timeout=timeout)
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=timeout)

def set_source(page, cell, text: str) -> None:
    "Replace a cell's source as a learner would: click into its editor, select all, type (insert) the new text."
    editor = cell.locator('.cm-content')
    editor.click()
    page.keyboard.press('Control+A')
    page.keyboard.insert_text(text)
    page.keyboard.press('Escape')  # back to command mode; the text stays

def cell_source(cell) -> str:
    "The text in a cell's editor, line by line (CodeMirror renders one .cm-line per line)."
    lines = cell.locator('.cm-line').all_inner_texts()  # an empty line holds a <br>: its text is '\n'
    return '\n'.join(line.replace('\u200b', '').rstrip('\n') for line in lines)

def test_lesson_runs_all_in_jupyterlab(chromium, lab, artifacts):
    base, token = lab
    page = chromium.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f'{base}/lab/tree/{LESSON}?token={token}')
        page.locator('.jp-Notebook .jp-Cell').first.wait_for()
        wait_for_connected_kernel(base, token, LESSON)
        outputs = page.locator('.jp-OutputArea-output')
        assert outputs.count() == 0
        run_all(page)
        wait_until_run(page, timeout=300_000)
        # The solutions of the three exercises come last, each under its own name: all three pass.
        assert outputs.filter(has_text='✓ matches the reference').count() >= 3
        assert outputs.filter(has_text='generated in').count() == 1
        figures = page.locator('.jp-OutputArea-output img')
        assert figures.count() >= 3
        figures.first.evaluate('e => e.scrollIntoView({block: "center"})')
        size = figures.first.evaluate('e => [e.naturalWidth, e.naturalHeight]')
        assert min(size) > 100, size
        page.screenshot(path=str(artifacts / 'jupyterlab-figure.png'))
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                              has_text='Traceback')
        assert errors.count() == 0, errors.first.inner_text()
        # They ran, yet stay out of sight: each under its own collapsed "Solution to exercise N" heading.
        assert not outputs.filter(has_text='✓ matches the reference').nth(2).is_visible()
        heading = page.locator('.jp-MarkdownCell', has_text='Solution to exercise 3').first
        assert 'jp-mod-collapsed' in heading.locator('.jp-collapseHeadingButton').get_attribute('class')
        heading.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / 'jupyterlab-exercises.png'))
    finally:
        page.screenshot(path=str(artifacts / 'jupyterlab-last.png'))
        page.close()

WRONG = """def within_tolerance(got, want, atol, rtol):
    return (got - want).abs() <= atol

check_ex1(within_tolerance);"""
RIGHT = """def within_tolerance(got, want, atol, rtol):
    return (got - want).abs() <= atol + rtol * want.abs()

check_ex1(within_tolerance);"""

def open_heading(panel, text: str) -> None:
    "Open a collapsed markdown heading as a learner does: hover it, click its collapse button."
    heading = panel.locator('.jp-MarkdownCell', has_text=text).last
    heading.scroll_into_view_if_needed()
    heading.hover()  # JupyterLab shows a heading's collapse button under the pointer
    heading.locator('.jp-collapseHeadingButton').click()

def test_exercise_in_jupyterlab(chromium, lab, artifacts):
    "Folded solution; a wrong answer fails with a hint, a right one passes; Run All keeps the learner's work."
    base, token = lab
    notebook = nbformat.from_dict(learner_version(nbformat.read(NBS / EXERCISES, as_version=4)))  # as copied
    code = [i for i, c in enumerate(notebook.cells) if c.cell_type == 'code']
    stub = next(i for i in code if notebook.cells[i].source.startswith('def within_tolerance('))
    solution = next(i for i in code if 'def within_tolerance_solution(' in notebook.cells[i].source)
    assert notebook.cells[solution].metadata.get('jupyter', {}).get('source_hidden') is True
    assert 'within_tolerance =' not in notebook.cells[solution].source  # the solution never rebinds the name
    page = chromium.new_page()
    page.set_default_timeout(60_000)
    try:
        # ?reset: a fresh workspace, so lesson 00 (opened by the test above) is not open beside this notebook.
        page.goto(f'{base}/lab/tree/{EXERCISES}?reset&token={token}')
        panel = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)')
        cells = panel.locator('.jp-Notebook .jp-Cell')
        cells.nth(len(notebook.cells) - 1).wait_for(state='attached')
        assert cells.count() == len(notebook.cells)
        wait_for_connected_kernel(base, token, EXERCISES)
        # (a) The solution is out of sight when the notebook opens, under its collapsed heading; opened,
        # its code is still folded: a placeholder, no editor, no code text.
        answer = cells.nth(solution)
        answer.locator('.jp-InputPlaceholder').wait_for(state='attached')
        assert not answer.is_visible()
        open_heading(panel, 'Solution to exercise 1')
        answer.wait_for(state='visible')
        assert answer.locator('.cm-content').count() == 0
        assert 'within_tolerance_solution' not in answer.inner_text()
        assert 'Solution to exercise 1' in answer.inner_text()  # the placeholder shows the first line
        discussion = panel.locator('.jp-MarkdownCell details', has_text='Solution to exercise 2')
        assert discussion.count() == 1 and discussion.get_attribute('open') is None  # closed
        answer.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / 'jupyterlab-solution-folded.png'))
        # (b) A wrong answer, then Run All: the exercise cell prints the failing trial and the hint.
        exercise = cells.nth(stub)
        set_source(page, exercise, WRONG)
        run_all(page)
        wait_until_run(page)
        output = exercise.locator('.jp-OutputArea-output')
        assert '✗ trial 0' in output.inner_text() and 'hint: the allowance grows' in output.inner_text()
        exercise.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / 'jupyterlab-exercise-wrong.png'))
        # (d) Run All ran the solution (its own name, so it passes) and left the learner's cell as typed ...
        assert '✓ matches the reference' in answer.locator('.jp-OutputArea-output').inner_text()
        assert cell_source(exercise) == WRONG
        # ... and the learner's function is still the learner's: checked again below the solution, it still fails.
        # Select the last cell by its prompt area (a click on its <summary> would open the solution),
        # once its heading is open.
        open_heading(panel, 'Discussion of exercise 2')
        cells.nth(cells.count() - 1).locator('.jp-InputPrompt').click()
        page.keyboard.press('Escape')
        page.keyboard.press('b')  # a new code cell below the last one
        probe = cells.nth(cells.count() - 1)
        set_source(page, probe, "check_ex1(within_tolerance);")
        probe.click()
        page.keyboard.press('Control+Enter')  # run in place (Shift+Enter at the end would add a cell)
        probe.locator('.jp-OutputArea-output', has_text='✗ trial').wait_for()
        # (c) A right answer passes.
        set_source(page, exercise, RIGHT)
        exercise.click()
        page.keyboard.press('Control+Enter')
        exercise.locator('.jp-OutputArea-output', has_text='✓ matches the reference').wait_for()
        page.screenshot(path=str(artifacts / 'jupyterlab-exercise-right.png'))
        # (d) again with the right answer: Run All keeps it, and the extra check still sees the learner's function.
        run_all(page)
        wait_until_run(page)
        assert cell_source(exercise) == RIGHT
        assert '✓ matches the reference' in exercise.locator('.jp-OutputArea-output').inner_text()
        assert '✓ matches the reference' in probe.locator('.jp-OutputArea-output').inner_text()
        assert discussion.get_attribute('open') is None  # the discussion of exercise 2 is still folded
        errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                               has_text='Traceback')
        assert errors.count() == 0, errors.first.inner_text()
    finally:
        page.screenshot(path=str(artifacts / 'jupyterlab-exercise-last.png'))
        page.close()

@pytest.fixture(scope='module')
def course_clone(tmp_path_factory):
    """A throw-away git repository holding this working tree (committed or not), with the repository's .venv: what a
    learner's clone is after `scripts/course` has set it up once."""
    clone = tmp_path_factory.mktemp('course') / 'contrastive_nb'
    files = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split('\0')
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    git = lambda *a: subprocess.run(['git', '-c', 'user.name=test', '-c', 'user.email=test@localhost', *a],
                                    cwd=clone, check=True, capture_output=True)
    git('init', '-q')
    git('add', '-A')
    git('commit', '-q', '-m', 'the course as a learner cloned it')
    (clone / '.venv').symlink_to(ROOT / '.venv')  # the same environment, not a second install
    with open(clone / '.git' / 'info' / 'exclude', 'a') as f: f.write('.venv\n')  # a link, not the ignored folder
    return clone

def test_course_opens_copies_that_keep_the_clone_clean(chromium, course_clone, tmp_path, artifacts):
    """`scripts/course` (the learner's command, as root or not) opens JupyterLab on my_lessons/: a cell run and the
    notebook saved there leave `git status` empty and nbs/ untouched."""
    token, port = secrets.token_hex(16), free_port()
    env = {**os.environ, 'IN_TEST': '1', 'JUPYTER_CONFIG_DIR': str(tmp_path / 'config'),
           'JUPYTER_RUNTIME_DIR': str(tmp_path / 'runtime'), 'IPYTHONDIR': str(tmp_path / 'ipython')}
    log_path = tmp_path / 'course.log'
    with open(log_path, 'w') as log:
        server = subprocess.Popen(
            [str(course_clone / 'scripts' / 'course'), '--no-browser', '--ip=127.0.0.1', f'--port={port}',
             '--ServerApp.port_retries=0', f'--IdentityProvider.token={token}',
             f'--LabApp.user_settings_dir={tmp_path / "settings"}', f'--LabApp.workspaces_dir={tmp_path / "ws"}'],
            cwd=course_clone, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f'http://127.0.0.1:{port}'
    page = None
    try:
        wait_for_http(f'{base}/api/status?token={token}', 180, server)  # .venv checked, package exported first
        assert 'Your own copies of the lessons are in my_lessons/' in log_path.read_text()
        page = chromium.new_page()
        page.set_default_timeout(60_000)
        page.goto(f'{base}/lab/tree/{LESSON}?reset&token={token}')
        panel = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)')
        panel.locator('.jp-Notebook .jp-Cell').first.wait_for()
        wait_for_connected_kernel(base, token, LESSON)
        first_code = panel.locator('.jp-Notebook .jp-CodeCell').first
        first_code.locator('.jp-InputPrompt').click()
        page.keyboard.press('Control+Enter')
        first_code.locator('.jp-InputPrompt', has_text='[1]').wait_for()
        page.keyboard.press('Control+s')
        copy = course_clone / 'my_lessons' / LESSON
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the save is done when the file on disk holds the run
            cells = [c for c in nbformat.read(copy, as_version=4).cells if c.cell_type == 'code']
            if cells[0].execution_count == 1: break
            time.sleep(0.5)
        assert cells[0].execution_count == 1, 'the saved copy does not hold the cell run'
        status = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=all'], cwd=course_clone,
                                capture_output=True, text=True, check=True).stdout
        assert status == '', status
    finally:
        if page is not None:
            page.screenshot(path=str(artifacts / 'jupyterlab-course-copy.png'))
            page.close()
        stop(server, signals=(2, 2), timeout=20)
