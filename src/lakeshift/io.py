"""JSONL reading with precise error messages, and writes that never leave half-finished files behind."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from lakeshift.errors import LakeshiftError


def read_jsonl(path: str | Path, required: Iterable[str] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields ``(line_number, object)`` for each non-blank line of a JSONL file.

    Raises:
        LakeshiftError: the file is missing, a line is not a JSON object, or lacks a ``required`` field;
            the message names the file, the line and the field.
    """
    path = Path(path)
    if not path.is_file():
        raise LakeshiftError(f"{path}: no such file")
    required = tuple(required)
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise LakeshiftError(f"{path}, line {lineno}: malformed JSON ({err.msg})") from None
            if not isinstance(obj, dict):
                raise LakeshiftError(
                    f"{path}, line {lineno}: expected a JSON object, got {type(obj).__name__}"
                )
            for key in required:
                if key not in obj:
                    raise LakeshiftError(f"{path}, line {lineno}: missing field {key!r}")
            yield lineno, obj


def dumps(obj: Any) -> str:
    """One canonical JSON line (stable key order as given, no NaN, UTF-8 kept)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


@contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Writes to a temporary file next to ``path`` and renames it into place only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Atomically writes rows as JSONL; returns the number written."""
    n = 0
    with atomic_write(path) as f:
        for row in rows:
            f.write(dumps(row) + "\n")
            n += 1
    return n
