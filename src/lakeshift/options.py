"""Options declared once: a dataclass field's metadata is both its command-line option and its config key.

A field made with :func:`option` carries an :class:`Option`: its help, what its value must be (a number
rule of :data:`lakeshift.config.NUMBER_RULES`, a set of choices, true or false, a string, or a value its
``parse``, ``check`` and ``write`` read and write, such as a list, :func:`choice_list`), its flag
(``--field-name`` unless named, or none for a positional argument) and the configs that may set it: the
matching section of a study config (``study``) and a pretraining config's ``train:`` (``pretrain``). A
config section that no command takes (a study's model entry) is declared the same way. From the fields,

* :func:`add_arguments` adds the argparse options (a rule's :func:`~lakeshift.config.number_type` as
  ``type=``, so a bad number is refused while the command line is parsed);
* :func:`config_keys` lists the keys a config section may hold, and :func:`check_config` validates one
  (unknown keys, types, ranges, choices), each error naming the file, line and key;
* :func:`to_argv` writes options back as a command line (what a study stage runs).

So the command line and the configs cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from lakeshift.config import SourcedConfig, number_type

T = TypeVar("T")

#: How a value is given on the command line: ``value`` (``--x V``), ``flag`` (``--x`` sets true; its default
#: is false, so a config's ``false`` is the default) or ``toggle`` (``--x`` / ``--no-x``; e.g. unset
#: ``None``, the machine's or the model's default, which a config's ``false`` or ``true`` overrides).
Kind = Literal["value", "flag", "toggle"]


@dataclass(frozen=True)
class Option:
    """The metadata of one option field (see the module docstring)."""

    help: str | None = None
    rule: str | None = None
    choices: Sequence[str] | None = None
    kind: Kind = "value"
    flag: str | None = None
    #: The value's name in ``--help`` (argparse's ``metavar``).
    metavar: str | None = None
    required: bool = False
    #: Given without a flag (``lakeshift report RUNS_DIR``); written first by :func:`to_argv`.
    positional: bool = False
    #: argparse's ``nargs`` (``"+"``: ``--sizes 7 8 9``, the values written apart by :func:`to_argv`).
    nargs: str | None = None
    #: Parses a command-line value that is neither a number nor a choice (e.g. a list of sizes).
    parse: Callable[[str], Any] | None = None
    #: For a config value that is not a number, a choice or a string (a mapping, a list): its problem as
    #: ``KEY_PATH: message`` (a key path under the one it is given), or None.
    check: Callable[[Any, str], str | None] | None = None
    #: Writes such a value as its command-line text (``parse`` reads it back).
    write: Callable[[Any], str] | None = None
    study: bool = False
    pretrain: bool = False


def option(default: Any = None, **meta: Any) -> Any:
    """A dataclass field with default ``default`` whose metadata is ``Option(**meta)``.

    Raises:
        ValueError: a ``flag`` whose default is not ``False``: a flag cannot be turned off, so a config's
            ``false`` must mean its default (a setting that is on, or left to the model or the machine,
            is a ``toggle``).
    """
    if meta.get("kind") == "flag" and default is not False:
        raise ValueError(f"a flag's default must be False, not {default!r}: declare it a toggle")
    return dataclasses.field(default=default, metadata={"option": Option(**meta)})


def options_of(cls: type) -> dict[str, tuple[dataclasses.Field, Option]]:
    """The option fields of dataclass ``cls`` by name, in declaration order."""
    return {f.name: (f, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata}


def from_values(cls: type[T], values: Mapping[str, Any]) -> T:
    """A ``cls`` from a dict such as an argparse namespace's ``vars``: keys that are not fields of ``cls`` are
    ignored, and so is ``None`` for a field whose default is not ``None`` (an option left unset)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {
        k: v for k, v in values.items() if k in fields and not (v is None and fields[k].default is not None)
    }
    return cls(**kwargs)


def flag_of(name: str, opt: Option) -> str:
    """The command-line flag of option ``name``."""
    return opt.flag or "--" + name.replace("_", "-")


def instance_of(*types: type) -> Callable[[Any, str], str | None]:
    """The ``check`` of a config value that must be one of ``types`` (a section's mapping, a list)."""
    names = " or ".join(t.__name__ for t in types)

    def check(value: Any, path: str) -> str | None:
        if isinstance(value, types):
            return None
        return f"{path}: expected {names}, got {type(value).__name__} {value!r}"

    return check


def choice_list(choices: Sequence[str], what: str) -> dict[str, Any]:
    """The ``parse`` and ``check`` of an option whose value is a list of ``choices`` (``what`` names one),
    comma-separated on the command line, e.g. ``option(**choice_list(INPUT_FORMATS, "input format"))``."""

    def unknown(item: Any) -> str:
        return f"unknown {what} {item!r} (known: {', '.join(choices)})"

    def parse(text: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        for item in items:
            if item not in choices:
                raise argparse.ArgumentTypeError(unknown(item))
        if not items:
            raise argparse.ArgumentTypeError(f"no {what} given")
        return items

    def check(value: Any, path: str) -> str | None:
        if not isinstance(value, list):
            return instance_of(list)(value, path)
        return next((f"{path}[{i}]: {unknown(x)}" for i, x in enumerate(value) if x not in choices), None)

    return {"parse": parse, "check": check}


def add_arguments(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    names: Iterable[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Adds the options ``names`` (default: every option) of ``cls`` to ``parser`` (or an argument group).

    An option's argparse default is its field's default unless ``defaults`` names another one (``None`` lets
    a command tell an option the user gave from one it did not)."""
    fields = options_of(cls)
    for name in fields if names is None else names:
        f, opt = fields[name]
        default = (defaults or {}).get(name, f.default)
        kwargs: dict[str, Any] = {} if opt.positional else {"dest": name}
        if opt.help is not None:
            kwargs["help"] = opt.help
        if opt.metavar is not None:
            kwargs["metavar"] = opt.metavar
        if opt.kind == "flag":
            kwargs.update(action="store_true", default=default)
        elif opt.kind == "toggle":
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        else:
            kind = number_type(opt.rule) if opt.rule else opt.parse
            if kind is not None:
                kwargs["type"] = kind
            if opt.choices is not None:
                kwargs["choices"] = opt.choices
            if opt.nargs is not None:
                kwargs["nargs"] = opt.nargs
            if opt.required:
                kwargs["required"] = True
            elif not opt.positional:
                kwargs["default"] = default
        parser.add_argument(name if opt.positional else flag_of(name, opt), **kwargs)


def config_keys(cls: type, scope: Literal["study", "pretrain"], exclude: Iterable[str] = ()) -> list[str]:
    """The keys a config section of ``scope`` may hold: the options of ``cls`` that it may set."""
    skip = set(exclude)
    return [n for n, (_, opt) in options_of(cls).items() if getattr(opt, scope) and n not in skip]


def check_config(
    cfg: SourcedConfig, section: Mapping[str, Any], cls: type, allowed: Sequence[str], where: str
) -> dict[str, Any]:
    """``section`` checked against the options ``allowed`` of ``cls``; returns it with numbers as numbers
    (YAML 1.1 reads ``1e-3`` as a string).

    Raises:
        LakeshiftError: naming file, line and key: an unknown key, a value of the wrong type, a number out
            of its range, a value that is not one of the choices.
    """
    fields = options_of(cls)
    out: dict[str, Any] = {}
    for key, value in section.items():
        path = f"{where}.{key}" if where else key
        if key not in allowed:
            raise cfg.error(path, f"unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")
        out[key] = value if value is None else _check_value(cfg, path, value, fields[key][1])
    return out


def _check_value(cfg: SourcedConfig, path: str, value: Any, opt: Option) -> Any:
    if opt.check is not None:
        problem = opt.check(value, path)
        if problem:
            key_path, _, message = problem.partition(": ")
            raise cfg.error(key_path, message)
    elif opt.kind != "value":
        if not isinstance(value, bool):
            raise cfg.error(path, f"expected true or false, got {value!r}")
    elif opt.rule:
        if isinstance(value, bool):  # YAML's true is an int to Python, never a number here
            raise cfg.error(path, f"expected a number, got {value!r}")
        value = cfg.check_number(path, value, opt.rule)
    elif opt.choices is not None:
        if value not in opt.choices:
            raise cfg.error(path, f"expected one of {', '.join(opt.choices)}, got {value!r}")
    elif not isinstance(value, str):
        raise cfg.error(path, f"expected a string, got {type(value).__name__} {value!r}")
    return value


def to_argv(options: Mapping[str, Any], cls: type) -> list[str]:
    """``options`` (option names of ``cls`` and values) as command-line arguments, positional ones first:
    ``None`` is left out, and so is a ``flag`` or ``toggle`` at its default (a false flag, a toggle on by
    default set true); otherwise a toggle is written ``--x`` or ``--no-x``, and a list comma-separated (one
    argument per value with ``nargs``)."""
    fields = options_of(cls)
    positional: list[str] = []
    argv: list[str] = []
    for name, value in options.items():
        f, opt = fields[name]
        flag = flag_of(name, opt)
        if value is None or (opt.kind != "value" and value == f.default):
            continue
        if opt.positional:
            positional.append(str(value))
        elif opt.kind != "value":
            argv.append(flag if value else "--no-" + flag[2:])
        elif opt.write is not None:
            argv += [flag, opt.write(value)]
        elif opt.nargs is not None:
            argv += [flag, *map(str, value)]
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(map(str, value))]
        else:
            argv += [flag, str(value)]
    return positional + argv
