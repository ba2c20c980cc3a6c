"""Drafts for speculative decoding from the text already there: what the ``speculative`` engine asks of
a draft source, and the source for models without cells (prompt lookup, as transformers'
``PromptLookupCandidateGenerator`` and vLLM's n-gram speculator do). A cells model with ``grids: coupled``
drafts from the map before at the same cells (:class:`lakeshift.models.cells.MapDrafts`).

A draft only proposes: the engine keeps of it the longest prefix its model's own greedy choices agree with,
so a draft source changes the speed of decoding, never its output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

#: Prompt lookup: the longest and shortest n-gram matched, and the tokens a draft proposes at most.
NGRAM_LONGEST = 4
NGRAM_SHORTEST = 2
NGRAM_DRAFT = 16


class Drafts(Protocol):
    """A slot's draft source, fed the slot's tokens as the engine accepts them; ``ready``: whether a draft
    may follow the next token (False: the engine asks for none)."""

    ready: bool

    def feed(self, ids: Sequence[int], channels: tuple[list[int], ...] | None) -> None:
        """Reads ``ids`` (with their cells channels, for a cells model; else None)."""

    def draft(self, after: int, limit: int) -> list[int]:
        """At most ``limit`` tokens to propose after ``after``, the token chosen after those fed."""
        ...


class NgramDrafts:
    """Prompt lookup: after the tokens fed and ``after``, the tokens that followed the latest earlier
    occurrence of their last n tokens (n from :data:`NGRAM_LONGEST` down to :data:`NGRAM_SHORTEST`), at
    most :data:`NGRAM_DRAFT`; none where no n-gram occurred before."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.latest: dict[tuple[int, ...], int] = {}  # n-gram -> the position after its latest occurrence
        self.ready = True

    def feed(self, ids: Sequence[int], channels: tuple[list[int], ...] | None = None) -> None:
        for tok in ids:
            self.ids.append(tok)
            # the n-grams ending before this token now have a later continuation
            end = len(self.ids) - 1
            for n in range(NGRAM_SHORTEST, NGRAM_LONGEST + 1):
                if end >= n:
                    self.latest[tuple(self.ids[end - n : end])] = end

    def draft(self, after: int, limit: int) -> list[int]:
        tail = [*self.ids[-(NGRAM_LONGEST - 1) :], after]
        for n in range(min(NGRAM_LONGEST, len(tail)), NGRAM_SHORTEST - 1, -1):
            start = self.latest.get(tuple(tail[-n:]))
            if start is not None:
                return self.ids[start : start + min(limit, NGRAM_DRAFT)]
        return []
