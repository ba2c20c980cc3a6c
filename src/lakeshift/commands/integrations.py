"""``lakeshift lmms-eval-tasks`` and ``lakeshift lmms-eval-model``: files for the lmms-eval entry point."""

from __future__ import annotations

import argparse
from pathlib import Path

from lakeshift.config import name_problem, number_type
from lakeshift.errors import LakeshiftError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``lmms-eval-tasks`` and ``lmms-eval-model``."""
    from lakeshift.integrations.lmms_eval import SPLITS

    p = subparsers.add_parser(
        "lmms-eval-tasks",
        help="write the FrozenLake task folder for `lmms-eval --include_path` (the package ships one)",
        description="Write one lmms-eval task per split x input format x prompt and a group per input "
        "format and prompt (its splits side by side), scored by lakeshift's scorer (see docs/harnesses.md). "
        "Without --data the maps are the paper "
        "suite's (the folder shipped in lakeshift.integrations.lmms_eval.TASKS_DIR).",
    )
    p.add_argument("--out", required=True, type=Path, help="task folder to write")
    p.add_argument(
        "--data",
        type=Path,
        help="a suite folder: its <split>/maps.jsonl are the documents (default: the paper suite, "
        "generated with --seed)",
    )
    p.add_argument(
        "--splits",
        default=",".join(SPLITS),
        help=f"comma-separated splits, one task each in every group (default {','.join(SPLITS)})",
    )
    p.add_argument(
        "--seed", type=number_type("seed"), default=0, help="suite seed without --data (default 0)"
    )
    p.set_defaults(handler=cmd_tasks)

    p = subparsers.add_parser(
        "lmms-eval-model",
        help="save the tiny random Qwen2.5-VL (tiny-vl) as a folder lmms-eval's qwen2_5_vl loads offline",
        description="Build tiny-vl (random weights, a tokenizer made from the prompts of every format) and "
        "save it as a Hugging Face folder for `lmms-eval --model qwen2_5_vl --model_args "
        "pretrained=DIR,device=cpu,device_map=cpu`: a smoke test of the task folder on CPU.",
    )
    p.add_argument("--out", required=True, type=Path, help="model folder to write")
    p.set_defaults(handler=cmd_model)


def cmd_tasks(args: argparse.Namespace) -> int:
    from lakeshift.integrations import lmms_eval
    from lakeshift.io import check_output

    check_output(
        args.out,
        inputs=[args.data],
        kind="dir",
        previous=lambda out: (out / lmms_eval.TEMPLATE_FILE).is_file(),
        what="task folder of lmms-eval-tasks",
    )
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    if not splits:
        raise LakeshiftError(f"--splits {args.splits!r}: no split named")
    bad = next(filter(None, (name_problem(s, "split") for s in splits)), None)
    if bad:  # each split names a file and a task under --out
        raise LakeshiftError(f"--splits: {bad}")
    if args.data is None:
        unknown = [s for s in splits if s not in lmms_eval.SPLITS]
        if unknown:
            raise LakeshiftError(
                f"--splits: {', '.join(unknown)} is not a test split of the paper suite "
                f"({', '.join(lmms_eval.SPLITS)}); give --data for other splits"
            )
        maps = lmms_eval.paper_maps(splits, args.seed)
    else:
        maps = lmms_eval.split_maps(args.data, splits)
    written = lmms_eval.write_tasks(args.out, maps)
    tasks = sum(1 for path in written if path.suffix == ".yaml")
    print(f"wrote {tasks} task and group files to {args.out} (lmms-eval --include_path {args.out})")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from lakeshift.integrations import lmms_eval
    from lakeshift.io import check_output

    check_output(
        args.out,
        kind="dir",
        previous=lambda out: (out / "config.json").is_file(),
        what="model folder",
    )
    lmms_eval.save_tiny_vl(args.out)
    print(f"wrote tiny-vl to {args.out} (lmms-eval --model qwen2_5_vl --model_args pretrained={args.out})")
    return 0
