"""The FrozenLake environment: maps, rules and an exact solver.

Semantics (rules ``"v1"``, the only version so far)
---------------------------------------------------
A map is an ``n x n`` grid (``n >= 2``). Every cell is *frozen* (safe) or a *hole*. Exactly one frozen cell
holds the player's **start** and another one the **goal**. Cells are addressed ``(row, col)``, 0-based,
row 0 at the top; text formats print them 1-based.

Moves: ``UP`` (row - 1), ``DOWN`` (row + 1), ``LEFT`` (col - 1), ``RIGHT`` (col + 1), abbreviated
``U D L R``. A plan is a sequence of moves, executed in order:

* a move that would leave the grid has no effect: the player stays where it is;
* entering a hole ends the episode at once with a failure;
* the plan **succeeds iff the player stands on the goal after its last move**. Reaching the goal and then
  walking on is a failure (gymnasium would stop the episode at the goal; the paper's evaluator does not,
  and we follow the paper). The empty plan fails because start != goal.

This is deterministic ``FrozenLake-v1`` with ``is_slippery=False`` and a free start position.

Solver
------
Breadth-first search from the goal gives every cell's distance to it. The optimal length is the start's
distance; ``d_inf = max(|s_row - g_row|, |s_col - g_col|)`` is the L-infinity start-goal distance
(``optimal_length >= |dr| + |dc| >= d_inf``). An optimal path is built from the
start by always taking a move into a cell one step closer to the goal. Where several moves qualify the
*tie-break* decides:

* ``"direct"`` (default): prefer the qualifying moves that are *direct*, i.e. reduce the row or the column
  distance to the goal (the directions a description trace calls "the direct path"), then take the first in
  ``UP, LEFT, RIGHT, DOWN`` order; a move away from the goal is taken only when no direct move is on a
  shortest path. This reproduces 999 of the 1000 official Mirage training answers (the plain order below
  976), and its description traces never detour while a direct move is as short.
* ``"priority"``: the first qualifying move in ``UP, LEFT, RIGHT, DOWN`` order, direct or not.
* ``"uniform"``: a uniformly random optimal path (each of the ``n_optimal_paths`` equally likely), drawn
  with a caller-supplied ``random.Random``, so it is reproducible from a seed.

Implementation: cells are bits of a Python integer (row stride ``n + 1``, the extra column is a guard bit
so that horizontal shifts cannot wrap), which makes a BFS layer a handful of integer operations.
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from lakeshift.errors import ArgumentError, LakeshiftError, shown

RULES_VERSION = "v1"

Cell = tuple[int, int]
MOVES: tuple[str, ...] = ("UP", "DOWN", "LEFT", "RIGHT")
MOVE_LETTERS: dict[str, str] = {"UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}
LETTER_MOVES: dict[str, str] = {v: k for k, v in MOVE_LETTERS.items()}
DELTAS: dict[str, Cell] = {"UP": (-1, 0), "DOWN": (1, 0), "LEFT": (0, -1), "RIGHT": (0, 1)}
TIE_BREAK_PRIORITY: tuple[str, ...] = ("UP", "LEFT", "RIGHT", "DOWN")
TieBreak = Literal["direct", "priority", "uniform"]
TIE_BREAKS: tuple[str, ...] = ("direct", "priority", "uniform")


class MapError(LakeshiftError, ValueError):
    """A map description that is not a valid FrozenLake map (a :class:`LakeshiftError`, and a ``ValueError``
    as before)."""


@dataclass(frozen=True)
class FrozenLakeMap:
    """An immutable ``size x size`` FrozenLake map.

    Attributes:
        size: Side length ``n``.
        holes: The hole cells.
        start: The player's start cell ``(row, col)``.
        goal: The goal cell ``(row, col)``.

    Example:
        >>> from lakeshift import FrozenLakeMap
        >>> lake = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
        >>> lake.start, lake.goal, lake.d_inf
        ((2, 1), (0, 1), 2)
        >>> lake.optimal_path()
        ['LEFT', 'UP', 'UP', 'RIGHT']
    """

    size: int
    holes: frozenset[Cell]
    start: Cell
    goal: Cell

    def __post_init__(self) -> None:
        n = self.size
        if not isinstance(n, int) or n < 2:
            raise MapError(f"map size must be an integer >= 2, got {n!r}")
        for name, cell in (("start", self.start), ("goal", self.goal)):
            if not _is_cell(cell):
                raise MapError(f"{name} must be a (row, column) tuple of integers, got {shown(cell)}")
            if not _inside(cell, n):
                raise MapError(f"{name} {cell} is outside the {n}x{n} map")
        if self.start == self.goal:
            raise MapError(f"start and goal are the same cell {self.start}")
        bad_holes = "holes must be a frozenset of (row, column) cells, got {}"
        if isinstance(self.holes, str) or not isinstance(self.holes, Collection):
            raise MapError(bad_holes.format(shown(self.holes)))
        try:
            for cell in self.holes:
                if not _inside(cell, n):
                    raise MapError(f"hole {cell} is outside the {n}x{n} map")
        except (TypeError, IndexError):  # a hole that is not a pair of numbers
            raise MapError(bad_holes.format(shown(self.holes))) from None
        if self.start in self.holes or self.goal in self.holes:
            raise MapError("start and goal must not be holes")

    # ----- conversions -------------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, rows: Sequence[str]) -> FrozenLakeMap:
        """Builds a map from gymnasium rows of ``S F H G`` characters.

        Raises:
            MapError: ``rows`` that is not a list of strings, or rows that are not a valid map.
        """
        if not isinstance(rows, Sequence) or not all(isinstance(row, str) for row in rows):
            raise MapError(f"rows must be a list of strings of S, F, H and G, got {shown(rows)}")
        n = len(rows)
        holes, start, goal = set(), [], []
        for r, row in enumerate(rows):
            if len(row) != n:
                raise MapError(f"row {r + 1} has {len(row)} cells, expected {n} (the map must be square)")
            for c, ch in enumerate(row):
                if ch == "H":
                    holes.add((r, c))
                elif ch == "S":
                    start.append((r, c))
                elif ch == "G":
                    goal.append((r, c))
                elif ch != "F":
                    raise MapError(
                        f"unknown cell {ch!r} at row {r + 1}, column {c + 1} (expected S, F, H or G)"
                    )
        if len(start) != 1 or len(goal) != 1:
            raise MapError(f"a map needs exactly one S and one G, found {len(start)} and {len(goal)}")
        return cls(n, frozenset(holes), start[0], goal[0])

    @classmethod
    def from_map_desc(cls, desc: Sequence[Sequence[int]]) -> FrozenLakeMap:
        """Builds a map from Mirage's ``map_desc`` (0 frozen, -1 hole, 1 start, 2 goal)."""
        letters = {0: "F", -1: "H", 1: "S", 2: "G"}
        if isinstance(desc, (str, bytes)) or not isinstance(desc, Iterable):
            raise MapError(f"map_desc must be a list of rows of 0, -1, 1 and 2, got {shown(desc)}")
        rows = []
        for r, row in enumerate(desc):
            try:
                rows.append("".join(letters[int(v)] for v in row))
            except (KeyError, TypeError, ValueError) as err:
                raise MapError(f"map_desc row {r + 1} has a value other than 0, -1, 1, 2: {row!r}") from err
        return cls.from_rows(rows)

    @property
    def rows(self) -> list[str]:
        """Gymnasium rows (``S F H G``), top row first."""
        return list(self._rows)

    @cached_property
    def _rows(self) -> tuple[str, ...]:
        n = self.size
        cells = ["F"] * (n * n)
        for r, c in self.holes:
            cells[r * n + c] = "H"
        cells[self.start[0] * n + self.start[1]] = "S"
        cells[self.goal[0] * n + self.goal[1]] = "G"
        flat = "".join(cells)
        return tuple(flat[i : i + n] for i in range(0, n * n, n))

    def to_map_desc(self) -> list[list[int]]:
        """Mirage's ``map_desc`` integer grid."""
        code = {"F": 0, "H": -1, "S": 1, "G": 2}
        return [[code[ch] for ch in row] for row in self.rows]

    def cell_char(self, r: int, c: int) -> str:
        """``S``, ``G``, ``H`` or ``F`` for one cell."""
        if (r, c) == self.start:
            return "S"
        if (r, c) == self.goal:
            return "G"
        return "H" if (r, c) in self.holes else "F"

    # ----- properties ----------------------------------------------------------------------------------
    @property
    def d_inf(self) -> int:
        """L-infinity distance between start and goal."""
        return max(abs(self.start[0] - self.goal[0]), abs(self.start[1] - self.goal[1]))

    @property
    def n_holes(self) -> int:
        return len(self.holes)

    def is_hole(self, cell: Cell) -> bool:
        return cell in self.holes

    def inside(self, cell: Cell) -> bool:
        return _inside(cell, self.size)

    @cached_property
    def _bits(self) -> _Board:
        return _Board.of(self)

    # ----- solver ----------------------------------------------------------------------------------------
    @property
    def optimal_length(self) -> int | None:
        """Length of a shortest successful plan, or ``None`` if the goal is unreachable."""
        layers = self._bits.layers
        return None if layers is None else len(layers) - 1

    @property
    def solvable(self) -> bool:
        return self._bits.layers is not None

    def optimal_path(self, tie_break: TieBreak = "direct", rng: random.Random | None = None) -> list[str]:
        """One shortest plan (moves as ``"UP"``...), chosen by ``tie_break`` (see module docstring).

        Raises:
            MapError: the goal is unreachable.
            ArgumentError: an unknown ``tie_break``, or ``"uniform"`` without ``rng``.
        """
        return self._bits.path(tie_break, rng)

    @property
    def n_optimal_paths(self) -> int:
        """Number of distinct shortest plans (0 if unsolvable)."""
        return self._bits.count_paths()

    def solve(self, tie_break: TieBreak = "direct", rng: random.Random | None = None) -> Solution:
        """Optimal length, one optimal path and the number of optimal paths at once.

        Raises:
            MapError: the goal is unreachable.
            ArgumentError: an unknown ``tie_break``, or ``"uniform"`` without ``rng``.
        """
        if not self.solvable:
            raise MapError("the goal is unreachable from the start")
        path = self.optimal_path(tie_break, rng)
        return Solution(len(path), path, self.n_optimal_paths)

    # ----- rules ------------------------------------------------------------------------------------------
    def step(self, cell: Cell, move: str) -> Cell:
        """The cell after one move from ``cell`` (off-edge moves stay in place; holes are not checked).

        Raises:
            ArgumentError: ``move`` is not one of :data:`MOVES`.
        """
        try:
            dr, dc = DELTAS[move]
        except (KeyError, TypeError):
            raise ArgumentError(f"move: unknown move {move!r} (expected one of {', '.join(MOVES)})") from None
        nxt = (cell[0] + dr, cell[1] + dc)
        return nxt if _inside(nxt, self.size) else cell

    def simulate(self, moves: Iterable[str]) -> Rollout:
        """Executes a plan under rules v1. ``moves`` are full names (``"UP"``) or letters (``"U"``).

        Example:
            >>> from lakeshift import FrozenLakeMap
            >>> lake = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
            >>> lake.simulate(["L", "U", "U", "R"]).success
            True
            >>> rollout = lake.simulate(["UP"])  # straight into the hole above the start
            >>> rollout.success, rollout.fell_at, rollout.final
            (False, 1, (1, 1))
        """
        pos = self.start
        visited = [pos]
        off_edge = 0
        reached_goal_at: int | None = None
        n = 0
        if isinstance(moves, (bytes, dict)) or not isinstance(moves, Iterable):
            raise ArgumentError(
                f"moves must be a sequence of moves (UP, DOWN, LEFT, RIGHT or U, D, L, R), got {shown(moves)}"
            )
        for n, move in enumerate(moves, start=1):
            name = LETTER_MOVES.get(move, move) if isinstance(move, str) else None
            if name not in DELTAS:
                raise ArgumentError(
                    f"moves: unknown move {move!r} at move {n} (expected UP, DOWN, LEFT, RIGHT or U, D, L, R)"
                )
            move = name
            nxt = self.step(pos, move)
            if nxt == pos:
                off_edge += 1
            pos = nxt
            visited.append(pos)
            if pos in self.holes:
                return Rollout(tuple(visited), False, n, off_edge, reached_goal_at, n)
            if pos == self.goal and reached_goal_at is None:
                reached_goal_at = n
        return Rollout(tuple(visited), pos == self.goal, None, off_edge, reached_goal_at, n)


@dataclass(frozen=True)
class Solution:
    optimal_length: int
    optimal_path: list[str]
    n_optimal_paths: int


@dataclass(frozen=True)
class Rollout:
    """The result of executing a plan.

    Attributes:
        positions: Start cell, then the cell after each executed move (stops at a hole).
        success: The player ends on the goal after the last move, without falling.
        fell_at: 1-based index of the move that entered a hole, or ``None``.
        off_edge_moves: Moves that had no effect because they pointed off the map.
        reached_goal_at: 1-based index of the first move that reached the goal, or ``None``.
        n_executed: Moves executed (all of them unless the player fell).
    """

    positions: tuple[Cell, ...]
    success: bool
    fell_at: int | None
    off_edge_moves: int
    reached_goal_at: int | None
    n_executed: int

    @property
    def final(self) -> Cell:
        return self.positions[-1]


def _is_cell(cell: object) -> bool:
    """A ``(row, column)`` tuple of two integers (numpy's included; not bools)."""
    return (
        isinstance(cell, tuple)
        and len(cell) == 2
        and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in cell)
    )


def _inside(cell: Cell, n: int) -> bool:
    return 0 <= cell[0] < n and 0 <= cell[1] < n


@dataclass
class _Board:
    """Bitboard view of a map: BFS layers from the goal, path extraction and counting."""

    n: int
    free: int
    start: int  # bit index of the start (row stride n + 1)
    goal: int
    layers: list[int] | None  # layers[k]: cells at distance k from the goal, up to the start's layer

    @classmethod
    def of(cls, m: FrozenLakeMap) -> _Board:
        n, w = m.size, m.size + 1
        holes = 0
        for r, c in m.holes:
            holes |= 1 << (r * w + c)
        free = _full_mask(n) & ~holes
        start = m.start[0] * w + m.start[1]
        goal = m.goal[0] * w + m.goal[1]
        return cls(n, free, start, goal, _bfs_layers(free, 1 << goal, 1 << start, w))

    def path(self, tie_break: TieBreak, rng: random.Random | None) -> list[str]:
        if self.layers is None:
            raise MapError("the goal is unreachable from the start")
        return _choose_path(self.layers, self.start, self.goal, self.n, tie_break, rng)

    def count_paths(self) -> int:
        if self.layers is None:
            return 0
        return _count_optimal_paths(self.layers, self.start, self.n)


_FULL_MASKS: dict[int, int] = {}


def _full_mask(n: int) -> int:
    mask = _FULL_MASKS.get(n)
    if mask is None:
        row = (1 << n) - 1
        mask = 0
        for r in range(n):
            mask |= row << (r * (n + 1))
        _FULL_MASKS[n] = mask
    return mask


def _bfs_layers(free: int, source: int, target: int, w: int) -> list[int] | None:
    """BFS layers from ``source`` until ``target`` is reached (``None`` if it never is)."""
    layers = [source]
    seen = frontier = source
    while not frontier & target:
        frontier = ((frontier << 1) | (frontier >> 1) | (frontier << w) | (frontier >> w)) & free & ~seen
        if not frontier:
            return None
        seen |= frontier
        layers.append(frontier)
    return layers


def _path_priority(layers: list[int], start: int, w: int) -> list[str]:
    """The optimal path that always takes the first move closer to the goal in ``UP, LEFT, RIGHT, DOWN``."""
    moves = []
    pos = start
    w2 = 2 * w
    for k in range(len(layers) - 2, -1, -1):
        # Shifting the lower layer up by one row first keeps every probe index non-negative.
        t = (layers[k] << w) >> pos
        if t & 1:
            moves.append("UP")
            pos -= w
        elif (t >> (w - 1)) & 1:
            moves.append("LEFT")
            pos -= 1
        elif (t >> (w + 1)) & 1:
            moves.append("RIGHT")
            pos += 1
        else:
            assert (t >> w2) & 1, "BFS layers are inconsistent"
            moves.append("DOWN")
            pos += w
    return moves


def _path_direct(layers: list[int], start: int, goal: int, w: int) -> list[str]:
    """The optimal path that prefers direct moves (towards the goal's row or column), then
    ``UP, LEFT, RIGHT, DOWN``; see the module docstring."""
    moves: list[str] = []
    append = moves.append
    pos = start
    wl, wr, w2 = w - 1, w + 1, 2 * w
    grow, gcol = divmod(goal, w)
    # UP is direct below the goal's row (bit index >= up_from), DOWN above it (bit index < down_below).
    up_from, down_below = (grow + 1) * w, grow * w
    for k in range(len(layers) - 2, -1, -1):
        # Bit w of t is pos itself; bits 0, w - 1, w + 1 and 2w are its UP, LEFT, RIGHT and DOWN neighbours.
        t = (layers[k] << w) >> pos
        col = pos % w
        if t & 1 and pos >= up_from:
            append("UP")
            pos -= w
        elif (t >> wl) & 1 and col > gcol:
            append("LEFT")
            pos -= 1
        elif (t >> wr) & 1 and col < gcol:
            append("RIGHT")
            pos += 1
        elif (t >> w2) & 1 and pos < down_below:
            append("DOWN")
            pos += w
        # No direct move is on a shortest path: the plain priority order.
        elif t & 1:
            append("UP")
            pos -= w
        elif (t >> wl) & 1:
            append("LEFT")
            pos -= 1
        elif (t >> wr) & 1:
            append("RIGHT")
            pos += 1
        else:
            assert (t >> w2) & 1, "BFS layers are inconsistent"
            append("DOWN")
            pos += w
    return moves


def _choose_path(
    layers: list[int], start: int, goal: int, n: int, tie_break: str, rng: random.Random | None
) -> list[str]:
    """One optimal path from BFS ``layers`` by ``tie_break`` (bit indices with row stride ``n + 1``)."""
    w = n + 1
    if tie_break == "direct":
        return _path_direct(layers, start, goal, w)
    if tie_break == "priority":
        return _path_priority(layers, start, w)
    if tie_break == "uniform":
        if rng is None:
            raise ArgumentError("rng: tie_break='uniform' needs an rng (a random.Random)")
        return _path_uniform(layers, start, w, _path_counts(layers, start, n), rng)
    raise ArgumentError(f"unknown tie_break {tie_break!r} (expected one of {', '.join(TIE_BREAKS)})")


def _path_counts(layers: list[int], start: int, n: int) -> list[int]:
    """Number of shortest paths to the goal from every cell that lies on a shortest start-goal path.

    Returns a list indexed by ``bit index + (n + 1)`` (the offset keeps neighbour indices in range); other
    cells hold 0. The grid is bipartite, so a cell at distance ``k`` only neighbours cells at distance
    ``k - 1`` and ``k + 1``: summing all four neighbours is exact while layers are filled in order, and every
    distance-``k - 1`` neighbour of an on-path cell is itself on a shortest path.
    """
    w = n + 1
    top = len(layers) - 1
    on_path = [0] * (top + 1)
    on_path[top] = 1 << start
    for k in range(top, 0, -1):
        f = on_path[k]
        on_path[k - 1] = ((f << 1) | (f >> 1) | (f << w) | (f >> w)) & layers[k - 1]
    counts = [0] * ((n + 2) * w + 1)
    counts[layers[0].bit_length() - 1 + w] = 1
    for k in range(1, top + 1):
        # Shifting by w makes bit positions the list indices directly.
        bits = on_path[k] << w
        while bits:
            i = (bits & -bits).bit_length() - 1
            counts[i] = counts[i - w] + counts[i + w] + counts[i - 1] + counts[i + 1]
            bits &= bits - 1
    return counts


def _count_optimal_paths(layers: list[int], start: int, n: int) -> int:
    """Number of shortest start-goal paths in one top-down pass (counts of paths *from the start*).

    Walking down the layers from the start, the cells of layer ``k - 1`` adjacent to the on-path cells of
    layer ``k`` are exactly the on-path cells of layer ``k - 1``; each one's count is the sum of its four
    neighbours' counts (only layer-``k`` neighbours are non-zero at that point, by bipartiteness).
    """
    w = n + 1
    counts = [0] * ((n + 2) * w + 1)
    counts[start + w] = 1
    f = 1 << start
    for k in range(len(layers) - 2, -1, -1):
        f = ((f << 1) | (f >> 1) | (f << w) | (f >> w)) & layers[k]
        bits = f << w
        while bits:
            i = (bits & -bits).bit_length() - 1
            counts[i] = counts[i - w] + counts[i + w] + counts[i - 1] + counts[i + 1]
            bits &= bits - 1
    return counts[layers[0].bit_length() - 1 + w]


def _path_uniform(layers: list[int], start: int, w: int, counts: list[int], rng: random.Random) -> list[str]:
    """A uniformly random optimal path: each move is weighted by the number of optimal paths it leads to."""
    shifts = {"UP": -w, "DOWN": w, "LEFT": -1, "RIGHT": 1}
    moves = []
    pos = start
    for k in range(len(layers) - 2, -1, -1):
        below = layers[k]
        options = []
        weights = []
        for move in TIE_BREAK_PRIORITY:
            nxt = pos + shifts[move]
            if nxt >= 0 and (below >> nxt) & 1:
                options.append((move, nxt))
                weights.append(counts[nxt + w])
        move, pos = rng.choices(options, weights=weights)[0]
        moves.append(move)
    return moves


def bitboard_solvable(n: int, hole_bits: int, start: Cell, goal: Cell) -> int | None:
    """Optimal length straight from a bitboard (for fast rejection sampling), or ``None`` if unsolvable.

    ``hole_bits`` uses the row stride ``n + 1`` of this module's bitboards.
    """
    w = n + 1
    layers = _bfs_layers(
        _full_mask(n) & ~hole_bits, 1 << (goal[0] * w + goal[1]), 1 << (start[0] * w + start[1]), w
    )
    return None if layers is None else len(layers) - 1


def solve_bitboard(
    n: int,
    hole_bits: int,
    start: int,
    goal: int,
    tie_break: TieBreak = "direct",
    rng: random.Random | None = None,
) -> tuple[int, list[str], int] | None:
    """Solves a map given as a bitboard: ``(optimal_length, optimal_path, n_optimal_paths)`` or ``None``.

    The fast path used by the generator (no :class:`FrozenLakeMap` is built). Cells are bit indices
    ``row * (n + 1) + col``; ``hole_bits`` must not contain ``start`` or ``goal``. Results are identical
    to :meth:`FrozenLakeMap.solve` with the same ``tie_break`` and ``rng`` state.
    """
    w = n + 1
    layers = _bfs_layers(_full_mask(n) & ~hole_bits, 1 << goal, 1 << start, w)
    if layers is None:
        return None
    path = _choose_path(layers, start, goal, n, tie_break, rng)
    return len(layers) - 1, path, _count_optimal_paths(layers, start, n)
