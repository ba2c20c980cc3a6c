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

from lakeshift.env import Cell
from lakeshift.formats import BoardState, FormatError, check_state

SYMBOLS: dict[str, str] = {"player": "@", "goal": "*", "hole": "#", "empty": "_"}
_KINDS: dict[str, str] = {v: k for k, v in SYMBOLS.items()}


def render_state(state: BoardState, style: str = "compact") -> str:
    """The table text of a state (no trailing newline).

    Raises:
        ValueError: unknown style.
    """
    n = state.size
    heads = [f"Col {c + 1}" for c in range(n)]
    labels = [f"Row {r + 1}" for r in range(n)]
    cells = state.symbol_rows(SYMBOLS)
    if style == "compact":
        lines = ["| | " + " | ".join(heads) + " |"]
        lines += [f"| {labels[r]} | " + " | ".join(cells[r]) + " |" for r in range(n)]
    elif style == "aligned":
        label_w = max(len(x) for x in labels)
        lines = ["| " + " " * label_w + " | " + " | ".join(heads) + " |"]
        for r in range(n):
            row = [cells[r][c].center(len(heads[c])) for c in range(n)]
            lines.append(f"| {labels[r].ljust(label_w)} | " + " | ".join(row) + " |")
    else:
        raise ValueError(f"unknown table style {style!r} (expected 'compact' or 'aligned')")
    return "\n".join(lines)


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
    holes: set[Cell] = set()
    players: list[Cell] = []
    goals: list[Cell] = []
    for r, row in enumerate(rows[1:]):
        if len(row) != size + 1:
            raise FormatError(f"table: row {r + 1} has {len(row) - 1} cells, expected {size}")
        if row[0] != f"Row {r + 1}":
            raise FormatError(f"table: row {r + 1} is labelled {row[0]!r}")
        for c, sym in enumerate(row[1:]):
            kind = _KINDS.get(sym)
            if kind is None:
                raise FormatError(f"table: unknown symbol {sym!r} at row {r + 1}, column {c + 1}")
            if kind == "hole":
                holes.add((r, c))
            elif kind == "player":
                players.append((r, c))
            elif kind == "goal":
                goals.append((r, c))
    if len(players) != 1:
        raise FormatError(f"table: expected one player '@', found {len(players)}")
    if len(goals) > 1:
        raise FormatError(f"table: expected at most one goal '*', found {len(goals)}")
    return check_state(size, holes, players[0], goals[0] if goals else None, "table")


def _split(line: str, lineno: int) -> list[str]:
    if not (line.startswith("|") and line.endswith("|")) or len(line) < 2:
        raise FormatError(f"table: line {lineno} does not start and end with '|': {line!r}")
    return [cell.strip() for cell in line[1:-1].split("|")]
