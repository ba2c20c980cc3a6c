"""The ``maps.jsonl`` record: one map per line of a split, the one validator every reader of maps uses, the
selection of an evaluation subset, and the conversion to and from :class:`~lakeshift.env.FrozenLakeMap`.

Fields (fixed; other tools read them): ``id``, ``split``, ``size``, ``rows``, ``start``, ``goal``, ``holes``,
``d_inf``, ``optimal_length``, ``optimal_path``, ``n_optimal_paths`` (:data:`MAP_FIELDS`); ``source_id`` and
``offset`` for embedded maps; ``official_id`` for maps imported with ``--id-source``
(:mod:`lakeshift.data.mirage`); ``augmentation`` and ``augmented_from`` in augmented training splits, one
line per record (:mod:`lakeshift.data.augment`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from lakeshift.data import records
from lakeshift.env import MOVES, FrozenLakeMap
from lakeshift.errors import ArgumentError, LakeshiftError, check_int, shown
from lakeshift.io import read_jsonl

#: The fields every record has (:func:`load_maps` requires them).
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


def load_maps(path: str | Path) -> list[dict[str, Any]]:
    """The map records of a split folder (or of a ``maps.jsonl`` file), in file order, each checked by
    :func:`check_map_record`; ids are unique and the file holds at least one map. What every reader of
    maps (``score``, ``stats``, ``show``, ``export``, ``report``, training) validates them with.

    Raises:
        LakeshiftError: a missing or empty file, a line that is malformed, lacks a field or disagrees with
            its map, or an id seen before (file, line, field).
    """
    if not isinstance(path, (str, PathLike)):
        raise ArgumentError(
            f"path must be a split folder or a maps.jsonl file (a str or Path), got {shown(path)}"
        )
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

    Raises:
        LakeshiftError: ``sizes`` that is not a collection of integers, ``per_size`` or ``limit`` that is
            not ``None`` or an integer >= 1, or a map that is not a record with an integer ``size``.
    """
    if sizes is not None and (
        isinstance(sizes, (str, bytes, Mapping))
        or not isinstance(sizes, Collection)
        or not all(_is_int(n) for n in sizes)
    ):
        raise ArgumentError(f"sizes must be None or a collection of map sizes (integers), got {shown(sizes)}")
    for name, value in (("per_size", per_size), ("limit", limit)):
        if value is not None:
            check_int(name, value, 1)
    if isinstance(maps, (str, bytes, Mapping)) or not isinstance(maps, Iterable):
        raise ArgumentError(f"maps must be a sequence of maps.jsonl records, got {shown(maps)}")
    out: list[Mapping[str, Any]] = []
    taken: Counter[int] = Counter()
    for i, rec in enumerate(maps):
        if not isinstance(rec, Mapping) or not _is_int(rec.get("size")):
            raise ArgumentError(
                f"maps[{i}] must be a maps.jsonl record with an integer 'size', got {shown(rec)}"
            )
        size = rec["size"]
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
        LakeshiftError: ``rec`` is not a mapping, or invalid ``rows`` or ``start``/``goal`` that disagree
            with them (names the map id).
    """
    records.require_record(rec, "rec")
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
