"""The token ids the position rule reads, derived from a structured tokenizer.

A :class:`CellVocab` is data, not a setting: :meth:`CellVocab.from_tokenizer` builds it from the tokenizer a
model is trained with, and a checkpoint keeps a copy (``config.json``'s ``cell_vocab``) so that it loads with
plain transformers. Checkpoints of earlier generations stored these tables as flat ``cell_*`` keys
(:meth:`CellVocab.from_legacy`), some of them without the markers; those are filled from their tokenizer
when lakeshift loads them.

A config's tables are checked as they are read: a token id is a whole number, a cell's row and column are
ones the model has embeddings for, a move is one step; a wrong one is one line naming the file and the key
(a coordinate beyond the row embeddings would otherwise crash fine-tuning with an ``IndexError``).
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakeshift.errors import LakeshiftError

#: The symbols of a grid cell: the grid input format's and the arrows of a ``wave`` frame.
GRID_CELLS = ".PGX^v<>"

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
        wave: the word that opens a ``wave`` frame's line ``Wave k:`` (the frame's grid follows its
            newline).
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
    wave: int = -1
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
        from lakeshift.traces.wave import WAVE_HEADER

        wave_word = WAVE_HEADER.split()[0]

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
            wave=vocab.get(wave_word, -1),
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
        words = ("header", "wave", "answer", "announce", "numbers", "row_words", "col_words", "comma", "by")
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
    def from_config(cls, values: Any, where: str = "cell_vocab") -> CellVocab:
        """The vocab :meth:`to_config` wrote.

        Raises:
            LakeshiftError: ``WHERE.FIELD: problem`` for a table of the wrong type or with a value the rule
                cannot use, ``WHERE: ...`` for a value that is not a mapping.
        """
        if not isinstance(values, Mapping):
            raise LakeshiftError(f"{where}: expected a mapping of token tables, got {_brief(values)}")
        return cls(**_typed({k: v for k, v in values.items() if k in _FIELDS}, f"{where}."))

    @classmethod
    def from_legacy(cls, fields: Mapping[str, Any], where: str = "config.json") -> CellVocab:
        """The vocab stored as flat ``cell_*`` config keys (``cell_coords``, ``cell_first``, ...); the
        coordinate bases were stored only for composed models and the moves only for walking ones.

        Raises:
            LakeshiftError: ``WHERE: cell_FIELD: problem`` for a table that is null, of the wrong type or
                with a value the rule cannot use.
        """
        values = {}
        for key, value in fields.items():
            name = key.removeprefix("cell_")
            if key.startswith("cell_") and name in _FIELDS:
                if value is None:  # a table switched off by hand: cells would silently read nothing
                    raise LakeshiftError(f"{where}: {key}: null (expected the table lakeshift wrote)")
                values[name] = value
        return cls(**_typed(values, f"{where}: cell_"))

    def missing(self, walks: bool) -> list[str]:
        """The tables the position rule cannot do without that are empty: the coordinate tokens, the grid
        cells and the newline, and the moves of a model that ``walks``."""
        needed = {"coords": self.coords, "first": self.first, "rest": self.rest, "newline": self.newline >= 0}
        if walks:
            needed["moves"] = self.moves
        return [name for name, value in needed.items() if not value]

    def id_problem(self, vocab_size: int) -> str | None:
        """``FIELD: ...`` for a token id that is not in a vocabulary of ``vocab_size`` tokens, or None."""
        for name, value in self.to_config().items():
            if isinstance(value, Mapping):
                ids = [int(k) for k in value] + (
                    [int(v) for v in value.values()] if name == "coord_base" else []
                )
            else:
                ids = list(value) if isinstance(value, list) else [value]
            bad = next((i for i in ids if i >= vocab_size), None)
            if bad is not None:
                return f"{name}: token id {bad} is not below the vocab_size {vocab_size}"
        return None


_FIELDS = {f.name: f for f in dataclasses.fields(CellVocab)}
#: The tables added to ``cell_vocab`` after it was first saved, each with the field of ``cells`` (the spec)
#: added in the same version: a config whose spec has that field was saved with the table.
LATER_TABLES: dict[str, str] = {"wave": "sequence"}


def absent_table(values: Mapping[str, Any], spec_fields: Iterable[str]) -> str | None:
    """The first table lakeshift saves in ``cell_vocab`` that a config's ``cell_vocab`` (``values``) lacks,
    or None. ``spec_fields``: the fields its ``cells`` holds; a table of :data:`LATER_TABLES` is required
    only beside the spec field saved since it (an earlier checkpoint has neither and reads no such token).

    Example:
        >>> values = CellVocab().to_config()
        >>> absent_table({k: v for k, v in values.items() if k != "wave"}, ["grids", "sequence"])
        'wave'
        >>> absent_table({k: v for k, v in values.items() if k != "wave"}, ["grids"]) is None
        True
    """
    fields = set(spec_fields)
    for name in _FIELDS:
        later = LATER_TABLES.get(name)
        if name not in values and (later is None or later in fields):
            return name
    return None


def _typed(values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """JSON values of :class:`CellVocab` fields (string keys, lists) in their field's type, each checked.

    Raises:
        LakeshiftError: ``{prefix}FIELD: problem`` for the first value the rule cannot use.
    """
    typed: dict[str, Any] = {}
    for name, value in values.items():
        try:
            typed[name] = _field(name, value)
        except _Bad as bad:
            raise LakeshiftError(f"{prefix}{name}: {bad}") from None
    return typed


class _Bad(Exception):
    """Why a config value cannot be a vocab field's (the message), raised inside :func:`_field`."""


def _brief(value: Any) -> str:
    return reprlib.repr(value)


def _int(value: Any, low: int, high: int | None, what: str) -> int:
    """``value`` as a whole number in ``[low, high]`` (a table's JSON key may be its digits)."""
    number = int(value) if isinstance(value, str) and value.isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int):
        raise _Bad(f"expected {what}, got {_brief(value)}")
    if number < low or (high is not None and number > high):
        top = f" .. {high}" if high is not None else " or more"
        raise _Bad(f"{what} must be {low}{top}, got {number}")
    return number


def _pair(value: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise _Bad(f"expected {what} as a pair [row, column], got {_brief(value)}")
    return value[0], value[1]


def _field(name: str, value: Any) -> Any:
    """The typed value of field ``name`` (raises :class:`_Bad`)."""
    from lakeshift.models.cells.positions import MAX_CELL

    default = _FIELDS[name].default
    token = "a token id"
    if name in ("coords", "moves", "coord_base", "numbers"):
        if not isinstance(value, Mapping):
            raise _Bad(f"expected a mapping of token ids, got {_brief(value)}")
        out: dict[int, Any] = {}
        for key, item in value.items():
            tok = _int(key, 0, None, token)
            if name == "coords":  # a cell beyond the row and column embeddings is an IndexError in training
                r, c = _pair(item, "a cell")
                out[tok] = (_int(r, 1, MAX_CELL - 1, "a row"), _int(c, 1, MAX_CELL - 1, "a column"))
            elif name == "moves":
                step = tuple(_int(d, -1, 1, "a step") for d in _pair(item, "a move"))
                if abs(step[0]) + abs(step[1]) != 1:
                    raise _Bad(f"token {tok}: a move is one step up, down, left or right, got {list(item)}")
                out[tok] = step
            elif name == "numbers":
                out[tok] = _int(item, 1, MAX_CELL - 1, "a number")
            else:
                out[tok] = _int(item, 0, None, token)
        return out
    if isinstance(default, (frozenset, tuple)):
        if not isinstance(value, (list, tuple)):
            raise _Bad(f"expected a list of token ids, got {_brief(value)}")
        # -1 stands for a word the tokenizer lacks in the fixed-length tables (col_words, table_row)
        ids = [
            _int(v, -1 if name in ("col_words", "table_row", "row_words") else 0, None, token) for v in value
        ]
        return frozenset(ids) if isinstance(default, frozenset) else tuple(ids)
    return _int(value, -1, None, token)
