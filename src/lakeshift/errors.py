"""The one exception type users see: a clear message, no traceback (the CLI prints it and exits 2)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


class LakeshiftError(Exception):
    """Bad input or an impossible request, described for the user (name the file, line and field)."""


class ArgumentError(LakeshiftError, ValueError):
    """A bad argument to a public function: a value of the wrong type, out of range, or not one of the names
    allowed. The message names the parameter, the value given and what is allowed. A ``ValueError`` too, as
    every bad value is (``MapError`` and ``FormatError`` are both as well)."""


def shown(value: Any, limit: int = 80) -> str:
    """A value as a message shows it: its type and its ``repr``, cut at ``limit`` characters."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(value).__name__} {text}"


def check_int(name: str, value: Any, low: int) -> int:
    """``value`` when it is an integer ``>= low`` (a bool is not an integer here).

    Raises:
        ArgumentError: naming ``name``, the value and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ArgumentError(f"{name} must be an integer >= {low}, got {shown(value)}")
    return value


def check_choice(name: str, value: Any, choices: Collection[str], what: str) -> str:
    """``value`` when it is one of ``choices`` (strings).

    Raises:
        ArgumentError: ``"<name>: unknown <what> <value> (expected one of ...)"``.
    """
    if not isinstance(value, str) or value not in choices:
        raise ArgumentError(f"{name}: unknown {what} {value!r} (expected one of {', '.join(choices)})")
    return value
