"""YAML loading that remembers where every value came from, so config errors can name file and line."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from lakeshift.errors import LakeshiftError
from lakeshift.io import read_text

#: A name that becomes one file or folder name (a study, a model entry, a split): letters, digits and
#: ``. _ + @ = -``, starting with a letter or digit, so it can never be ``..``, empty, hidden or a path.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@=-]{0,127}")


def name_problem(value: Any, what: str) -> str | None:
    """Why ``value`` cannot be ``what`` (a study name, a split), which names a file or folder; or ``None``."""
    if isinstance(value, str) and PLAIN_NAME.fullmatch(value):
        return None
    return (
        f"{what} {value!r} must be a plain name (at most 128 letters, digits and . _ + @ = -, starting "
        "with a letter or digit): it names a folder or file"
    )


@dataclass
class SourcedConfig:
    """A parsed YAML document plus the line of every key path (``"models[2].cot"`` -> 14)."""

    path: Path
    data: Any
    lines: dict[str, int] = field(default_factory=dict)
    #: The file of a key path that another file gave (:meth:`extending`); every other one is ``path``'s.
    files: dict[str, Path] = field(default_factory=dict)

    def where(self, key_path: str) -> str:
        """``file:line`` of a key path, falling back to its closest located parent."""
        probe = key_path
        while probe:
            if probe in self.lines:
                return f"{self.files.get(probe, self.path)}:{self.lines[probe]}"
            probe = (
                probe.rsplit(".", 1)[0] if "." in probe else probe.rsplit("[", 1)[0] if "[" in probe else ""
            )
        return str(self.path)

    def error(self, key_path: str, message: str) -> LakeshiftError:
        return LakeshiftError(f"{self.where(key_path)}: {key_path}: {message}")

    def extending(self, base: SourcedConfig, merged: tuple[str, ...]) -> SourcedConfig:
        """This document over ``base``: its top-level keys replace the base's, except the mappings named in
        ``merged``, which are merged key by key (this document's keys win). Errors keep naming the file and
        line each value came from."""
        data = {**base.data, **self.data}
        for key in merged:
            if isinstance(base.data.get(key), dict) and isinstance(self.data.get(key), dict):
                data[key] = {**base.data[key], **self.data[key]}

        def own(path: str) -> bool:  # a key path of this document, not of the base
            top = path.split(".", 1)[0].split("[", 1)[0]
            if top not in self.data:
                return False
            if top in merged and "." in path and isinstance(self.data[top], dict):
                return path.split(".", 2)[1].split("[", 1)[0] in self.data[top]
            return True

        lines = {k: v for k, v in base.lines.items() if not own(k)}
        files = {k: base.files.get(k, base.path) for k in lines}
        return SourcedConfig(self.path, data, {**lines, **self.lines}, files)

    def check_number(self, key_path: str, value: Any, rule: str) -> int | float:
        """``value`` checked against a :data:`NUMBER_RULES` rule; returns it (numeric strings as floats).

        Raises:
            LakeshiftError: naming file, line and key (``count: true``, ``batch_size: 0``, ``lr: -1``).
        """
        problem = number_problem(value, rule)
        if problem:
            raise self.error(key_path, problem)
        return float(value) if isinstance(value, str) else value


class NumberRule(NamedTuple):
    """What a number must be: its type, its range (``high`` ``None``: no bound of meaning) and the largest
    value the machine can honour (``maximum``, refused as ``must be at most N``, ``why`` saying what it
    would take)."""

    kind: type
    low: float
    low_inclusive: bool
    high: float | None = None
    high_inclusive: bool = False
    maximum: float | None = None
    why: str = ""


#: The largest integer torch, numpy and C libraries take as an index or a count (a C ``int``).
INT_MAX = 2**31 - 1
#: The largest float a setting may have: a clock or a step count made from it stays a finite number.
FLOAT_MAX = 1e9
_FITS = "what the trainer, torch and numpy take"

#: The numbers of every option and config value, by rule name: a config's value is checked against its rule
#: (:func:`number_problem`), a command line's by the rule's argparse type (:func:`number_type`), so a zero
#: batch size, a negative limit or a batch no machine can hold is one clear line before any work starts,
#: never a library traceback deep in a run, nor silently replaced by a default. Every rule has a maximum.
NUMBER_RULES: dict[str, NumberRule] = {
    # counts, steps, limits
    "positive_int": NumberRule(int, 1, True, maximum=INT_MAX, why=_FITS),
    # warmup steps, examples in a report: 0 means none
    "nonnegative_int": NumberRule(int, 0, True, maximum=INT_MAX, why=_FITS),
    # learning rates, epochs, minutes
    "positive_float": NumberRule(float, 0, False, maximum=FLOAT_MAX, why="a finite clock and step count"),
    # weight decay, temperature: 0 is meaningful
    "nonnegative_float": NumberRule(float, 0, True, maximum=FLOAT_MAX, why="a finite setting"),
    "probability": NumberRule(float, 0, False, 1, True),  # top-p: 0 would keep no token at all
    # a hole probability of 1 leaves no frozen cell for start and goal
    "hole_probability": NumberRule(float, 0, True, 1, False),
    # a 1x1 map has no room for both start and goal
    "map_size": NumberRule(int, 2, True, maximum=1000, why="a million cells a map"),
    "seed": NumberRule(int, 0, True, 2**32, False),  # what torch, numpy and Python all accept
    # sequences decoded or trained at once: one token each is already 64k rows of activations
    "batch_size": NumberRule(int, 1, True, maximum=65536, why="larger batches fit no machine's memory"),
    # generated or trained tokens of one sequence: no model's context is longer
    "tokens": NumberRule(int, 1, True, maximum=2**20, why="no model's context is longer"),
    # GRPO's completions per prompt (at least two to compare): a prompt's group is trained as one batch
    "generations": NumberRule(int, 2, True, maximum=65536, why="larger batches fit no machine's memory"),
    # answers sampled per prompt: every map's answers are held until all are in
    "samples": NumberRule(int, 1, True, maximum=1024, why="every answer of a map is held until all are in"),
    # the rank of LoRA adapters: larger than any model's hidden size
    "lora_rank": NumberRule(int, 1, True, maximum=8192, why="larger than any model's hidden size"),
    # processes, requests in flight, shards run at once
    "workers": NumberRule(int, 1, True, maximum=1024, why="one machine's processes or connections"),
    # retries of a request, each waiting twice as long as the last
    "retries": NumberRule(int, 0, True, maximum=100, why="the backoff between retries doubles"),
    # a wait for one request or one step
    "seconds": NumberRule(float, 0, False, maximum=7 * 24 * 3600, why="a week"),
}


def number_problem(value: Any, rule: str) -> str | None:
    """Why ``value`` breaks ``rule`` (one of :data:`NUMBER_RULES`), or ``None`` when it is fine.

    Booleans are never numbers here (YAML's ``true`` is an int to Python). Float rules accept numeric
    strings, because YAML 1.1 reads ``1e-3`` as a string."""
    kind = NUMBER_RULES[rule].kind
    what = "an integer" if kind is int else "a number"
    if isinstance(value, bool) or value is None:
        return f"expected {what}, got {value!r}"
    if kind is int:
        if not isinstance(value, int):
            return f"expected {what}, got {type(value).__name__} {value!r}"
        number: float = value
    else:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return f"expected {what}, got {type(value).__name__} {value!r}"
        if not math.isfinite(number):
            return f"expected a finite number, got {value!r}"
    problem = _range_problem(number, rule)
    return f"{problem}, got {value!r}" if problem else None


def number_type(rule: str) -> Callable[[str], int | float]:
    """The argparse ``type=`` of ``rule`` (one of :data:`NUMBER_RULES`): a command-line value as a number,
    or ``argparse.ArgumentTypeError`` saying why it is not one or not in the rule's range."""
    kind = NUMBER_RULES[rule].kind

    def parse(text: str) -> int | float:
        try:
            number = kind(text)
        except (TypeError, ValueError):
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        problem = _range_problem(number, rule)
        if problem:
            raise argparse.ArgumentTypeError(f"{problem}, got {text!r}")
        return number

    parse.__name__ = rule  # argparse names the type in its own messages
    return parse


def _range_problem(number: float, rule: str) -> str | None:
    """``must be ...`` when ``number`` is outside the range of ``rule`` or above its maximum, else None."""
    kind, low, low_incl, high, high_incl, maximum, why = NUMBER_RULES[rule]
    above = number > low or (low_incl and number == low)
    below = high is None or number < high or (high_incl and number == high)
    if above and below:
        if maximum is not None and number > maximum:
            return f"must be at most {_number_text(maximum)} ({why})"
        return None
    what = "an integer" if kind is int else "a number"
    if high is None:
        return f"must be {what} {'>=' if low_incl else '>'} {low}"
    top = "2**32" if high == 2**32 else high
    return f"must be {what} in {'[' if low_incl else '('}{low}, {top}{']' if high_incl else ')'}"


def _number_text(number: float) -> str:
    """A maximum as the user can type it back (``1000000000``, not ``1e9``)."""
    return str(int(number)) if number == int(number) else str(number)


#: The deepest nesting of mappings and lists a config may have (real configs nest 4 or 5 levels).
MAX_YAML_DEPTH = 64
#: The most values (mapping entries, list items, scalars) a config may hold once its aliases are expanded:
#: a few aliases can otherwise stand for billions of values ("billion laughs").
MAX_YAML_VALUES = 100_000
_STANDARD_TAGS = {
    "mapping": "tag:yaml.org,2002:map",
    "sequence": "tag:yaml.org,2002:seq",
}


def dump_yaml(value: Any) -> str:
    """``value`` (plain mappings, lists and scalars) as block-style YAML, keys in their order: for the YAML
    that lakeshift writes (a dataset card's front matter), so PyYAML stays imported here alone."""
    import yaml

    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True)


def load_yaml(path: str | Path) -> SourcedConfig:
    """Parses a YAML file, recording the 1-based line of every mapping key and list item.

    Hostile files are refused, not obeyed: an unknown tag (``!foo``), an alias that contains itself, more
    than :data:`MAX_YAML_DEPTH` levels of nesting, or more than :data:`MAX_YAML_VALUES` values once aliases
    are expanded. Every YAML reader of lakeshift goes through here.

    Raises:
        LakeshiftError: the file is missing, is not valid YAML, or is hostile (with the line of the problem).
    """
    import yaml

    path = Path(path)
    if not path.is_file():
        raise LakeshiftError(f"{path}: no such config file")
    text = read_text(path)  # not UTF-8: one line with the line and byte offset
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise LakeshiftError(f"{where}: invalid YAML ({getattr(err, 'problem', err)})") from None
    except RecursionError:  # the composer recurses once per level of nesting
        raise LakeshiftError(
            f"{path}: invalid YAML (nested more than {MAX_YAML_DEPTH} levels deep)"
        ) from None
    lines: dict[str, int] = {}
    data = _Converter(path, lines).value(node, "", ()) if node is not None else {}
    return SourcedConfig(path, data, lines)


class _Converter:
    """Turns a composed YAML node graph into Python values, line numbers recorded, hostile graphs refused."""

    def __init__(self, path: Path, lines: dict[str, int]) -> None:
        self.path = path
        self.lines = lines
        self.values = 0

    def error(self, node: Any, message: str) -> LakeshiftError:
        return LakeshiftError(f"{self.path}:{node.start_mark.line + 1}: invalid YAML ({message})")

    def value(self, node: Any, key_path: str, parents: tuple[int, ...]) -> Any:
        import yaml

        self.values += 1
        if self.values > MAX_YAML_VALUES:
            raise self.error(
                node, f"more than {MAX_YAML_VALUES:,} values once its aliases are expanded (alias bomb?)"
            )
        if id(node) in parents:
            raise self.error(node, "an alias refers to a value that contains it")
        if len(parents) >= MAX_YAML_DEPTH:
            raise self.error(node, f"nested more than {MAX_YAML_DEPTH} levels deep")
        inside = (*parents, id(node))
        if isinstance(node, yaml.MappingNode):
            self.check_tag(node, "mapping")
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self.error(key_node, "a key must be a plain value, not a mapping or a list")
                key = str(key_node.value)
                child = f"{key_path}.{key}" if key_path else key
                if key in out:
                    raise LakeshiftError(
                        f"{self.path}:{key_node.start_mark.line + 1}: duplicate key {child!r}"
                    )
                self.lines[child] = key_node.start_mark.line + 1
                out[key] = self.value(value_node, child, inside)
            return out
        if isinstance(node, yaml.SequenceNode):
            self.check_tag(node, "sequence")
            items = []
            for i, item in enumerate(node.value):
                child = f"{key_path}[{i}]"
                self.lines[child] = item.start_mark.line + 1
                items.append(self.value(item, child, inside))
            return items
        try:
            return yaml.SafeLoader(" ").construct_object(node, deep=True)
        except yaml.YAMLError as err:  # an unknown tag (`!foo 1`), a malformed `!!int`, ...
            raise self.error(node, str(getattr(err, "problem", None) or err).splitlines()[0]) from None

    def check_tag(self, node: Any, kind: str) -> None:
        if node.tag != _STANDARD_TAGS[kind]:
            raise self.error(node, f"unknown tag {node.tag!r} on a {kind}")
