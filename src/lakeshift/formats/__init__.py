"""Map formats: the image and the three text formats (``desc``, ``table``, ``grid``) of the paper.

Every text format has a module with ``render_state(state, ...) -> str`` and ``parse(text) -> BoardState``;
this package dispatches on the format name:

* :func:`render` draws a :class:`~lakeshift.env.FrozenLakeMap` in any input format, the image included
  (optionally with the player moved to another cell, for the intermediate states of a CoT trace);
* :func:`parse` reads one map block back (as a model writes it: surrounding whitespace is ignored) and
  raises :class:`FormatError` with a reason when the text is malformed;
* :func:`file_text` gives the exact contents of VSP's reference files (``pure_text/*.txt`` has no trailing
  newline, ``table/*.txt`` has one).

Convention: ``render`` never ends with a newline, in every text format, so map blocks compose into prompts and
traces without stray blank lines. Only :func:`file_text` adds VSP's trailing newline to tables.

A drawn state is a :class:`BoardState`: the holes, the player cell and the goal cell. When the player stands
on the goal, the text shows only the player (``@`` / ``P``), so the goal is ``None`` in a parsed state; the
description format still names the goal cell, and its parser also returns ``goal=None`` in that case so all
formats agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, overload

from lakeshift.env import Cell, FrozenLakeMap, MapError
from lakeshift.errors import ArgumentError, LakeshiftError, check_choice, shown

if TYPE_CHECKING:
    from PIL import Image

INPUT_FORMATS: tuple[str, ...] = ("image", "desc", "table", "grid")
TEXT_FORMATS: tuple[str, ...] = ("desc", "table", "grid")
TABLE_STYLES: tuple[str, ...] = ("compact", "aligned")


class FormatError(LakeshiftError, ValueError):
    """Text that is not a well-formed map in the expected format (the message says why)."""


@dataclass(frozen=True)
class BoardState:
    """What one drawn map shows: size, holes, player cell and goal cell (``None`` under the player).

    Attributes:
        size: Side length ``n``.
        holes: Hole cells ``(row, col)``, 0-based.
        player: The player's cell.
        goal: The goal's cell, or ``None`` when the player stands on it (the text then shows only the player).
    """

    size: int
    holes: frozenset[Cell]
    player: Cell
    goal: Cell | None

    @classmethod
    def of(cls, m: FrozenLakeMap, player: Cell | None = None) -> BoardState:
        """The state of map ``m`` with the player at ``player`` (default: the start).

        Raises:
            ArgumentError: ``player`` is not a ``(row, column)`` pair, or is outside the map or on a hole (no
                format can draw that); a ``ValueError`` too.
        """
        pos = player_cell(m, player)
        return cls(m.size, m.holes, pos, None if pos == m.goal else m.goal)

    def to_map(self, goal: Cell | None = None) -> FrozenLakeMap:
        """The map with the player as start.

        Args:
            goal: The goal cell to use when this state has none (player on the goal); ignored otherwise.

        Raises:
            FormatError: the state has no goal and none is given, or the cells do not form a valid map.
        """
        g = self.goal if self.goal is not None else goal
        if g is None:
            raise FormatError("the player stands on the goal: pass the goal cell to build a map")
        try:
            return FrozenLakeMap(self.size, self.holes, self.player, g)
        except MapError as err:
            raise FormatError(str(err)) from None

    def symbol_rows(self, symbols: Mapping[str, str]) -> list[list[str]]:
        """The board as rows of symbols, given one symbol per kind (``player goal hole empty``)."""
        return [list(row) for row in self.symbol_strings(symbols)]

    def symbol_strings(self, symbols: Mapping[str, str]) -> list[str]:
        """The board as one string per row, one character per cell (every symbol must be one character).

        The rows without the player are built once per ``(size, holes, goal, symbols)`` and cached: the
        states of one trace differ only in the player's cell, so drawing a state costs one string splice.
        """
        r, c = self.player
        # The player hides the goal, so a state on the goal can use the map's rows (goal drawn there).
        goal = self.player if self.goal is None else self.goal
        rows = list(
            _base_rows(self.size, self.holes, goal, symbols["hole"], symbols["goal"], symbols["empty"])
        )
        row = rows[r]
        rows[r] = row[:c] + symbols["player"] + row[c + 1 :]
        return rows

    def cell_symbol(self, r: int, c: int) -> str:
        """``"player"``, ``"goal"``, ``"hole"`` or ``"empty"`` for one cell (the player hides the goal)."""
        if (r, c) == self.player:
            return "player"
        if (r, c) == self.goal:
            return "goal"
        return "hole" if (r, c) in self.holes else "empty"


def player_cell(m: FrozenLakeMap, player: Any) -> Cell:
    """The cell a drawing puts the player on: ``player`` as a ``(row, column)`` pair, or ``m``'s start.

    Raises:
        ArgumentError: ``player`` is not a pair of integers, or is outside the map or on a hole.
    """
    if player is None:
        return m.start
    try:
        if len(player) != 2:
            raise TypeError
        pos = (int(player[0]), int(player[1]))
    except (TypeError, ValueError):
        raise ArgumentError(f"player must be a (row, column) pair of integers, got {shown(player)}") from None
    if not m.inside(pos):
        raise ArgumentError(f"player cell {pos} is outside the {m.size}x{m.size} map")
    if pos in m.holes:
        raise ArgumentError(f"player cell {pos} is a hole: no format draws a player in a hole")
    return pos


@lru_cache(maxsize=512)
def _base_rows(
    size: int, holes: frozenset[Cell], goal: Cell | None, hole: str, goal_sym: str, empty: str
) -> tuple[str, ...]:
    """Rows of one-character symbols without the player (a frozenset caches its hash, so lookups for the
    states of one map cost a dictionary probe)."""
    cells = [empty] * (size * size)
    for r, c in holes:
        cells[r * size + c] = hole
    if goal is not None:
        cells[goal[0] * size + goal[1]] = goal_sym
    flat = "".join(cells)
    return tuple(flat[i : i + size] for i in range(0, size * size, size))


def check_state(size: int, holes: set[Cell], player: Cell | None, goal: Cell | None, what: str) -> BoardState:
    """Validates parsed pieces and builds the state (shared by the parsers).

    Raises:
        FormatError: no player, a cell outside the map, the player or goal on a hole.
    """
    if size < 2:
        raise FormatError(f"{what}: map size must be at least 2, got {size}")
    if player is None:
        raise FormatError(f"{what}: no player")
    for name, cell in (("player", player), ("goal", goal), *(("hole", h) for h in sorted(holes))):
        if cell is not None and not (0 <= cell[0] < size and 0 <= cell[1] < size):
            raise FormatError(f"{what}: {name} at row {cell[0] + 1}, column {cell[1] + 1} is outside the map")
    if player in holes:
        raise FormatError(f"{what}: the player is on a hole")
    if goal is not None and goal in holes:
        raise FormatError(f"{what}: the goal is on a hole")
    return BoardState(size, frozenset(holes), player, None if goal == player else goal)


def state_from_symbols(rows: list[list[str]], symbols: Mapping[str, str], what: str) -> BoardState:
    """Builds a state from a square grid of cell symbols (shared by the grid and table parsers).

    Args:
        rows: One list of cell symbols per map row, row labels already removed.
        symbols: The format's symbol of each kind (``"player"``, ``"goal"``, ``"hole"``, ``"empty"``).
        what: The format's name, for messages.

    Raises:
        FormatError: ragged or non-square rows, unknown symbols, not exactly one player, two goals.
    """
    kinds = {sym: kind for kind, sym in symbols.items()}
    size = len(rows)
    holes: set[Cell] = set()
    found: dict[str, list[Cell]] = {"player": [], "goal": []}
    for r, row in enumerate(rows):
        if len(row) != size:
            raise FormatError(f"{what}: row {r + 1} has {len(row)} cells, expected {size} (square map)")
        for c, sym in enumerate(row):
            kind = kinds.get(sym)
            if kind is None:
                raise FormatError(f"{what}: unknown symbol {sym!r} at row {r + 1}, column {c + 1}")
            if kind == "hole":
                holes.add((r, c))
            elif kind in found:
                found[kind].append((r, c))
    players, goals = found["player"], found["goal"]
    if len(players) != 1:
        raise FormatError(f"{what}: expected one player {symbols['player']!r}, found {len(players)}")
    if len(goals) > 1:
        raise FormatError(f"{what}: expected at most one goal {symbols['goal']!r}, found {len(goals)}")
    return check_state(size, holes, players[0], goals[0] if goals else None, what)


_MODULES: dict[str, ModuleType] = {}


def _module(fmt: str) -> ModuleType:
    """The module of a text format; :class:`ArgumentError` naming ``fmt`` for any other name."""
    module = _MODULES.get(fmt) if isinstance(fmt, str) else None
    if module is None:
        # Imported here, not at the top: the format modules import this package.
        from lakeshift.formats import desc, grid, table

        _MODULES.update(desc=desc, table=table, grid=grid)
        module = _MODULES[check_choice("fmt", fmt, TEXT_FORMATS, "text format")]
    return module


# A literal "image" is a str too: the overlap is the point (the image, else text), as in typeshed's open().
@overload
def render(  # type: ignore[overload-overlap]
    m: FrozenLakeMap, fmt: Literal["image"], *, player: Cell | None = None, style: str | None = None
) -> Image.Image: ...


@overload
def render(m: FrozenLakeMap, fmt: str, *, player: Cell | None = None, style: str | None = None) -> str: ...


def render(
    m: FrozenLakeMap, fmt: str, *, player: Cell | None = None, style: str | None = None
) -> str | Image.Image:
    """Draws map ``m`` in an input format: the text (no trailing newline), or for ``"image"`` gymnasium's
    frame as a Pillow ``RGB`` image (:func:`lakeshift.formats.image.render_image`; ``render_rgb`` gives
    the array).

    Args:
        m: The map.
        fmt: ``"image"``, ``"desc"``, ``"table"`` or ``"grid"`` (:data:`INPUT_FORMATS`).
        player: Draw the player here instead of at the start (an intermediate CoT state).
        style: Table only: ``"compact"`` (default, VSP's files) or ``"aligned"`` (the paper's figure).

    Raises:
        ArgumentError: ``m`` that is not a :class:`FrozenLakeMap` (a ``maps.jsonl`` record's map is
            ``map_from_record(record)``), an unknown format or style, or ``player`` that is not a cell of
            the map off its holes; a ``ValueError`` too.

    Example:
        >>> from lakeshift import FrozenLakeMap, render
        >>> lake = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
        >>> print(render(lake, "grid"))
        Grid:
        .  G  .
        .  X  .
        .  P  X
        >>> print(render(lake, "desc", player=(2, 0)))  # the state after the move LEFT
        This is a 3x3 map.
        The player is at: row 3, column 1;
        The hole(s) are at: Row 2, Column 2; Row 3, Column 3;
        The goal is at: Row 1, Column 2.
        >>> render(lake, "image").size  # 64 pixels a cell, as gymnasium draws it
        (192, 192)
    """
    if not isinstance(m, FrozenLakeMap):
        hint = " (map_from_record(record) gives a maps.jsonl record's map)" if isinstance(m, Mapping) else ""
        raise ArgumentError(f"m must be a FrozenLakeMap, got {shown(m)}{hint}")
    check_choice("fmt", fmt, INPUT_FORMATS, "input format")
    if fmt == "image":
        if style is not None:
            raise ArgumentError(f"style {style!r} applies to the table format only")
        # Imported here: the image module pulls in numpy, pygame and Pillow, which text formats never need.
        from lakeshift.formats.image import render_image

        return render_image(m, player=player_cell(m, player))
    return render_state(BoardState.of(m, player), fmt, style=style)


def render_state(state: BoardState, fmt: str, *, style: str | None = None) -> str:
    """Draws a :class:`BoardState` in a text format (no trailing newline); see :func:`render`."""
    module = _module(fmt)
    if fmt == "table":
        return module.render_state(state, style=style or "compact")
    if style is not None and style != "compact":
        raise ArgumentError(f"style {style!r} applies to the table format only")
    return module.render_state(state)


def parse(text: str, fmt: str) -> BoardState:
    r"""Parses one map block in a text format (surrounding whitespace ignored; both table styles accepted).

    Raises:
        FormatError: the text is not one well-formed map (the message says why).
        ArgumentError: ``text`` that is not a string, or an unknown format (a ``ValueError`` too).

    Example:
        >>> from lakeshift import parse
        >>> state = parse("Grid:\n.  G  .\nP  X  .\n.  .  X", "grid")
        >>> state.player, state.goal, sorted(state.holes)
        ((1, 0), (0, 1), [(1, 1), (2, 2)])
        >>> parse("Grid:\n.  G  .\nP  X\n.  .  X", "grid")
        Traceback (most recent call last):
        lakeshift.formats.FormatError: grid: row 2 has 2 cells, expected 3 (square map)
    """
    module = _module(fmt)
    if not isinstance(text, str):
        raise ArgumentError(f"text must be a string (one map block), got {shown(text)}")
    return module.parse(text)


def file_text(m: FrozenLakeMap, fmt: str) -> str:
    """The exact contents of VSP's reference file for ``m``.

    ``desc``: ``pure_text/*.txt`` (no trailing newline); ``table``: ``table/*.txt`` (compact, one trailing
    newline). The grid has no reference file; it gets the table's convention (a trailing newline).
    """
    text = render(m, fmt)
    return text if fmt == "desc" else text + "\n"


__all__ = [
    "INPUT_FORMATS",
    "TABLE_STYLES",
    "TEXT_FORMATS",
    "BoardState",
    "FormatError",
    "check_state",
    "file_text",
    "parse",
    "player_cell",
    "render",
    "render_state",
]
