"""Shared fixtures: paths, the git state at start, free ports, a static server and a headless Chromium."""
import os, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / 'nbs'
ARTIFACTS = ROOT / 'test-artifacts'  # git-ignored: screenshots for a human to look at
sys.path.insert(0, str(ROOT / 'scripts'))
from find_chromium import find_chromium  # noqa: E402

CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                  '--disable-background-networking', '--disable-component-update', '--disable-sync']

def lesson_notebooks() -> list[Path]:
    "Every notebook the course renders and tests, in order."
    return sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_'))

def git_status() -> str | None:
    "Porcelain status of the working tree, or None outside a git checkout."
    r = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=all'], cwd=ROOT, capture_output=True,
                       text=True)
    return r.stdout if r.returncode == 0 else None

def pytest_sessionstart(session):
    session.config.stash['git_status_at_start'] = git_status()

@pytest.fixture(scope='session')
def git_status_at_start(request): return request.config.stash['git_status_at_start']

@pytest.fixture(scope='session', autouse=True)
def working_tree_left_as_found(git_status_at_start):
    """At the end of the session, whatever tests ran and in whatever order: no tracked file, and no untracked file
    that git does not ignore, differs from the start. A change is reported as an error at teardown of the last test
    ("N passed, 1 error"); outside a git checkout there is nothing to compare."""
    yield
    if git_status_at_start is None: return
    now = git_status()
    if now != git_status_at_start:
        before, after = set(git_status_at_start.splitlines()), set(now.splitlines())
        changed = sorted(after - before) + [f'(no longer) {l}' for l in sorted(before - after)]
        pytest.fail('the tests changed files in the working tree:\n' + '\n'.join(changed), pytrace=False)

def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]

def wait_for_http(url: str, timeout: float, proc: subprocess.Popen) -> None:
    "Poll `url` until it answers, failing early if `proc` died."
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2): return
        except OSError: time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout} s")

def stop(proc: subprocess.Popen, signals=(2,), timeout: float = 10) -> None:
    "Stop a server we started, by its own pid: the given signals first, then terminate, then kill."
    for sig in signals:
        if proc.poll() is None:
            proc.send_signal(sig)
            time.sleep(0.5)
    try: proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try: proc.wait(5)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()

@pytest.fixture(scope='session')
def chromium():
    "A headless Chromium driven by Playwright, with a fresh profile."
    path = find_chromium()
    assert path, "No Chromium found: install it (apt-get install chromium) or set CHROMIUM=/path/to/chrome"
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        context = pw.chromium.launch_persistent_context(profile, executable_path=path, args=CHROMIUM_FLAGS,
                                                        headless=True, viewport={'width': 1280, 'height': 900})
        yield context
        context.close()

@pytest.fixture(scope='session')
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
