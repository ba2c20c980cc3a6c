"""Benchmark suites on disk: a suite's splits (:mod:`lakeshift.data.catalog`) generated or imported, written
in every input x CoT format, and cached by config.

Layout of ``OUT/`` (field names are fixed; other tools read them)::

    OUT/suite.json                    suite config, hash and split list (written last)
    OUT/<split>/maps.jsonl            one map per line (the record of lakeshift.data.maps)
    OUT/<split>/images/<id>.png       gymnasium's frame of the map (unless images are turned off)
    OUT/<split>/sft/<input>__<cot>.jsonl   trl conversational records, one per map (image inputs only
                                      when images are written); train splits use the "train" prompt
                                      variant, the others the "test" variant
    OUT/<split>/split.json            config, hash, counts and generation report (written last)

Caching: each split has a hash of everything that determines its files (its spec, the seed, the generator
and rules versions, the formats written, the hashes of the splits it depends on, the imported files).
Regenerating with the same config is a no-op; a different config in the same folder is refused unless
``force``. A split is written in a hidden temporary folder and renamed into place when complete, with
``split.json`` written last, so an interrupted run leaves nothing that looks finished; rerunning resumes
with the splits that are not done.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeshift import traces
from lakeshift._version import __version__
from lakeshift.data import augment, records
from lakeshift.data.catalog import check_suite
from lakeshift.data.generate import GENERATOR_VERSION, GenStats, SplitSpec, generate_split, rows_key
from lakeshift.data.maps import load_maps, map_from_record
from lakeshift.data.mirage import import_id_splits
from lakeshift.env import RULES_VERSION
from lakeshift.errors import ArgumentError, LakeshiftError, check_int, shown
from lakeshift.formats import INPUT_FORMATS
from lakeshift.formats.image import render_png
from lakeshift.io import atomic_write, dumps, read_json
from lakeshift.traces import COT_FORMATS

SUITE_FILE = "suite.json"
SPLIT_FILE = "split.json"
#: Maps per worker job when a split's images and SFT files are written.
MAPS_PER_JOB = 50
#: CoT formats whose trace may answer another shortest path than ``optimal_path`` (split.json counts them).
OWN_PATH_COTS: tuple[str, ...] = ("astar", *traces.MAP_COTS)


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
        LakeshiftError: bad specs or formats, an ``out`` that is not a path, a ``seed`` that is not an
            integer >= 0, a missing or malformed ``id_source``, or a folder holding a different config
            without ``force``. Raised before anything is written.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr))
    if not isinstance(out, (str, os.PathLike)):
        raise ArgumentError(f"out must be a folder path (a str or Path), got {shown(out)}")
    check_int("seed", seed, 0)
    out = Path(out)
    specs = list(specs) if isinstance(specs, Iterable) else specs
    check_suite(specs)
    _check_formats(input_formats, cot_formats)
    inputs = [f for f in input_formats if images or f != "image"]
    names = [s.name for s in specs]
    imported = import_id_splits(id_source, names) if id_source is not None else {}
    common = {"seed": seed, "images": images, "input_formats": inputs, "cot_formats": list(cot_formats)}
    configs, hashes = _split_configs(specs, imported, common)
    suite_cfg = {"suite": suite_name, "splits": [[n, hashes[n]] for n in names]}
    suite_hash = _canonical_hash(suite_cfg)
    result = SuiteResult(out, suite_hash, up_to_date=False)

    old_suite = _read_json_object(out / SUITE_FILE)
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
            result.reports[name] = _read_json_object(out / name / SPLIT_FILE) or {}
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
        meta = _read_json_object(folder / SPLIT_FILE)
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


def _read_json_object(path: Path) -> dict | None:
    """The JSON object in ``path``, or None when it is missing, unreadable, malformed or not an object: such
    a ``suite.json`` or ``split.json`` marks nothing as finished."""
    try:
        obj = read_json(path)
    except LakeshiftError:
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
) -> tuple[list[str], Counter[str]]:
    """Images of a chunk of maps (written into ``image_dir``) and their SFT lines, one string per SFT file,
    and per CoT of :data:`OWN_PATH_COTS` how many of the maps' traces answer with their own path (A*'s, the
    wave's arrows) instead of ``optimal_path``."""
    recs, image_dir, variant, inputs, cots = args
    if image_dir is not None:
        for rec in recs:
            # Augmented records that differ only in their path share one image.
            if augment.image_id(rec) == rec["id"]:
                render_png(map_from_record(rec), Path(image_dir) / f"{rec['id']}.png")
    parts: list[list[str]] = [[] for _ in range(len(inputs) * len(cots))]
    differs: Counter[str] = Counter()
    own = [c for c in OWN_PATH_COTS if c in cots]
    for rec in recs:
        image = f"images/{augment.image_id(rec)}.png"
        made = records.sft_records(rec, variant, inputs, cots, image)
        for k, sft in enumerate(made.values()):
            parts[k].append(dumps(sft) + "\n")
        if own:
            answer = traces.boxed(rec["optimal_path"])
            for cot in own:
                differs[cot] += not _assistant_text(made[inputs[0], cot]).endswith(answer)
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
    chunk: int = MAPS_PER_JOB,
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
            results: Iterable[tuple[list[str], Counter[str]]] = (
                pool.imap(_render_chunk, jobs) if pool is not None else map(_render_chunk, jobs)
            )
            own_differs: Counter[str] = Counter()
            for job, (parts, differs) in zip(jobs, results, strict=True):
                for h, text in zip(handles, parts, strict=True):
                    h.write(text)
                own_differs.update(differs)
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
            # Records whose astar or wave trace answers its own (equally short) path, not optimal_path.
            **{f"{c}_answer_differs": own_differs[c] for c in OWN_PATH_COTS if c in cots},
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
