"""Runs last (file order): the tests left no tracked or untracked-but-not-ignored file changed."""
import pytest

from conftest import git_status

def test_tests_leave_the_working_tree_as_they_found_it(git_status_at_start):
    if git_status_at_start is None: pytest.skip('not a git checkout')
    assert git_status() == git_status_at_start, "a test changed files in the working tree:\n" + git_status()
