"""The table format: VSP's ``table/*.txt`` (compact, the default) and the paper figure's aligned variant.

Compact (byte-exact with VSP, whose files add one trailing newline that :func:`render_state` leaves out; see
:func:`lakeshift.formats.file_text`)::

    | | Col 1 | Col 2 | Col 3 |
    | Row 1 | * | # | # |
    | Row 2 | @ | _ | _ |
    | Row 3 | _ | _ | _ |

Aligned (``style="aligned"``, as drawn in the paper's Figure 3): every column as wide as its header, row
labels left-justified to the widest label, symbols centred::

    |       | Col 1 | Col 2 | Col 3 |
    | Row 1 |   *   |   #   |   #   |

``@`` player (also when standing on the goal), ``*`` goal, ``#`` hole, ``_`` empty. :func:`parse` accepts
both styles and any spacing inside the cells.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from lakeshift.env import Cell
from lakeshift.errors import ArgumentError
from lakeshift.formats import BoardState, FormatError, _base_rows, state_from_symbols

SYMBOLS: dict[str, str] = {"player": "@", "goal": "*", "hole": "#", "empty": "_"}
_PLAYER, _GOAL, _HOLE, _EMPTY = (SYMBOLS[k] for k in ("player", "goal", "hole", "empty"))


def render_state(state: BoardState, style: str = "compact") -> str:
    """The table text of a state (no trailing newline).

    Raises:
        ArgumentError: unknown style (a ``ValueError`` too).
    """
    if not isinstance(style, str) or style not in _ROW_LINE:
        raise ArgumentError(f"style: unknown table style {style!r} (expected 'compact' or 'aligned')")
    # The lines without the player are cached per map; only the player's row is formatted anew.
    r, c = state.player
    # With the player on the goal the goal is hidden, so the map's own lines (goal drawn there) serve.
    goal = state.player if state.goal is None else state.goal
    lines = list(_base_lines(state.size, state.holes, goal, style))
    row = _base_rows(state.size, state.holes, goal, _HOLE, _GOAL, _EMPTY)[r]
    lines[r + 1] = _ROW_LINE[style](state.size, r, row[:c] + _PLAYER + row[c + 1 :])
    return "\n".join(lines)


def _compact_header(n: int) -> str:
    return "| | " + " | ".join([f"Col {c + 1}" for c in range(n)]) + " |"


def _compact_row(n: int, r: int, row: str) -> str:
    # str.join over the row string: one symbol per character, no per-cell Python work.
    return f"| Row {r + 1} | " + " | ".join(row) + " |"


def _aligned_label_width(n: int) -> int:
    return len(f"Row {n}")


def _aligned_header(n: int) -> str:
    return (
        "| " + " " * _aligned_label_width(n) + " | " + " | ".join([f"Col {c + 1}" for c in range(n)]) + " |"
    )


def _aligned_row(n: int, r: int, row: str) -> str:
    label = f"Row {r + 1}".ljust(_aligned_label_width(n))
    return f"| {label} | " + " | ".join([sym.center(len(f"Col {c + 1}")) for c, sym in enumerate(row)]) + " |"


_HEADER_LINE: dict[str, Callable[[int], str]] = {"compact": _compact_header, "aligned": _aligned_header}
_ROW_LINE: dict[str, Callable[[int, int, str], str]] = {"compact": _compact_row, "aligned": _aligned_row}


@lru_cache(maxsize=512)
def _base_lines(size: int, holes: frozenset[Cell], goal: Cell | None, style: str) -> tuple[str, ...]:
    rows = _base_rows(size, holes, goal, _HOLE, _GOAL, _EMPTY)
    row_line = _ROW_LINE[style]
    return (_HEADER_LINE[style](size), *(row_line(size, r, row) for r, row in enumerate(rows)))


def parse(text: str) -> BoardState:
    """Parses a table in either style (surrounding whitespace ignored).

    Raises:
        FormatError: malformed header or rows, unknown symbols, not exactly one player, two goals.
    """
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or not lines[0]:
        raise FormatError("table: empty text")
    rows = [_split(line, i + 1) for i, line in enumerate(lines)]
    head = rows[0]
    size = len(head) - 1
    if head[0] != "" or head[1:] != [f"Col {c + 1}" for c in range(size)]:
        raise FormatError(f"table: bad header line {lines[0]!r}")
    if len(rows) != size + 1:
        raise FormatError(f"table: header has {size} columns but there are {len(rows) - 1} rows")
    for r, row in enumerate(rows[1:]):
        if len(row) != size + 1:
            raise FormatError(f"table: row {r + 1} has {len(row) - 1} cells, expected {size}")
        if row[0] != f"Row {r + 1}":
            raise FormatError(f"table: row {r + 1} is labelled {row[0]!r}")
    return state_from_symbols([row[1:] for row in rows[1:]], SYMBOLS, "table")


def _split(line: str, lineno: int) -> list[str]:
    if not (line.startswith("|") and line.endswith("|")) or len(line) < 2:
        raise FormatError(f"table: line {lineno} does not start and end with '|': {line!r}")
    return [cell.strip() for cell in line[1:-1].split("|")]
