"""scripts/serve keeps .venv current and says what it does, on stderr only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Stands in for .venv/bin/python: runs `-c` with the real interpreter, records pip calls.
FAKE_PYTHON = f"""#!/bin/sh
if [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi
echo "$@" >> "$(dirname "$0")/pip.log"
"""
FAKE_BZZZ = """#!/bin/sh
echo "bzzz $*"
"""


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "serve", root / "scripts" / "serve")
    (root / "pyproject.toml").write_text('[project]\nname = "bzzz"\ndependencies = []\n')
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("bzzz", FAKE_BZZZ)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return root


def _serve(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "scripts" / "serve"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def _installs(root: Path) -> int:
    log = root / ".venv" / "bin" / "pip.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if line.endswith("install --quiet -e ."))


def test_serve_installs_again_only_when_pyproject_changed(tmp_path: Path) -> None:
    root = _checkout(tmp_path)

    first = _serve(root, "--stdio")
    again = _serve(root, "--stdio")
    (root / "pyproject.toml").write_text('[project]\nname = "bzzz"\ndependencies = ["rich"]\n')
    changed = _serve(root, "--port", "8000")

    assert [first.stdout, again.stdout, changed.stdout] == [
        "bzzz serve --stdio\n",
        "bzzz serve --stdio\n",
        "bzzz serve --port 8000\n",
    ]
    assert _installs(root) == 2
    assert "installing the project" in first.stderr
    assert "installing" not in again.stderr
    assert "pyproject.toml changed" in changed.stderr
    assert "running .venv/bin/bzzz serve --port 8000" in changed.stderr
