r"""The position rule: the row, column and player flag each token of a sequence gets (position coupling).

A small model reads a grid badly: to know which cell of ``Grid:\nX  G  .\n.  P  .`` is at row 2, column 2 it
must count newlines and cells in a 1-D sequence. Position coupling (Cho et al. 2024) gives every token that
*is* a cell the embedding of its row and of its column, so "the cell at (2,2)" and the coordinate token
``(2,2)`` share a vector and attention can match them directly. The rule, for a :class:`CellSpec` and the
token ids of a :class:`CellVocab`:

- the cells of the first grid of the sequence (rows of ``.PGX`` cells, the first of each row a bare
  character, the others with their two spaces; a grid starts at the bare cell right after the ``Grid:``
  line, a row at one after a newline, and ends at any other token) get their 1-based row and column; the
  grid's ``P`` is the walk's start and its size the walk's bounds, unless the grid is in the assistant's
  turn (a trace's grid shows the player already moved);
- every coordinate token ``(r,c)``, wherever it is, gets ``r`` and ``c``;
- ``maps`` with ``table``: the cells of a table row (``| Row R | @ | _ |``) get (R, k), k counting the row's
  cells; the prompt's table is the map (its size bounds the walk, its ``@`` starts it), the tables of the
  assistant's turn are redrawn maps, read as ``grids`` reads redrawn grids;
- ``maps`` with ``desc``: the number ending each ``row R, column C`` of a desc map in the prompt gets (R, C),
  ``This is a NxM map`` gives the walk its size, and the player's cell (lower-case ``row``, ``column``)
  starts it;
- ``grids``: with ``first`` a later grid gets nothing; with ``every`` each later grid (one a grid CoT
  redraws) gets its own cells; with ``next`` each token of a later grid gets the cell it predicts: the
  header line (1, 1), each cell the next cell of its row (the row's last none), each newline the first cell
  of the next row; its width and height are the first map's;
- ``walk``: each move token of an answer (``\boxed{DOWN, RIGHT}``) gets the cell the player reaches by the
  moves so far from the start, one cell per move, an off-edge move staying in place (the env's rule); it is
  where the player *would be*, not what is there. With ``trace`` the move a trace states after ``will move``
  walks too, on from the trace's previous stated move, and ``\boxed{`` walks again from the start;
- ``player``: the token of a redrawn map (under ``next``) that predicts the cell the stated moves reached
  gets flag 1;
- ``grids: coupled``: every map (the prompt's and each one the assistant's turn draws) gets its number
  (1: the prompt's), and each of its tokens the cell of the token after it: the header line (1, 1), a cell
  the next cell of its row (the row's last (r, W + 1)), a newline the first cell of the next row (the last
  row's (H + 1, 1)). Where a map ends is marked by size, not by a row or column number, so it does not
  depend on the sizes trained: once the prompt's map gives the width, the token before a row's newline
  gets edge :data:`ROW_END` (the prompt's first row none: its width is not known yet), and once it gives
  the height, the newline after a redrawn map's last row gets :data:`MAP_END`;
- every other token gets 0, whose embedding is zero.

The rule is causal: a token's row and column depend only on it and the tokens before it, so generation (which
has no later tokens) gives every token what training gave it; :class:`CellWalker` reads a sequence piece by
piece. Rows and columns above the training sizes have untrained embeddings unless training moves them
(``offsets: random``).

Example:
    >>> from lakeshift.models.cells.vocab import CellVocab
    >>> vocab = CellVocab(first=frozenset({1}), rest=frozenset({2}), newline=3, header=(9,))
    >>> cell_positions([9, 1, 2, 3, 1, 2, 4], PositionRule.of(CellSpec(), vocab))
    ([0, 1, 1, 0, 2, 2, 0], [0, 1, 2, 0, 1, 2, 0])
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lakeshift.models.cells.spec import CellSpec
from lakeshift.models.cells.vocab import Cell, CellVocab

#: Rows and columns 1..30 (the largest map a structured tokenizer writes); 0 = not a cell.
MAX_CELL = 31
#: Map numbers 1..127 (``grids: coupled``: the prompt's map and the maps a trace redraws); 0 = none.
MAX_FRAME = 128
#: ``grids: coupled``: the token before a row's newline (the row's last cell) and the newline after a map's
#: last row; 0 = neither (:data:`EDGES` values).
ROW_END, MAP_END = 1, 2
EDGES = 3
#: What the rule gives each token: its row, column, player flag, map number and edge.
CHANNELS = 5


@dataclass(frozen=True)
class PositionRule:
    """The token ids the rule reads, as a :class:`CellSpec` enables them over a :class:`CellVocab`."""

    coords: dict[int, Cell]
    first: frozenset[int]
    rest: frozenset[int]
    newline: int
    header: tuple[int, ...]
    wave: int
    answer: tuple[int, ...]
    announce: tuple[int, ...]
    moves: dict[int, Cell]
    start: frozenset[int]
    box: int
    player: bool
    desc: bool
    numbers: dict[int, int]
    row_words: frozenset[int]
    col_words: tuple[int, ...]
    comma: int
    by: int
    table: bool
    table_cells: frozenset[int]
    table_player: int
    table_row: tuple[int, ...]
    every: bool
    next: bool
    coupled: bool
    local: bool

    @classmethod
    def of(cls, spec: CellSpec, vocab: CellVocab) -> PositionRule:
        walks = spec.walk != "none"
        return cls(
            coords=dict(vocab.coords),
            first=vocab.first,
            rest=vocab.rest,
            newline=vocab.newline,
            header=vocab.header,
            wave=vocab.wave,
            answer=vocab.answer,
            announce=vocab.announce if spec.walk == "trace" else (),
            moves=dict(vocab.moves) if walks else {},
            start=vocab.start if walks else frozenset(),
            box=vocab.box if walks else -1,
            player=spec.player,
            desc="desc" in spec.maps,
            numbers=dict(vocab.numbers),
            row_words=vocab.row_words,
            col_words=vocab.col_words,
            comma=vocab.comma,
            by=vocab.by,
            table="table" in spec.maps,
            table_cells=vocab.table_cells,
            table_player=vocab.table_player,
            table_row=vocab.table_row,
            every=spec.grids != "first",
            next=spec.grids == "next",
            coupled=spec.grids == "coupled",
            local=spec.attention == "local",
        )


def cell_positions(ids: list[int], rule: PositionRule) -> tuple[list[int], list[int]]:
    """Row and column index (0 = none) of every token of one sequence."""
    rows, cols, *_ = CellWalker(rule).feed(ids)
    return rows, cols


class CellWalker:
    """The rule of the module doc fed a sequence piece by piece (generation: the prompt, then a token per
    step): each token's row, column, player flag, map number and edge (:data:`CHANNELS`).

    Each piece gets exactly what the whole sequence gives it: the rule is causal (a token's indices depend
    on it and the tokens before it only), so the walker keeps the state after the last token and reads on.
    """

    def __init__(self, rule: PositionRule) -> None:
        self.rule = rule
        self._walk = _Walk()

    def feed(self, ids: list[int]) -> tuple[list[int], ...]:
        out = [self._walk.step(tok, self.rule) for tok in ids]
        return tuple([token[i] for token in out] for i in range(CHANNELS))

    def fork(self) -> CellWalker:
        """A walker in this one's state that reads on without changing it (a decoder's draft)."""
        twin = CellWalker(self.rule)
        twin._walk = replace(self._walk)
        return twin


@dataclass
class _Walk:
    """The state of :class:`CellWalker` between two tokens."""

    state: str = "before"  # before the first grid, inside a grid, or after one ("done")
    row: int = 0  # the current grid's row and column
    col: int = 0
    height: int = 0  # the first grid's size (0 while it is read): where a walk stops at the edge
    width: int = 0
    start: tuple[int, int] | None = None
    here: tuple[int, int] = (0, 0)
    walking: bool = False  # the previous token was a walked move
    recent: tuple[int, ...] = ()  # the last tokens read, as many as the longest marker has
    answering: bool = False  # inside the assistant's turn: a grid here is not the prompt's map
    redrawn: bool = False  # inside a grid after the sequence's first (one a grid CoT writes)
    stated: bool = False  # a move stated since the last grid ended (``player``: the next grid shows it)
    predicts: bool = False  # the token read last predicts the cell it gets (``next``)
    table_row: int = 0  # the row of the table line being read (``maps: table``; 0: none)
    table_col: int = 0
    table_redrawn: bool = False  # that table is in the assistant's turn (one a table CoT redraws)
    wave_header: bool = False  # a ``Wave`` word read since the last grid started: its newline opens one
    map_number: int = 0  # ``coupled``: the number of the map read last (1: the prompt's)
    mapped: bool = False  # ``coupled``: the token read last got its cell from a map (and its number)
    edge: int = 0  # ``coupled``: the edge of the token read last

    def step(self, tok: int, rule: PositionRule) -> tuple[int, int, int, int, int]:
        """Reads ``tok`` and returns its row, column, player flag, map number and edge."""
        self.predicts = self.mapped = False
        self.edge = 0
        cell = self._step(tok, rule)
        flag = int(rule.player and self.stated and self.predicts and cell == self.here)
        number = self.map_number if self.mapped and cell != (0, 0) and self.map_number < MAX_FRAME else 0
        return *cell, flag, number, self.edge if number else 0

    def _step(self, tok: int, rule: PositionRule) -> tuple[int, int]:
        header, answer, announce = rule.header, rule.answer, rule.announce
        prev = self.recent[-1] if self.recent else None
        before = self.recent
        # a grid's header is ``Grid:`` and its newline, or a ``wave`` frame's ``Wave k:`` and its newline
        after_header = _ends_with(before, header) or (self.wave_header and prev == rule.newline)
        announced = _ends_with(before, announce)
        # (4: a desc cell reads the ``row R, column`` before it)
        self.recent = (*self.recent, tok)[-max(len(header), len(answer), len(announce), 4) :]
        self.answering = self.answering or _ends_with(self.recent, answer)
        self.wave_header = self.wave_header or tok == rule.wave
        ends_header = _ends_with(self.recent, header) or (self.wave_header and tok == rule.newline)
        if rule.table:
            cell = self._table_cell(tok, before, rule)
            if cell is not None:
                self.walking = False
                return cell
        if rule.desc and not self.answering and self.state != "inside" and tok in rule.numbers:
            return self._desc_cell(before, rule.numbers[tok], rule)
        if rule.next and self.state == "done" and self.height and ends_header:
            self.walking, self.predicts = False, True
            return 1, 1  # ``next``: the header line of a redrawn grid predicts its cell (1, 1)
        opens_map = self.state == "before" or (self.state == "done" and self.height > 0)
        if rule.coupled and ends_header and opens_map:
            self.walking, self.predicts, self.mapped = False, True, True
            self.map_number += 1
            return 1, 1  # ``coupled``: a map's header line predicts its cell (1, 1)
        if tok in rule.coords:
            self.walking = False
            return rule.coords[tok]
        # A grid starts with a bare cell right after the ``Grid:`` line; its later rows with one after a
        # newline. (Deciding from the tokens before, never after: generation has no later tokens.)
        starts_row = tok in rule.first and prev == rule.newline
        starts_grid = tok in rule.first and after_header
        if starts_grid:
            self.wave_header = False
        if self.state == "done" and rule.every and starts_grid:
            self.state, self.row = "before", 0  # a later grid (one a grid CoT redraws): read it too
            self.redrawn = True
        if self.state == "done":
            moves = rule.moves
            boxed = prev == rule.box
            self.walking = tok in moves and self.start is not None and (self.walking or boxed or announced)
            if not self.walking:
                return 0, 0
            self.stated = announced and not boxed
            dr, dc = moves[tok]
            assert self.start is not None  # walking needs a start (above)
            r, c = self.start if boxed else self.here
            self.here = (min(max(r + dr, 1), self.height), min(max(c + dc, 1), self.width))
            return self.here
        if (self.state == "inside" and starts_row) or (self.state == "before" and starts_grid):
            self.state, self.row, self.col = "inside", self.row + 1, 1
        elif self.state == "inside" and tok in rule.rest and self.col:
            self.col += 1
        elif self.state == "inside" and tok == rule.newline:
            self.col = 0
            if rule.coupled and self.row + 1 < MAX_CELL:
                self.predicts = self.mapped = True
                self.edge = MAP_END if self.row == self.height else 0
                return self.row + 1, 1  # ``coupled``: the first cell of the next row ((H + 1, 1): none)
            if rule.next and self.redrawn and self.row < self.height:
                self.predicts = True
                return self.row + 1, 1  # ``next``: it predicts the first cell of the next row
            return 0, 0
        elif self.state == "inside":
            self.state, self.redrawn, self.stated = "done", False, False
            self.height = self.height or self.row
            return 0, 0
        else:
            return 0, 0
        if self.row >= MAX_CELL or self.col >= MAX_CELL:
            return 0, 0
        if not self.height:
            self.width = max(self.width, self.col)
            if self.start is None and tok in rule.start and not self.answering:
                self.start = self.here = (self.row, self.col)
        if rule.coupled:  # the cell the next token is: the row's last predicts its newline, (r, W + 1)
            self.predicts = self.mapped = True
            sized = self.height or self.row > 1  # (the prompt's first row is its width)
            self.edge = ROW_END if sized and self.col == self.width else 0
            return (self.row, self.col + 1) if self.col + 1 < MAX_CELL else (0, 0)
        if rule.next and self.redrawn:  # the cell this one predicts; the row's last predicts a newline
            self.predicts = True
            return (self.row, self.col + 1) if self.col < self.width else (0, 0)
        return self.row, self.col

    def _table_cell(self, tok: int, before: tuple[int, ...], rule: PositionRule) -> tuple[int, int] | None:
        """A token of a table's row line (``maps: table``): its cell, or (0, 0); None for any other token.

        The table in the prompt is the map: its cells get their own (R, k), and it gives the walk its size
        and start (the ``@``). A table of the assistant's turn is a redrawn map, read as ``grids``
        reads a redrawn grid."""
        if tok in rule.numbers and before[-2:] == rule.table_row:
            self.table_row, self.table_col, self.table_redrawn = rule.numbers[tok], 0, self.answering
            if self.table_redrawn and rule.next and self.table_row < MAX_CELL:
                self.predicts = True
                return self.table_row, 1  # ``next``: the row's number predicts its first cell
            return 0, 0
        if self.table_row and tok in rule.table_cells:
            self.table_col += 1
            r, c = self.table_row, self.table_col
            if r >= MAX_CELL or c >= MAX_CELL:
                return 0, 0
            if not self.table_redrawn:
                self.height, self.width = max(self.height, r), max(self.width, c)
                if self.start is None and tok == rule.table_player:
                    self.start = self.here = (r, c)
                    self.state = "done"  # the map's start is read: moves walk from here on
                return r, c
            if not rule.every:
                return 0, 0
            if rule.next:
                self.predicts = True
                return (r, c + 1) if c < self.width else (0, 0)
            return r, c
        if self.table_row and tok == rule.newline:
            if self.table_redrawn and self.table_row >= self.height:
                self.stated = False  # the redrawn map is drawn: the next one needs a new stated move
            self.table_row = 0
            return 0, 0
        return None

    def _desc_cell(self, before: tuple[int, ...], number: int, rule: PositionRule) -> tuple[int, int]:
        """A number token of a desc map in the prompt (``maps: desc``): the column of ``row R, column C``
        gets (R, C), and the player's (``row``, ``column`` in lower case) starts the walk; ``NxM`` of
        ``This is a NxM map`` is its size."""
        numbers, rows, cols = rule.numbers, rule.row_words, rule.col_words
        if len(before) >= 2 and before[-1] == rule.by and before[-2] in numbers and not self.height:
            self.height, self.width = numbers[before[-2]], number
            return 0, 0
        row_word, row, comma, col_word = before[-4:] if len(before) >= 4 else (None, None, None, None)
        if not (row_word in rows and row in numbers and comma == rule.comma and col_word in cols):
            return 0, 0
        cell = (numbers[row], number)
        if cell[0] >= MAX_CELL or number >= MAX_CELL:
            return 0, 0
        if col_word == cols[0] and self.start is None and self.height:
            self.start = self.here = cell
            self.state = "done"  # the map is read as far as walks need: stated moves walk from here on
        return cell


def _ends_with(tokens: tuple[int, ...], marker: tuple[int, ...]) -> bool:
    """Whether ``tokens`` ends with the non-empty ``marker``."""
    return bool(marker) and tokens[-len(marker) :] == marker
