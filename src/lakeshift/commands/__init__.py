"""The CLI's subcommands, plus the number validators every subcommand's options use (``type=``).

Each validator rejects a bad value while the command line is parsed, before any work starts, so a zero
batch size or a negative limit is one clear line (exit 2) and never a library traceback deep in a run, nor
silently replaced by a default (``--max-steps 0`` once meant "no limit" and trained 3 epochs).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _parse(text: str, kind: type) -> int | float:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts, steps, sizes of batches)."""
    value = int(_parse(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (warmup steps, examples in a report: 0 means none)."""
    value = int(_parse(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, epochs, minutes, seconds)."""
    value = float(_parse(text, float))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (weight decay, temperature: 0 is meaningful)."""
    value = float(_parse(text, float))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def probability(text: str) -> float:
    """A number in (0, 1] (top-p: 0 would keep no token at all)."""
    value = float(_parse(text, float))
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


def hole_probability(text: str) -> float:
    """A number in [0, 1) (a hole probability of 1 leaves no frozen cell for start and goal)."""
    value = float(_parse(text, float))
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text!r}")
    return value


def map_size(text: str) -> int:
    """A map side length: an integer >= 2 (a 1x1 map has no room for both start and goal)."""
    value = int(_parse(text, int))
    if value < 2:
        raise argparse.ArgumentTypeError(f"map size must be an integer >= 2, got {text!r}")
    return value


def seed(text: str) -> int:
    """A random seed torch, numpy and Python all accept: an integer in [0, 2**32)."""
    value = int(_parse(text, int))
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {text!r}")
    return value


#: The validator of each number rule (:data:`lakeshift.config.NUMBER_RULES`), for argparse's ``type=``.
RULE_TYPES: dict[str, Callable[[str], int | float]] = {
    "positive_int": positive_int,
    "nonnegative_int": nonnegative_int,
    "positive_float": positive_float,
    "nonnegative_float": nonnegative_float,
    "probability": probability,
    "seed": seed,
}
