"""The spelling every trace shares: the CoT format names, the boxed answer, cells, and moves between cells."""

from __future__ import annotations

from collections.abc import Sequence

from lakeshift.env import DELTAS, LETTER_MOVES, Cell, FrozenLakeMap
from lakeshift.errors import ArgumentError

COT_FORMATS: tuple[str, ...] = (
    "none",
    "desc",
    "table",
    "grid",
    "table+desc",
    "grid+desc",
    "astar",
    "coords",
    "wave",
)
#: CoT formats that write no map: a search trace (``astar``) or a list of cells (``coords``).
PATH_COTS: tuple[str, ...] = ("astar", "coords")
#: CoT formats whose trace is fixed by the map, not by a plan: the breadth-first frames of ``wave``.
MAP_COTS: tuple[str, ...] = ("wave",)
#: CoT formats that write a trace before the answer (every one but ``none``).
TRACE_COTS: tuple[str, ...] = tuple(c for c in COT_FORMATS if c != "none")
#: The map format each CoT redraws after every move (``None``: it redraws no map).
MAP_FORMAT: dict[str, str | None] = {
    "none": None,
    "desc": None,
    "table": "table",
    "grid": "grid",
    "table+desc": "table",
    "grid+desc": "grid",
    "astar": None,
    "coords": None,
    "wave": None,
}
#: Where the answer starts: the text the scorer looks for, and every trace's last line begins with.
BOXED = "\\boxed{"


def boxed(path: Sequence[str]) -> str:
    r"""The final answer, e.g. ``\boxed{UP, RIGHT}`` (letters ``U D L R`` are accepted and spelled out)."""
    return BOXED + ", ".join(normalise_move(move) for move in path) + "}"


def cell_text(cell: Cell) -> str:
    """``(row,column)``, 1-based, as the path CoTs write a cell: ``cell_text((0, 2)) == "(1,3)"``."""
    return f"({cell[0] + 1},{cell[1] + 1})"


def implied_move(prev: Cell | None, now: Cell) -> str | None:
    """The move from ``prev`` to the adjacent cell ``now``; ``None`` without a ``prev`` or if not adjacent."""
    if prev is None:
        return None
    delta = (now[0] - prev[0], now[1] - prev[1])
    for move, d in DELTAS.items():
        if d == delta:
            return move
    return None


def into_hole(m: FrozenLakeMap, pos: Cell, move: str) -> bool:
    """Whether ``move`` from ``pos`` lands in a hole of ``m``."""
    return m.step(pos, move) in m.holes


def normalise_move(move: str) -> str:
    """``UP``, ``DOWN``, ``LEFT`` or ``RIGHT`` for a move name or its letter; :class:`ArgumentError` (a
    ``ValueError``) otherwise."""
    name = LETTER_MOVES.get(move, move) if isinstance(move, str) else None
    if name not in DELTAS:
        raise ArgumentError(f"unknown move {move!r} (expected UP, DOWN, LEFT, RIGHT or U, D, L, R)")
    return name
