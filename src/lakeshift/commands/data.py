"""``lakeshift generate``, ``lakeshift stats``, ``lakeshift show`` and ``lakeshift export``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from lakeshift.data.options import CUSTOM_SPLIT, GenerateOptions
from lakeshift.errors import LakeshiftError
from lakeshift.options import add_arguments, options_of

SHOW_FORMATS = ("desc", "table", "grid", "image")

_GENERATE_EPILOG = """\
Suites: 'paper' writes id-train (100/200/300/400 maps of sizes 3-6), id-test (100 per size 3-6, disjoint
from id-train), ood-size (200 per size 7-10), ood-dist (200 per size 7-10 with d_inf >= 6), embed10-train
(every id-train map inside a random 10x10 map) and embed10-test (200 10x10 maps per d_inf 2..9);
'tiny' is the same structure with a handful of maps; a .json/.yaml file defines your own splits
({"splits": [{"name": ..., "groups": [{"size": 5, "count": 100, "hole_prob": 0.2, "d_inf_min": 1,
"d_inf_max": null, "length_min": 1, "length_max": null}], "train": true, "exclude": [...],
"embed_source": null, "tie_break": "direct"}]}).

Without --suite, one split named --split is generated from --sizes/--count/--hole-prob/--d-inf/--length,
e.g. 50,000 training maps: lakeshift generate --out data/big --split big-train --train --sizes 3 4 5 6
--count 12500.

Output per split: maps.jsonl, images/<id>.png, sft/<input>__<cot>.jsonl for every input format x CoT
format, split.json (written last). Running again with the same options is a no-op; other options into the
same --out are refused unless --force. An interrupted run leaves nothing that looks finished: rerun it.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``generate``, ``stats``, ``show`` and ``export``."""
    p = subparsers.add_parser(
        "generate",
        help="generate (or import) benchmark splits: maps, images and SFT files",
        description="Generate the paper's suite, a suite file, or one custom split, reproducibly from a "
        "seed.",
        epilog=_GENERATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p, GenerateOptions, [n for n in options_of(GenerateOptions) if n not in CUSTOM_SPLIT])
    add_arguments(
        p.add_argument_group("one custom split (instead of --suite)"), GenerateOptions, CUSTOM_SPLIT
    )
    p.set_defaults(handler=cmd_generate)

    p = subparsers.add_parser(
        "stats",
        help="per split and size: count, mean d_inf, mean/max optimal length, hole fraction",
        description="Statistics of a suite folder (every split in it) or of one split folder, as in the "
        "paper's Tables 2 and 7. Hole fraction = holes / (n*n).",
    )
    p.add_argument("dir", type=Path, metavar="DIR", help="suite folder or split folder")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.set_defaults(handler=cmd_stats)

    p = subparsers.add_parser(
        "show",
        help="print one map in a format, or its reference CoT completion or prompt",
        description="Print exactly the requested text on stdout and nothing else. Without --cot/--prompt: "
        "the "
        "map in --format (desc: VSP's pure_text file, no trailing newline; table and grid: one trailing "
        "newline, as VSP's table files). --cot C: the reference assistant completion (CoT and \\boxed{} "
        "answer) of the SFT record for input --format and CoT C, as stored in sft/<format>__<C>.jsonl (no "
        "trailing newline added). --prompt: the user message of that record. --format image without "
        "--cot/--prompt prints the path of the map's PNG (rendered to --out if given or if the split has no "
        "images).",
    )
    p.add_argument("split_dir", type=Path, metavar="SPLIT_DIR", help="a split folder (with maps.jsonl)")
    p.add_argument("--id", required=True, help="map id (see maps.jsonl)")
    p.add_argument("--format", required=True, help="desc, table, grid or image")
    p.add_argument(
        "--cot",
        help="print the completion for this CoT: none, desc, table, grid, table+desc, grid+desc, astar, "
        "coords or wave",
    )
    p.add_argument("--prompt", action="store_true", help="print the user prompt (rule text with the map)")
    p.add_argument("--style", help="table style: 'compact' (VSP, default) or 'aligned' (the paper's figure)")
    p.add_argument("--variant", help="prompt variant 'train' or 'test' (default: the split's)")
    p.add_argument("--out", type=Path, help="--format image: write the PNG here")
    p.set_defaults(handler=cmd_show)

    p = subparsers.add_parser(
        "export",
        help="export a suite as a Hugging Face Hub dataset folder, or a split as parquet or arrow",
        description="A suite folder (or --format hub) becomes a dataset folder for the Hub: data/*.parquet "
        "and a dataset card (README.md), which datasets.load_dataset(FOLDER) loads as a DatasetDict, one "
        "split per suite split (id-test -> id_test), one row per map with its image, the question in each "
        "input format and the reference answer. A split folder exports its maps (default) or one of its SFT "
        "files as a datasets.Dataset: --format parquet writes one .parquet file, --format arrow a "
        "save_to_disk folder. Image SFT records get an 'images' column of datasets.Image() (the PNGs are "
        "embedded).",
    )
    p.add_argument("split_dir", type=Path, metavar="DIR", help="suite folder or split folder")
    p.add_argument(
        "--format",
        help="'hub' (default for a suite folder: a dataset folder with its card), 'parquet' (default for a "
        "split folder) or 'arrow'",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (hub, arrow) or file (parquet)")
    p.add_argument(
        "--sft",
        metavar="INPUT__COT",
        help="export sft/INPUT__COT.jsonl instead of maps.jsonl, e.g. grid__grid+desc",
    )
    p.add_argument(
        "--splits", metavar="A,B", help="--format hub: export only these splits (comma-separated names)"
    )
    p.set_defaults(handler=cmd_export)


# ----- generate ---------------------------------------------------------------------------------------------
def _parse_range(text: str, what: str) -> tuple[int | None, int | None]:
    text = text.strip()
    if not text:
        return None, None
    try:
        if ":" in text:
            lo, hi = text.split(":", 1)
            return (int(lo) if lo.strip() else None), (int(hi) if hi.strip() else None)
        return int(text), int(text)
    except ValueError:
        raise LakeshiftError(f"{what}: expected MIN:MAX, MIN:, :MAX or one integer, got {text!r}") from None


def cmd_generate(args: argparse.Namespace) -> int:
    from lakeshift.data import build_suite, load_suite
    from lakeshift.data.generate import Group, SplitSpec
    from lakeshift.env import TIE_BREAKS

    inputs, cots = list(args.inputs), list(args.cots)
    augment = None
    if args.augment is not None:
        from lakeshift.data.augment import parse_augment

        augment = str(parse_augment(args.augment))
    workers = args.workers or os.cpu_count() or 1
    custom = args.sizes is not None or args.count is not None
    if args.suite and custom:
        raise LakeshiftError("give either --suite or a custom split (--sizes/--count), not both")
    if args.suite:
        specs = load_suite(args.suite)
        name = args.suite if "/" not in args.suite and "." not in args.suite else Path(args.suite).stem
    elif custom:
        if not args.sizes or args.count is None:
            raise LakeshiftError("a custom split needs --sizes and --count")
        twice = sorted({n for n in args.sizes if args.sizes.count(n) > 1})
        if twice:
            raise LakeshiftError(
                f"--sizes {' '.join(map(str, args.sizes))}: size {twice[0]} is given twice (each size is "
                "one group of --count maps)"
            )
        if args.id_source:
            raise LakeshiftError("--id-source applies to suites with id-train/id-test (e.g. --suite paper)")
        if args.tie_break not in TIE_BREAKS:
            raise LakeshiftError(
                f"unknown tie-break {args.tie_break!r} (expected one of {', '.join(TIE_BREAKS)})"
            )
        dmin, dmax = _parse_range(args.d_inf, "--d-inf")
        lmin, lmax = _parse_range(args.length, "--length")
        groups = tuple(
            Group(
                n,
                args.count,
                args.hole_prob,
                d_inf_min=dmin or 1,
                d_inf_max=dmax,
                length_min=lmin or 1,
                length_max=lmax,
            )
            for n in args.sizes
        )
        specs = [SplitSpec(args.split, groups, train=args.train, tie_break=args.tie_break)]
        name = "custom"
    else:
        raise LakeshiftError(
            "give --suite (paper, tiny or a suite file) or a custom split (--sizes and --count)"
        )
    if augment is not None:
        specs = _with_augment(specs, augment, custom)
    from lakeshift.data import bounds
    from lakeshift.data.catalog import check_suite

    check_suite(specs)  # the estimate below does arithmetic on every group: they must be valid first

    # Before any work: a run the machine cannot hold (memory, disk) or that would take absurdly long is one
    # clear line, not a hang (a 1000x1000 map's grid CoT alone is gigabytes).
    estimate = bounds.estimate(bounds.suite_sizes(specs), inputs, cots, images=args.images, workers=workers)
    try:
        bounds.check(estimate, args.out, max_memory_gb=args.max_memory_gb, max_hours=args.max_hours)
    except LakeshiftError as err:
        if args.suite and Path(args.suite).is_file():  # the request is in that file: name it
            raise LakeshiftError(f"{args.suite}: {err}") from None
        raise
    import time

    from lakeshift.io import output_lock

    if args.out.exists() and not args.out.is_dir():
        raise LakeshiftError(f"--out {args.out} is a file; expected a folder")
    t0 = time.perf_counter()
    with output_lock(args.out, "lakeshift generate"):  # one writer per suite folder
        result = build_suite(
            specs,
            args.out,
            seed=args.seed,
            suite_name=name,
            workers=workers,
            force=args.force,
            images=args.images,
            id_source=args.id_source,
            input_formats=inputs,
            cot_formats=cots,
            progress=args.progress,
        )
    if result.up_to_date:
        return 0
    elapsed = time.perf_counter() - t0
    # An augmented split counts records and maps apart ("maps"); the rate is of generated maps.
    n_maps = sum(
        int(result.reports[s].get("maps", result.reports[s].get("count", 0))) for s in result.written
    )
    for split in result.written:
        rep = result.reports[split]
        dup = rep.get("identical_to_train", 0)
        redrawn = rep.get("generation", {}).get("redrawn_duplicate_of_train", 0)
        extra = f", {redrawn} redrawn as duplicates of training maps" if redrawn else ""
        extra += f", {dup} identical to a training map" if dup else ""
        what = f"{rep.get('count')} maps"
        if "maps" in rep:  # an augmented split: records vs generated maps
            what = f"{rep['count']} records ({rep['maps']} maps)"
        print(f"{args.out / split}: {what}{extra}", file=sys.stderr)
    rate = n_maps / elapsed if elapsed > 0 else float("inf")
    print(
        f"wrote {len(result.written)} split(s), {n_maps} maps in {elapsed:.1f} s ({rate:.0f} maps/s)",
        file=sys.stderr,
    )
    return 0


def _with_augment(specs: list, augment: str, custom: bool) -> list:
    """``--augment`` applied to the training splits (refused for a custom split that is not one)."""
    from dataclasses import replace

    if custom and not specs[0].train:
        raise LakeshiftError(
            "--augment applies to training splits only (add --train); test splits are never augmented"
        )
    if not any(s.train for s in specs):
        raise LakeshiftError("--augment: the suite has no training split (test splits are never augmented)")
    return [replace(s, augment=augment) if s.train else s for s in specs]


# ----- stats ------------------------------------------------------------------------------------------------
def cmd_stats(args: argparse.Namespace) -> int:
    from lakeshift.data.maps import load_maps
    from lakeshift.data.stats import find_splits, format_table, split_stats

    rows: list[dict[str, Any]] = []
    for d in find_splits(args.dir):
        rows.extend(split_stats(d.name, load_maps(d)))
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(format_table(rows))
    return 0


# ----- show -------------------------------------------------------------------------------------------------
def _find_map(split_dir: Path, map_id: str) -> dict[str, Any]:
    from lakeshift.data.maps import load_maps

    if not split_dir.is_dir():
        raise LakeshiftError(f"{split_dir}: no such split folder")
    for rec in load_maps(split_dir):
        if str(rec["id"]) == map_id:
            return rec
    raise LakeshiftError(f"{split_dir}: no map with id {map_id!r}")


def _split_variant(split_dir: Path) -> str:
    try:
        meta = json.loads((split_dir / "split.json").read_text(encoding="utf-8"))
        return str(meta.get("prompt_variant", "test"))
    except (OSError, ValueError):
        return "test"


def cmd_show(args: argparse.Namespace) -> int:
    from lakeshift import formats, traces
    from lakeshift.data import records
    from lakeshift.data.maps import map_from_record

    if args.format not in SHOW_FORMATS:
        raise LakeshiftError(f"unknown format {args.format!r} (expected one of {', '.join(SHOW_FORMATS)})")
    if args.cot is not None and args.cot not in traces.COT_FORMATS:
        raise LakeshiftError(
            f"unknown CoT format {args.cot!r} (expected one of {', '.join(traces.COT_FORMATS)})"
        )
    if args.style is not None and args.style not in formats.TABLE_STYLES:
        raise LakeshiftError(
            f"unknown table style {args.style!r} (expected one of {', '.join(formats.TABLE_STYLES)})"
        )
    if args.variant is not None and args.variant not in ("train", "test"):
        raise LakeshiftError(f"unknown prompt variant {args.variant!r} (expected train or test)")
    if args.cot is not None and args.prompt:
        raise LakeshiftError("give --cot or --prompt, not both")
    rec = _find_map(args.split_dir, args.id)
    m = map_from_record(rec)
    if args.cot is not None or args.prompt:
        variant = args.variant or _split_variant(args.split_dir)
        sft = records.sft_record(rec, args.format, args.cot or "none", variant, table_style=args.style)
        message = sft["messages"][2 if args.cot is not None else 1]
        content = message["content"]
        if not isinstance(content, str):  # image records: text blocks around the image placeholder
            content = "<image>".join(b.get("text", "") for b in content if b.get("type") == "text")
        sys.stdout.write(content)
        return 0
    if args.format == "image":
        png = args.split_dir / "images" / f"{rec['id']}.png"
        if args.out is not None or not png.is_file():
            if args.out is None:
                raise LakeshiftError(
                    f"{png} does not exist (generated with --no-images?); give --out FILE.png"
                )
            from lakeshift.formats.image import PNG_COMPRESS_LEVEL, render_image
            from lakeshift.io import atomic_write, check_output

            check_output(
                args.out,
                inputs=(args.split_dir, args.split_dir / "maps.jsonl"),
                previous=lambda p: p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n",
                what="PNG",
            )
            with atomic_write(args.out, "wb") as f:
                render_image(m).save(f, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
            png = args.out
        sys.stdout.write(f"{png}\n")
        return 0
    if args.style not in (None, "compact") and args.format != "table":
        raise LakeshiftError("--style applies to --format table only")
    text = (
        formats.file_text(m, args.format)
        if args.style in (None, "compact")
        else formats.render(m, "table", style=args.style) + "\n"
    )
    sys.stdout.write(text)
    return 0


# ----- export -----------------------------------------------------------------------------------------------
def _check_png(path: Path, where: str) -> None:
    """A PNG an export embeds must exist and decode: a missing or torn image is an error, not a hole."""
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise LakeshiftError(f"{where}: field 'images': {path} not found")
    try:
        with Image.open(path) as im:
            im.load()  # decodes every pixel: a truncated file fails here, not later in the dataset
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as err:
        raise LakeshiftError(f"{where}: field 'images': {path} is not a readable PNG ({err})") from None


def _is_hub_export(path: Path) -> bool:
    """A folder that ``export --format hub`` wrote: a card whose front matter carries lakeshift's tag."""
    from lakeshift.data.export import TAG

    try:
        head = (path / "README.md").read_text(encoding="utf-8")[:20000]
    except (OSError, UnicodeDecodeError):
        return False
    return head.startswith("---\n") and f"\n- {TAG}\n" in head.split("\n---\n", 1)[0]


def _hub_feature(kind: str) -> Any:
    """The ``datasets`` feature of a column kind of :data:`lakeshift.data.export.COLUMNS`."""
    import datasets

    if kind.startswith("list:"):
        return datasets.List(_hub_feature(kind.removeprefix("list:")))
    if kind == "image":
        return datasets.Image()
    if kind == "augmentation":
        return {"transform": datasets.Value("string"), "path": datasets.Value("int64")}
    return datasets.Value(kind)


def _write_hub(split_dirs: list[Path], out: Path, suite: str | None) -> list[Any]:
    """Writes a Hub dataset folder (:mod:`lakeshift.data.export`) into ``out``: each split's parquet shards,
    then the card. Returns each split's :class:`~lakeshift.data.export.SplitInfo`."""
    from lakeshift.data import export

    try:
        import datasets
    except ImportError:
        raise LakeshiftError("export needs the 'datasets' package (pip install 'lakeshift[train]')") from None
    plans, optional = export.plan(split_dirs)
    features = datasets.Features({k: _hub_feature(v) for k, v in export.columns(optional).items()})
    (out / "data").mkdir(parents=True)
    bars = datasets.is_progress_bar_enabled()
    # A bar per shard written says nothing: the command prints one line a split instead.
    datasets.disable_progress_bars()
    infos = []
    try:
        for split in plans:
            parts, num_bytes = [], 0
            for i, rows in enumerate(export.shards(split.rows(optional))):
                part = out / "data" / f".{split.hub_name}-{i:05d}.parquet"
                shard = datasets.Dataset.from_list(rows, features=features)
                shard.to_parquet(str(part))
                parts.append(part)
                num_bytes += int(shard.data.nbytes)
            # The Hub's names once the count is known.
            final = [
                p.with_name(export.shard_name(split.hub_name, i, len(parts))) for i, p in enumerate(parts)
            ]
            for part, name in zip(parts, final, strict=True):
                part.rename(name)
            infos.append(split.info(num_bytes, final))
    finally:
        if bars:
            datasets.enable_progress_bars()
    # datasets' own spelling of its features in a card (what push_to_hub writes).
    card = export.dataset_card(infos, features._to_yaml_list(), suite=suite)
    (out / "README.md").write_text(card, encoding="utf-8")
    if any(info.official for info in infos):  # the card's license_link
        licence = "\n\n".join(export.licence_paragraphs(infos))
        (out / "LICENSE.md").write_text(f"# Licence\n\n{licence}\n", encoding="utf-8")
    return infos


def _export_hub(args: argparse.Namespace) -> int:
    import shutil

    from lakeshift.data.export import iter_split_dirs
    from lakeshift.io import check_output, writing

    if args.sft:
        raise LakeshiftError(
            "--sft exports one SFT file of a split folder (--format parquet or arrow); a Hub dataset "
            "holds the maps with the question in every input format"
        )
    names = [s.strip() for s in args.splits.split(",") if s.strip()] if args.splits else None
    dirs = list(iter_split_dirs(args.split_dir, names))
    out: Path = args.out
    check_output(
        out,
        inputs=(args.split_dir, *dirs),
        kind="dir",
        previous=_is_hub_export,
        what="dataset folder (export --format hub)",
    )
    suite = None
    if not (args.split_dir / "maps.jsonl").is_file():
        try:
            suite = json.loads((args.split_dir / "suite.json").read_text(encoding="utf-8")).get("suite")
        except (OSError, ValueError, AttributeError):
            suite = None
    # Written next to --out under a temporary name and renamed into place when complete (as below).
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    with writing(out, temporary=tmp):
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            infos = _write_hub(dirs, tmp, suite if isinstance(suite, str) else None)
            if out.is_dir():
                shutil.rmtree(out)
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for info in infos:
        print(f"{out}: split {info.hub_name}: {info.num_examples} rows", file=sys.stderr)
    rows = sum(info.num_examples for info in infos)
    print(
        f"{out}: {len(infos)} split{'s' if len(infos) != 1 else ''}, {rows} rows; "
        f"load with datasets.load_dataset({str(out)!r})",
        file=sys.stderr,
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import shutil

    from lakeshift.data.maps import load_maps
    from lakeshift.io import check_output, is_parquet, read_jsonl, refuse_inside_locked, writing

    refuse_inside_locked(args.out, "lakeshift export")  # a study's workdir while its run writes it
    split_dir: Path = args.split_dir
    is_split = (split_dir / "maps.jsonl").is_file()
    if args.format is None:
        args.format = "parquet" if is_split else "hub"
    if args.format not in ("hub", "parquet", "arrow"):
        raise LakeshiftError(f"unknown export format {args.format!r} (expected hub, parquet or arrow)")
    if args.format == "hub":
        return _export_hub(args)
    if args.splits:
        raise LakeshiftError("--splits applies to --format hub (a split folder is one split)")
    if not is_split:
        raise LakeshiftError(
            f"{split_dir}: not a split folder (no maps.jsonl); a suite folder exports with --format hub"
        )
    sft_file = split_dir / "sft" / f"{args.sft}.jsonl" if args.sft else None
    check_output(
        args.out,
        inputs=(split_dir, split_dir / "maps.jsonl", sft_file, split_dir / "sft"),
        kind="file" if args.format == "parquet" else "dir",
        previous=is_parquet if args.format == "parquet" else (lambda d: (d / "state.json").is_file()),
        what="parquet export" if args.format == "parquet" else "arrow export (save_to_disk folder)",
    )
    maps = load_maps(split_dir)  # validated as `score` validates them, whatever is exported
    if sft_file is not None:
        if not sft_file.is_file():
            have = sorted(p.stem for p in (split_dir / "sft").glob("*.jsonl"))
            raise LakeshiftError(
                f"unknown SFT file {args.sft!r} in {split_dir} (have: {', '.join(have) or 'none'})"
            )
        rows = []
        by_id = {str(rec["id"]): rec for rec in maps}
        for lineno, obj in read_jsonl(sft_file, required=("id", "messages")):
            if not isinstance(obj["messages"], list) or not all(isinstance(m, dict) for m in obj["messages"]):
                raise LakeshiftError(f"{sft_file}, line {lineno}: field 'messages' must be a list of objects")
            if not isinstance(obj["id"], (str, int)) or isinstance(obj["id"], bool):
                raise LakeshiftError(
                    f"{sft_file}, line {lineno}: field 'id' must be a string, got {obj['id']!r}"
                )
            if "images" in obj:
                images = obj["images"]
                if not isinstance(images, list) or not all(isinstance(p, str) for p in images):
                    raise LakeshiftError(f"{sft_file}, line {lineno}: field 'images' must be a list of paths")
                for p in images:
                    _check_png(split_dir / p, f"{sft_file}, line {lineno}")
            facts = by_id.get(str(obj["id"]))
            if facts is None:
                raise LakeshiftError(
                    f"{sft_file}, line {lineno}: field 'id': {obj['id']!r} is not in maps.jsonl"
                )
            # The map's facts, so an SFT export can be cut by size or distance as the paper's tables are.
            rows.append(obj | {key: facts[key] for key in ("size", "d_inf", "optimal_length")})
    else:
        rows = maps
    try:
        import datasets
    except ImportError:
        raise LakeshiftError("export needs the 'datasets' package (pip install 'lakeshift[train]')") from None
    if rows and "images" in rows[0]:
        for r in rows:
            r["images"] = [str((split_dir / p).resolve()) for p in r["images"]]
    try:
        ds = datasets.Dataset.from_list(rows)
    except (TypeError, ValueError) as err:  # pyarrow cannot type a column (mixed types across records)
        what = f"{sft_file}" if sft_file is not None else f"{split_dir / 'maps.jsonl'}"
        raise LakeshiftError(f"{what}: records do not form a table ({str(err).splitlines()[0]})") from None
    if rows and "images" in rows[0]:
        ds = ds.cast_column("images", datasets.List(datasets.Image()))
    # Written next to --out under a temporary name and renamed into place when complete: a full disk or a
    # kill leaves no half-written export that looks finished.
    out: Path = args.out
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    with writing(out, temporary=tmp):
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            if args.format == "parquet":
                ds.to_parquet(str(tmp))
            else:
                ds.save_to_disk(str(tmp))
            if out.is_dir():
                shutil.rmtree(out)
            os.replace(tmp, out)
        finally:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
    print(f"{args.out}: {len(ds)} rows ({args.format})", file=sys.stderr)
    return 0
