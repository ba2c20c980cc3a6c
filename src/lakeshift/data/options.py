"""The options of ``lakeshift generate``, declared once (:mod:`lakeshift.options`): its command line, the
keys of a study's ``data:`` section (``study=True``) and the command line of a study's data stage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lakeshift.formats import INPUT_FORMATS
from lakeshift.options import choice_list, option
from lakeshift.traces import COT_FORMATS, MAP_COTS, PATH_COTS

#: The CoT formats of a suite's SFT files unless asked for others: the paper's six (no search traces, no
#: wave).
DEFAULT_COTS: tuple[str, ...] = tuple(c for c in COT_FORMATS if c not in (*PATH_COTS, *MAP_COTS))


@dataclass
class GenerateOptions:
    """Everything ``lakeshift generate`` accepts: a suite, or one custom split (``CUSTOM_SPLIT``)."""

    out: Path = option(required=True, parse=Path, help="output folder (one subfolder per split)")
    suite: str | None = option(help="'paper', 'tiny', or a .json/.yaml suite file (see below)", study=True)
    seed: int = option(
        0,
        rule="seed",
        help="suite seed, 0 .. 2**32 - 1; map i of split s depends on (seed, s, i) only (default 0)",
        study=True,
    )
    id_source: Path | None = option(
        parse=Path,
        help="Mirage folder vsp_spatial_planning: import id-train/id-test from train_direct.jsonl / "
        "test_direct.jsonl instead of generating them (ids '<n>x<n>-<map_id>', official answers kept)",
        study=True,
    )
    workers: int | None = option(
        rule="workers",
        help="worker processes for generation, images and SFT files; the output is identical for any value "
        "(default: the number of CPUs)",
        study=True,
    )
    force: bool = option(
        False, kind="flag", help="overwrite splits in --out that were made with other options"
    )
    images: bool = option(
        True,
        kind="toggle",
        help="write PNGs and image__* SFT files (default; --no-images: text only)",
        study=True,
    )
    progress: bool = option(True, kind="toggle", help="show a progress bar (default)")
    max_memory_gb: float | None = option(
        rule="positive_float",
        help="refuse runs whose estimated peak memory exceeds this (default: the memory available now); "
        "the estimate (from sizes, counts and formats) is printed when a run is refused",
    )
    max_hours: float = option(
        24.0, rule="positive_float", help="refuse runs estimated to take longer than this (default 24)"
    )
    inputs: tuple[str, ...] = option(
        INPUT_FORMATS,
        help=f"comma-separated input formats of the SFT files (default: all: {','.join(INPUT_FORMATS)})",
        study=True,
        **choice_list(INPUT_FORMATS, "input format"),
    )
    cots: tuple[str, ...] = option(
        DEFAULT_COTS,
        help=f"comma-separated CoT formats of the SFT files: {', '.join(DEFAULT_COTS)} (the default), astar "
        "(A* search trace), coords (coordinate path), wave (breadth-first arrows from the goal)",
        study=True,
        **choice_list(COT_FORMATS, "CoT format"),
    )
    split: str = option("custom", help="split name (default 'custom'); ids are <split>-00042")
    sizes: list[int] | None = option(rule="map_size", nargs="+", metavar="N", help="map sizes, e.g. 7 8 9 10")
    count: int | None = option(rule="positive_int", help="maps per size (>= 1)")
    hole_prob: float = option(
        0.1, rule="hole_probability", help="probability that a cell is a hole (default 0.1)"
    )
    d_inf: str = option("", metavar="MIN:MAX", help="d_inf range: '6:' (>= 6), ':5', '2:4', '7' (exactly)")
    length: str = option("", metavar="MIN:MAX", help="optimal-length range, same syntax as --d-inf")
    tie_break: str = option(
        "direct",
        help="optimal path among equals: 'direct' (moves towards the goal first, then UP, LEFT, RIGHT, "
        "DOWN; matches 999/1000 official answers), 'priority' (UP, LEFT, RIGHT, DOWN) or 'uniform' (seeded)",
    )
    train: bool = option(False, kind="flag", help="a training split: SFT prompts use the 'train' variant")
    augment: str | None = option(
        metavar="SPEC",
        help="training splits only: solution augmentation, 'paths=K' (up to K optimal paths per map, "
        "each its own record), 'dihedral' (the 8 rotations and reflections of each map) or both, e.g. "
        "paths=4,dihedral; with --suite it applies to every training split of the suite",
    )


#: The options of one custom split, given instead of ``--suite``.
CUSTOM_SPLIT: tuple[str, ...] = (
    "split", "sizes", "count", "hole_prob", "d_inf", "length", "tie_break", "train", "augment",
)  # fmt: skip
