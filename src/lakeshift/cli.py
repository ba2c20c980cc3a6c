"""The ``lakeshift`` command: one entry point, one subcommand per stage of the pipeline.

Each ``lakeshift.commands.<area>`` module adds its subcommands with ``register(subparsers)`` and keeps heavy
imports inside the handlers, so ``lakeshift --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from lakeshift._version import __version__
from lakeshift.errors import LakeshiftError

COMMAND_MODULES = ("data", "scoring", "report", "models", "studies", "integrations")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``lakeshift train: error: argument --lr: ...``), exit status 2, like
    every other bad input; subparsers inherit the class. ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _CheckingParser(_Parser):
    """A parser whose usage errors are exceptions: for command lines that are planned, not run."""

    def error(self, message: str) -> NoReturn:
        raise LakeshiftError(f"{self.prog}: {message}")


def check_argv(argv: Sequence[str]) -> argparse.Namespace:
    """Parses a ``lakeshift`` command line without running it (a study's stages, before any runs).

    Raises:
        LakeshiftError: what the command would refuse while parsing (a bad number, an unknown choice).
    """
    return build_parser(_CheckingParser).parse_args(list(argv))


def build_parser(parser_class: type[_Parser] = _Parser) -> argparse.ArgumentParser:
    parser = parser_class(
        prog="lakeshift",
        description="FrozenLake benchmark for out-of-distribution generalization of CoT reasoning.",
    )
    parser.add_argument("--version", action="version", version=f"lakeshift {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    import importlib

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"lakeshift.commands.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"lakeshift.commands.{name}":
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    # Before torch loads: spinning OpenMP threads cost 2-3x of CPU training speed under any contention.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, or a one-line usage error (exit 2): a return code
        return int(done.code or 0)
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # `show ... > file` on a full disk fails here, where the handlers below see it
        return code
    except LakeshiftError as err:
        print(f"lakeshift {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `lakeshift stats DIR | head`: the reader left; not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        # The file system said no (read-only, full, a file where a folder goes, ...) somewhere no specific
        # handler caught it: one line with the path (the command's output when the error names none, as a
        # full disk's write() does). Other OSErrors (a library's own) keep their traceback.
        from lakeshift.io import FILE_SYSTEM_ERRNOS, os_error_message

        if err.errno not in FILE_SYSTEM_ERRNOS:
            raise
        print(f"lakeshift {args.command}: error: {os_error_message(err, _output(args))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"lakeshift {args.command}: interrupted; finished work is kept, rerun to resume", file=sys.stderr
        )
        return 130
    except Exception as err:
        # Libraries that write for us (safetensors, torch, pyarrow) wrap a full or read-only disk in their
        # own exception types; those are still an unwritable output, not a bug worth a traceback.
        from lakeshift.io import wrapped_os_problem

        problem = wrapped_os_problem(err, getattr(args, "out", None) or getattr(args, "workdir", None))
        if problem is None:
            raise
        print(
            f"lakeshift {args.command}: error: {_output(args)}: {problem} ({type(err).__name__})",
            file=sys.stderr,
        )
        return 2


def _output(args: argparse.Namespace) -> str:
    """What the command writes, for errors that name no file (a full disk's ``write()``)."""
    out = getattr(args, "out", None) or getattr(args, "workdir", None)
    return str(out) if out is not None else "standard output"


if __name__ == "__main__":
    sys.exit(main())
