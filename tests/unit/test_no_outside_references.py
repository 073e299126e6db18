"""Code, tests and docs state facts themselves: no pointers to documents that are not in the
repository (planning notes, seed documents, a development machine's paths, a tracker's numbers)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(
    r"/work/"  # a development machine's checkout and shared folders
    r"|\bseed \d{3}\b"  # numbered seed documents
    r"|reference §|§ ?\d"  # sections of a reference document
    r"|shared/(?:reference|seeds|golden-tables)"
    r"|\(issues? \d+\)|\bissues? \d+(?:-\d+)?\b(?! of)"  # an issue tracker outside the repository
)


def test_no_file_points_at_documents_outside_the_repository() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in files:
        if name.startswith("tests/golden/tables/") or not name.endswith((".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".txt", "Makefile")):
            continue
        if name == "tests/unit/test_no_outside_references.py":
            continue
        for number, line in enumerate((REPO / name).read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if OUTSIDE.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
