"""Seeded, pure map generation: every map from its own RNG, so any map can be regenerated alone.

Randomness
----------
Map ``index`` of split ``split`` generated with seed ``seed`` uses
``random.Random(int.from_bytes(sha256(f"{seed}/{split}/{index}").digest()))`` and nothing else. Files are
therefore byte-identical whatever the number of worker processes, and :func:`generate_map` rebuilds one
map without generating the others. Every redraw (unsolvable map, unmet constraint, duplicate of a training
map) keeps drawing from the same RNG, so it is deterministic too. Uniform integers are drawn as
``int(rng.random() * m)`` (bias below ``m / 2**53``, far below anything measurable) because it is three
times faster than ``randrange``.

Distribution of a random map (one :class:`Group`)
-------------------------------------------------
The model is gymnasium's ``generate_random_map``: every cell is a hole with probability ``hole_prob``
independently (``p = 1 - hole_prob`` frozen); then start and goal are placed uniformly at random on two
distinct frozen cells (gymnasium itself pins them to the corners; VSP and the paper place them at random).
The map is redrawn until it is solvable and meets the group's constraints (``d_inf`` and optimal-length
ranges: plain rejection sampling, as the paper's App. A does). It is drawn in an equivalent, faster order:
start and goal uniformly among all cells (so a ``d_inf`` rejection costs two draws), then the number of
holes ``K ~ Binomial(n*n, hole_prob)`` (redrawn if ``K > n*n - 2``), then ``K`` hole cells uniformly among
the other cells. Both orders give every (holes, start, goal) the probability
``q**K (1-q)**(n*n-K) / ((n*n-K)(n*n-K-1))`` (``q = hole_prob``), hence the same distribution.

The optimal path is chosen by the split's tie-break (see :mod:`lakeshift.env`); ``"uniform"`` draws it
from the map's RNG after the map itself.

Embedded maps (paper 4.3 and App. A)
-------------------------------------
A source map of size ``k`` is placed at a uniformly random offset inside a random ``size x size`` map
whose cells are holes with probability ``hole_prob`` (the big map's own start and goal are removed, i.e.
left frozen). The source's cells are copied, so its optimal path stays valid. The surrounding cells can
create a *shorter* path that leaves the source's square (e.g. around a wall of holes that the small map's
edge made impassable): such embeddings are redrawn (new big map and offset), so the recorded
``optimal_path`` is the source's own answer and ``optimal_length`` is both the source's and the embedded
map's true BFS length, as the paper assumes ("does not change the correct path").
``n_optimal_paths`` is counted on the embedded map (outside detours of equal length can add paths).
"""

from __future__ import annotations

import _random
import bisect
import hashlib
import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache

from lakeshift.env import (
    LETTER_MOVES,
    TIE_BREAKS,
    TieBreak,
    _bfs_layers,
    _choose_path,
    _count_optimal_paths,
    _full_mask,
)
from lakeshift.errors import ArgumentError, LakeshiftError, check_int, shown

_Random = random.Random
_c_seed = _random.Random.seed

#: Bumped whenever the same seed would produce different maps (part of every suite's config hash).
GENERATOR_VERSION = "2"  # 2: default tie-break "direct" (was "priority")
#: Attempts per map before giving up on constraints that are (almost) never met.
DEFAULT_MAX_ATTEMPTS = 200_000


@dataclass(frozen=True)
class Group:
    """``count`` random maps of one size, with optional ``d_inf`` and optimal-length ranges (inclusive)."""

    size: int
    count: int
    hole_prob: float
    d_inf_min: int = 1
    d_inf_max: int | None = None
    length_min: int = 1
    length_max: int | None = None


@dataclass(frozen=True)
class SplitSpec:
    """How one split is made.

    Attributes:
        name: Split name (map ids are ``f"{name}-{index:05d}"``).
        groups: Random-map groups, generated in order (the map index runs across groups).
        train: Training split (SFT records use the "train" prompt variant, others the "test" one).
        tie_break: ``"direct"`` (default), ``"priority"`` or ``"uniform"`` (see :mod:`lakeshift.env`).
        embed_source: Name of the split whose maps are embedded (one embedded map per source map),
            instead of ``groups``.
        embed_size: Size of the big map for embedding.
        embed_hole_prob: Hole probability of the big map for embedding.
        exclude: Training splits whose maps this split must not contain (redrawn when drawn).
        augment: Training splits only: solution augmentation, e.g. ``"paths=4,dihedral"`` (see
            :mod:`lakeshift.data.augment`); ``""`` for none.
    """

    name: str
    groups: tuple[Group, ...] = ()
    train: bool = False
    tie_break: TieBreak = "direct"
    embed_source: str | None = None
    embed_size: int = 10
    embed_hole_prob: float = 0.1
    exclude: tuple[str, ...] = ()
    augment: str = ""

    @property
    def count(self) -> int | None:
        """Number of maps (``None`` for embedded splits: as many as the source)."""
        return None if self.embed_source else sum(g.count for g in self.groups)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["groups"] = [asdict(g) for g in self.groups]
        d["exclude"] = list(self.exclude)
        if not self.augment:
            del d["augment"]  # so that the config hashes of splits without augmentation stay as they were
        return d

    @classmethod
    def from_dict(cls, d: Mapping, where: str = "split") -> SplitSpec:
        """Builds a spec from a plain dict (suite files); unknown fields and fields of the wrong type
        (``train: "no"``, ``groups: 5``, ``name: 7``) raise LakeshiftError; ``null`` means the default.
        The groups' values are checked by :func:`validate_group`."""
        if not isinstance(d, Mapping):
            raise LakeshiftError(f"{where}: expected an object (a split spec), got {type(d).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        extra = set(d) - known
        if extra:
            raise LakeshiftError(f"{where}: unknown field(s) {sorted(extra)} (known: {sorted(known)})")
        if "name" not in d:
            raise LakeshiftError(f"{where}: missing field 'name'")
        kw = {k: v for k, v in d.items() if v is not None or k == "name"}
        for key, (kinds, what) in _SPEC_FIELD_TYPES.items():
            value = kw.get(key)
            wrong = not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
            if key in kw and wrong:
                raise LakeshiftError(f"{where}: field {key!r} must be {what}, got {value!r}")
        if not all(isinstance(name, str) for name in kw.get("exclude", ())):
            raise LakeshiftError(f"{where}: field 'exclude' must be a list of split names")
        groups = []
        for i, g in enumerate(kw.pop("groups", [])):
            gknown = set(Group.__dataclass_fields__)
            if not isinstance(g, Mapping) or set(g) - gknown:
                raise LakeshiftError(
                    f"{where}, group {i + 1}: expected an object with fields {sorted(gknown)}"
                )
            try:
                groups.append(Group(**g))
            except TypeError as err:
                raise LakeshiftError(f"{where}, group {i + 1}: {err}") from None
        kw["groups"] = tuple(groups)
        kw["exclude"] = tuple(kw.get("exclude", ()))
        return cls(**kw)


#: The type of each field of a split spec in a suite file, and how a message names it.
_SPEC_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "a string"),
    "groups": ((list, tuple), "a list of groups"),
    "train": ((bool,), "true or false"),
    "tie_break": ((str,), "a string"),
    "embed_source": ((str,), "a split name"),
    "embed_size": ((int,), "an integer"),
    "embed_hole_prob": ((int, float), "a number"),
    "exclude": ((list, tuple), "a list of split names"),
    "augment": ((str,), "a string"),
}


@dataclass
class GenStats:
    """Why draws were rejected while generating (reported in ``split.json``)."""

    attempts: int = 0
    unsolvable: int = 0
    constraints: int = 0
    duplicate_of_train: int = 0
    embed_shortcut: int = 0
    per_map_max_attempts: int = 0

    def add(self, other: GenStats) -> None:
        self.attempts += other.attempts
        self.unsolvable += other.unsolvable
        self.constraints += other.constraints
        self.duplicate_of_train += other.duplicate_of_train
        self.embed_shortcut += other.embed_shortcut
        self.per_map_max_attempts = max(self.per_map_max_attempts, other.per_map_max_attempts)


# ----- validation -------------------------------------------------------------------------------------------
def validate_group(g: Group, where: str = "group") -> None:
    """Rejects impossible or malformed constraints before any work is done.

    Raises:
        LakeshiftError: naming the group and the constraint.
    """
    # bool is an int subclass: `count: true` in a YAML suite must not mean one map.
    if not isinstance(g.size, int) or isinstance(g.size, bool) or g.size < 2:
        raise LakeshiftError(f"{where}: size must be an integer >= 2, got {g.size!r}")
    if not isinstance(g.count, int) or isinstance(g.count, bool) or g.count < 1:
        raise LakeshiftError(f"{where}: count must be an integer >= 1, got {g.count!r}")
    for name in ("d_inf_min", "d_inf_max", "length_min", "length_max"):
        value = getattr(g, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise LakeshiftError(f"{where}: {name} must be an integer, got {value!r}")
    if (
        not isinstance(g.hole_prob, (int, float))
        or isinstance(g.hole_prob, bool)
        or not 0.0 <= g.hole_prob < 1.0
    ):
        raise LakeshiftError(f"{where}: hole_prob must be a probability in [0, 1), got {g.hole_prob!r}")
    n = g.size
    dmax = n - 1 if g.d_inf_max is None else g.d_inf_max
    if g.d_inf_min > n - 1:
        raise LakeshiftError(
            f"{where}: impossible constraint d_inf >= {g.d_inf_min} on a {n}x{n} map (d_inf <= {n - 1})"
        )
    if g.d_inf_min < 1 or dmax < g.d_inf_min:
        raise LakeshiftError(f"{where}: empty d_inf range {g.d_inf_min}..{dmax}")
    lmax = g.length_max
    if g.length_min < 1 or (lmax is not None and lmax < g.length_min):
        raise LakeshiftError(f"{where}: empty optimal-length range {g.length_min}..{lmax}")
    if lmax is not None and lmax < g.d_inf_min:
        raise LakeshiftError(
            f"{where}: impossible constraints: optimal length <= {lmax} but d_inf >= {g.d_inf_min} "
            "(the optimal length is at least d_inf)"
        )
    # A shortest path visits distinct free cells; without holes it is the Manhattan distance.
    longest = 2 * (n - 1) if g.hole_prob == 0 else n * n - 1
    if g.length_min > longest:
        raise LakeshiftError(
            f"{where}: impossible constraint optimal length >= {g.length_min} on a {n}x{n} map "
            f"with hole probability {g.hole_prob} (at most {longest})"
        )


def validate_spec(spec: SplitSpec, known_splits: Collection[str] = ()) -> None:
    """Checks a split spec (names, tie-break, groups, embedding); raises LakeshiftError."""
    if not isinstance(spec.name, str) or not spec.name or "/" in spec.name or spec.name.startswith("."):
        raise LakeshiftError(
            f"bad split name {spec.name!r} (a non-empty string without '/' that does not start with '.')"
        )
    if not isinstance(spec.groups, (tuple, list)) or not all(isinstance(g, Group) for g in spec.groups):
        raise LakeshiftError(f"split {spec.name}: groups must be a tuple of Group, got {shown(spec.groups)}")
    if spec.tie_break not in TIE_BREAKS:
        raise LakeshiftError(
            f"split {spec.name}: unknown tie-break {spec.tie_break!r} "
            f"(expected one of {', '.join(TIE_BREAKS)})"
        )
    if spec.embed_source:
        if spec.groups:
            raise LakeshiftError(f"split {spec.name}: an embedded split takes no groups")
        if known_splits and spec.embed_source not in known_splits:
            raise LakeshiftError(f"split {spec.name}: unknown embed source split {spec.embed_source!r}")
        if not isinstance(spec.embed_size, int) or isinstance(spec.embed_size, bool) or spec.embed_size < 2:
            raise LakeshiftError(
                f"split {spec.name}: embed size must be an integer >= 2, got {spec.embed_size!r}"
            )
        p = spec.embed_hole_prob
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p < 1.0:
            raise LakeshiftError(
                f"split {spec.name}: embed_hole_prob must be a probability in [0, 1), got {p!r}"
            )
    elif not spec.groups:
        raise LakeshiftError(f"split {spec.name}: no maps to generate (give groups or an embed source)")
    for i, g in enumerate(spec.groups):
        validate_group(g, f"split {spec.name}, group {i + 1} ({g.size}x{g.size})")
    for name in spec.exclude:
        if known_splits and name not in known_splits:
            raise LakeshiftError(f"split {spec.name}: unknown excluded split {name!r}")


# ----- randomness -------------------------------------------------------------------------------------------
def map_rng(seed: int, split: str, index: int) -> random.Random:
    """The RNG of one map: a function of ``(seed, split, index)`` only.

    Equal to ``random.Random(int.from_bytes(sha256(f"{seed}/{split}/{index}").digest(), "big"))``; the
    C-level seeding call skips ``Random.seed``'s Python wrapper (about 1 us of the ~30 us a map costs).
    """
    rng = _Random.__new__(_Random)
    _c_seed(rng, int.from_bytes(hashlib.sha256(f"{seed}/{split}/{index}".encode()).digest(), "big"))
    rng.gauss_next = None  # type: ignore[attr-defined]  # random.Random's state, not in its stubs
    return rng


def map_id(split: str, index: int, total: int) -> str:
    """``"<split>-00042"`` (at least five digits, more when the split is larger)."""
    return f"{split}-{index:0{_id_width(total)}d}"


def _id_width(total: int) -> int:
    return max(5, len(str(max(total - 1, 0))))


@lru_cache(maxsize=256)
def _binomial_cdf(cells: int, q: float) -> tuple[float, ...]:
    """Cumulative probabilities of ``Binomial(cells, q)`` (log-space, so large maps do not overflow)."""
    if q == 0.0:
        return (1.0,)
    lq, lp = math.log(q), math.log1p(-q)
    total, cdf = 0.0, []
    for k in range(cells + 1):
        total += math.exp(
            math.lgamma(cells + 1)
            - math.lgamma(k + 1)
            - math.lgamma(cells - k + 1)
            + k * lq
            + (cells - k) * lp
        )
        cdf.append(total)
    return tuple(cdf)


@lru_cache(maxsize=64)
def _pool(cells: int) -> tuple[int, ...]:
    return tuple(range(cells))


@lru_cache(maxsize=64)
def _geometry(n: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Per flat cell index ``r * n + c``: row, column and bit index ``r * (n + 1) + c``."""
    rows = tuple(i // n for i in range(n * n))
    cols = tuple(i % n for i in range(n * n))
    bits = tuple(r * (n + 1) + c for r, c in zip(rows, cols, strict=True))
    return rows, cols, bits


def _bitboard(cells: Iterable[int], bit_of: Sequence[int], n_bits: int) -> int:
    """The bitboard with the bits ``bit_of[c]`` set, built in one pass (O(n^2), not O(n^2) per cell)."""
    board = bytearray((n_bits + 7) // 8)
    for c in cells:
        b = bit_of[c]
        board[b >> 3] |= 1 << (b & 7)
    return int.from_bytes(board, "little")


# ----- one map ----------------------------------------------------------------------------------------------
def _rows_of(n: int, holes: Iterable[int], s: int, g: int) -> list[str]:
    cells = bytearray(b"F" * (n * n))
    for h in holes:
        cells[h] = 72  # "H"
    cells[s] = 83  # "S"
    cells[g] = 71  # "G"
    flat = cells.decode("ascii")
    return [flat[i : i + n] for i in range(0, n * n, n)]


def _draw_random(
    g: Group,
    rng: random.Random,
    tie_break: TieBreak,
    forbidden: Collection[tuple[str, ...]],
    stats: GenStats,
    max_attempts: int,
    where: Callable[[], str],
) -> dict:
    n = g.size
    nn = n * n
    w = n + 1
    rows_of, cols_of, bit_of = _geometry(n)
    cdf = _binomial_cdf(nn, float(g.hole_prob))
    full = _full_mask(n)
    dmin, dmax = g.d_inf_min, (n - 1 if g.d_inf_max is None else g.d_inf_max)
    lmin, lmax = g.length_min, (nn if g.length_max is None else g.length_max)
    rnd = rng.random
    pool0 = _pool(nn)
    for attempt in range(1, max_attempts + 1):
        s = int(rnd() * nn)
        t = int(rnd() * (nn - 1))
        t += t >= s
        d = max(abs(rows_of[s] - rows_of[t]), abs(cols_of[s] - cols_of[t]))
        if d < dmin or d > dmax:
            stats.constraints += 1
            continue
        k = bisect.bisect_right(cdf, rnd())
        if k > nn - 2:
            stats.unsolvable += 1
            continue
        if 2 * k <= nn:
            # Sparse holes: draw cells until k distinct ones are neither start, goal nor already holes
            # (a uniform k-subset of the other cells, like Fisher-Yates, at a fraction of its cost). A
            # bytearray, not a bitboard: setting one bit of an n*n-bit integer copies it (O(n^4) per map).
            taken = bytearray(nn)
            taken[s] = taken[t] = 1
            holes: list[int] = []
            while len(holes) < k:
                c = int(rnd() * nn)
                if not taken[c]:
                    taken[c] = 1
                    holes.append(c)
        else:
            # Dense holes: partial Fisher-Yates; positions 0 and 1 hold start and goal, the next k the holes.
            pool = list(pool0)
            pool[0], pool[s] = s, 0
            tg = s if t == 0 else t
            pool[1], pool[tg] = pool[tg], pool[1]
            for j in range(2, 2 + k):
                r = j + int(rnd() * (nn - j))
                pool[j], pool[r] = pool[r], pool[j]
            holes = pool[2 : 2 + k]
        hole_bits = _bitboard(holes, bit_of, w * n)
        sb, gb = bit_of[s], bit_of[t]
        layers = _bfs_layers(full & ~hole_bits, 1 << gb, 1 << sb, w)
        if layers is None:
            stats.unsolvable += 1
            continue
        length = len(layers) - 1
        if length < lmin or length > lmax:
            stats.constraints += 1
            continue
        rows = _rows_of(n, holes, s, t)
        if forbidden and tuple(rows) in forbidden:
            stats.duplicate_of_train += 1
            continue
        stats.attempts += attempt
        stats.per_map_max_attempts = max(stats.per_map_max_attempts, attempt)
        path = _choose_path(layers, sb, gb, n, tie_break, rng)
        return {
            "size": n,
            "rows": rows,
            "start": [rows_of[s], cols_of[s]],
            "goal": [rows_of[t], cols_of[t]],
            "holes": k,
            "d_inf": d,
            "optimal_length": length,
            "optimal_path": path,
            "n_optimal_paths": _count_optimal_paths(layers, sb, n),
        }
    raise LakeshiftError(
        f"{where()}: no {n}x{n} map met the constraints (d_inf {dmin}..{dmax}, optimal length "
        f"{lmin}..{g.length_max if g.length_max is not None else 'any'}, hole probability {g.hole_prob}) "
        f"in {max_attempts} attempts; loosen them"
    )


def _embed(
    src: Mapping,
    size: int,
    hole_prob: float,
    rng: random.Random,
    forbidden: Collection[tuple[str, ...]],
    stats: GenStats,
    max_attempts: int,
    where: Callable[[], str],
) -> dict:
    k = int(src["size"])
    if k > size:
        raise LakeshiftError(f"{where()}: cannot embed a {k}x{k} map into a {size}x{size} map")
    n, nn, w = size, size * size, size + 1
    rows_of, cols_of, bit_of = _geometry(n)
    cdf = _binomial_cdf(nn, float(hole_prob))
    full = _full_mask(n)
    src_rows = src["rows"]
    src_len = int(src["optimal_length"])
    rnd = rng.random
    pool0 = _pool(nn)
    for attempt in range(1, max_attempts + 1):
        nh = bisect.bisect_right(cdf, rnd())
        pool = list(pool0)
        for j in range(nh):
            r = j + int(rnd() * (nn - j))
            pool[j], pool[r] = pool[r], pool[j]
        r0 = int(rnd() * (n - k + 1))
        c0 = int(rnd() * (n - k + 1))
        cells = bytearray(b"F" * nn)
        for h in pool[:nh]:
            cells[h] = 72
        for i, row in enumerate(src_rows):
            base = (r0 + i) * n + c0
            cells[base : base + k] = row.encode("ascii")
        flat = cells.decode("ascii")
        s, t = flat.index("S"), flat.index("G")
        hole_bits = _bitboard((i for i, ch in enumerate(flat) if ch == "H"), bit_of, w * n)
        sb, gb = bit_of[s], bit_of[t]
        layers = _bfs_layers(full & ~hole_bits, 1 << gb, 1 << sb, w)
        assert layers is not None, "an embedded solvable map stays solvable"
        if len(layers) - 1 != src_len:
            stats.embed_shortcut += 1
            continue
        rows = [flat[i : i + n] for i in range(0, nn, n)]
        if forbidden and tuple(rows) in forbidden:
            stats.duplicate_of_train += 1
            continue
        stats.attempts += attempt
        stats.per_map_max_attempts = max(stats.per_map_max_attempts, attempt)
        return {
            "size": n,
            "rows": rows,
            "start": [rows_of[s], cols_of[s]],
            "goal": [rows_of[t], cols_of[t]],
            "holes": flat.count("H"),
            "d_inf": max(abs(rows_of[s] - rows_of[t]), abs(cols_of[s] - cols_of[t])),
            "optimal_length": src_len,
            "optimal_path": [LETTER_MOVES.get(m, m) for m in src["optimal_path"]],
            "n_optimal_paths": _count_optimal_paths(layers, sb, n),
            "source_id": src["id"],
            "offset": [r0, c0],
        }
    raise LakeshiftError(
        f"{where()}: could not embed map {src['id']} without a shortcut in {max_attempts} attempts"
    )


def _locate(spec: SplitSpec, index: int) -> Group:
    for g in spec.groups:
        if index < g.count:
            return g
        index -= g.count
    raise IndexError(f"split {spec.name} has no map {index}")


def _one(
    spec: SplitSpec,
    seed: int,
    index: int,
    total: int,
    forbidden: Collection[tuple[str, ...]],
    source: Mapping | None,
    stats: GenStats,
    max_attempts: int,
) -> dict:
    rng = map_rng(seed, spec.name, index)

    def where() -> str:
        return f"split {spec.name}, map {index}"

    if spec.embed_source:
        if source is None:
            raise ValueError("an embedded split needs its source map")
        body = _embed(
            source, spec.embed_size, spec.embed_hole_prob, rng, forbidden, stats, max_attempts, where
        )
    else:
        body = _draw_random(_locate(spec, index), rng, spec.tie_break, forbidden, stats, max_attempts, where)
    return {"id": map_id(spec.name, index, total), "split": spec.name, **body}


def generate_map(
    spec: SplitSpec,
    seed: int,
    index: int,
    *,
    forbidden: Collection[tuple[str, ...]] = frozenset(),
    sources: Sequence[Mapping] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> dict:
    """Regenerates map ``index`` of a split alone (identical to its line in the split's ``maps.jsonl``).

    Args:
        spec: The split.
        seed: Suite seed.
        index: 0-based map index within the split.
        forbidden: Rows (as tuples) of the training maps this split must avoid.
        sources: The source split's records, for embedded splits.
        max_attempts: Give up after this many draws.

    Raises:
        LakeshiftError: a spec :func:`validate_spec` refuses (a group's ``size`` below 2, its ``hole_prob``
            outside [0, 1), ...), a ``seed`` that is not an integer >= 0, an ``index`` outside the split,
            an embedded split without ``sources``, ``max_attempts`` below 1, or constraints that no map
            met in ``max_attempts`` draws.
    """
    if not isinstance(spec, SplitSpec):
        raise ArgumentError(f"spec must be a SplitSpec, got {shown(spec)}")
    validate_spec(spec)
    check_int("seed", seed, 0)
    check_int("max_attempts", max_attempts, 1)
    if spec.embed_source:
        if not isinstance(sources, Sequence):
            raise ArgumentError(
                f"sources: split {spec.name} embeds the maps of split {spec.embed_source!r}: pass that "
                f"split's records (a list), got {shown(sources)}"
            )
        total = len(sources)
    else:
        total = spec.count or 0
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < total:
        raise ArgumentError(
            f"index must be an integer in [0, {total}) (split {spec.name} has {total} maps), "
            f"got {shown(index)}"
        )
    source = sources[index] if spec.embed_source and sources is not None else None
    return _one(spec, seed, index, total, forbidden, source, GenStats(), max_attempts)


# Worker-process state (set by the pool initializer, so large arguments are sent once per process).
_WORKER: dict = {}


def _init_worker(spec: SplitSpec, seed: int, total: int, forbidden, sources, max_attempts: int) -> None:
    _WORKER.update(
        spec=spec, seed=seed, total=total, forbidden=forbidden, sources=sources, max_attempts=max_attempts
    )


def _work_chunk(bounds: tuple[int, int]) -> tuple[list[dict], GenStats]:
    st = GenStats()
    w = _WORKER
    out = [
        _one(
            w["spec"],
            w["seed"],
            i,
            w["total"],
            w["forbidden"],
            w["sources"][i] if w["sources"] is not None else None,
            st,
            w["max_attempts"],
        )
        for i in range(*bounds)
    ]
    return out, st


def generate_split(
    spec: SplitSpec,
    seed: int,
    *,
    workers: int = 1,
    forbidden: Collection[tuple[str, ...]] = frozenset(),
    sources: Sequence[Mapping] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    progress: Callable[[int], None] | None = None,
    chunk: int = 2000,
) -> tuple[list[dict], GenStats]:
    """Generates every map of a split, in index order; identical output for any ``workers``.

    Args:
        spec: The split (validate it first with :func:`validate_spec`).
        seed: Suite seed.
        workers: Worker processes (1: in this process).
        forbidden: Rows (as tuples) of training maps that must not be drawn (redrawn, and counted).
        sources: Records of ``spec.embed_source`` for embedded splits.
        max_attempts: Per-map draw limit.
        progress: Called with the number of maps finished after each chunk.
        chunk: Maps per unit of work.

    Returns:
        The map records and the rejection statistics.
    """
    if spec.embed_source:
        if sources is None:
            raise ValueError(f"split {spec.name} embeds {spec.embed_source}: pass its records as sources")
        total = len(sources)
    else:
        total = spec.count or 0
    stats = GenStats()
    records: list[dict] = []
    bounds = [(a, min(a + chunk, total)) for a in range(0, total, chunk)]
    if workers <= 1 or len(bounds) <= 1:
        _init_worker(spec, seed, total, forbidden, sources, max_attempts)
        try:
            for b in bounds:
                recs, st = _work_chunk(b)
                records.extend(recs)
                stats.add(st)
                if progress:
                    progress(len(recs))
        finally:
            _WORKER.clear()
        return records, stats
    import multiprocessing as mp

    ctx = mp.get_context(_start_method())
    with ctx.Pool(
        min(workers, len(bounds)),
        initializer=_init_worker,
        initargs=(spec, seed, total, frozenset(forbidden), sources, max_attempts),
    ) as pool:
        for recs, st in pool.imap(_work_chunk, bounds):
            records.extend(recs)
            stats.add(st)
            if progress:
                progress(len(recs))
    return records, stats


def _start_method() -> str:
    """``fork`` where available (fast, no re-import); ``spawn`` elsewhere."""
    import multiprocessing as mp

    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def rows_key(record: Mapping) -> tuple[str, ...]:
    """The identity of a map for duplicate checks: its gymnasium rows."""
    return tuple(record["rows"])
