r"""Row and column embeddings for map cells (position coupling), a named-size option: ``--model mini-cells``.

A small model trained from scratch reads a grid badly: to know which cell of ``Grid:\nX  G  .\n.  P  .``
is at row 2, column 2 it must count newlines and cells in a 1-D sequence (docs/results/history.md, "Base
models and cell embeddings", measures what the embeddings below change). Position coupling (Cho et al.
2024) gives every token that *is* a cell the embedding of its row and of its column, added to its token
embedding, so "the cell at (2,2)" and the coordinate token ``(2,2)`` share a vector and attention can
match them directly:

- the cells of the first grid of the sequence (the map of the ``grid`` input format: rows of ``.PGX``
  cells, the first of each row a bare character, the others with their two spaces; a grid starts at the
  bare cell right after the ``Grid:`` line, a row at one after a newline, and ends at any other token) get
  their 1-based row and column;
- every coordinate token ``(r,c)`` (the ``coords`` and ``astar`` CoTs, with or without its leading space)
  gets ``r`` and ``c``, wherever it is;
- every move token of an answer (``\boxed{DOWN, RIGHT}`` after the first grid; the models a named size
  builds, whose config has ``cell_moves``) gets the cell the player reaches by the moves so far, from the
  grid's start cell ``P``, one cell per move, an off-edge move staying in place (the env's rule). It is
  where the player *would be*, not what is there: holes and the goal are still the model's to read. The
  start is the ``P`` of a grid in the prompt: a grid of the assistant's turn (after ``<|im_start|>assistant``)
  sets none, since a trace's first grid already shows the player one move in, so with table or desc
  input no move walks. With ``cell_trace_moves`` (a config field, off by default) the move a trace states
  after ``will move`` (``I will move RIGHT`` of the desc CoTs) walks too, on from the trace's previous
  stated move, so the token before a redrawn grid carries the player's new cell; an answer's
  ``\boxed{`` walks again from the start. Other moves in prose (``moving DOWN or RIGHT``) get none;
- with ``cell_player`` (a config field, off by default): the number ending each ``row R, column C`` of a desc
  map in the prompt gets (R, C), ``This is a NxM map`` gives the walk its size, and the player's cell (the
  lower-case ``row``, ``column`` of ``The player is at:``) is the start, so with desc input the moves walk
  as with grid input. And in a redrawn grid under ``next``, the token that predicts the cell the trace's
  stated moves have reached gets a player flag (a third embedding, two values, 0 = none): the redrawn
  grid of a grid+desc trace shows the player where its stated move leads. A grid CoT states no move (its
  redrawn grid *is* the move), so it gets no flag. Like the walk, the flag says where the player would be
  by the moves written so far, never what is there or which move to take;
- with ``cell_order`` (a config field, off by default): a cell's row ``r`` and column ``c`` also give an
  ordered part, ``(r, c) / ORDER_SCALE`` through one learned linear map, added to their lookup embeddings,
  so that "the goal is below the player" is a difference of two vectors rather than a relation between two
  unrelated table entries, and rows and columns beyond the trained sizes keep their order;
- with ``cell_tables`` (a config field, off by default): the cells of a table map (``| Row R | @ | _ |``,
  the cell tokens `` | @``, `` | _``, `` | *``, `` | #``) get (R, k), k counting the row's cells, as a grid's
  do: the table in the prompt is the map (its size bounds the walk, its ``@`` starts it), and the tables a
  table CoT redraws in the assistant's turn are redrawn maps, read by ``cell_grids`` as redrawn grids are
  (``first``: none; ``every``: their own cells; ``next``: the ``R`` of ``| Row R`` and each cell carry the
  cell after them, the row's last none, with the player flag of ``cell_player``);
- every other token gets index 0, whose embedding is zero.

The rule is causal: a token's row and column depend only on it and the tokens before it, so generation
(which has no later tokens) gives every token what training gave it.

Why the walk: without it a model that knows where the goal is does not know which cell its answer has
reached, and walks into holes (docs/results/history.md, "Base models and cell embeddings").

A move's cell depends on the moves before it: generation feeds each step's tokens to a :class:`CellWalker` per
sequence, which gives them what the whole sequence's rule gives them in training. With ``cell_grids: first``
(the default, and the shipped base's) only the first grid of a sequence gets cell positions (with grid input,
the prompt's map); with ``every`` (``mini-cells-shift``, ``mini-cells-compose``, or ``lakeshift train
--cell-grids every``) so does each map a grid CoT redraws, so that a redrawn cell shares the vector of the
prompt's cell it copies. With ``next`` every grid after the sequence's first is coupled to what it predicts
instead: the header line before it gets (1, 1), each cell the row and column of the cell after it in its row
(the row's last cell none), and each newline inside it the first cell of the next row, so the token that
predicts cell (r, c) carries the vector of the first grid's cell (r, c) it copies (as a move of an answer
carries the cell it reaches); its width and height are the first grid's. Answers walk from the first grid's
start either way. Table input gets none without ``cell_tables``, and desc input none without ``cell_player``.
Rows and columns above the training sizes have untrained embeddings, like the coordinate tokens themselves:
this helps reading maps, not size generalization by itself.

``cell_shift`` (a config field, off by default; on in the named size ``mini-cells-shift``): in training,
every row and column index of a sequence with a grid moves by one random offset (:func:`shifted`) so that
small maps train every embedding up to row and column 30 as a relative position; at test time nothing
moves. (A sequence without a grid keeps its indices: nothing in it would show the offset.) RESULTS.md,
"Out-of-distribution", measures it.

Composed coordinate tokens (config field ``cell_coord_base``, from ``cell_tables(compose=True)``; the
named size ``mini-cells-compose``, which also shifts): a coordinate token ``(r,c)`` is not a vector of its
own but the shared vector of its spelling (the token ``(1,1)``, or `` (1,1)`` with its space) plus the
embeddings of row ``r`` and column ``c``, on the input side and in the tied output layer
(:class:`ComposedHead` scores it against the same sum, moved with its sequence in a shifted pass). Text
from 3x3-6x6 maps never contains ``(7,1)``..``(10,10)``: as separate tokens they stay untrained and a
model never writes them; composed, they are made of the row and column embeddings that shifted training
trains up to 30.

The model is Qwen2 with this embedding (``model_type`` ``lakeshift_cells``), registered with transformers'
Auto classes by :func:`register` so checkpoints save and load like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_CELL = 31  # rows and columns 1..30 (MAX_MAP_SIZE); 0 = not a cell
ORDER_SCALE = 10.0  # ``cell_order``: row and column r enter as r / 10 (a 10x10 map spans 0.1-1)
MODEL_TYPE = "lakeshift_cells"
GRID_CELLS = ".PGX"
GRIDS = ("first", "every", "next")  # the values of ``cell_grids``: which grids get cells, and how
#: The on/off options of a cells model (config fields; ``--cell-trace-moves`` ... on ``lakeshift train``).
FLAGS = ("cell_trace_moves", "cell_player", "cell_order", "cell_tables")
#: Every option a training run may set on a cells model, in :func:`set_grids`'s order.
OPTIONS = ("cell_grids", *FLAGS)

_registered: dict[str, Any] = {}


def cell_tables(tokenizer: Any, moves: bool = False, compose: bool = False) -> dict[str, Any]:
    """The token ids the rule needs, from a structured tokenizer: config fields of a cells model.

    ``moves``: also the move tokens (``cell_moves``), which then get the cell the walk reaches (module doc).
    ``compose``: also ``cell_coord_base``, each coordinate token's shared token (``(1,1)`` or `` (1,1)``,
    the same spacing), which makes its embedding and output vector composed (module doc).
    """
    from lakeshift.env import DELTAS
    from lakeshift.models.tokenizer import MAX_MAP_SIZE
    from lakeshift.traces import BOXED

    vocab = tokenizer.get_vocab()
    walk = {
        str(vocab[piece]): list(delta)
        for move, delta in DELTAS.items()
        for piece in (move, f", {move}", f" {move}")
        if moves and piece in vocab
    }
    coords: dict[str, list[int]] = {}
    base: dict[str, int] = {}
    for r in range(1, MAX_MAP_SIZE + 1):
        for c in range(1, MAX_MAP_SIZE + 1):
            for space in ("", " "):
                piece = f"{space}({r},{c})"
                if piece in vocab:
                    coords[str(vocab[piece])] = [r, c]
                    base[str(vocab[piece])] = vocab[f"{space}(1,1)"]
    composed = {"cell_coord_base": base} if compose else {}
    return {
        **composed,
        "cell_coords": coords,
        "cell_first": sorted(vocab[s] for s in GRID_CELLS if s in vocab),
        "cell_rest": sorted(vocab[f"  {s}"] for s in GRID_CELLS if f"  {s}" in vocab),
        "cell_newline": vocab["\n"],
        **marker_ids(tokenizer),
        "cell_moves": walk,
        "cell_start": sorted(vocab[piece] for piece in ("P", "  P") if moves and piece in vocab),
        "cell_box": vocab.get(BOXED, -1) if moves else -1,
        **desc_ids(tokenizer),
        **table_ids(tokenizer),
    }


def marker_ids(tokenizer: Any) -> dict[str, list[int]]:
    """The token sequences the rule reads, as config fields: ``cell_header``, the line that opens every grid
    (``Grid:`` and its newline: a grid starts after it); ``cell_answer``, the opening of the assistant's
    turn (a grid after it is not the prompt's map); ``cell_announce``, the words before the move a trace
    states (``I will move RIGHT``)."""
    from lakeshift.formats.grid import HEADER
    from lakeshift.models.tokenizer import IM_START

    def ids(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    return {
        "cell_header": ids(HEADER + "\n"),
        "cell_answer": ids(IM_START + "assistant\n"),
        "cell_announce": ids(" will move"),
    }


def desc_ids(tokenizer: Any) -> dict[str, Any]:
    """The tokens of a desc map's words that :data:`cell_player` reads, as config fields: ``cell_numbers``
    (each number token, spaced or bare, and its value), ``cell_row_words`` (`` row``, `` Row``),
    ``cell_col_words`` (`` column``, `` Column``; the first the player's), ``cell_comma`` and ``cell_by``
    (the ``x`` of ``3x3``)."""
    from lakeshift.models.tokenizer import MAX_MAP_SIZE

    vocab = tokenizer.get_vocab()
    numbers = {
        str(vocab[piece]): n
        for n in range(1, MAX_MAP_SIZE + 1)
        for piece in (str(n), f" {n}")
        if piece in vocab
    }
    return {
        "cell_numbers": numbers,
        "cell_row_words": [vocab.get(" row", -1), vocab.get(" Row", -1)],
        "cell_col_words": [vocab.get(" column", -1), vocab.get(" Column", -1)],
        "cell_comma": vocab.get(",", -1),
        "cell_by": vocab.get("x", -1),
    }


def table_ids(tokenizer: Any) -> dict[str, Any]:
    """The tokens of a table map that :data:`cell_tables` reads, as config fields: ``cell_table_cells``
    (`` | _``, `` | @``, `` | *``, `` | #``), ``cell_table_player`` (`` | @``) and ``cell_table_row`` (``|``
    and `` Row``, the opening of a row line)."""
    from lakeshift.formats.table import SYMBOLS

    vocab = tokenizer.get_vocab()
    return {
        "cell_table_cells": sorted(vocab[f" | {s}"] for s in SYMBOLS.values() if f" | {s}" in vocab),
        "cell_table_player": vocab.get(f" | {SYMBOLS['player']}", -1),
        "cell_table_row": [vocab.get("|", -1), vocab.get(" Row", -1)],
    }


#: The token fields a cells model's config needs for the causal rule; an older checkpoint lacks some.
MARKER_FIELDS = ("cell_answer", "cell_numbers", "cell_table_cells")


def set_markers(model: Any, tokenizer: Any) -> None:
    """Gives a cells model saved without the :func:`marker_ids`, :func:`desc_ids` or :func:`table_ids`
    fields (an older checkpoint) those of its tokenizer, so that its grids and walks follow the causal rule
    (module doc)."""
    for field, ids in {**marker_ids(tokenizer), **desc_ids(tokenizer), **table_ids(tokenizer)}.items():
        setattr(model.config, field, ids)
    model.model.embed_tokens.tables.update(lookup_tables(vars(model.config)))


def check_sizes(model_type: str | None, sizes: Iterable[int], where: str) -> None:
    """Refuses maps with more rows and columns than a cells model has positions for (any other model
    passes).

    Raises:
        LakeshiftError: naming ``where`` and the largest size.
    """
    from lakeshift.errors import LakeshiftError

    largest = max(sizes, default=0)
    if model_type == MODEL_TYPE and largest >= MAX_CELL:
        raise LakeshiftError(
            f"{where}: {largest}x{largest} maps: a cells model has row and column positions up to "
            f"{MAX_CELL - 1} only (cells beyond would all get position 0)"
        )


def lookup_tables(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The :func:`cell_tables` fields (as a config stores them) in the form :func:`cell_positions` reads."""
    return {
        "coords": {int(k): tuple(v) for k, v in fields["cell_coords"].items()},
        "first": set(fields["cell_first"]),
        "rest": set(fields["cell_rest"]),
        "newline": fields["cell_newline"],
        "header": tuple(fields.get("cell_header") or ()),
        "answer": tuple(fields.get("cell_answer") or ()),
        "announce": tuple(fields.get("cell_announce") or ()) if fields.get("cell_trace_moves") else (),
        "moves": {int(k): tuple(v) for k, v in fields.get("cell_moves", {}).items()},
        "start": set(fields.get("cell_start", [])),
        "box": fields.get("cell_box", -1),
        "player": bool(fields.get("cell_player")),
        "numbers": {int(k): v for k, v in (fields.get("cell_numbers") or {}).items()},
        "row_words": set(fields.get("cell_row_words") or ()),
        "col_words": tuple(fields.get("cell_col_words") or ()),
        "comma": fields.get("cell_comma", -1),
        "by": fields.get("cell_by", -1),
        "table": bool(fields.get("cell_tables")),
        "table_cells": set(fields.get("cell_table_cells") or ()),
        "table_player": fields.get("cell_table_player", -1),
        "table_row": tuple(fields.get("cell_table_row") or ()),
        **_grid_flags(fields.get("cell_grids", "first")),
    }


def _grid_flags(grids: str) -> dict[str, bool]:
    """The lookup-table flags of a ``cell_grids`` value: which grids get cells, and whether coupled to the
    next cell."""
    return {"every": grids in ("every", "next"), "next": grids == "next"}


def cell_positions(ids: list[int], tables: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Row and column index (0 = none) of every token of one sequence (see the module doc; ``tables`` from
    :func:`lookup_tables`)."""
    rows, cols, _ = CellWalker(tables).feed(ids)
    return rows, cols


class CellWalker:
    """The rule of the module doc fed a sequence piece by piece (generation: the prompt, then a token per
    step): each token's row, column and player flag.

    Each piece gets exactly what the whole sequence gives it: the rule is causal (a token's indices depend
    on it and the tokens before it only), so the walker keeps the state after the last token and reads on.
    """

    def __init__(self, tables: dict[str, Any]) -> None:
        self.tables = tables
        self._walk = _Walk()

    def feed(self, ids: list[int]) -> tuple[list[int], list[int], list[int]]:
        out = [self._walk.step(tok, self.tables) for tok in ids]
        return [r for r, _, _ in out], [c for _, c, _ in out], [f for _, _, f in out]


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
    stated: bool = False  # a move stated since the last grid ended (``cell_player``: the next grid shows it)
    predicts: bool = False  # the token read last predicts the cell it gets (``next``)
    table_row: int = 0  # the row of the table line being read (``cell_tables``; 0: none)
    table_col: int = 0
    table_redrawn: bool = False  # that table is in the assistant's turn (one a table CoT redraws)

    def step(self, tok: int, tables: dict[str, Any]) -> tuple[int, int, int]:
        """Reads ``tok`` and returns its row, column and player flag."""
        self.predicts = False
        cell = self._step(tok, tables)
        return *cell, int(tables["player"] and self.stated and self.predicts and cell == self.here)

    def _step(self, tok: int, tables: dict[str, Any]) -> tuple[int, int]:
        header, answer, announce = tables["header"], tables["answer"], tables["announce"]
        prev = self.recent[-1] if self.recent else None
        before = self.recent
        after_header, announced = _ends_with(self.recent, header), _ends_with(self.recent, announce)
        # (4: a desc cell reads the ``row R, column`` before it)
        self.recent = (*self.recent, tok)[-max(len(header), len(answer), len(announce), 4) :]
        self.answering = self.answering or _ends_with(self.recent, answer)
        if tables["table"]:
            cell = self._table_cell(tok, before, tables)
            if cell is not None:
                self.walking = False
                return cell
        if tables["player"] and not self.answering and self.state != "inside" and tok in tables["numbers"]:
            return self._desc_cell(before, tables["numbers"][tok], tables)
        if tables["next"] and self.state == "done" and self.height and _ends_with(self.recent, header):
            self.walking, self.predicts = False, True
            return 1, 1  # ``next``: the header line of a redrawn grid predicts its cell (1, 1)
        if tok in tables["coords"]:
            self.walking = False
            return tables["coords"][tok]
        # A grid starts with a bare cell right after the ``Grid:`` line; its later rows with one after a
        # newline. (Deciding from the tokens before, never after: generation has no later tokens.)
        starts_row = tok in tables["first"] and prev == tables["newline"]
        starts_grid = tok in tables["first"] and after_header
        if self.state == "done" and tables["every"] and starts_grid:
            self.state, self.row = "before", 0  # a later grid (one a grid CoT redraws): read it too
            self.redrawn = True
        if self.state == "done":
            moves = tables["moves"]
            boxed = prev == tables["box"]
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
        elif self.state == "inside" and tok in tables["rest"] and self.col:
            self.col += 1
        elif self.state == "inside" and tok == tables["newline"]:
            self.col = 0
            if tables["next"] and self.redrawn and self.row < self.height:
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
            if self.start is None and tok in tables["start"] and not self.answering:
                self.start = self.here = (self.row, self.col)
        if tables["next"] and self.redrawn:  # the cell this one predicts; the row's last predicts a newline
            self.predicts = True
            return (self.row, self.col + 1) if self.col < self.width else (0, 0)
        return self.row, self.col

    def _table_cell(
        self, tok: int, before: tuple[int, ...], tables: dict[str, Any]
    ) -> tuple[int, int] | None:
        """A token of a table's row line (``cell_tables``): its cell, or (0, 0); None for any other token.

        The table in the prompt is the map: its cells get their own (R, k), and it gives the walk its size
        and start (the ``@``). A table of the assistant's turn is a redrawn map, read as ``cell_grids``
        reads a redrawn grid."""
        if tok in tables["numbers"] and before[-2:] == tables["table_row"]:
            self.table_row, self.table_col, self.table_redrawn = tables["numbers"][tok], 0, self.answering
            if self.table_redrawn and tables["next"] and self.table_row < MAX_CELL:
                self.predicts = True
                return self.table_row, 1  # ``next``: the row's number predicts its first cell
            return 0, 0
        if self.table_row and tok in tables["table_cells"]:
            self.table_col += 1
            r, c = self.table_row, self.table_col
            if r >= MAX_CELL or c >= MAX_CELL:
                return 0, 0
            if not self.table_redrawn:
                self.height, self.width = max(self.height, r), max(self.width, c)
                if self.start is None and tok == tables["table_player"]:
                    self.start = self.here = (r, c)
                    self.state = "done"  # the map's start is read: moves walk from here on
                return r, c
            if not tables["every"]:
                return 0, 0
            if tables["next"]:
                self.predicts = True
                return (r, c + 1) if c < self.width else (0, 0)
            return r, c
        if self.table_row and tok == tables["newline"]:
            if self.table_redrawn and self.table_row >= self.height:
                self.stated = False  # the redrawn map is drawn: the next one needs a new stated move
            self.table_row = 0
            return 0, 0
        return None

    def _desc_cell(self, before: tuple[int, ...], number: int, tables: dict[str, Any]) -> tuple[int, int]:
        """A number token of a desc map in the prompt (``cell_player``): the column of ``row R, column C``
        gets (R, C), and the player's (``row``, ``column`` in lower case) starts the walk; ``NxM`` of
        ``This is a NxM map`` is its size."""
        numbers, rows, cols = tables["numbers"], tables["row_words"], tables["col_words"]
        if len(before) >= 2 and before[-1] == tables["by"] and before[-2] in numbers and not self.height:
            self.height, self.width = numbers[before[-2]], number
            return 0, 0
        row_word, row, comma, col_word = before[-4:] if len(before) >= 4 else (None, None, None, None)
        if not (row_word in rows and row in numbers and comma == tables["comma"] and col_word in cols):
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


def shifted(index: Any) -> Any:
    """``index`` (a batch of row or column indices, 0 = none) moved by a random offset per sequence, so that
    the largest stays below :data:`MAX_CELL`: training on small maps then trains every row and column
    embedding, as a relative position (random position offsets, Cho et al. 2024)."""
    import torch

    room = (MAX_CELL - 1 - index.max(dim=1, keepdim=True).values).clamp(min=0)
    offset = (torch.rand(room.shape, device=index.device) * (room + 1)).floor().long()
    return torch.where(index > 0, index + offset, index)


def set_grids(
    model: Any,
    grids: str | None = None,
    trace_moves: bool | None = None,
    player: bool | None = None,
    order: bool | None = None,
    tables: bool | None = None,
) -> None:
    """Switches a loaded cells model to ``cell_grids`` = ``grids`` (one of :data:`GRIDS`),
    ``cell_trace_moves`` = ``trace_moves``, ``cell_player`` = ``player``, ``cell_order`` = ``order`` and
    ``cell_tables`` = ``tables`` (None: unchanged); saved with it. A model that gets the player flag or
    the ordered part without having had it starts with zero weights for it, so that it computes what it
    computed before."""
    import torch

    if grids is not None:
        model.config.cell_grids = grids
    if trace_moves is not None:
        model.config.cell_trace_moves = trace_moves
    if tables is not None:
        model.config.cell_tables = tables
    embedding = model.model.embed_tokens
    weight = embedding.weight
    hidden, where = weight.shape[1], {"device": weight.device, "dtype": weight.dtype}
    parts = {
        "player": (player, lambda: torch.nn.Embedding(2, hidden, padding_idx=0, **where)),
        "order": (order, lambda: torch.nn.Linear(2, hidden, bias=False, **where)),
    }
    for name, (on, make) in parts.items():
        if on is None:
            continue
        setattr(model.config, f"cell_{name}", on)
        if on and getattr(embedding, name) is None:
            part = make()
            torch.nn.init.zeros_(part.weight)
            setattr(embedding, name, part)
        elif not on:
            setattr(embedding, name, None)
    embedding.tables.update(lookup_tables(vars(model.config)))


def config_walks(config: Any) -> bool:
    """Whether a cells model's move tokens get the cell their walk reaches (``cell_moves`` in its config)."""
    return bool(getattr(config, "cell_moves", None))


def register() -> tuple[type, type]:
    """Defines and registers the config and model classes with transformers (once); returns them."""
    if _registered:
        return _registered["config"], _registered["model"]
    import torch
    from torch import nn
    from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    def stacked(indices: Sequence[tuple[list[int], ...]], device: Any) -> tuple[torch.Tensor, ...]:
        """Per-sequence ``(rows, cols, flags)`` as three batch tensors."""
        return tuple(torch.tensor(list(column), device=device) for column in zip(*indices, strict=True))

    class CellsConfig(Qwen2Config):
        model_type = MODEL_TYPE

        def __init__(
            self,
            cell_coords: dict[str, list[int]] | None = None,
            cell_first: list[int] | None = None,
            cell_rest: list[int] | None = None,
            cell_newline: int = -1,
            cell_header: list[int] | None = None,
            cell_moves: dict[str, list[int]] | None = None,
            cell_start: list[int] | None = None,
            cell_shift: bool = False,
            cell_coord_base: dict[str, int] | None = None,
            cell_grids: str = "first",
            cell_answer: list[int] | None = None,
            cell_announce: list[int] | None = None,
            cell_trace_moves: bool = False,
            cell_player: bool = False,
            cell_order: bool = False,
            cell_numbers: dict[str, int] | None = None,
            cell_row_words: list[int] | None = None,
            cell_col_words: list[int] | None = None,
            cell_comma: int = -1,
            cell_by: int = -1,
            **kwargs: Any,
        ) -> None:
            self.cell_coords = cell_coords or {}
            self.cell_first = cell_first or []
            self.cell_rest = cell_rest or []
            self.cell_newline = cell_newline
            self.cell_header = cell_header or []
            self.cell_moves = cell_moves or {}
            self.cell_start = cell_start or []
            self.cell_shift = cell_shift
            self.cell_coord_base = cell_coord_base or {}
            self.cell_grids = cell_grids
            self.cell_answer = cell_answer or []
            self.cell_announce = cell_announce or []
            self.cell_trace_moves = cell_trace_moves
            self.cell_player = cell_player
            self.cell_order = cell_order
            self.cell_numbers = cell_numbers or {}
            self.cell_row_words = cell_row_words or []
            self.cell_col_words = cell_col_words or []
            self.cell_comma = cell_comma
            self.cell_by = cell_by
            super().__init__(**kwargs)

    class CellEmbedding(nn.Embedding):
        """Token embedding plus the row and column embeddings of :class:`CellWalker` (and, with
        ``cell_player``, its player flag's)."""

        def __init__(self, config: CellsConfig) -> None:
            super().__init__(config.vocab_size, config.hidden_size, config.pad_token_id)
            self.row = nn.Embedding(MAX_CELL, config.hidden_size, padding_idx=0)
            self.col = nn.Embedding(MAX_CELL, config.hidden_size, padding_idx=0)
            self.player = nn.Embedding(2, config.hidden_size, padding_idx=0) if config.cell_player else None
            self.order = nn.Linear(2, config.hidden_size, bias=False) if config.cell_order else None
            self.tables = lookup_tables(vars(config))
            self.shift = bool(config.cell_shift)
            base = {int(k): v for k, v in (getattr(config, "cell_coord_base", None) or {}).items()}
            self.composed = sorted(base)  # the coordinate tokens (token ids) whose vectors are composed
            # (plain lists, made into tensors per device when used: checkpoints hold no extra buffers)
            self._lists = {
                "coordinates": sorted(self.tables["coords"]),
                "tokens": self.composed,
                "base": [base[t] for t in self.composed],
                "rows": [self.tables["coords"][t][0] for t in self.composed],
                "cols": [self.tables["coords"][t][1] for t in self.composed],
            }
            self._tensors: dict[tuple[str, str], torch.Tensor] = {}
            self._offsets: tuple[torch.Tensor, torch.Tensor] | None = None

        def index(self, name: str, device: Any) -> torch.Tensor:
            key = (name, str(device))
            if key not in self._tensors:
                self._tensors[key] = torch.tensor(self._lists[name], dtype=torch.long, device=device)
            return self._tensors[key]

        def indices(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
            """Rows, columns and player flags of a batch (:class:`CellWalker` per sequence)."""
            walked = [CellWalker(self.tables).feed(seq) for seq in input_ids.tolist()]
            return stacked(walked, input_ids.device)

        def forward(
            self, input_ids: torch.Tensor, cells: tuple[torch.Tensor, ...] | None = None
        ) -> torch.Tensor:
            rows, cols, *flags = self.indices(input_ids) if cells is None else cells  # flags: optional
            self._offsets = None
            # (not under no_grad: GRPO samples with the model in training mode, one token per pass)
            if self.shift and self.training and torch.is_grad_enabled():
                # Only a sequence with a grid moves: its cells show the offset, so the coordinates it
                # writes can follow it (a table or desc map states its rows and columns in words).
                coordinate = torch.isin(input_ids, self.index("coordinates", input_ids.device))
                grid = ((rows > 0) & ~coordinate).any(dim=1, keepdim=True)
                moved_rows = torch.where(grid, shifted(rows), rows)
                moved_cols = torch.where(grid, shifted(cols), cols)
                # a sequence's offset (0 where it has no grid), for the output vectors of the same pass
                self._offsets = ((moved_rows - rows).amax(dim=1), (moved_cols - cols).amax(dim=1))
                rows, cols = moved_rows, moved_cols
            if self.composed:
                lookup = torch.arange(self.num_embeddings, device=input_ids.device)
                lookup[self.index("tokens", input_ids.device)] = self.index("base", input_ids.device)
                input_ids = lookup[input_ids]
            embedded = super().forward(input_ids) + self.cell_vectors(rows, cols)
            return embedded + self.player(flags[0]) if self.player is not None and flags else embedded

        def cell_vectors(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
            """The vectors of cells (0: none) at ``rows`` and ``cols``: their lookup embeddings and, with
            ``cell_order``, their ordered part."""
            vectors = self.row(rows) + self.col(cols)
            if self.order is None:
                return vectors
            ordered = torch.stack((rows, cols), dim=-1).to(self.order.weight.dtype) / ORDER_SCALE
            return vectors + self.order(ordered)

        def coordinate_vectors(self) -> torch.Tensor:
            """The composed coordinate tokens' vectors: their shared token's plus their row's and column's,
            ``(tokens, hidden)``; in a shifted training pass ``(batch, tokens, hidden)``, each sequence's
            rows and columns moved as its input's were."""
            device = self.weight.device
            rows, cols = self.index("rows", device), self.index("cols", device)
            shared = self.weight[self.index("base", device)]
            if self._offsets is None:
                return shared + self.cell_vectors(rows, cols)
            dr, dc = self._offsets
            rows = (rows[None, :] + dr[:, None]).clamp(max=MAX_CELL - 1)
            cols = (cols[None, :] + dc[:, None]).clamp(max=MAX_CELL - 1)
            return shared[None] + self.cell_vectors(rows, cols)

    class ComposedHead(nn.Linear):
        """The output layer (tied to the token embedding) of a model with composed coordinate tokens: a
        coordinate token's logit is scored against the vector its input embedding is made of."""

        def __init__(self, config: CellsConfig, embedding: CellEmbedding) -> None:
            super().__init__(config.hidden_size, config.vocab_size, bias=False)
            # not a submodule: its weights are the model's embedding's
            object.__setattr__(self, "embedding", embedding)

        def forward(self, hidden: torch.Tensor) -> torch.Tensor:
            logits = super().forward(hidden)
            coordinates = torch.matmul(hidden, self.embedding.coordinate_vectors().transpose(-1, -2))
            tokens = self.embedding.index("tokens", hidden.device)
            return logits.index_copy(-1, tokens, coordinates.to(logits.dtype))

    class CellsForCausalLM(Qwen2ForCausalLM):
        config_class = CellsConfig

        def __init__(self, config: CellsConfig) -> None:
            super().__init__(config)
            self.model.embed_tokens = CellEmbedding(config)
            if self.model.embed_tokens.composed:
                self.lm_head = ComposedHead(config, self.model.embed_tokens)
            self._walkers: list[CellWalker] = []
            self._walked = 0
            self.post_init()

        def prepare_inputs_for_generation(self, input_ids: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            inputs = super().prepare_inputs_for_generation(input_ids, *args, **kwargs)
            step = inputs.get("input_ids")
            if config_walks(self.config) and step is not None:
                # A move's cell depends on the moves before it: one walker per sequence reads each step's
                # tokens after the earlier ones (a new batch, or any other length, starts afresh).
                batch, total, new = input_ids.shape[0], input_ids.shape[1], step.shape[1]
                walkers = self._walkers if len(self._walkers) == batch and self._walked == total - new else []
                if not walkers:
                    walkers = [CellWalker(self.model.embed_tokens.tables) for _ in range(batch)]
                    new = total
                fed = [w.feed(x) for w, x in zip(walkers, input_ids[:, total - new :].tolist(), strict=True)]
                self._walkers, self._walked = walkers, total
                inputs["cells"] = tuple(t[:, -step.shape[1] :] for t in stacked(fed, input_ids.device))
            return inputs

        def forward(
            self,
            input_ids: torch.Tensor | None = None,
            attention_mask: torch.Tensor | None = None,
            position_ids: torch.Tensor | None = None,
            cells: tuple[torch.Tensor, ...] | None = None,
            **kwargs: Any,
        ) -> Any:
            # (generate checks its inputs against this signature: attention_mask and position_ids stay named)
            if cells is not None and input_ids is not None and kwargs.get("inputs_embeds") is None:
                kwargs["inputs_embeds"] = self.model.embed_tokens(input_ids, cells)
                input_ids = None
            return super().forward(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kwargs
            )

    AutoConfig.register(MODEL_TYPE, CellsConfig)
    AutoModelForCausalLM.register(CellsConfig, CellsForCausalLM)
    _registered.update(config=CellsConfig, model=CellsForCausalLM)
    return CellsConfig, CellsForCausalLM
