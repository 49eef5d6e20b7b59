"""README.md is generated from nbs/index.ipynb and must not be stale."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
sys.path.insert(0, str(ROOT / 'scripts'))
from make_readme import render_readme  # noqa: E402

def test_readme_matches_index_notebook():
    assert (ROOT / 'README.md').read_text() == render_readme(), \
        "README.md is stale: edit nbs/index.ipynb, then run python scripts/make_readme.py"

def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / 'README.md').read_text()
    assert 'scripts/course' in readme and 'scripts/test' in readme
    ci = [l.strip() for l in (ROOT / '.ci' / 'run').read_text().splitlines() if l.strip() and not l.startswith('#')]
    assert 'scripts/test' in ci, ".ci/run must call the README's test command"

def test_set_up_installs_fashion_mnist_where_it_may_and_env_stays_free_of_apt():
    "Issue 27: CI runs scripts/test alone; it installs Fashion-MNIST beside Chromium where it may; _env.sh has no apt."
    code = lambda name: '\n'.join(l for l in (ROOT / name).read_text().splitlines() if not l.lstrip().startswith('#'))
    assert code('.ci/run').splitlines()[-1].strip() == 'scripts/test', "CI runs exactly the README's test command"
    test = code('scripts/test')
    assert 'apt_install chromium' in test and 'apt_install dataset-fashion-mnist' in test
    assert 'the tests that read it will be skipped' in test
    assert test.index('dataset-fashion-mnist') < test.index('exec pytest')
    assert 'apt' not in code('scripts/_env.sh'), "scripts/course sources _env.sh: it must not install system packages"

def python_blocks(text: str) -> list[str]:
    "The ```python blocks of a markdown text, in order."
    return re.findall(r'^```python\n(.*?)^```$', text, flags=re.MULTILINE | re.DOTALL)

def test_python_blocks_are_found():
    assert python_blocks("a\n```python\nx = 1\n```\n```bash\nls\n```\n"
                         "```python\ny = 2\n```\n") == ['x = 1\n', 'y = 2\n']

@pytest.mark.parametrize('index', range(4))
def test_readme_quickstart_runs_as_written(index, tmp_path):
    "Each Python example of the README, run by a fresh interpreter in an empty folder, as a user would."
    section = (ROOT / 'README.md').read_text().split('### The library in your own code')[1].split('\n## ')[0]
    blocks = python_blocks(section)
    assert len(blocks) == 4, f"the quickstart has {len(blocks)} Python examples; update this test's range"
    env = {**os.environ, 'OMP_NUM_THREADS': '2'}
    out = subprocess.run([sys.executable, '-c', blocks[index]], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip(), "an example prints what it computed"
