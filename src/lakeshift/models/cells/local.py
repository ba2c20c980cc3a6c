r"""The locality rule of ``attention: local``: which earlier tokens each token attends to.

A ``wave`` frame redraws the map one breadth-first step on: each of its cells is a function of the same
cell and its four neighbours in the frame before. With full attention a model must find those few tokens
among every earlier one, and a larger map is more candidates to pick from. Under ``attention: local`` the
rule hands each token of a redrawn map exactly its neighbourhood, so what it computes cannot depend on the
map's size. The rule reads the position rule's channels (:class:`~lakeshift.models.cells.CellWalker`, with
``grids: coupled``, in which each token of a map gets the cell of the token after it):

- a token *shows* the cell that the token before it predicts, when both are tokens of the same map: a
  map's first cell shows (1, 1), a row's newline shows (r, W + 1), the column after the last;
- **neighbourhood**: a token of a redrawn map (map number ``n >= 2``) that predicts cell (r, c), other than
  the map's end, attends to the tokens of map ``n - 1`` (the prompt's map for the first) that show a cell
  (r + dr, c + dc), dr and dc in -1..1 (key slot ``3 * (dr + 1) + dc + 1``), and to itself (:data:`SELF`);
- **stop**: the newline after a redrawn map's last row (edge ``MAP_END``), whose next token says whether
  another map follows, attends to the token of its own map that shows the start's cell (:data:`LOOKUP`)
  and to itself: the end of the trace is a lookup of one cell;
- **answer**: ``\boxed{`` and each move of the answer attend to the token of the last map that shows the
  cell their walk has reached (``\boxed{``: the start), and to themselves: following the arrows is a lookup
  of one cell per move;
- every other token attends to every earlier token, as without the field (:data:`FULL`).

A key a map does not have (a cell beyond its edge) is left out (``-1``). The rule is causal, like the
position rule: a token's keys depend on it and the tokens before it only, so :class:`LocalKeys` reads a
sequence piece by piece and generation gets what training got. A token's keys are at most :data:`SLOTS`,
whatever the sequence's length.

Example (the map ``P G`` in one row, its one frame ``> G``, the answer; ids: 1 ``P``, 2 ``  G``, 3 the
newline, 4 ``>``, 5 ``Wave``, 6 ``\boxed{``, 7 ``RIGHT``, 9 ``Grid:``):

    >>> from lakeshift.models.cells.positions import CellWalker, PositionRule
    >>> from lakeshift.models.cells.spec import CellSpec
    >>> from lakeshift.models.cells.vocab import CellVocab
    >>> vocab = CellVocab(first=frozenset({1, 4}), rest=frozenset({2}), newline=3, header=(9, 3), wave=5,
    ...                   moves={7: (0, 1)}, start=frozenset({1}), box=6)
    >>> rule = PositionRule.of(CellSpec(grids="coupled", attention="local"), vocab)
    >>> ids = [9, 3, 1, 2, 3, 5, 3, 4, 2, 3, 6, 7]
    >>> keys = LocalKeys(rule).feed(ids, CellWalker(rule).feed(ids))
    >>> [k if k is None else [i for i in k if i >= 0] for k in keys]  # doctest: +NORMALIZE_WHITESPACE
    [None, None, None, None, None, None, [2, 3, 6], [2, 3, 4, 7], [3, 4, 8], [9, 7], [10, 7], [11, 8]]
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from lakeshift.models.cells.positions import MAP_END, CellWalker, PositionRule

#: Key slots: the nine neighbours (row-major, offsets -1..1), the token itself, the one cell looked up.
NEIGHBOURS = 9
SELF = 9
LOOKUP = 10
SLOTS = 11
#: The keys of a token that attends as without the field (to every earlier token).
FULL = None

Keys = tuple[int, ...] | None


class TokenReader:
    """The position rule and, under ``attention: local``, the locality rule, fed a sequence together piece
    by piece: what a cells model needs of each token."""

    def __init__(self, rule: PositionRule) -> None:
        self.walker = CellWalker(rule)
        self.keys = LocalKeys(rule) if rule.local else None

    def feed(self, ids: Sequence[int]) -> tuple[tuple[list[int], ...], list[Keys]]:
        """The channels (:meth:`CellWalker.feed`) and the keys (:data:`FULL` for each token without
        ``attention: local``) of ``ids``."""
        channels = self.walker.feed(list(ids))
        keys: list[Keys] = [FULL] * len(ids) if self.keys is None else self.keys.feed(ids, channels)
        return channels, keys

    def fork(self) -> TokenReader:
        """A reader in this one's state that reads on without changing it (a decoder's draft)."""
        twin = copy.copy(self)
        twin.walker = self.walker.fork()
        twin.keys = self.keys.fork() if self.keys is not None else None
        return twin


class LocalKeys:
    """The locality rule of the module doc fed a sequence piece by piece: the :data:`SLOTS` key positions
    (0-based in the sequence fed, ``-1`` none) of each token, or :data:`FULL`."""

    def __init__(self, rule: PositionRule) -> None:
        self.rule = rule
        self.position = 0
        self.shows: dict[tuple[int, int, int], int] = {}  # (map, row, col) -> the token that shows it
        self.start: tuple[int, int] | None = None
        self.last_map = 0
        self.previous: tuple[int, int, int] = (0, 0, 0)  # map, row, col the token before predicts
        self.answering = False  # inside ``\boxed{...}``: walked moves look up the last map

    def fork(self) -> LocalKeys:
        """Keys in this state that read on without changing it."""
        twin = copy.copy(self)
        twin.shows = dict(self.shows)
        return twin

    def feed(self, ids: Sequence[int], channels: tuple[list[int], ...]) -> list[Keys]:
        """The keys of ``ids``, given their position-rule channels (``CellWalker.feed``)."""
        rows, cols, _, numbers, edges = channels
        return [
            self._step(tok, row, col, number, edge)
            for tok, row, col, number, edge in zip(ids, rows, cols, numbers, edges, strict=True)
        ]

    def _step(self, tok: int, row: int, col: int, number: int, edge: int) -> Keys:
        here = self.position
        self.position += 1
        before, self.previous = self.previous, (number, row, col)
        if number and before[0] == number:
            self.shows[before] = here
            if number == 1 and self.start is None and tok in self.rule.start:
                self.start = before[1:]
        self.last_map = max(self.last_map, number)
        rule = self.rule
        if number >= 2 and edge == MAP_END:
            return self._lookup(here, number, self.start)
        if number >= 2:
            keys = [-1] * SLOTS
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    keys[3 * (dr + 1) + dc + 1] = self.shows.get((number - 1, row + dr, col + dc), -1)
            keys[SELF] = here
            return tuple(keys)
        if tok == rule.box and rule.box >= 0:
            self.answering = True
            return self._lookup(here, self.last_map, self.start)
        if self.answering and tok in rule.moves and row:
            return self._lookup(here, self.last_map, (row, col))
        self.answering = False
        return FULL

    def _lookup(self, here: int, number: int, cell: tuple[int, int] | None) -> Keys:
        keys = [-1] * SLOTS
        keys[SELF] = here
        if cell is not None:
            keys[LOOKUP] = self.shows.get((number, *cell), -1)
        return tuple(keys)
