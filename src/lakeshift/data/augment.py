"""Solution augmentation of training splits: several optimal paths per map, and the map's 8 symmetries.

The paper's second version (OpenReview LAzMmAeHyJ) reports that augmenting the solutions seen in training
"greatly boosts OOD results"; it publishes no generator. Two kinds, combined as ``--augment paths=4,dihedral``
(:func:`parse_augment`):

* ``paths=K`` (``1 <= K <=`` :data:`MAX_PATHS`): up to ``K`` distinct optimal paths per map, all of them when
  the map has fewer, each its own record whose ``optimal_path`` (hence every CoT trace) follows that path.
  The first is the map's own answer (the split's tie-break); the others are drawn without replacement,
  uniformly among the remaining optimal paths, from the map's augmentation RNG: when the map has at most
  :data:`ENUMERATE_LIMIT` optimal paths they are enumerated and sampled, else drawn with
  :meth:`FrozenLakeMap.optimal_path` ``("uniform")`` until ``K`` are distinct.
* ``dihedral``: the 8 rotations and reflections of each map (:data:`TRANSFORMS`), its path's moves mapped
  the same way. A symmetric map gives the same rows under several transforms: only the first (in
  :data:`TRANSFORMS` order) is kept, so the records of one map are pairwise distinct. With both kinds, every
  kept transform gets its ``K`` paths (its first path the mapped answer).

Randomness: map ``index`` of split ``split`` uses ``map_rng(seed, split + "#augment", index)`` (see
:mod:`lakeshift.data.generate`): a function of the map alone, so the output is identical for any number of
workers and one map's augmentation can be redone alone.

Records (``maps.jsonl`` lines of an augmented split) keep every map field, recomputed for the transformed
map, plus ``augmentation`` (``{"transform": "rot90", "path": 2}``; the original is ``{"transform": "id",
"path": 0}``) and ``augmented_from`` (the id of the generated map they come from, the original's own id).
Ids: the original keeps its id; the others are ``<id>-<transform>`` and ``<id>[-<transform>]-p<k>``. The
records of one transform share one image (:func:`image_id`). A map and its transforms count as one map for
the train/test disjointness check: a split that excludes an augmented training split avoids all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakeshift.env import DELTAS, TIE_BREAK_PRIORITY, Cell, FrozenLakeMap
from lakeshift.errors import LakeshiftError

AUGMENT_KINDS: tuple[str, ...] = ("paths", "dihedral")
#: Largest ``K`` of ``paths=K`` (a bound on the records one map can make: 8 x 64).
MAX_PATHS = 64
#: Maps with at most this many optimal paths have them enumerated (else uniform draws until distinct).
ENUMERATE_LIMIT = 512
#: The dihedral group of the square, identity first; rotations are clockwise.
TRANSFORMS: tuple[str, ...] = (
    "id",
    "rot90",
    "rot180",
    "rot270",
    "flip-lr",
    "flip-ud",
    "transpose",
    "antitranspose",
)
_ORIGINAL = {"transform": "id", "path": 0}


@dataclass(frozen=True)
class Augment:
    """A parsed ``--augment`` value: ``paths`` optimal paths per map (1: only the map's own), ``dihedral``."""

    paths: int = 1
    dihedral: bool = False

    @property
    def active(self) -> bool:
        return self.paths > 1 or self.dihedral

    def __str__(self) -> str:
        """The canonical spelling, e.g. ``"paths=4,dihedral"`` (``""`` when nothing is augmented)."""
        parts = ([f"paths={self.paths}"] if self.paths > 1 else []) + (["dihedral"] if self.dihedral else [])
        return ",".join(parts)


def parse_augment(text: str, where: str = "--augment") -> Augment:
    """Parses ``"paths=K"``, ``"dihedral"`` or both, comma-separated.

    Raises:
        LakeshiftError: an unknown kind, a malformed or out-of-range ``K``, a kind given twice, or nothing.
    """
    if not isinstance(text, str):
        raise LakeshiftError(f"{where}: expected a string like 'paths=4,dihedral', got {text!r}")
    paths, dihedral, seen = 1, False, set()
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise LakeshiftError(f"{where}: nothing to augment (expected paths=K and/or dihedral)")
    for item in items:
        kind, eq, value = item.partition("=")
        kind = kind.strip()
        if kind not in AUGMENT_KINDS:
            raise LakeshiftError(
                f"{where}: unknown augmentation {kind!r} (expected paths=K and/or dihedral, "
                "e.g. paths=4,dihedral)"
            )
        if kind in seen:
            raise LakeshiftError(f"{where}: {kind!r} given twice")
        seen.add(kind)
        if kind == "dihedral":
            if eq:
                raise LakeshiftError(f"{where}: 'dihedral' takes no value, got {item!r}")
            dihedral = True
            continue
        try:
            paths = int(value)
        except ValueError:
            raise LakeshiftError(f"{where}: paths=K needs an integer K, got {item!r}") from None
        if not 1 <= paths <= MAX_PATHS:
            raise LakeshiftError(f"{where}: paths=K needs 1 <= K <= {MAX_PATHS}, got K={paths}")
    return Augment(paths, dihedral)


# ----- transforms -------------------------------------------------------------------------------------------
def transform_cell(cell: Cell, n: int, transform: str) -> Cell:
    """Where ``cell`` of an ``n x n`` map goes under ``transform``."""
    r, c = cell
    if transform == "id":
        return r, c
    if transform == "rot90":
        return c, n - 1 - r
    if transform == "rot180":
        return n - 1 - r, n - 1 - c
    if transform == "rot270":
        return n - 1 - c, r
    if transform == "flip-lr":
        return r, n - 1 - c
    if transform == "flip-ud":
        return n - 1 - r, c
    if transform == "transpose":
        return c, r
    if transform == "antitranspose":
        return n - 1 - c, n - 1 - r
    raise ValueError(f"unknown transform {transform!r} (expected one of {', '.join(TRANSFORMS)})")


def _move_table(transform: str) -> dict[str, str]:
    # The transforms are affine, so a move's image is the same everywhere: measure it at the centre of 3x3.
    by_delta = {d: move for move, d in DELTAS.items()}
    out = {}
    for move, (dr, dc) in DELTAS.items():
        a = transform_cell((1, 1), 3, transform)
        b = transform_cell((1 + dr, 1 + dc), 3, transform)
        out[move] = by_delta[(b[0] - a[0], b[1] - a[1])]
    return out


MOVE_MAPS: dict[str, dict[str, str]] = {t: _move_table(t) for t in TRANSFORMS}


def transform_map(m: FrozenLakeMap, transform: str) -> FrozenLakeMap:
    """The map seen under ``transform`` (holes, start and goal moved together)."""
    n = m.size
    return FrozenLakeMap(
        n,
        frozenset(transform_cell(h, n, transform) for h in m.holes),
        transform_cell(m.start, n, transform),
        transform_cell(m.goal, n, transform),
    )


def transform_path(path: Iterable[str], transform: str) -> list[str]:
    """A plan's moves under ``transform`` (the transformed plan solves the transformed map)."""
    table = MOVE_MAPS[transform]
    return [table[move] for move in path]


def all_transform_rows(rows: Sequence[str]) -> list[tuple[str, ...]]:
    """The rows of the 8 transforms of a map (duplicates included), for disjointness checks."""
    m = FrozenLakeMap.from_rows(list(rows))
    return [tuple(transform_map(m, t).rows) for t in TRANSFORMS]


# ----- paths ------------------------------------------------------------------------------------------------
def optimal_paths(m: FrozenLakeMap, limit: int | None = None) -> list[list[str]]:
    """Every optimal path of ``m`` (at most ``limit``), in ``UP, LEFT, RIGHT, DOWN`` lexicographic order."""
    from lakeshift.traces import goal_distances

    dist = goal_distances(m)
    if m.start not in dist:
        return []
    out: list[list[str]] = []
    stack: list[str] = []

    def walk(cell: Cell) -> bool:
        if cell == m.goal:
            out.append(list(stack))
            return limit is not None and len(out) >= limit
        for move in TIE_BREAK_PRIORITY:
            nxt = m.step(cell, move)
            if dist.get(nxt) == dist[cell] - 1:
                stack.append(move)
                if walk(nxt):
                    return True
                stack.pop()
        return False

    walk(m.start)
    return out


def choose_paths(m: FrozenLakeMap, first: Sequence[str], k: int, n_optimal: int, rng: Any) -> list[list[str]]:
    """``first`` and up to ``k - 1`` other distinct optimal paths of ``m`` (module docstring)."""
    chosen = [list(first)]
    if k <= 1 or n_optimal <= 1:
        return chosen
    if n_optimal <= ENUMERATE_LIMIT:
        others = [p for p in optimal_paths(m) if p != chosen[0]]
        if len(others) <= k - 1:
            return chosen + others
        return chosen + rng.sample(others, k - 1)
    seen = {tuple(first)}
    while len(chosen) < k:
        path = m.optimal_path("uniform", rng)
        if tuple(path) not in seen:
            seen.add(tuple(path))
            chosen.append(path)
    return chosen


# ----- records ----------------------------------------------------------------------------------------------
def augment_record(rec: Mapping[str, Any], aug: Augment, rng: Any) -> tuple[list[dict[str, Any]], int]:
    """The records of one generated map (the original first) and the number of transforms dropped as
    duplicates of an earlier one."""
    from lakeshift.data.records import map_of

    base = map_of(rec)
    rid = str(rec["id"])
    n_opt = int(rec["n_optimal_paths"])
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, ...]] = set()
    dropped = 0
    for t in TRANSFORMS if aug.dihedral else ("id",):
        m = base if t == "id" else transform_map(base, t)
        key = tuple(m.rows)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        first = transform_path(rec["optimal_path"], t)
        for k, path in enumerate(choose_paths(m, first, aug.paths, n_opt, rng)):
            new = dict(rec)
            if t != "id":
                new.pop("offset", None)  # an embedded map's offset does not survive the transform
                new.update(rows=m.rows, start=list(m.start), goal=list(m.goal))
            new["id"] = _record_id(rid, t, k)
            new["optimal_path"] = path
            new["augmentation"] = {"transform": t, "path": k}
            new["augmented_from"] = rid
            out.append(new)
    return out, dropped


def _record_id(base: str, transform: str, k: int) -> str:
    rid = base if transform == "id" else f"{base}-{transform}"
    return rid if k == 0 else f"{rid}-p{k}"


def image_id(rec: Mapping[str, Any]) -> str:
    """The id whose image a record shows: records differing only in their path share the path-0 image."""
    aug = rec.get("augmentation")
    if not isinstance(aug, Mapping) or not aug.get("path"):
        return str(rec["id"])
    return _record_id(str(rec["augmented_from"]), str(aug["transform"]), 0)


def is_original(rec: Mapping[str, Any]) -> bool:
    """Whether a record is a generated map itself (not an augmented copy)."""
    return rec.get("augmentation", _ORIGINAL) == _ORIGINAL


def augment_chunk(args: tuple[list[dict[str, Any]], int, str, int, str]) -> tuple[list[dict[str, Any]], int]:
    """Augments maps ``start, start + 1, ...`` of a split (a unit of work for a process pool)."""
    from lakeshift.data.generate import map_rng

    recs, start, split, seed, spec = args
    aug = parse_augment(spec)
    out: list[dict[str, Any]] = []
    dropped = 0
    for i, rec in enumerate(recs, start=start):
        new, d = augment_record(rec, aug, map_rng(seed, f"{split}#augment", i))
        out.extend(new)
        dropped += d
    return out, dropped


def augment_split(
    recs: Sequence[dict[str, Any]], split: str, seed: int, aug: Augment, pool: Any = None, chunk: int = 200
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every record of an augmented split, in map order (each map's records together, the original first),
    and a report (maps, records, transforms dropped as duplicates). Identical for any ``pool``."""
    jobs = [(list(recs[a : a + chunk]), a, split, seed, str(aug)) for a in range(0, len(recs), chunk)]
    results = pool.imap(augment_chunk, jobs) if pool is not None else map(augment_chunk, jobs)
    out: list[dict[str, Any]] = []
    dropped = 0
    for part, d in results:
        out.extend(part)
        dropped += d
    report = {
        "augment": str(aug),
        "maps": len(recs),
        "records": len(out),
        "dropped_duplicate_transforms": dropped,
    }
    return out, report
