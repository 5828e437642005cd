"""Check commit messages: a subject of at most 72 characters, then a blank line before the body.

    python .github/scripts/check-commit-message.py --file .git/COMMIT_EDITMSG   # commit-msg hook
    python .github/scripts/check-commit-message.py BASE..HEAD                   # a range of commits

The hook (.githooks/commit-msg; ``git config core.hooksPath .githooks``) checks each commit as it
is written; the tests workflow checks a pull request's commits. Only new commits are ever
checked, so history written before the rule cannot make a check fail. Exits 1 naming every
problem, 2 on bad usage.
"""

from __future__ import annotations

import subprocess
import sys

MAX_SUBJECT = 72
# git commit --fixup/--squash prefixes: the commit is folded into another before it lands
AUTOSQUASH = ("fixup! ", "squash! ", "amend! ")


def problems(message: str) -> list[str]:
    """What is wrong with one commit message (comment lines, as git strips them, ignored)."""
    lines = [line.rstrip() for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[0]:
        lines.pop(0)
    if not lines:
        return ["the message is empty"]
    subject = lines[0]
    for prefix in AUTOSQUASH:
        subject = subject.removeprefix(prefix)
    found = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters (at most {MAX_SUBJECT}); "
                     "put the detail in the body")
    if len(lines) > 1 and lines[1]:
        found.append("no blank line between the subject and the body")
    return found


def messages(revision_range: str) -> list[tuple[str, str]]:
    """(short hash, message) of each commit in the range, oldest first."""
    out = subprocess.run(["git", "log", "--reverse", "--format=%h%x00%B%x00", revision_range],
                         capture_output=True, text=True, check=True).stdout
    fields = out.split("\0")
    return [(fields[i].strip(), fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--file":
        with open(argv[1], encoding="utf-8") as file:
            checked = [("this commit", file.read())]
    elif len(argv) == 1 and ".." in argv[0]:
        checked = messages(argv[0])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    failed = False
    for name, message in checked:
        for problem in problems(message):
            print(f"{name}: {problem}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
