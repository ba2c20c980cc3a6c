"""``lakeshift score`` and ``lakeshift baseline``, and the scoring options every scoring command shares."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lakeshift.config import number_type
from lakeshift.errors import LakeshiftError
from lakeshift.io import jsonl_files, printable
from lakeshift.scoring import COMPAT_MODES


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``score`` and ``baseline``."""
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
    add_scoring_options(p)
    p.set_defaults(handler=cmd_score)

    p = subparsers.add_parser(
        "baseline",
        help="predictions of a reference policy (oracle, greedy, random)",
        description="Writes a policy's predictions in the predictions format and prints their score.",
    )
    p.add_argument("--maps", required=True, type=Path)
    p.add_argument("--policy", required=True, choices=("oracle", "greedy", "random"))
    p.add_argument("--out", type=Path, help="predictions JSONL to write")
    p.add_argument(
        "--seed",
        type=number_type("seed"),
        default=0,
        help="seed of the random policy (0 .. 2**32 - 1, default 0)",
    )
    p.add_argument("--cot", help="oracle only: write the reference completion of this CoT format")
    p.set_defaults(handler=cmd_baseline)


def add_scoring_options(p: argparse.ArgumentParser) -> None:
    """``--compat``, ``--strict`` and ``--no-faithfulness``: how outputs are scored."""
    p.add_argument(
        "--compat",
        choices=[mode for mode in COMPAT_MODES if mode],
        help="frozen_ood: the paper's evaluator exactly; vsp: VSP's 'Action plan:' evaluator",
    )
    p.add_argument("--strict", action="store_true", help="bad prediction records are errors, not warnings")
    p.add_argument("--no-faithfulness", action="store_true", help="skip the CoT faithfulness check")


def print_warnings(warnings: list[str], limit: int = 10) -> None:
    if not warnings:
        return
    print(f"warnings: {len(warnings)}", file=sys.stderr)
    for w in warnings[:limit]:
        print(f"  {printable(w)}", file=sys.stderr)
    if len(warnings) > limit:
        print(f"  ... {len(warnings) - limit} more", file=sys.stderr)


def cmd_score(args: argparse.Namespace) -> int:
    from lakeshift.io import check_output, jsonl_has_fields, write_jsonl
    from lakeshift.report import fmt_summary
    from lakeshift.scoring import load_scoring_maps, score_predictions, summarize
    from lakeshift.scoring.shards import read_prediction_set

    paths = predictions_paths(args.predictions)
    if args.out:
        from lakeshift.io import refuse_inside_locked

        refuse_inside_locked(args.out, "lakeshift score")  # a study's workdir while its run writes it
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
    # Paths, decodings and ids come from files and their names: printed with their control characters
    # escaped, so a row cannot retitle or clear the terminal.
    print(
        f"{printable(paths[0]) if len(paths) == 1 else f'{len(paths)} files ({printable(paths[0])}, ...)'}: "
        f"{len(preds.predictions)} predictions for {len(maps)} maps"
        + (f" (compat {args.compat})" if args.compat else "")
    )
    decodings = sorted({r.decoding for r in records if r.decoding})
    if decodings:
        print(f"decoding: {printable(', '.join(decodings))}")
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
    print_warnings(preds.warnings)
    return 0


def predictions_paths(given: list[Path]) -> list[Path]:
    """The predictions files named by ``--predictions``: files as given, a folder's predictions files
    (``*.jsonl`` or ``*.jsonl.gz`` whose first record has ``id`` and ``output``, sorted, then its inspect
    ``.eval`` logs), a glob's matches (sorted).

    Raises:
        LakeshiftError: a folder without predictions files, or a glob that matches nothing.
    """
    import glob

    from lakeshift.scoring.harness_logs import harness_logs

    out: list[Path] = []
    for p in given:
        if p.is_dir():
            found = [f for f in jsonl_files(p) if is_predictions_file(f)] + harness_logs(p, recursive=False)
            if not found:
                raise LakeshiftError(
                    f"--predictions {p}: no predictions files (*.jsonl or *.jsonl.gz with 'id' and 'output') "
                    "in it"
                )
        elif not p.exists() and glob.has_magic(str(p)):
            found = [Path(f) for f in sorted(glob.glob(str(p)))]
            if not found:
                raise LakeshiftError(f"--predictions {p}: the pattern matches no file")
        else:
            found = [p]
        out += [f for f in found if f not in out]
    return out


def is_predictions_file(path: Path) -> bool:
    """Whether ``path`` is a predictions file (its first record has ``id`` and ``output``) or a harness log
    read as one (:mod:`lakeshift.scoring.harness_logs`)."""
    from lakeshift.io import first_record
    from lakeshift.scoring.harness_logs import is_harness_log

    first = first_record(path)
    return (first is not None and "id" in first and "output" in first) or is_harness_log(path, first)


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
        from lakeshift.io import check_output, jsonl_has_fields, refuse_inside_locked

        refuse_inside_locked(args.out, "lakeshift baseline")  # a study's workdir while its run writes it
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
