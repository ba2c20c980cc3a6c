"""Reading a completion (or a model's output) back into steps, cells and A* expansions.

The readers never raise on malformed text: they record what they could not read, step by step."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from lakeshift.env import LETTER_MOVES, Cell, FrozenLakeMap
from lakeshift.errors import ArgumentError, check_choice, shown
from lakeshift.formats import BoardState, FormatError, parse
from lakeshift.traces.astar import SEARCH_ORDER, Expansion
from lakeshift.traces.vocabulary import BOXED, COT_FORMATS, MAP_FORMAT, PATH_COTS, implied_move
from lakeshift.traces.wave import parse_wave

_ANNOUNCE = re.compile(r"I will move (UP|DOWN|LEFT|RIGHT)\b")
_HEADER = re.compile(r"This is a \d+x\d+ map\.")
_TABLE_HEAD = re.compile(r"\s*\|\s*\|")
_GRID_ROW = re.compile(r"\S(?:[ \t]+\S)*")
_CELL = re.compile(r"\((\d+),(\d+)\)")
_EXPANSION = re.compile(r"\((\d+),(\d+)\) g(\d+) h(\d+)(?:: ?(.*)| goal)")
_NEIGHBOUR = re.compile(r"([ULRD])([+HWCO])")


def search_order(parsed: ParsedSearch) -> tuple[str, ...]:
    """The neighbour order a parsed trace uses: its first expansion's, when that lists four distinct moves,
    else :data:`SEARCH_ORDER`."""
    for e in parsed.expansions[:1]:
        letters = [letter for letter, _ in e.neighbours]
        if len(letters) == 4 and len(set(letters)) == 4:
            return tuple(LETTER_MOVES[letter] for letter in letters)
    return SEARCH_ORDER


@dataclass(frozen=True)
class ParsedSearch:
    """An ``astar`` trace read back by :func:`parse_search` (cells 0-based).

    Attributes:
        expansions: The expansion lines that parsed, in order (malformed ones are in ``errors``).
        lines: The line number (1-based, within the trace) of each parsed expansion.
        path: The read-back cells as written (goal first), or ``None`` without a ``path:`` line.
        errors: ``(line number, why)`` for lines that are neither an expansion nor the path.
    """

    expansions: tuple[Expansion, ...]
    lines: tuple[int, ...]
    path: tuple[Cell, ...] | None
    errors: tuple[tuple[int, str], ...]


def parse_search(text: str) -> ParsedSearch:
    r"""Reads an ``astar`` trace (ours or a model's) back; tolerant, never raises. Everything from the last
    ``\boxed{`` on is ignored; blank lines are skipped."""
    cut = text.rfind(BOXED)
    if cut >= 0:
        text = text[:cut]
    expansions: list[Expansion] = []
    lines: list[int] = []
    path: tuple[Cell, ...] | None = None
    errors: list[tuple[int, str]] = []
    for k, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("path:"):
            body = line[5:].strip()
            cells = tuple((int(r) - 1, int(c) - 1) for r, c in _CELL.findall(body))
            if _CELL.sub("", body).strip():
                errors.append((k, f"path line has text other than cells: {line!r}"))
            path = cells if path is None else path
            continue
        found = _EXPANSION.fullmatch(line)
        if not found:
            errors.append((k, f"not an expansion line: {line!r}"))
            continue
        r, c, g, h, rest = found.groups()
        marks: tuple[tuple[str, str], ...] = ()
        if rest is not None:
            marks = tuple(_NEIGHBOUR.findall(rest))
            if _NEIGHBOUR.sub("", rest).strip() or not marks:
                errors.append((k, f"malformed neighbours in {line!r}"))
                continue
        elif int(h) != 0:
            errors.append((k, f"'goal' written on a cell with h{h}: {line!r}"))
            continue
        expansions.append(Expansion((int(r) - 1, int(c) - 1), int(g), int(h), marks))
        lines.append(k)
    return ParsedSearch(tuple(expansions), tuple(lines), path, tuple(errors))


def path_step_span(text: str, cot: str, step: int) -> tuple[int, int] | None:
    """Where step ``step`` (1-based, numbered as :func:`lakeshift.scoring.check_search_trace` numbers them)
    of a path CoT lies in ``text``: a ``coords`` cell; an ``astar`` expansion line, or a read-back cell."""
    cut = text.rfind(BOXED)
    body = text if cut < 0 else text[:cut]
    if cot == "coords":
        cells = list(_CELL.finditer(body))
        return (cells[step].start(), cells[step].end()) if 0 < step < len(cells) else None
    lines: list[tuple[int, int]] = []
    path: list[tuple[int, int]] = []
    pos = 0
    for line in body.splitlines(keepends=True):
        stripped = line.strip()
        start = pos + len(line) - len(line.lstrip())
        if stripped.startswith("path:"):
            path = [(pos + c.start(), pos + c.end()) for c in _CELL.finditer(line)]
        elif stripped:
            lines.append((start, start + len(stripped)))
        pos += len(line)
    if 0 < step <= len(lines):
        return lines[step - 1]
    j = step - len(lines)
    return path[j] if 0 < j < len(path) else (path[0] if path and j <= 0 else None)


def parse_cells(text: str) -> list[Cell]:
    r"""The cells (0-based) a ``coords`` trace writes before its last ``\boxed{``, in order."""
    cut = text.rfind(BOXED)
    return [(int(r) - 1, int(c) - 1) for r, c in _CELL.findall(text[:cut] if cut >= 0 else text)]


@dataclass(frozen=True)
class TraceStep:
    """One step read back from a CoT text.

    Attributes:
        move: The move this step announces: from its sentences (``"I will move X"``) in description and
            combined formats; in table/grid formats, the move implied by the state change (``state_move``).
        state_text: The map block of this step, as written (``None`` if the step has none).
        state: ``state_text`` parsed, or ``None`` if absent or malformed.
        state_move: The single move that turns the previous state's player cell into this one (the first
            step compares with the map's start when a map is given), ``None`` when not one step or unknown.
        sentences: The step's sentences (``None`` in table/grid formats).
        error: Why the step is incomplete or malformed, or ``None``.
        cell: Path CoTs (``astar``, ``coords``): the cell this step reaches, as written (0-based).
    """

    move: str | None
    state_text: str | None = None
    state: BoardState | None = None
    state_move: str | None = None
    sentences: str | None = None
    error: str | None = None
    cell: Cell | None = None


def parse_steps(text: str, cot: str, m: FrozenLakeMap | None = None) -> list[TraceStep]:
    r"""Splits a CoT completion (ours or a model's) into steps; tolerant, never raises on bad text.

    Everything from the last ``\boxed{`` on is the answer and ignored; a ``This is a NxN map.`` line is
    skipped. In description formats a step ends with the line that says ``I will move X`` (sentences may
    span lines); in combined formats the map block that follows belongs to that step; in table/grid formats
    every map block is a step. Malformed blocks give a step with ``state=None`` and an ``error``; an announced
    move without its map (combined formats) gives a step with ``error="no map after the announced move"``.

    A ``wave`` trace gives one step per frame (:func:`lakeshift.traces.wave.parse_wave`), with ``state_text``
    the frame as written, ``state`` ``None`` (a frame of arrows is no board) and ``error`` for a frame with a
    line that is not a row of cells.

    Path CoTs give one step per move of the path they write (``coords``: its cells; ``astar``: the ``path:``
    read-back, reversed to start first), with ``cell`` the cell reached and ``error`` for a cell that is not
    adjacent to the previous one; :func:`parse_search` reads an ``astar`` trace's expansions.

    Args:
        text: The assistant text.
        cot: One of :data:`COT_FORMATS` (``"none"`` gives ``[]``).
        m: The map, if known: lets the first step's ``state_move`` be computed from the start.

    Raises:
        ArgumentError: unknown ``cot``, ``text`` that is not a string or ``m`` that is not a map (bad
            arguments, never bad model output); a ``ValueError`` too.
    """
    check_choice("cot", cot, COT_FORMATS, "CoT format")
    if not isinstance(text, str):
        raise ArgumentError(f"text must be a string (the assistant text), got {shown(text)}")
    if m is not None and not isinstance(m, FrozenLakeMap):
        raise ArgumentError(f"m must be a FrozenLakeMap or None, got {shown(m)}")
    if cot == "none":
        return []
    if cot == "wave":
        parsed = parse_wave(text)
        why = {k: err for k, err in reversed(parsed.errors)}
        return [TraceStep(None, state_text=t, error=why.get(k)) for k, t in enumerate(parsed.texts)]
    if cot in PATH_COTS:
        if cot == "coords":
            cells = parse_cells(text)
        else:
            written = parse_search(text).path
            cells = list(reversed(written)) if written else []
        return _cell_steps(cells, m)
    cut = text.rfind(BOXED)
    if cut >= 0:
        text = text[:cut]
    map_fmt = MAP_FORMAT[cot]
    with_desc = cot.endswith("desc")
    steps: list[TraceStep] = []
    prev: Cell | None = m.start if m is not None else None
    pending: list[str] = []  # sentence lines not yet closed by an announcement
    announced: tuple[str, str] | None = None  # (move, sentences) waiting for its map (combined formats)

    def flush_announced(error: str) -> None:
        nonlocal announced
        if announced is not None:
            steps.append(TraceStep(announced[0], sentences=announced[1], error=error))
            announced = None

    for kind, chunk in _segments(text):
        if kind == "sentence":
            if not with_desc:
                continue
            pending.append(chunk)
            found = _ANNOUNCE.findall(chunk)
            if not found:
                continue
            sentences = " ".join(pending)
            pending = []
            if map_fmt is None:
                steps.append(TraceStep(found[-1], sentences=sentences))
            else:
                flush_announced("no map after the announced move")
                announced = (found[-1], sentences)
            continue
        # A map block.
        if map_fmt is None or kind != map_fmt:
            continue
        try:
            state: BoardState | None = parse(chunk, map_fmt)
            error = None
        except FormatError as err:
            state, error = None, str(err)
        state_move = implied_move(prev, state.player) if state is not None else None
        prev = state.player if state is not None else None
        if with_desc:
            if announced is None:
                stray = " ".join(pending) if pending else None
                pending = []
                steps.append(TraceStep(None, chunk, state, state_move, stray, error or "no announced move"))
            else:
                steps.append(TraceStep(announced[0], chunk, state, state_move, announced[1], error))
                announced = None
        else:
            steps.append(TraceStep(state_move, chunk, state, state_move, None, error))
    flush_announced("no map after the announced move")
    if pending and with_desc:
        steps.append(TraceStep(None, sentences=" ".join(pending), error="no announced move"))
    return steps


def moves_between(cells: Sequence[Cell]) -> list[str | None]:
    """The move from each cell to the next (``None`` where two cells are not adjacent)."""
    return [implied_move(a, b) for a, b in pairwise(cells)]


def _cell_steps(cells: Sequence[Cell], m: FrozenLakeMap | None) -> list[TraceStep]:
    """One step per written cell after the first (the start): the move from the previous cell."""
    steps = []
    for i in range(1, len(cells)):
        move = implied_move(cells[i - 1], cells[i])
        error = None if move is not None else "not adjacent to the previous cell"
        if i == 1 and m is not None and cells[0] != m.start:
            error = "the path does not begin at the start"
        steps.append(TraceStep(move, state_move=move, error=error, cell=cells[i]))
    return steps


def _segments(text: str) -> list[tuple[str, str]]:
    """Splits text into ``("table" | "grid" | "sentence", chunk)`` pieces; blank and header lines vanish."""
    lines = text.splitlines()
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            # A table runs over consecutive "|" lines; a header line (empty first cell) starts the next one.
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("|") and not _TABLE_HEAD.match(lines[j]):
                j += 1
            out.append(("table", "\n".join(lines[i:j])))
            i = j
        elif line == "Grid:":
            j = i + 1
            while j < len(lines) and _is_grid_row(lines[j]):
                j += 1
            out.append(("grid", "\n".join(lines[i:j])))
            i = j
        else:
            if line and not _HEADER.fullmatch(line):
                out.append(("sentence", line))
            i += 1
    return out


def _is_grid_row(line: str) -> bool:
    line = line.strip()
    return bool(line) and _GRID_ROW.fullmatch(line) is not None and all(len(t) == 1 for t in line.split())
