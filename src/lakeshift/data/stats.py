"""Statistics of map splits (as in the paper's Tables 2 and 7): counts, d_inf, optimal lengths, holes.

``hole fraction`` is holes / (n * n), over all cells of the map (start and goal included in the denominator).
``count`` counts records (lines of ``maps.jsonl``) and ``maps`` the generated maps they come from: they differ
in augmented training splits (:mod:`lakeshift.data.augment`), whose records are several paths and
symmetries of
one map. ``first_move`` is the shape of the recorded paths: the share of paths whose first move is ``UP``,
``DOWN``, ``LEFT``, ``RIGHT`` (the table prints percentages ``U/D/L/R``), which augmentation evens out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError

COLUMNS: tuple[str, ...] = (
    "split",
    "size",
    "count",
    "maps",
    "mean_d_inf",
    "mean_optimal_length",
    "max_optimal_length",
    "mean_n_optimal_paths",
    "hole_fraction",
    "first_move",
)
_FIRST = ("UP", "DOWN", "LEFT", "RIGHT")


def split_stats(split: str, records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per map size (ascending) plus an ``"all"`` row, for one split's map records."""
    by_size: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for rec in records:
        by_size[int(rec["size"])].append(rec)
    rows = [_row(split, str(n), by_size[n]) for n in sorted(by_size)]
    if len(by_size) > 1:
        rows.append(_row(split, "all", [r for n in sorted(by_size) for r in by_size[n]]))
    return rows


def _row(split: str, size: str, recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    k = len(recs)
    firsts = Counter(r["optimal_path"][0] for r in recs if r.get("optimal_path"))
    return {
        "split": split,
        "size": size,
        "count": k,
        "maps": len({str(r.get("augmented_from", r.get("id"))) for r in recs}),
        "mean_d_inf": sum(r["d_inf"] for r in recs) / k,
        "mean_optimal_length": sum(r["optimal_length"] for r in recs) / k,
        "max_optimal_length": max(r["optimal_length"] for r in recs),
        "mean_n_optimal_paths": sum(r["n_optimal_paths"] for r in recs) / k,
        "hole_fraction": sum(r["holes"] for r in recs) / sum(int(r["size"]) ** 2 for r in recs),
        "first_move": {move: firsts[move] / k for move in _FIRST},
    }


def find_splits(path: str | Path) -> list[Path]:
    """The split folders under ``path``: itself if it holds ``maps.jsonl``, else its subfolders that do
    (in ``suite.json`` order when present, else by name).

    Raises:
        LakeshiftError: ``path`` is missing or holds no split.
    """
    import json

    path = Path(path)
    if not path.is_dir():
        raise LakeshiftError(f"{path}: no such folder")
    if (path / "maps.jsonl").is_file():
        return [path]
    order: list[str] = []
    try:
        order = list(json.loads((path / "suite.json").read_text(encoding="utf-8")).get("splits", []))
    except (OSError, ValueError, AttributeError):
        order = []
    found = {p.name: p for p in path.iterdir() if p.is_dir() and (p / "maps.jsonl").is_file()}
    if not found:
        raise LakeshiftError(f"{path}: no split here (no maps.jsonl in it or its subfolders)")
    names = [n for n in order if n in found] + sorted(n for n in found if n not in order)
    return [found[n] for n in names]


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A plain-text table of stats rows (fixed column widths, two decimals)."""
    head = [
        "split",
        "size",
        "count",
        "maps",
        "mean d_inf",
        "mean opt len",
        "max opt len",
        "mean #opt paths",
        "hole frac",
        "first U/D/L/R %",
    ]
    body = [
        [
            str(r["split"]),
            str(r["size"]),
            str(r["count"]),
            str(r["maps"]),
            f"{r['mean_d_inf']:.2f}",
            f"{r['mean_optimal_length']:.2f}",
            str(r["max_optimal_length"]),
            f"{r['mean_n_optimal_paths']:.2f}",
            f"{r['hole_fraction']:.3f}",
            "/".join(f"{100 * r['first_move'][m]:.0f}" for m in _FIRST),
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = []
    for i, cells in enumerate([head, *body]):
        lines.append(
            "  ".join(
                c.ljust(w) if j < 2 else c.rjust(w)
                for j, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
