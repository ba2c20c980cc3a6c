"""``lakeshift run`` (a study config) and ``lakeshift demo`` (the built-in CPU study)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from lakeshift.config import number_type
from lakeshift.errors import LakeshiftError

if TYPE_CHECKING:
    from lakeshift.studies import Study

DEMO_CONFIG = Path(__file__).resolve().parents[1] / "studies" / "demo.yaml"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a study config: generate, train, predict, score, report (cached, resumable)",
        description=(
            "Run every stage of a study config (data, training runs, predictions, report). "
            "Stages are cached by a hash of their inputs: rerunning redoes only what is missing or changed."
        ),
    )
    p.add_argument("config", type=Path, help="study YAML (see configs/studies/)")
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan and the stage commands, run nothing"
    )
    p.add_argument("--workdir", type=Path, help="override the config's workdir")
    p.add_argument(
        "--models",
        nargs="+",
        metavar="PATTERN",
        help="run only the model entries whose names match (shell globs, e.g. 'grid__*'), and the data they "
        "need, not the report: a long study split across sessions",
    )
    p.set_defaults(handler=_run)

    p = subparsers.add_parser(
        "demo",
        help="the main job on a CPU: data, two small models trained, predictions, report",
        description=(
            "Generate data, train two small models on grid input, without CoT (the shipped base "
            "mini-cells-base fine-tuned) and with the wave CoT (mini-cells with local attention, from "
            "scratch), predict on the ID and both OOD splits with the random-walk and greedy baselines, "
            "score and write a report. Each model trains a fixed number of steps, so on one machine and "
            "library set the numbers repeat exactly; under 15 minutes on 2 CPU cores (the built-in config: "
            "lakeshift/studies/demo.yaml)."
        ),
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("lakeshift-demo"),
        help="output folder (default ./lakeshift-demo)",
    )
    p.add_argument(
        "--max-minutes",
        type=number_type("positive_float"),
        metavar="M",
        help="train each model for a time budget of M minutes instead of the fixed step count (its numbers "
        "then depend on the machine's speed)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    p.set_defaults(handler=_demo)


def _run(args: argparse.Namespace) -> int:
    from lakeshift.studies import load_study

    study = load_study(args.config, args.workdir)
    if args.models:
        study = study.only(args.models)
    return _run_locked(study, args.dry_run, "lakeshift run")


def _run_locked(study: Study, dry_run: bool, command: str) -> int:
    """Runs ``study`` holding its workdir's lock: one writer per workdir, whichever command it is."""
    from lakeshift.io import output_lock
    from lakeshift.studies import run_study

    if study.workdir.exists() and not study.workdir.is_dir():
        raise LakeshiftError(f"workdir {study.workdir} is a file; expected a folder")
    if dry_run:
        return run_study(study, dry_run=True)
    with output_lock(study.workdir, command):
        return run_study(study)


def _demo(args: argparse.Namespace) -> int:
    from lakeshift.studies import plan_study, read_study_config

    cfg = read_study_config(DEMO_CONFIG)
    if args.max_minutes is not None:
        train = cfg.data["train"]
        del train["max_steps"]
        train["max_minutes"] = args.max_minutes
    return _run_locked(plan_study(cfg, args.workdir), args.dry_run, "lakeshift demo")
