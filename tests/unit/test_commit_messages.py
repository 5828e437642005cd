"""The commit-message check (.github/scripts/check-commit-message.py, the commit-msg hook in
.githooks/ and the tests workflow's step): a subject of at most 72 characters, then a blank line
before the body. Messages are given as text, so nothing here depends on the clone's history."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location(
        "check_commit_message", REPO / ".github" / "scripts" / "check-commit-message.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_short_subject_and_a_body_after_a_blank_line_pass():
    check = load()
    assert check.problems("fit: device hints span only the devices' NUMA nodes\n") == []
    assert check.problems("x" * 72 + "\n\nThe detail, as long as it needs to be. " * 5) == []
    # comment lines are git's template, stripped before the commit is made
    assert check.problems("# Please enter the commit message\n\nshort subject\n# more\n") == []
    assert check.problems("fixup! " + "x" * 72) == []  # folded into its commit before it lands


def test_a_long_subject_a_missing_blank_line_or_nothing_fail():
    check = load()
    assert check.problems("x" * 73) == [
        "the subject is 73 characters (at most 72); put the detail in the body"]
    assert check.problems("subject\nbody right below") == [
        "no blank line between the subject and the body"]
    assert check.problems("# only a comment\n\n") == ["the message is empty"]


def test_the_hook_runs_the_check_on_the_message_file(tmp_path):
    check = load()
    hook = REPO / ".githooks" / "commit-msg"
    assert os.access(hook, os.X_OK)
    assert "check-commit-message.py\" --file \"$1\"" in hook.read_text()
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("y" * 80 + "\n")
    assert check.main(["--file", str(message)]) == 1
    message.write_text("a fine subject\n\nand its body\n")
    assert check.main(["--file", str(message)]) == 0
    assert check.main([]) == 2
