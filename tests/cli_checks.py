"""Running the CLI in process and checking its one-line errors, shared by the reliability tests."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeshift.cli import main

#: Mounting a tmpfs (the full-disk cases) needs root.
ROOT = os.geteuid() == 0


def quiet_main(argv: list[str | Path]) -> tuple[int, str]:
    """Runs the CLI in process; returns the exit status and stderr (an exception escapes: a traceback)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


def one_error_line(code: int, err: str, *needles: str) -> str:
    """Asserts exit 2, no traceback and exactly one ``error:`` line holding every needle; returns it."""
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "1M") -> Iterator[Path]:
    path.mkdir()
    if not ROOT:
        pytest.skip("mounting a tmpfs for the full-disk case needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path}: {result.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
