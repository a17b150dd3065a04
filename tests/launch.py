"""Which `bzzz` executable the tests start: the zygote's launcher, or the real console script.

``bzzz_executable()`` starts, once per test process, the zygote (``zygote.py``: a server that
has imported what `bzzz` needs and forks it per command) and returns a launcher script that
behaves as `bzzz` does (arguments, environment, streams, signals, exit status). It saves the
~4 s of CPU each `bzzz` process spends importing, hundreds of times a run.
``bzzz_executable(real=True)``, or ``BZZZ_TEST_ZYGOTE=0`` for the whole run, starts the console
script itself: for tests about the process (its pid, its memory, its limits, its terminal).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
READY_TIMEOUT = 120.0

_lock = threading.Lock()
_launcher: str | None = None


def real_bzzz() -> str:
    """The `bzzz` console script of the interpreter running the tests."""
    beside = Path(sysconfig.get_path("scripts")) / "bzzz"
    if beside.is_file():
        return str(beside)
    found = shutil.which("bzzz")
    if found is None:
        pytest.fail("the bzzz console script is not installed (pip install -e .)")
    return found


def bzzz_executable(*, real: bool = False) -> str:
    """The `bzzz` to start: the zygote's launcher unless ``real`` (or BZZZ_TEST_ZYGOTE=0)."""
    if real or os.environ.get("BZZZ_TEST_ZYGOTE", "1") == "0":
        return real_bzzz()
    global _launcher
    with _lock:
        if _launcher is None:
            _launcher = _start_zygote()
        return _launcher


def _start_zygote() -> str:
    where = Path(tempfile.mkdtemp(prefix="bzzz-zygote-"))
    socket_path = where / "z.sock"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "zygote.py"), str(socket_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")},
        cwd=where,
    )
    assert proc.stdout is not None
    # The zygote ends when its stdin closes: when this process ends, whatever ends it.
    atexit.register(_stop, proc, where)
    timer = threading.Timer(READY_TIMEOUT, proc.kill)
    timer.start()
    try:
        line = proc.stdout.readline()
    finally:
        timer.cancel()
    if line.strip() != b"ready":
        pytest.fail(f"the bzzz zygote did not start (exit {proc.poll()})")
    script = where / "bzzz"
    script.write_text(
        f"#!{sys.executable} -S\n"
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        f"sys.argv[1:1] = [{str(socket_path)!r}]\n"
        "import bzzz_launcher\n"
        "bzzz_launcher.main()\n"
    )
    script.chmod(0o755)
    return str(script)


def _stop(proc: subprocess.Popen[bytes], where: Path) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(where, ignore_errors=True)
