"""Benchmark suites on disk: the paper's splits (or your own), every input x CoT format, cached by config.

Layout of ``OUT/`` (field names are fixed; other tools read them)::

    OUT/suite.json                    suite config, hash and split list (written last)
    OUT/<split>/maps.jsonl            one map per line: id, split, size, rows, start, goal, holes, d_inf,
                                      optimal_length, optimal_path, n_optimal_paths (+ source_id, offset
                                      for embedded maps; + official_id for maps imported with --id-source;
                                      + augmentation, augmented_from in augmented training splits, one
                                      line per record: see lakeshift.data.augment)
    OUT/<split>/images/<id>.png       gymnasium's frame of the map (unless images are turned off)
    OUT/<split>/sft/<input>__<cot>.jsonl   trl conversational records, one per map (image inputs only
                                      when images are written); train splits use the "train" prompt
                                      variant, the others the "test" variant
    OUT/<split>/split.json            config, hash, counts and generation report (written last)

The ``paper`` suite (the paper's section 4.1 and appendix A): ``id-train`` (100/200/300/400 maps of sizes 3-6,
holes with probability 0.2 as gymnasium's ``generate_random_map(p=0.8)``, start and goal uniform), ``id-test``
(100 per size, disjoint from id-train), ``ood-size`` (200 per size 7-10, hole probability 0.1), ``ood-dist``
(as ood-size with ``d_inf >= 6``), ``embed10-train`` (each id-train map embedded in a random 10x10 map),
``embed10-test`` (200 maps of 10x10 for each ``d_inf`` in 2..9). See :mod:`lakeshift.data.generate` for the
distributions.

Caching: each split has a hash of everything that determines its files (its spec, the seed, the generator
and rules versions, the formats written, the hashes of the splits it depends on, the imported files).
Regenerating with the same config is a no-op; a different config in the same folder is refused unless
``force``. A split is written in a hidden temporary folder and renamed into place when complete, with
``split.json`` written last, so an interrupted run leaves nothing that looks finished; rerunning resumes
with the splits that are not done.

``--id-source`` (the Mirage folder ``vsp_spatial_planning``): ``id-train`` and ``id-test`` are read from
``train_direct.jsonl`` and ``test_direct.jsonl`` instead of generated, in file order. Mirage's ``map_id``
is unique only per size (train ids repeat across sizes, test ids are ``0..99`` per size), so our ids are
``"<n>x<n>-<map_id>"`` (``"5x5-1454"``, ``"3x3-31"``) and the original is kept in ``official_id``; should a
``(size, map_id)`` pair repeat, later copies get ``"-2"``, ``"-3"``... appended (none do in the published
files). The official training answer is kept as ``optimal_path`` when it is a successful plan of BFS-optimal
length (all 1000 are); otherwise the solver's path is used and the split report counts it. Imported maps are
never redrawn: the report counts test maps identical to a training map (the published id-test has 8).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeshift import traces
from lakeshift._version import __version__
from lakeshift.data import augment, records
from lakeshift.data.generate import (
    GENERATOR_VERSION,
    GenStats,
    Group,
    SplitSpec,
    generate_split,
    rows_key,
    validate_spec,
)
from lakeshift.env import MOVES, RULES_VERSION, FrozenLakeMap, MapError
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS
from lakeshift.io import atomic_write, dumps, read_jsonl
from lakeshift.traces import COT_FORMATS

MAP_FIELDS: tuple[str, ...] = (
    "id",
    "split",
    "size",
    "rows",
    "start",
    "goal",
    "holes",
    "d_inf",
    "optimal_length",
    "optimal_path",
    "n_optimal_paths",
)
ID_SPLITS: tuple[str, ...] = ("id-train", "id-test")
SUITE_FILE = "suite.json"
SPLIT_FILE = "split.json"


# ----- suites -----------------------------------------------------------------------------------------------
def paper_suite() -> list[SplitSpec]:
    """The paper's six splits."""
    id_groups = ((3, 100), (4, 200), (5, 300), (6, 400))
    return [
        SplitSpec("id-train", tuple(Group(n, c, 0.2) for n, c in id_groups), train=True),
        SplitSpec("id-test", tuple(Group(n, 100, 0.2) for n in (3, 4, 5, 6)), exclude=("id-train",)),
        SplitSpec("ood-size", tuple(Group(n, 200, 0.1) for n in (7, 8, 9, 10)), exclude=("id-train",)),
        SplitSpec(
            "ood-dist", tuple(Group(n, 200, 0.1, d_inf_min=6) for n in (7, 8, 9, 10)), exclude=("id-train",)
        ),
        SplitSpec("embed10-train", train=True, embed_source="id-train", embed_size=10, embed_hole_prob=0.1),
        SplitSpec(
            "embed10-test",
            tuple(Group(10, 200, 0.1, d_inf_min=d, d_inf_max=d) for d in range(2, 10)),
            exclude=("embed10-train",),
        ),
    ]


def tiny_suite() -> list[SplitSpec]:
    """A small suite with the paper's structure (8 maps per group), for demos and smoke tests."""
    return [
        SplitSpec("id-train", tuple(Group(n, 8, 0.2) for n in (3, 4, 5, 6)), train=True),
        SplitSpec("id-test", tuple(Group(n, 4, 0.2) for n in (3, 4, 5, 6)), exclude=("id-train",)),
        SplitSpec("ood-size", tuple(Group(n, 4, 0.1) for n in (7, 8, 9, 10)), exclude=("id-train",)),
        SplitSpec(
            "ood-dist", tuple(Group(n, 4, 0.1, d_inf_min=6) for n in (7, 8, 9, 10)), exclude=("id-train",)
        ),
        SplitSpec("embed10-train", train=True, embed_source="id-train"),
        SplitSpec(
            "embed10-test",
            tuple(Group(10, 2, 0.1, d_inf_min=d, d_inf_max=d) for d in range(2, 10)),
            exclude=("embed10-train",),
        ),
    ]


SUITES: dict[str, Callable[[], list[SplitSpec]]] = {"paper": paper_suite, "tiny": tiny_suite}


def load_suite(name_or_path: str) -> list[SplitSpec]:
    """A named suite (``paper``, ``tiny``) or a suite file (``.json``/``.yaml``: ``{"splits": [...]}``,
    each split a :class:`~lakeshift.data.generate.SplitSpec` as a dict with ``groups`` as dicts).

    Raises:
        LakeshiftError: an unknown name, or a file that is missing, malformed or fails :func:`check_suite`.
    """
    if name_or_path in SUITES:
        return SUITES[name_or_path]()
    path = Path(name_or_path)
    if path.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise LakeshiftError(
            f"unknown suite {name_or_path!r} (expected one of {', '.join(SUITES)} "
            "or a .json/.yaml suite file)"
        )
    if not path.is_file():
        raise LakeshiftError(f"{path}: no such suite file")
    if path.suffix.lower() == ".json":
        from lakeshift.io import read_json

        data = read_json(path)
    else:
        from lakeshift.config import load_yaml

        data = load_yaml(path).data
    if not isinstance(data, Mapping) or not isinstance(data.get("splits"), list):
        raise LakeshiftError(f"{path}: expected an object with a list 'splits'")
    specs = [SplitSpec.from_dict(s, f"{path}: splits[{i}]") for i, s in enumerate(data["splits"])]
    try:  # before anything reads the specs (the resource estimate of `generate` does arithmetic on them)
        check_suite(specs)
    except LakeshiftError as err:
        raise LakeshiftError(f"{path}: {err}") from None
    return specs


def check_suite(specs: Sequence[SplitSpec]) -> None:
    """Validates a suite: unique names, dependencies defined earlier, every group's constraints possible."""
    seen: list[str] = []
    for spec in specs:
        if spec.name in seen:
            raise LakeshiftError(f"split {spec.name!r} is defined twice")
        for dep in (*spec.exclude, *([spec.embed_source] if spec.embed_source else [])):
            if dep not in seen:
                raise LakeshiftError(
                    f"split {spec.name}: depends on {dep!r}, which must be defined before it"
                )
        validate_spec(spec, seen)
        if spec.augment:
            augment.parse_augment(spec.augment, f"split {spec.name}: augment")
            if not spec.train:
                raise LakeshiftError(
                    f"split {spec.name}: augment applies to training splits only (give train: true); "
                    "test splits are never augmented"
                )
        if spec.embed_source:
            src = next(s for s in specs if s.name == spec.embed_source)
            big = max((g.size for g in src.groups), default=0)
            if big > spec.embed_size:
                raise LakeshiftError(
                    f"split {spec.name}: cannot embed {big}x{big} maps of {src.name} "
                    f"in {spec.embed_size}x{spec.embed_size}"
                )
        seen.append(spec.name)


# ----- readers ----------------------------------------------------------------------------------------------
def load_maps(path: str | Path) -> list[dict[str, Any]]:
    """The map records of a split folder (or of a ``maps.jsonl`` file), in file order, each checked by
    :func:`check_map_record`; ids are unique and the file holds at least one map. What every reader of
    maps (``score``, ``stats``, ``show``, ``export``, ``report``, training) validates them with.

    Raises:
        LakeshiftError: a missing or empty file, a line that is malformed, lacks a field or disagrees with
            its map, or an id seen before (file, line, field).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "maps.jsonl"
    out = []
    first_line: dict[str, int] = {}
    for lineno, rec in read_jsonl(path, required=MAP_FIELDS):
        where = f"{path}, line {lineno}"
        check_map_record(rec, where)
        rid = str(rec["id"])
        if rid in first_line:
            raise LakeshiftError(f"{where}: duplicate map id {rid!r} (also on line {first_line[rid]})")
        first_line[rid] = lineno
        out.append(rec)
    if not out:
        raise LakeshiftError(f"{path}: no maps in file")
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_cell(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_is_int(v) for v in value)


def check_map_record(rec: Mapping[str, Any], where: str) -> FrozenLakeMap:
    """Validates one ``maps.jsonl`` record: the type of every field present (``"size": "five"`` and
    ``"start": "0,0"`` are errors), then the map itself as the scorer checks it (:func:`map_from_record`:
    valid ``rows``, ``start``/``goal`` agreeing with them), a solvable map, and ``size``, ``d_inf``,
    ``optimal_length`` and the length of ``optimal_path`` agreeing with it (one breadth-first search). The
    one validator behind ``stats``, ``show``, ``export``, ``score``, ``report`` and every reader of maps.

    Returns:
        The record's map.

    Raises:
        LakeshiftError: ``where`` (file and line), the field and what is wrong with it.
    """
    rid = rec.get("id")
    if "id" in rec and (not isinstance(rid, (str, int)) or isinstance(rid, bool)):
        raise LakeshiftError(f"{where}: field 'id' must be a string, got {type(rid).__name__} {rid!r}")
    if "split" in rec and not isinstance(rec["split"], str):
        raise LakeshiftError(f"{where}: field 'split' must be a string, got {rec['split']!r}")
    for key in ("size", "holes", "d_inf", "optimal_length", "n_optimal_paths"):
        if key in rec and not (_is_int(rec[key]) and rec[key] >= 0):
            raise LakeshiftError(f"{where}: field {key!r} must be an integer >= 0, got {rec[key]!r}")
    for key in ("start", "goal"):
        if key in rec and not _is_cell(rec[key]):
            raise LakeshiftError(f"{where}: field {key!r} must be [row, column] integers, got {rec[key]!r}")
    if not isinstance(rec.get("rows"), list) or not all(isinstance(r, str) for r in rec["rows"]):
        raise LakeshiftError(f"{where}: field 'rows' must be a list of strings")
    if "optimal_path" in rec and (
        not isinstance(rec["optimal_path"], list)
        or not all(isinstance(m, str) and m in MOVES for m in rec["optimal_path"])
    ):
        raise LakeshiftError(f"{where}: field 'optimal_path' must be a list of UP/DOWN/LEFT/RIGHT")
    try:
        m = map_from_record(rec)
    except LakeshiftError as err:
        raise LakeshiftError(f"{where}: invalid map ({err})") from None
    if "size" in rec and rec["size"] != m.size:
        raise LakeshiftError(
            f"{where}: field 'size' is {rec['size']}, but 'rows' make a {m.size}x{m.size} map"
        )
    if "d_inf" in rec and rec["d_inf"] != m.d_inf:
        raise LakeshiftError(
            f"{where}: field 'd_inf' is {rec['d_inf']}, but start and goal are {m.d_inf} apart"
        )
    shortest = m.optimal_length
    if shortest is None:
        raise LakeshiftError(f"{where}: field 'rows': an unsolvable map (no safe path from start to goal)")
    if "optimal_length" in rec and rec["optimal_length"] != shortest:
        raise LakeshiftError(
            f"{where}: field 'optimal_length' is {rec['optimal_length']}, but the map's shortest plan has "
            f"{shortest} moves"
        )
    if "optimal_path" in rec and len(rec["optimal_path"]) != shortest:
        raise LakeshiftError(
            f"{where}: field 'optimal_path' has {len(rec['optimal_path'])} moves, but the map's shortest "
            f"plan has {shortest}"
        )
    return m


def select_maps(
    maps: Sequence[Mapping[str, Any]],
    *,
    sizes: Collection[int] | None = None,
    per_size: int | None = None,
    limit: int | None = None,
) -> list[Mapping[str, Any]]:
    """The evaluation subset of a split, in file order: maps of ``sizes`` (all if None), the first
    ``per_size`` of each size, then the first ``limit`` overall.

    ``lakeshift predict`` records these three settings in every prediction (``selection``) and the scorer
    applies the same function, so a map the subset should contain but the predictions lack is counted
    ``missing`` while the maps outside the subset are not counted at all.
    """
    out: list[Mapping[str, Any]] = []
    taken: Counter[int] = Counter()
    for rec in maps:
        size = int(rec["size"])
        if sizes and size not in sizes:
            continue
        if per_size is not None and taken[size] >= per_size:
            continue
        taken[size] += 1
        out.append(rec)
        if limit is not None and len(out) >= limit:
            break
    return out


def map_from_record(rec: Mapping[str, Any]) -> FrozenLakeMap:
    """The :class:`FrozenLakeMap` of a ``maps.jsonl`` record (from ``rows``; ``start``/``goal`` checked).

    Raises:
        LakeshiftError: invalid ``rows`` or ``start``/``goal`` that disagree with them (names the map id).
    """
    return records.map_of(rec)


def record_from_map(
    m: FrozenLakeMap, rid: str, split: str, path: Sequence[str] | None = None
) -> dict[str, Any]:
    """A ``maps.jsonl`` record for ``m`` (``path`` given: used as the optimal path, else the solver's)."""
    sol = m.solve()
    return {
        "id": rid,
        "split": split,
        "size": m.size,
        "rows": m.rows,
        "start": list(m.start),
        "goal": list(m.goal),
        "holes": m.n_holes,
        "d_inf": m.d_inf,
        "optimal_length": sol.optimal_length,
        "optimal_path": list(path) if path is not None else sol.optimal_path,
        "n_optimal_paths": sol.n_optimal_paths,
    }


# ----- import of the official ID data -----------------------------------------------------------------------
_BOXED = re.compile(r"\\boxed\{([^}]*)\}")


def import_official(source: str | Path, which: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Reads Mirage's ``train_direct.jsonl`` (``which="id-train"``) or ``test_direct.jsonl`` (``"id-test"``).

    Returns:
        The map records (file order) and a report (file, sha256, answers kept/replaced, renamed ids).

    Raises:
        LakeshiftError: a missing folder or file, or a malformed line (file, line and field named).
    """
    folder = Path(source)
    if not folder.is_dir():
        raise LakeshiftError(f"--id-source {folder}: no such folder")
    path = folder / ("train_direct.jsonl" if which == "id-train" else "test_direct.jsonl")
    required = ("map_id", "map_desc", *(("text_output",) if which == "id-train" else ()))
    records: list[dict[str, Any]] = []
    taken: Counter[str] = Counter()
    kept = replaced = renamed = 0
    for lineno, obj in read_jsonl(path, required=required):
        where = f"{path}, line {lineno}"
        try:
            m = FrozenLakeMap.from_map_desc(obj["map_desc"])
        except (MapError, TypeError) as err:
            raise LakeshiftError(f"{where}: field 'map_desc': {err}") from None
        if not m.solvable:
            raise LakeshiftError(f"{where}: field 'map_desc': the goal is unreachable")
        official = str(obj["map_id"])
        base = f"{m.size}x{m.size}-{official}"
        taken[base] += 1
        rid = base if taken[base] == 1 else f"{base}-{taken[base]}"
        renamed += taken[base] > 1
        path_moves = None
        if which == "id-train":
            found = _BOXED.findall(str(obj["text_output"]))
            if not found:
                raise LakeshiftError(f"{where}: field 'text_output' has no \\boxed{{...}} answer")
            moves = [w.strip().upper() for w in found[-1].split(",") if w.strip()]
            if all(mv in MOVES for mv in moves):
                roll = m.simulate(moves)
                if roll.success and len(moves) == m.optimal_length:
                    path_moves = moves
            kept += path_moves is not None
            replaced += path_moves is None
        rec = record_from_map(m, rid, which, path_moves)
        rec["official_id"] = official
        records.append(rec)
    report = {
        "file": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "maps": len(records),
        "renamed_duplicate_ids": renamed,
    }
    if which == "id-train":
        report.update(official_answers_kept=kept, official_answers_replaced=replaced)
    return records, report


def _file_sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise LakeshiftError(f"{path}: cannot read ({err.strerror})") from None


# ----- writing ----------------------------------------------------------------------------------------------
@dataclass
class SuiteResult:
    """What :func:`build_suite` did."""

    out: Path
    hash: str
    up_to_date: bool
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    reports: dict[str, dict] = field(default_factory=dict)


def _canonical_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sft_file_name(input_format: str, cot_format: str) -> str:
    """``"grid__grid+desc.jsonl"``."""
    return f"{input_format}__{cot_format}.jsonl"


def build_suite(
    specs: Sequence[SplitSpec],
    out: str | Path,
    *,
    seed: int = 0,
    suite_name: str = "custom",
    workers: int = 1,
    force: bool = False,
    images: bool = True,
    id_source: str | Path | None = None,
    input_formats: Sequence[str] = INPUT_FORMATS,
    cot_formats: Sequence[str] = COT_FORMATS,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> SuiteResult:
    """Generates (or imports) every split of a suite and writes maps, images, SFT files and reports.

    Args:
        specs: The splits, dependencies first (see :func:`paper_suite`).
        out: Output folder.
        seed: Suite seed (map ``i`` of split ``s`` depends on ``(seed, s, i)`` only).
        suite_name: Recorded in ``suite.json``.
        workers: Processes for generation, images and SFT records (output is identical for any number).
        force: Overwrite splits made with a different config.
        images: Write PNGs (and the ``image__*`` SFT files); off for text-only work.
        id_source: Mirage ``vsp_spatial_planning`` folder: import ``id-train``/``id-test`` from it.
        input_formats: Input formats of the SFT files.
        cot_formats: CoT formats of the SFT files.
        progress: Show a tqdm progress bar on stderr.
        log: Where one-line status messages go (default: stderr).

    Returns:
        A :class:`SuiteResult` (``up_to_date`` when nothing had to be done).

    Raises:
        LakeshiftError: bad specs or formats, a missing or malformed ``id_source``, or a folder holding a
            different config without ``force``. Raised before anything is written.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr))
    out = Path(out)
    specs = list(specs)
    check_suite(specs)
    _check_formats(input_formats, cot_formats)
    inputs = [f for f in input_formats if images or f != "image"]
    names = [s.name for s in specs]
    imported = _import_id_splits(id_source, names) if id_source is not None else {}
    common = {"seed": seed, "images": images, "input_formats": inputs, "cot_formats": list(cot_formats)}
    configs, hashes = _split_configs(specs, imported, common)
    suite_cfg = {"suite": suite_name, "splits": [[n, hashes[n]] for n in names]}
    suite_hash = _canonical_hash(suite_cfg)
    result = SuiteResult(out, suite_hash, up_to_date=False)

    old_suite = _read_json(out / SUITE_FILE)
    if old_suite is not None and old_suite.get("hash") != suite_hash and not force:
        raise LakeshiftError(
            f"{out} holds a different suite ({old_suite.get('suite')}, "
            f"hash {str(old_suite.get('hash'))[:12]}; "
            f"this config: {suite_hash[:12]}); use --force to overwrite or choose another --out"
        )
    done = _finished_splits(out, hashes, force)
    if all(done.values()) and old_suite is not None and old_suite.get("hash") == suite_hash:
        say(f"{out}: up to date (suite {suite_name}, hash {suite_hash[:12]}); nothing to do")
        result.up_to_date = True
        result.skipped = names
        return result

    out.mkdir(parents=True, exist_ok=True)
    if force and old_suite is not None and old_suite.get("hash") != suite_hash:
        (out / SUITE_FILE).unlink(missing_ok=True)
    todo_total = sum(
        len(imported[spec.name][0]) if spec.name in imported else _expected_count(spec, specs, imported)
        for spec in specs
        if not done[spec.name]
    )
    records_by_split: dict[str, list[dict]] = {}
    # The generated maps of each split without their augmented copies (what an embedded split embeds).
    base_by_split: dict[str, list[dict]] = {}
    bar = _progress_bar(todo_total, progress)
    pool = _make_pool(workers) if todo_total and workers > 1 else None
    try:
        for spec in specs:
            name = spec.name
            if done[name]:
                records_by_split[name] = load_maps(out / name)
                base_by_split[name] = [r for r in records_by_split[name] if augment.is_original(r)]
                result.skipped.append(name)
            else:
                bar.set_description(name)
                base, recs, report = _make_split(
                    spec, seed, imported, records_by_split, base_by_split, workers, pool
                )
                base_by_split[name], records_by_split[name] = base, recs
                _write_split(
                    out,
                    spec,
                    recs,
                    configs[name],
                    hashes[name],
                    report,
                    inputs,
                    cot_formats,
                    images,
                    pool,
                    bar,
                )
                result.written.append(name)
            result.reports[name] = _read_json(out / name / SPLIT_FILE) or {}
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
    with atomic_write(out / SUITE_FILE) as f:
        f.write(
            json.dumps(
                {"suite": suite_name, "hash": suite_hash, "seed": seed, "splits": names, "config": suite_cfg},
                indent=2,
            )
            + "\n"
        )
    return result


def _check_formats(input_formats: Sequence[str], cot_formats: Sequence[str]) -> None:
    for f in input_formats:
        if f not in INPUT_FORMATS:
            raise LakeshiftError(f"unknown input format {f!r} (expected one of {', '.join(INPUT_FORMATS)})")
    for c in cot_formats:
        if c not in COT_FORMATS:
            raise LakeshiftError(f"unknown CoT format {c!r} (expected one of {', '.join(COT_FORMATS)})")


def _import_id_splits(id_source: str | Path, names: Sequence[str]) -> dict[str, tuple[list[dict], dict]]:
    """``--id-source``: the official id-train / id-test maps, with each file's import report."""
    missing = [n for n in ID_SPLITS if n not in names]
    if missing:
        raise LakeshiftError(
            f"--id-source needs splits {', '.join(ID_SPLITS)} in the suite; missing {missing}"
        )
    return {name: import_official(id_source, name) for name in ID_SPLITS}


def _split_configs(
    specs: Sequence[SplitSpec], imported: Mapping[str, tuple[list[dict], dict]], common: dict[str, Any]
) -> tuple[dict[str, dict], dict[str, str]]:
    """Each split's config and its hash; dependencies come first, so their hashes feed the dependants'."""
    hashes: dict[str, str] = {}
    configs: dict[str, dict] = {}
    for spec in specs:
        deps = [*spec.exclude, *([spec.embed_source] if spec.embed_source else [])]
        cfg = {
            "split": spec.name,
            "spec": spec.to_dict(),
            "seed": common["seed"],
            "generator_version": GENERATOR_VERSION,
            "rules": RULES_VERSION,
            "lakeshift_version": __version__,
            "images": common["images"],
            "input_formats": common["input_formats"],
            "cot_formats": common["cot_formats"],
            "prompt_variant": "train" if spec.train else "test",
            "depends_on": {d: hashes[d] for d in deps},
        }
        if spec.name in imported:
            rep = imported[spec.name][1]
            cfg["imported_from"] = {"file": Path(rep["file"]).name, "sha256": rep["sha256"]}
            cfg["spec"] = {"name": spec.name, "train": spec.train, "imported": True}
        configs[spec.name] = cfg
        hashes[spec.name] = _canonical_hash(cfg)
    return configs, hashes


def _finished_splits(out: Path, hashes: Mapping[str, str], force: bool) -> dict[str, bool]:
    """Which splits ``out`` already holds with this config; a folder holding anything else is an error
    unless ``force``."""
    done: dict[str, bool] = {}
    for name, digest in hashes.items():
        folder = out / name
        meta = _read_json(folder / SPLIT_FILE)
        done[name] = meta is not None and meta.get("hash") == digest and (folder / "maps.jsonl").is_file()
        if not done[name] and folder.exists() and not force:
            what = "a different config" if meta is not None else "files that are not a finished split"
            raise LakeshiftError(f"{folder} holds {what}; use --force to overwrite or choose another --out")
    return done


def _make_split(
    spec: SplitSpec,
    seed: int,
    imported: Mapping[str, tuple[list[dict], dict]],
    records_by_split: Mapping[str, list[dict]],
    base_by_split: Mapping[str, list[dict]],
    workers: int,
    pool: Any,
) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Generates (or imports) one split: ``(maps before augmentation, records, report)``."""
    # An augmented training split's records include every kept transform of its maps, so a map and its
    # transforms count as one map here: no test map equals any of them.
    forbidden = {rows_key(r) for dep in spec.exclude for r in records_by_split[dep]}
    report: dict[str, Any] = {}
    if spec.name in imported:
        recs, report["imported"] = imported[spec.name]
    else:
        sources = base_by_split[spec.embed_source] if spec.embed_source else None
        recs, stats = generate_split(spec, seed, workers=workers, forbidden=forbidden, sources=sources)
        report["generation"] = _stats_dict(stats)
    report["identical_to_train"] = sum(rows_key(r) in forbidden for r in recs)
    base = recs
    if spec.augment:
        recs, report["augmentation"] = augment.augment_split(
            recs, spec.name, seed, augment.parse_augment(spec.augment), pool
        )
    return base, recs, report


def _expected_count(spec: SplitSpec, specs: Sequence[SplitSpec], imported: Mapping[str, Any]) -> int:
    if not spec.embed_source:
        return spec.count or 0
    if spec.embed_source in imported:
        return len(imported[spec.embed_source][0])
    src = next(s for s in specs if s.name == spec.embed_source)
    return _expected_count(src, specs, imported)


def _stats_dict(st: GenStats) -> dict[str, int]:
    return {
        "draws": st.attempts,
        "rejected_unsolvable": st.unsolvable,
        "rejected_constraints": st.constraints,
        "redrawn_duplicate_of_train": st.duplicate_of_train,
        "rejected_embedding_shortcut": st.embed_shortcut,
        "max_draws_one_map": st.per_map_max_attempts,
    }


def _read_json(path: Path) -> dict | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # ValueError: not UTF-8 or not JSON
        return None
    return obj if isinstance(obj, dict) else None


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled or total == 0:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="map", file=sys.stderr, dynamic_ncols=True)


def _make_pool(workers: int) -> Any:
    import multiprocessing as mp

    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    return mp.get_context(method).Pool(workers)


def _render_chunk(
    args: tuple[list[dict], str | None, str, list[str], list[str]],
) -> tuple[list[str], int]:
    """Images of a chunk of maps (written into ``image_dir``) and their SFT lines, one string per SFT file,
    and how many of the maps' ``astar`` traces answer with A*'s own path instead of ``optimal_path``."""
    recs, image_dir, variant, inputs, cots = args
    if image_dir is not None:
        from lakeshift.formats.image import render_png

        for rec in recs:
            # Augmented records that differ only in their path share one image.
            if augment.image_id(rec) == rec["id"]:
                render_png(map_from_record(rec), Path(image_dir) / f"{rec['id']}.png")
    parts: list[list[str]] = [[] for _ in range(len(inputs) * len(cots))]
    differs = 0
    astar = "astar" in cots
    for rec in recs:
        image = f"images/{augment.image_id(rec)}.png"
        made = records.sft_records(rec, variant, inputs, cots, image)
        for k, sft in enumerate(made.values()):
            parts[k].append(dumps(sft) + "\n")
        if astar:
            answer = traces.boxed(rec["optimal_path"])
            differs += not _assistant_text(made[inputs[0], "astar"]).endswith(answer)
    return ["".join(p) for p in parts], differs


def _assistant_text(record: Mapping[str, Any]) -> str:
    content = record["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def _write_split(
    out: Path,
    spec: SplitSpec,
    recs: list[dict],
    config: dict,
    split_hash: str,
    report: dict,
    inputs: Sequence[str],
    cots: Sequence[str],
    images: bool,
    pool: Any,
    bar: Any,
    chunk: int = 50,
) -> None:
    final = out / spec.name
    for stale in out.glob(f".{spec.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = out / f".{spec.name}.partial-{os.getpid()}"
    tmp.mkdir(parents=True)
    try:
        with (tmp / "maps.jsonl").open("w", encoding="utf-8") as f:
            for rec in recs:
                f.write(dumps(rec) + "\n")
        image_dir = None
        if images:
            image_dir = tmp / "images"
            image_dir.mkdir()
        (tmp / "sft").mkdir()
        variant = "train" if spec.train else "test"
        names = [sft_file_name(i, c) for i in inputs for c in cots]
        handles = [(tmp / "sft" / n).open("w", encoding="utf-8") for n in names]
        try:
            jobs = [
                (
                    recs[a : a + chunk],
                    str(image_dir) if image_dir else None,
                    variant,
                    list(inputs),
                    list(cots),
                )
                for a in range(0, len(recs), chunk)
            ]
            results: Iterable[tuple[list[str], int]] = (
                pool.imap(_render_chunk, jobs) if pool is not None else map(_render_chunk, jobs)
            )
            astar_differs = 0
            for job, (parts, differs) in zip(jobs, results, strict=True):
                for h, text in zip(handles, parts, strict=True):
                    h.write(text)
                astar_differs += differs
                bar.update(len(job[0]))
        finally:
            for h in handles:
                h.close()
        by_size = Counter(r["size"] for r in recs)
        meta = {
            "split": spec.name,
            "hash": split_hash,
            "count": len(recs),
            "counts_by_size": {str(k): by_size[k] for k in sorted(by_size)},
            **({"maps": sum(augment.is_original(r) for r in recs)} if spec.augment else {}),
            # Records whose astar trace answers A*'s own (equally short) path, not optimal_path (traces doc).
            **({"astar_answer_differs": astar_differs} if "astar" in cots else {}),
            "prompt_variant": variant,
            "images": images,
            "sft_files": [f"sft/{n}" for n in names],
            **report,
            "config": config,
        }
        with (tmp / SPLIT_FILE).open("w", encoding="utf-8") as f:
            f.write(json.dumps(meta, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
