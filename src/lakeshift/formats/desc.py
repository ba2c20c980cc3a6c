"""The description format, byte-exact with VSP's ``pure_text/*.txt``.

```
This is a 3x3 map.
The player is at: row 2, column 1;
The hole(s) are at: Row 1, Column 2; Row 1, Column 3;
The goal is at: Row 1, Column 1.
```
Rows and columns are 1-based. The player line uses lower-case ``row``/``column``, holes and goal capitalised
ones (VSP's quirk, kept). Holes are listed in row-major order, each followed by ``;``; with no holes the third
line is exactly ``There is no holes in this map;`` (VSP's grammar, kept). No trailing newline.

When the player stands on the goal (a CoT state), the goal line still names the goal cell, i.e. the same cell
as the player line; :func:`parse` then returns ``goal=None`` like the other formats do.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lakeshift.env import Cell
from lakeshift.formats import BoardState, FormatError, check_state

NO_HOLES = "There is no holes in this map;"

_HEADER = re.compile(r"This is a (\d+)x(\d+) map\.")
_PLAYER = re.compile(r"The player is at: row (\d+), column (\d+);")
_HOLES = re.compile(r"The hole\(s\) are at:((?: Row \d+, Column \d+;)+)")
_HOLE = re.compile(r" Row (\d+), Column (\d+);")
_GOAL = re.compile(r"The goal is at: Row (\d+), Column (\d+)\.")


def render_state(state: BoardState) -> str:
    """The description text of a state (no trailing newline)."""
    n = state.size
    r, c = state.player
    lines = [f"This is a {n}x{n} map.", f"The player is at: row {r + 1}, column {c + 1};"]
    lines.append(_holes_line(state.holes))
    gr, gc = state.player if state.goal is None else state.goal
    lines.append(f"The goal is at: Row {gr + 1}, Column {gc + 1}.")
    return "\n".join(lines)


@lru_cache(maxsize=512)
def _holes_line(holes: frozenset[Cell]) -> str:
    # Cached: every state of a map has the same holes (a frozenset caches its hash).
    if not holes:
        return NO_HOLES
    return "The hole(s) are at:" + "".join([f" Row {r + 1}, Column {c + 1};" for r, c in sorted(holes)])


def parse(text: str) -> BoardState:
    """Parses a description (surrounding whitespace and trailing spaces on lines ignored).

    Raises:
        FormatError: not exactly the four description lines, or inconsistent cells.
    """
    lines = [line.strip() for line in text.strip().splitlines()]
    if len(lines) != 4:
        raise FormatError(f"description: expected 4 lines, got {len(lines)}")
    head = _HEADER.fullmatch(lines[0])
    if not head:
        raise FormatError(f"description: bad first line {lines[0]!r}")
    if head[1] != head[2]:
        raise FormatError(f"description: the map must be square, got {head[1]}x{head[2]}")
    size = int(head[1])
    player_m = _PLAYER.fullmatch(lines[1])
    if not player_m:
        raise FormatError(f"description: bad player line {lines[1]!r}")
    holes: set[Cell] = set()
    if lines[2] != NO_HOLES:
        holes_m = _HOLES.fullmatch(lines[2])
        if not holes_m:
            raise FormatError(f"description: bad holes line {lines[2]!r}")
        for hole in _HOLE.finditer(holes_m[1]):
            cell = _cell(hole)
            if cell in holes:
                raise FormatError(f"description: hole at row {hole[1]}, column {hole[2]} listed twice")
            holes.add(cell)
    goal_m = _GOAL.fullmatch(lines[3])
    if not goal_m:
        raise FormatError(f"description: bad goal line {lines[3]!r}")
    return check_state(size, holes, _cell(player_m), _cell(goal_m), "description")


def _cell(match: re.Match[str]) -> Cell:
    return int(match[1]) - 1, int(match[2]) - 1
