"""The token ids the position rule reads, derived from a structured tokenizer.

A :class:`CellVocab` is data, not a setting: :meth:`CellVocab.from_tokenizer` builds it from the tokenizer a
model is trained with, and a checkpoint keeps a copy (``config.json``'s ``cell_vocab``) so that it loads with
plain transformers. Checkpoints of earlier generations stored these tables as flat ``cell_*`` keys
(:meth:`CellVocab.from_legacy`), some of them without the markers; those are filled from their tokenizer
when lakeshift loads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The symbols of a grid cell (the grid input format).
GRID_CELLS = ".PGX"

Cell = tuple[int, int]


@dataclass(frozen=True)
class CellVocab:
    """Token ids by role. ``-1`` and empty collections mean the tokenizer has no such token.

    Attributes:
        coords: each coordinate token ``(r,c)`` (with or without its leading space) and its cell.
        coord_base: each coordinate token's shared spelling token (``(1,1)`` or `` (1,1)``, the same
            spacing): what a composed coordinate is made of.
        first: the bare grid cells (the first of a row); rest: the cells after two spaces.
        newline: ``\\n``.
        header: the line that opens a grid (``Grid:`` and its newline).
        answer: the opening of the assistant's turn.
        announce: the words before a move a trace states (`` will move``).
        moves: each move token (``UP``, ``, UP``, `` UP``) and its row and column step.
        start: the player cell tokens of a grid (``P``, ``  P``).
        box: the token that opens an answer (``\\boxed{``).
        numbers: each number token (spaced or bare) and its value; row_words (`` row``, `` Row``),
            col_words (`` column``, `` Column``: the first the player's), comma and by (``x`` of ``3x3``):
            what a desc map's cells are read from.
        table_cells: the cell tokens of a table row (`` | _`` ...), table_player (`` | @``) and
            table_row (``|``, `` Row``: the opening of a row line).
    """

    coords: Mapping[int, Cell] = field(default_factory=dict)
    coord_base: Mapping[int, int] = field(default_factory=dict)
    first: frozenset[int] = frozenset()
    rest: frozenset[int] = frozenset()
    newline: int = -1
    header: tuple[int, ...] = ()
    answer: tuple[int, ...] = ()
    announce: tuple[int, ...] = ()
    moves: Mapping[int, Cell] = field(default_factory=dict)
    start: frozenset[int] = frozenset()
    box: int = -1
    numbers: Mapping[int, int] = field(default_factory=dict)
    row_words: frozenset[int] = frozenset()
    col_words: tuple[int, ...] = ()
    comma: int = -1
    by: int = -1
    table_cells: frozenset[int] = frozenset()
    table_player: int = -1
    table_row: tuple[int, ...] = ()

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> CellVocab:
        """The vocab of a structured tokenizer (:mod:`lakeshift.models.tokenizer`)."""
        from lakeshift.env import DELTAS
        from lakeshift.formats.grid import HEADER
        from lakeshift.formats.table import SYMBOLS
        from lakeshift.models.tokenizer import IM_START, MAX_MAP_SIZE
        from lakeshift.traces import BOXED

        vocab = tokenizer.get_vocab()

        def ids(text: str) -> tuple[int, ...]:
            return tuple(tokenizer.encode(text, add_special_tokens=False))

        coords: dict[int, Cell] = {}
        base: dict[int, int] = {}
        for r in range(1, MAX_MAP_SIZE + 1):
            for c in range(1, MAX_MAP_SIZE + 1):
                for space in ("", " "):
                    piece = f"{space}({r},{c})"
                    if piece in vocab:
                        coords[vocab[piece]] = (r, c)
                        base[vocab[piece]] = vocab[f"{space}(1,1)"]
        return cls(
            coords=coords,
            coord_base=base,
            first=frozenset(vocab[s] for s in GRID_CELLS if s in vocab),
            rest=frozenset(vocab[f"  {s}"] for s in GRID_CELLS if f"  {s}" in vocab),
            newline=vocab["\n"],
            header=ids(HEADER + "\n"),
            answer=ids(IM_START + "assistant\n"),
            announce=ids(" will move"),
            moves={
                vocab[piece]: delta
                for move, delta in DELTAS.items()
                for piece in (move, f", {move}", f" {move}")
                if piece in vocab
            },
            start=frozenset(vocab[piece] for piece in ("P", "  P") if piece in vocab),
            box=vocab.get(BOXED, -1),
            numbers={
                vocab[piece]: n
                for n in range(1, MAX_MAP_SIZE + 1)
                for piece in (str(n), f" {n}")
                if piece in vocab
            },
            row_words=frozenset(vocab.get(w, -1) for w in (" row", " Row")),
            col_words=(vocab.get(" column", -1), vocab.get(" Column", -1)),
            comma=vocab.get(",", -1),
            by=vocab.get("x", -1),
            table_cells=frozenset(vocab[f" | {s}"] for s in SYMBOLS.values() if f" | {s}" in vocab),
            table_player=vocab.get(f" | {SYMBOLS['player']}", -1),
            table_row=(vocab.get("|", -1), vocab.get(" Row", -1)),
        )

    @property
    def complete(self) -> bool:
        """Whether it has the markers and desc and table words (a legacy checkpoint may lack them)."""
        return bool(self.answer and self.numbers and self.table_cells)

    def with_words_of(self, other: CellVocab) -> CellVocab:
        """This vocab with the markers and desc and table words of ``other`` (a legacy checkpoint's tables
        completed from its tokenizer)."""
        words = ("header", "answer", "announce", "numbers", "row_words", "col_words", "comma", "by")
        tables = ("table_cells", "table_player", "table_row")
        return dataclasses.replace(self, **{name: getattr(other, name) for name in (*words, *tables)})

    def to_config(self) -> dict[str, Any]:
        """The vocab as JSON (``config.json``'s ``cell_vocab``: string keys, lists)."""

        def plain(value: Any) -> Any:
            if isinstance(value, Mapping):
                return {str(k): list(v) if isinstance(v, tuple) else v for k, v in sorted(value.items())}
            if isinstance(value, frozenset):
                return sorted(value)
            return list(value) if isinstance(value, tuple) else value

        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> CellVocab:
        """The vocab :meth:`to_config` wrote."""
        return cls(**_typed({k: v for k, v in values.items() if k in _FIELDS}))

    @classmethod
    def from_legacy(cls, fields: Mapping[str, Any]) -> CellVocab:
        """The vocab stored as flat ``cell_*`` config keys (``cell_coords``, ``cell_first``, ...); the
        coordinate bases were stored only for composed models and the moves only for walking ones."""
        renamed = {"cell_coord_base": "coord_base"}
        values = {}
        for key, value in fields.items():
            name = renamed.get(key, key.removeprefix("cell_"))
            if key.startswith("cell_") and name in _FIELDS and value is not None:
                values[name] = value
        return cls(**_typed(values))


_FIELDS = {f.name: f for f in dataclasses.fields(CellVocab)}


def _typed(values: Mapping[str, Any]) -> dict[str, Any]:
    """JSON values of :class:`CellVocab` fields (string keys, lists) in their field's type."""
    typed: dict[str, Any] = {}
    for name, value in values.items():
        default = _FIELDS[name].default
        if name in ("coords", "moves"):
            typed[name] = {int(k): (int(v[0]), int(v[1])) for k, v in value.items()}
        elif name in ("coord_base", "numbers"):
            typed[name] = {int(k): int(v) for k, v in value.items()}
        elif isinstance(default, frozenset):
            typed[name] = frozenset(value)
        elif isinstance(default, tuple):
            typed[name] = tuple(value)
        else:
            typed[name] = value
    return typed
