"""The grid format of the paper (Figure 2 / 3): a ``Grid:`` line, then one line per row::

    Grid:
    .  G  .
    .  X  .
    .  P  X

``P`` player (also when standing on the goal), ``G`` goal, ``X`` hole, ``.`` empty, cells separated by two
spaces (measured from the paper's figure), no trailing spaces, no trailing newline. :func:`parse` accepts any
whitespace between cells.
"""

from __future__ import annotations

from functools import lru_cache

from lakeshift.env import Cell
from lakeshift.formats import BoardState, FormatError, _base_rows, state_from_symbols

HEADER = "Grid:"
SEP = "  "
SYMBOLS: dict[str, str] = {"player": "P", "goal": "G", "hole": "X", "empty": "."}
_PLAYER, _GOAL, _HOLE, _EMPTY = (SYMBOLS[k] for k in ("player", "goal", "hole", "empty"))


def render_state(state: BoardState) -> str:
    """The grid text of a state (no trailing newline)."""
    # The lines without the player are cached per map; only the player's row is joined anew.
    r, c = state.player
    # With the player on the goal the goal is hidden, so the map's own lines (goal drawn there) serve.
    goal = state.player if state.goal is None else state.goal
    lines = list(_base_lines(state.size, state.holes, goal))
    row = _base_rows(state.size, state.holes, goal, _HOLE, _GOAL, _EMPTY)[r]
    lines[r + 1] = SEP.join(row[:c] + _PLAYER + row[c + 1 :])
    return "\n".join(lines)


@lru_cache(maxsize=512)
def _base_lines(size: int, holes: frozenset[Cell], goal: Cell | None) -> tuple[str, ...]:
    return (HEADER, *map(SEP.join, _base_rows(size, holes, goal, _HOLE, _GOAL, _EMPTY)))


def parse(text: str) -> BoardState:
    """Parses a grid (surrounding whitespace ignored).

    Raises:
        FormatError: missing ``Grid:`` line, ragged or non-square rows, unknown symbols, not exactly one
            player, two goals.
    """
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or lines[0] != HEADER:
        raise FormatError(f"grid: the first line must be {HEADER!r}")
    rows = [line.split() for line in lines[1:]]
    size = len(rows)
    if size < 2:
        raise FormatError(f"grid: expected at least 2 rows, got {size}")
    return state_from_symbols(rows, SYMBOLS, "grid")
