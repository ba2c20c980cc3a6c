r"""Drafts for decoding a trace that redraws its map: the tokens that followed the same place of the map
before, for a decoder to verify (speculative decoding with drafts from the text already there).

A ``grid`` trace's map is the map before with a cell or two changed, a ``wave`` frame the frame before with
the wavefront added, and the text between two maps (a step's narration, a frame's header) mostly the text
between the two before. Under ``grids: coupled`` the position rule gives each token of a map the cell of the
token after it (:class:`~lakeshift.models.cells.CellWalker`), so the place a token holds is known by its cell,
whatever the map's size:

- a token *shows* the cell the token before it predicts (when that token belongs to a map);
- its **counterpart**: the token of map ``n - 1`` that shows the same cell, when it shows a cell of a redrawn
  map ``n >= 2``; otherwise the token after the counterpart of the token before it (so text between maps is
  matched from the map it follows on); otherwise none (the prompt, its map, the first text after it);
- the **draft** after a token: the tokens after its counterpart, through the end of the first map they
  reach at most (a redrawn map's ``MAP_END``, or the last token of the prompt's map): a draft never runs
  past the map it is about into the text after.

The ``speculative`` engine's draft source for such a model (:mod:`lakeshift.models.backends.drafts`; prompt
lookup for other models). A draft only proposes: a decoder keeps of it the longest prefix its own greedy
choices agree with (and its own next token), so what it writes is what it would have written token by
token. The rule is causal, like the position rule: :class:`MapDrafts` is fed a sequence piece by piece with
the channels the walker gave.

Example (the map ``P G`` in one row, then two frames ``> G`` and ``> G``; ids: 1 ``P``, 2 ``  G``, 3 the
newline, 4 ``>``, 5 ``Wave``, 9 ``Grid:``):

    >>> from lakeshift.models.cells.positions import CellWalker, PositionRule
    >>> from lakeshift.models.cells.spec import CellSpec
    >>> from lakeshift.models.cells.vocab import CellVocab
    >>> vocab = CellVocab(first=frozenset({1, 4}), rest=frozenset({2}), newline=3, header=(9, 3), wave=5)
    >>> rule = PositionRule.of(CellSpec(grids="coupled"), vocab)
    >>> ids = [9, 3, 1, 2, 3, 5, 3, 4, 2, 3, 5, 3]
    >>> drafts = MapDrafts()
    >>> drafts.feed(ids, CellWalker(rule).feed(ids))
    >>> drafts.draft(4, limit=10)  # after the second frame's first cell (chosen, not fed): the first's rest
    [2, 3]
"""

from __future__ import annotations

from collections.abc import Sequence

from lakeshift.models.cells.positions import MAP_END

NONE = -1


class MapDrafts:
    """The rule of the module doc fed a sequence piece by piece: each token's counterpart, and the draft
    after a token not yet fed."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.numbers: list[int] = []
        self.edges: list[int] = []
        self.counterparts: list[int] = []
        self.shows: dict[tuple[int, int, int], int] = {}  # (map, row, col) -> the token that shows it
        self.predicted: tuple[int, int, int] = (0, 0, 0)  # map, row, col the token fed last predicts
        self.ready = False  # the token after those fed has a counterpart

    def feed(self, ids: Sequence[int], channels: tuple[list[int], ...] | None) -> None:
        """Reads ``ids`` with their position-rule channels (``CellWalker.feed``)."""
        if channels is None:
            raise ValueError("map drafts read a cells model's channels")
        rows, cols, _, numbers, edges = channels
        for tok, row, col, number, edge in zip(ids, rows, cols, numbers, edges, strict=True):
            here = len(self.ids)
            self.counterparts.append(self._counterpart())
            if self.predicted[0]:
                self.shows[self.predicted] = here
            self.ids.append(tok)
            self.numbers.append(number)
            self.edges.append(edge)
            self.predicted = (number, row, col) if number else (0, 0, 0)
        self.ready = self._counterpart() != NONE

    def draft(self, after: int, limit: int) -> list[int]:
        """At most ``limit`` tokens to propose after ``after``, the token chosen after those fed (its
        counterpart is known from the tokens before it); none where it has no counterpart."""
        start = self._counterpart()
        if start == NONE or limit <= 0:
            return []
        end = min(len(self.ids), start + 1 + limit)
        mapped = False  # a map's token was drafted: the draft ends where that map does
        for i in range(start + 1, end):
            if self.edges[i] == MAP_END or (mapped and not self.numbers[i]):
                end = i + 1 if self.edges[i] == MAP_END else i
                break
            mapped = mapped or bool(self.numbers[i])
        return self.ids[start + 1 : end]

    def _counterpart(self) -> int:
        """The counterpart of the token after those fed."""
        number, row, col = self.predicted
        if number >= 2:
            return self.shows.get((number - 1, row, col), NONE)
        if self.counterparts and self.counterparts[-1] != NONE:
            return self.counterparts[-1] + 1
        return NONE
