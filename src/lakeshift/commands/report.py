"""``lakeshift report``: tables, figures and ``report.html`` for every predictions file under a folder.

How ``report`` finds its inputs
-------------------------------
Every ``*.jsonl`` under ``RUNS_DIR`` (recursively, sorted) whose first record has ``id`` and ``output`` is a
predictions file; so are inspect logs (``.eval``, ``.json``) and lmms-eval ``--log_samples`` files, read
as the predictions rows they hold (the evaluated maps their ``selection``); other JSONL files (scored
records, logs) are skipped. Its maps file is, in this order:

1. the ``maps`` field of its first record (a path; relative paths are relative to the predictions file);
2. ``DATA_DIR/<split>/maps.jsonl`` with ``--data DATA_DIR``, where ``<split>`` is the first record's
   ``split`` field, else the file name without ``.jsonl`` (``runs/grid__grid+desc/ood-dist.jsonl``).

Records without ``model`` / ``input_format`` / ``cot_format`` take them from the file's folder: the model is
the folder path relative to ``RUNS_DIR`` and a folder named ``<input>__<cot>`` gives the two formats.
The Figure 4 training histogram uses ``--train-maps`` or, with ``--data``, ``DATA_DIR/id-train/maps.jsonl``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from lakeshift.commands.scoring import add_scoring_options, print_warnings
from lakeshift.errors import LakeshiftError
from lakeshift.io import first_record, jsonl_files, jsonl_stem
from lakeshift.options import add_arguments
from lakeshift.report.options import ReportOptions


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``report``."""
    p = subparsers.add_parser(
        "report",
        help="score every predictions file under RUNS_DIR and write tables, plots and report.html",
        description=__doc__.split("How ``report``")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p, ReportOptions)
    add_scoring_options(p)
    p.set_defaults(handler=cmd_report)


def find_runs(runs_dir: Path, data: Path | None, allow_empty: bool = False) -> list[Any]:
    """Predictions files under ``runs_dir`` with their maps files (see the module docstring).

    Raises:
        LakeshiftError: ``runs_dir`` is missing, holds no predictions file, or a file's maps cannot be found.
    """
    from lakeshift.report import RunInput
    from lakeshift.report.analysis import COT_ORDER, INPUT_ORDER
    from lakeshift.scoring import harness_logs
    from lakeshift.scoring.shards import shard_of, unsharded_stem

    if not runs_dir.is_dir():
        raise LakeshiftError(f"{runs_dir}: no such folder")
    runs = []
    sharded: dict[tuple[Path, str], Any] = {}  # the shard files of one set are one run
    for path in [*jsonl_files(runs_dir, recursive=True), *harness_logs.harness_logs(runs_dir)]:
        first = first_record(path) if path.name.endswith((".jsonl", ".jsonl.gz")) else None
        if harness_logs.is_harness_log(path, first):
            rows = harness_logs.prediction_rows(path)
            first = rows[0][1] if rows else None
        if first is None or "id" not in first or "output" not in first:
            continue
        stem = jsonl_stem(path)
        if shard_of(first) is not None:
            stem = unsharded_stem(path)
            if (path.parent, stem) in sharded:
                sharded[path.parent, stem].paths.append(path)
                continue
        if first.get("maps"):
            maps_path = Path(first["maps"])
            if not maps_path.is_absolute():
                maps_path = path.parent / maps_path
        elif data is not None:
            split = str(first.get("split") or jsonl_stem(path))
            maps_path = data / split / "maps.jsonl"
        else:
            raise LakeshiftError(
                f"{path}, line 1: no 'maps' field and no --data DATA_DIR: cannot tell which maps it answers"
            )
        if not maps_path.is_file():
            raise LakeshiftError(f"{path}: maps file {maps_path} not found")
        rel = path.parent.relative_to(runs_dir)
        folder = str(rel) if str(rel) != "." else stem
        defaults: dict[str, Any] = {"model": folder}
        inp, sep, cot = path.parent.name.partition("__")
        if sep and inp in INPUT_ORDER and cot in COT_ORDER:
            defaults.update(input_format=inp, cot_format=cot)
        name = f"{folder}__{stem}".replace("/", "_")
        runs.append(RunInput(path, maps_path, defaults, name, [path]))
        if stem != jsonl_stem(path):
            sharded[path.parent, stem] = runs[-1]
    if not runs and not allow_empty:
        raise LakeshiftError(
            f"{runs_dir}: no predictions files (*.jsonl or *.jsonl.gz with 'id' and 'output') found"
        )
    return runs


def cmd_report(args: argparse.Namespace) -> int:
    from lakeshift.io import check_output, refuse_inside_locked
    from lakeshift.report import build_report, references, terminal_summary

    refuse_inside_locked(args.out, "lakeshift report")  # a study's workdir while its run writes it

    # An unknown --reference fails before any scoring.
    reference = references.load(args.reference) if args.reference else None
    runs = find_runs(args.runs_dir, args.data, allow_empty=reference is not None)
    train = args.train_maps
    if train is None and args.data is not None and (args.data / "id-train" / "maps.jsonl").is_file():
        train = args.data / "id-train" / "maps.jsonl"
    # A report folder holds report.html (or scored/, written first, when a report was interrupted); a
    # folder of inputs (RUNS_DIR, DATA_DIR, a split) holds neither.
    inputs = [args.runs_dir, args.data, train, *(r.path for r in runs), *(r.maps_path for r in runs)]
    inputs += [p.parent for p in inputs[2:] if p is not None]
    check_output(
        args.out,
        inputs=inputs,
        kind="dir",
        previous=lambda d: (d / "report.html").is_file() or (d / "scored").is_dir(),
        what="report folder (with report.html)",
    )
    # report.html is written last and marks a finished report: a rerun that fails part-way (a full disk)
    # must not leave the old page next to half of the new tables.
    (args.out / "report.html").unlink(missing_ok=True)
    result = build_report(
        runs,
        args.out,
        compat=args.compat,
        strict=args.strict,
        train_maps=train,
        baselines=("oracle", "greedy", "random") if args.baselines else (),
        check_trace=not args.no_faithfulness,
        n_examples=args.examples,
        images=args.images,
        reference=reference,
    )
    print(f"scored {result.n_records} records from {len(runs)} predictions files ({len(result.runs)} runs)")
    print(terminal_summary(args.out, shutil.get_terminal_size().columns))
    print(f"wrote {len(result.files)} files to {args.out} (open {args.out / 'report.html'})")
    print_warnings(result.warnings)
    return 0
