"""``lakeshift score``, ``lakeshift report`` and ``lakeshift baseline``.

How ``report`` finds its inputs
-------------------------------
Every ``*.jsonl`` under ``RUNS_DIR`` (recursively, sorted) whose first record has ``id`` and ``output`` is a
predictions file; other JSONL files (scored records, logs) are skipped. Its maps file is, in this order:

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
import sys
from pathlib import Path
from typing import Any

from lakeshift.commands import nonnegative_int
from lakeshift.errors import LakeshiftError

COMPAT_CHOICES = ("frozen_ood", "vsp")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``score``, ``report`` and ``baseline``."""
    p = subparsers.add_parser(
        "score",
        help="score a predictions file against its maps",
        description="Extract each output's plan, simulate it and print accuracy (95%% Wilson CI), per-size "
        "accuracy and verdict counts.",
    )
    p.add_argument("--maps", required=True, type=Path, help="maps.jsonl of the split")
    p.add_argument(
        "--predictions",
        required=True,
        type=Path,
        nargs="+",
        metavar="FILE",
        help="predictions JSONL (id, output, ...); several files, a glob or a folder are read as one set "
        "(the shards of `lakeshift predict --shard`: an id in two files is an error, an absent shard a "
        "warning and its maps scored missing)",
    )
    p.add_argument("--out", type=Path, help="write one scored record per map (JSONL)")
    _common(p)
    p.set_defaults(handler=cmd_score)

    p = subparsers.add_parser(
        "report",
        help="score every predictions file under RUNS_DIR and write tables, plots and report.html",
        description=__doc__.split("How ``report``")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs_dir", type=Path, metavar="RUNS_DIR")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--data", type=Path, help="suite folder with <split>/maps.jsonl")
    p.add_argument("--train-maps", type=Path, help="training maps.jsonl for the Figure 4 histogram")
    p.add_argument(
        "--examples", type=nonnegative_int, default=600, help="examples embedded in report.html (default 600)"
    )
    p.add_argument("--no-baselines", action="store_true", help="do not add the oracle/greedy/random rows")
    p.add_argument("--no-images", action="store_true", help="do not embed map images in report.html")
    p.add_argument(
        "--reference",
        metavar="NAME",
        help="add published results as labelled rows of Tables 1, 3, 5 and dashed curves (known: paper, "
        "the paper's Qwen2.5-VL-7B numbers); with it RUNS_DIR may hold no predictions",
    )
    _common(p)
    p.set_defaults(handler=cmd_report)

    p = subparsers.add_parser(
        "baseline",
        help="predictions of a reference policy (oracle, greedy, random)",
        description="Writes a policy's predictions in the predictions format and prints their score.",
    )
    p.add_argument("--maps", required=True, type=Path)
    p.add_argument("--policy", required=True, choices=("oracle", "greedy", "random"))
    p.add_argument("--out", type=Path, help="predictions JSONL to write")
    p.add_argument("--seed", type=int, default=0, help="seed of the random policy (default 0)")
    p.add_argument("--cot", help="oracle only: write the reference completion of this CoT format")
    p.set_defaults(handler=cmd_baseline)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compat",
        choices=COMPAT_CHOICES,
        help="frozen_ood: the paper's evaluator exactly; vsp: VSP's 'Action plan:' evaluator",
    )
    p.add_argument("--strict", action="store_true", help="bad prediction records are errors, not warnings")
    p.add_argument("--no-faithfulness", action="store_true", help="skip the CoT faithfulness check")


def _print_warnings(warnings: list[str], limit: int = 10) -> None:
    if not warnings:
        return
    print(f"warnings: {len(warnings)}", file=sys.stderr)
    for w in warnings[:limit]:
        print(f"  {w}", file=sys.stderr)
    if len(warnings) > limit:
        print(f"  ... {len(warnings) - limit} more", file=sys.stderr)


def cmd_score(args: argparse.Namespace) -> int:
    from lakeshift.io import check_output, jsonl_has_fields, write_jsonl
    from lakeshift.report import fmt_summary
    from lakeshift.scoring import load_scoring_maps, score_predictions, summarize
    from lakeshift.scoring.shards import read_prediction_set

    paths = predictions_paths(args.predictions)
    if args.out:
        # Scored records start with id and verdict: anything else at --out is not ours to replace.
        check_output(
            args.out,
            inputs=(args.maps, *paths),
            previous=jsonl_has_fields("id", "verdict"),
            what="score output (scored records)",
        )
    maps = load_scoring_maps(args.maps)
    preds = read_prediction_set(paths, maps, strict=args.strict, maps_path=args.maps)
    records = list(score_predictions(maps, preds, compat=args.compat, check_trace=not args.no_faithfulness))
    if args.out:
        write_jsonl(args.out, (r.to_json() for r in records))
    summary = summarize(records)
    print(
        f"{paths[0] if len(paths) == 1 else f'{len(paths)} files ({paths[0]}, ...)'}: "
        f"{len(preds.predictions)} predictions for {len(maps)} maps"
        + (f" (compat {args.compat})" if args.compat else "")
    )
    decodings = sorted({r.decoding for r in records if r.decoding})
    if decodings:
        print(f"decoding: {', '.join(decodings)}")
    print(fmt_summary(summary))
    traced = [r.trace for r in records if r.trace is not None and r.trace.faithful is not None]
    if traced:
        faithful = sum(bool(t.faithful) for t in traced)
        print(f"CoT faithfulness: {faithful}/{len(traced)} traces match the true states and the answer")
    problems = []
    if preds.malformed:
        problems.append(f"{preds.malformed} malformed lines")
    if preds.unknown_ids:
        problems.append(f"{preds.unknown_ids} ids not in the maps file (ignored)")
    if preds.duplicates:
        problems.append(f"{preds.duplicates} duplicate ids")
    if summary["verdicts"].get("missing"):
        problems.append(f"{summary['verdicts']['missing']} maps without a prediction (scored missing)")
    if problems:
        print("problems: " + "; ".join(problems))
    _print_warnings(preds.warnings)
    return 0


def predictions_paths(given: list[Path]) -> list[Path]:
    """The predictions files named by ``--predictions``: files as given, a folder's predictions files
    (``*.jsonl`` whose first record has ``id`` and ``output``, sorted), a glob's matches (sorted).

    Raises:
        LakeshiftError: a folder without predictions files, or a glob that matches nothing.
    """
    import glob

    out: list[Path] = []
    for p in given:
        if p.is_dir():
            found = [f for f in sorted(p.glob("*.jsonl")) if _is_predictions(f)]
            if not found:
                raise LakeshiftError(
                    f"--predictions {p}: no predictions files (*.jsonl with 'id' and 'output') in it"
                )
        elif not p.exists() and glob.has_magic(str(p)):
            found = [Path(f) for f in sorted(glob.glob(str(p)))]
            if not found:
                raise LakeshiftError(f"--predictions {p}: the pattern matches no file")
        else:
            found = [p]
        out += [f for f in found if f not in out]
    return out


def _is_predictions(path: Path) -> bool:
    first = _first_record(path)
    return first is not None and "id" in first and "output" in first


def _first_record(path: Path) -> dict[str, Any] | None:
    from lakeshift.io import first_record

    return first_record(path)


def find_runs(runs_dir: Path, data: Path | None, allow_empty: bool = False) -> list[Any]:
    """Predictions files under ``runs_dir`` with their maps files (see the module docstring).

    Raises:
        LakeshiftError: ``runs_dir`` is missing, holds no predictions file, or a file's maps cannot be found.
    """
    from lakeshift.report import RunInput
    from lakeshift.report.analysis import COT_ORDER, INPUT_ORDER
    from lakeshift.scoring.shards import shard_of, unsharded_stem

    if not runs_dir.is_dir():
        raise LakeshiftError(f"{runs_dir}: no such folder")
    runs = []
    sharded: dict[tuple[Path, str], Any] = {}  # the shard files of one set are one run
    for path in sorted(runs_dir.rglob("*.jsonl")):
        first = _first_record(path)
        if first is None or "id" not in first or "output" not in first:
            continue
        stem = path.stem
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
            split = str(first.get("split") or path.stem)
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
        if stem != path.stem:
            sharded[path.parent, stem] = runs[-1]
    if not runs and not allow_empty:
        raise LakeshiftError(f"{runs_dir}: no predictions files (*.jsonl with 'id' and 'output') found")
    return runs


def cmd_report(args: argparse.Namespace) -> int:
    from lakeshift.io import check_output
    from lakeshift.report import build_report, references, terminal_summary

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
        baselines=() if args.no_baselines else ("oracle", "greedy", "random"),
        check_trace=not args.no_faithfulness,
        n_examples=args.examples,
        images=not args.no_images,
        reference=reference,
    )
    print(f"scored {result.n_records} records from {len(runs)} predictions files ({len(result.runs)} runs)")
    print(terminal_summary(args.out, shutil.get_terminal_size().columns))
    print(f"wrote {len(result.files)} files to {args.out} (open {args.out / 'report.html'})")
    _print_warnings(result.warnings)
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    from lakeshift.io import write_jsonl
    from lakeshift.report import fmt_summary
    from lakeshift.scoring import Prediction, PredictionsFile, load_scoring_maps, score_predictions, summarize
    from lakeshift.scoring.baselines import baseline_predictions

    if args.cot is not None:
        from lakeshift.traces import COT_FORMATS

        if args.cot not in COT_FORMATS:
            raise LakeshiftError(
                f"--cot {args.cot!r}: unknown CoT format (expected one of {', '.join(COT_FORMATS)})"
            )
    if args.cot and args.policy != "oracle":
        raise LakeshiftError("--cot is only meaningful with --policy oracle")
    if args.out:
        from lakeshift.io import check_output, jsonl_has_fields

        check_output(
            args.out,
            inputs=(args.maps,),
            previous=jsonl_has_fields("id", "output"),
            what="predictions file",
        )
    maps = load_scoring_maps(args.maps)
    rows = baseline_predictions(maps.values(), args.policy, seed=args.seed, cot=args.cot)
    if args.out:
        write_jsonl(args.out, rows)
        print(f"wrote {len(rows)} predictions to {args.out}")
    preds = {
        r["id"]: Prediction(
            r["id"], r["output"], {k: v for k, v in r.items() if k not in ("id", "output")}, i
        )
        for i, r in enumerate(rows, start=1)
    }
    records = list(score_predictions(maps, PredictionsFile(args.maps, preds, [])))
    print(f"policy {args.policy} on {args.maps}:")
    print(fmt_summary(summarize(records)))
    return 0
