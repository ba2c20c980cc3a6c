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

from lakeshift.env import Cell
from lakeshift.formats import BoardState, FormatError, check_state

HEADER = "Grid:"
SEP = "  "
SYMBOLS: dict[str, str] = {"player": "P", "goal": "G", "hole": "X", "empty": "."}
_KINDS: dict[str, str] = {v: k for k, v in SYMBOLS.items()}


def render_state(state: BoardState) -> str:
    """The grid text of a state (no trailing newline)."""
    return "\n".join([HEADER, *(SEP.join(row) for row in state.symbol_rows(SYMBOLS))])


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
    holes: set[Cell] = set()
    players: list[Cell] = []
    goals: list[Cell] = []
    for r, row in enumerate(rows):
        if len(row) != size:
            raise FormatError(f"grid: row {r + 1} has {len(row)} cells, expected {size} (square map)")
        for c, sym in enumerate(row):
            kind = _KINDS.get(sym)
            if kind is None:
                raise FormatError(f"grid: unknown symbol {sym!r} at row {r + 1}, column {c + 1}")
            if kind == "hole":
                holes.add((r, c))
            elif kind == "player":
                players.append((r, c))
            elif kind == "goal":
                goals.append((r, c))
    if len(players) != 1:
        raise FormatError(f"grid: expected one player 'P', found {len(players)}")
    if len(goals) > 1:
        raise FormatError(f"grid: expected at most one goal 'G', found {len(goals)}")
    return check_state(size, holes, players[0], goals[0] if goals else None, "grid")
