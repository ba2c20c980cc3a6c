r"""Row and column embeddings for map cells (position coupling), a named-size option: ``--model mini-cells``.

A small model trained from scratch reads a grid badly: to know which cell of ``Grid:\nX  G  .\n.  P  .``
is at row 2, column 2 it must count newlines and cells in a 1-D sequence. Measured (RESULTS.md, "Base
models and cell embeddings"): after 40 minutes of pretraining on map reading, ``mini`` located the start
cell of a grid on 7/15 maps; ``mini-cells`` after 30 minutes on 15/15, and fine-tuned for 5 minutes on
grid / no CoT it solved 0.595 of the id-test maps (``mini`` from scratch: 0.09). Position coupling (Cho et
al. 2024; ``notes/small-models.md``) gives every token that *is* a cell the embedding of its row and of its
column, added to its token embedding, so "the cell at (2,2)" and the coordinate token ``(2,2)`` share a
vector and attention can match them directly:

- the cells of the first grid of the sequence (the map of the ``grid`` input format: rows of ``.PGX``
  cells, the first of each row a bare character, the others with their two spaces; a grid starts after a
  newline) get their 1-based row and column;
- every coordinate token ``(r,c)`` (the ``coords`` and ``astar`` CoTs, with or without its leading space)
  gets ``r`` and ``c``, wherever it is;
- every move token of an answer (``\boxed{DOWN, RIGHT}`` after the first grid; the models a named size
  builds, whose config has ``cell_moves``) gets the cell the player reaches by the moves so far, from the
  grid's start cell ``P``, one cell per move, an off-edge move staying in place (the env's rule). It is
  where the player *would be*, not what is there: holes and the goal are still the model's to read. Moves
  in prose (``moving DOWN or RIGHT`` of the desc CoT) get none;
- every other token gets index 0, whose embedding is zero.

Why the walk: fine-tuned for 15 minutes on grid / no CoT, ``mini-cells-base`` without it lost every one of
its 54 failed id-test maps by walking into a hole: it knew where the goal was but not which cell its
answer had reached. With the walk, 5 minutes of the same fine-tuning solve 0.70 of the maps instead of
0.595 (RESULTS.md, "Base models and cell embeddings").

A continuation step of generation never starts a grid, exactly as the completion's tokens after the first
grid never get grid positions in training; a move's cell depends on the moves before it, so generation
computes the positions of the whole sequence at every step (``prepare_inputs_for_generation``) and
training and generation agree. Grids written by the grid CoTs and table/desc inputs get no cell positions
(the desc input writes its coordinates as words). Rows and columns above the training sizes have
untrained embeddings, like the coordinate tokens themselves: this helps reading maps, not size
generalization by itself.

``cell_shift`` (a config field, off by default): in training, every row and column index of a sequence
moves by one random offset (:func:`shifted`) so that small maps train every embedding up to row and column
30 as a relative position; at test time nothing moves. For size generalization (RESULTS.md, "OOD").

The model is Qwen2 with this embedding (``model_type`` ``lakeshift_cells``), registered with transformers'
Auto classes by :func:`register` so checkpoints save and load like any other.
"""

from __future__ import annotations

from typing import Any

MAX_CELL = 31  # rows and columns 1..30 (MAX_MAP_SIZE); 0 = not a cell
MODEL_TYPE = "lakeshift_cells"
GRID_CELLS = ".PGX"

_registered: dict[str, Any] = {}


def cell_tables(tokenizer: Any, moves: bool = False) -> dict[str, Any]:
    """The token ids the rule needs, from a structured tokenizer: config fields of a cells model.

    ``moves``: also the move tokens (``cell_moves``), which then get the cell the walk reaches (module doc).
    """
    from lakeshift.env import DELTAS
    from lakeshift.models.tokenizer import MAX_MAP_SIZE

    vocab = tokenizer.get_vocab()
    walk = {
        str(vocab[piece]): list(delta)
        for move, delta in DELTAS.items()
        for piece in (move, f", {move}", f" {move}")
        if moves and piece in vocab
    }
    coords: dict[str, list[int]] = {}
    for r in range(1, MAX_MAP_SIZE + 1):
        for c in range(1, MAX_MAP_SIZE + 1):
            for piece in (f"({r},{c})", f" ({r},{c})"):
                if piece in vocab:
                    coords[str(vocab[piece])] = [r, c]
    return {
        "cell_coords": coords,
        "cell_first": sorted(vocab[s] for s in GRID_CELLS if s in vocab),
        "cell_rest": sorted(vocab[f"  {s}"] for s in GRID_CELLS if f"  {s}" in vocab),
        "cell_newline": vocab["\n"],
        "cell_moves": walk,
        "cell_start": sorted(vocab[piece] for piece in ("P", "  P") if moves and piece in vocab),
        "cell_box": vocab.get("\\boxed{", -1) if moves else -1,
    }


def lookup_tables(fields: dict[str, Any]) -> dict[str, Any]:
    """The :func:`cell_tables` fields (as a config stores them) in the form :func:`cell_positions` reads."""
    return {
        "coords": {int(k): tuple(v) for k, v in fields["cell_coords"].items()},
        "first": set(fields["cell_first"]),
        "rest": set(fields["cell_rest"]),
        "newline": fields["cell_newline"],
        "moves": {int(k): tuple(v) for k, v in fields.get("cell_moves", {}).items()},
        "start": set(fields.get("cell_start", [])),
        "box": fields.get("cell_box", -1),
    }


def cell_positions(ids: list[int], tables: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Row and column index (0 = none) of every token of one sequence (see the module doc; ``tables`` from
    :func:`lookup_tables`)."""
    coords, moves = tables["coords"], tables["moves"]
    first, rest, newline = tables["first"], tables["rest"], tables["newline"]
    rows, cols = [0] * len(ids), [0] * len(ids)
    row = col = width = 0
    start: tuple[int, int] | None = None
    here = (0, 0)
    walking = False  # the previous token was a move of an answer
    state = "before"  # before the first grid, inside it, or after it
    for i, tok in enumerate(ids):
        if tok in coords:
            rows[i], cols[i] = coords[tok]
            continue
        if state == "done":
            boxed = ids[i - 1] == tables["box"]
            walking = tok in moves and start is not None and (walking or boxed)
            if walking:
                here = start if boxed else here
                dr, dc = moves[tok]
                here = (min(max(here[0] + dr, 1), row), min(max(here[1] + dc, 1), width))
                rows[i], cols[i] = here
            continue
        starts_row = tok in first and i > 0 and ids[i - 1] == newline
        if starts_row and (state == "inside" or _grid_follows(ids, i, rest)):
            state, row, col = "inside", row + 1, 1
        elif state == "inside" and tok in rest and col:
            col += 1
        elif state == "inside" and tok == newline:
            col = 0
            continue
        elif state == "inside":
            state = "done"
            continue
        else:
            continue
        if row < MAX_CELL and col < MAX_CELL:
            rows[i], cols[i] = row, col
            width = max(width, col)
            if start is None and tok in tables["start"]:
                start = (row, col)
    return rows, cols


def shifted(index: Any) -> Any:
    """``index`` (a batch of row or column indices, 0 = none) moved by a random offset per sequence, so that
    the largest stays below :data:`MAX_CELL`: training on small maps then trains every row and column
    embedding, as a relative position (random position offsets, Cho et al. 2024)."""
    import torch

    room = (MAX_CELL - 1 - index.max(dim=1, keepdim=True).values).clamp(min=0)
    offset = (torch.rand(room.shape, device=index.device) * (room + 1)).floor().long()
    return torch.where(index > 0, index + offset, index)


def config_walks(config: Any) -> bool:
    """Whether a cells model's move tokens get the cell their walk reaches (``cell_moves`` in its config)."""
    return bool(getattr(config, "cell_moves", None))


def _grid_follows(ids: list[int], i: int, rest: set[int]) -> bool:
    """A bare cell character starts a grid only when a spaced cell follows it (not a stray ``.``)."""
    return i + 1 < len(ids) and ids[i + 1] in rest


def register() -> tuple[type, type]:
    """Defines and registers the config and model classes with transformers (once); returns them."""
    if _registered:
        return _registered["config"], _registered["model"]
    import torch
    from torch import nn
    from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    class CellsConfig(Qwen2Config):
        model_type = MODEL_TYPE

        def __init__(
            self,
            cell_coords: dict[str, list[int]] | None = None,
            cell_first: list[int] | None = None,
            cell_rest: list[int] | None = None,
            cell_newline: int = -1,
            cell_moves: dict[str, list[int]] | None = None,
            cell_start: list[int] | None = None,
            cell_shift: bool = False,
            **kwargs: Any,
        ) -> None:
            self.cell_coords = cell_coords or {}
            self.cell_first = cell_first or []
            self.cell_rest = cell_rest or []
            self.cell_newline = cell_newline
            self.cell_moves = cell_moves or {}
            self.cell_start = cell_start or []
            self.cell_shift = cell_shift
            super().__init__(**kwargs)

    class CellEmbedding(nn.Embedding):
        """Token embedding plus the row and column embeddings of :func:`cell_positions`."""

        def __init__(self, config: CellsConfig) -> None:
            super().__init__(config.vocab_size, config.hidden_size, config.pad_token_id)
            self.row = nn.Embedding(MAX_CELL, config.hidden_size, padding_idx=0)
            self.col = nn.Embedding(MAX_CELL, config.hidden_size, padding_idx=0)
            self.tables = lookup_tables(vars(config))
            self.shift = bool(config.cell_shift)

        def positions(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            pairs = [cell_positions(seq, self.tables) for seq in input_ids.tolist()]
            rows = torch.tensor([p[0] for p in pairs], device=input_ids.device)
            cols = torch.tensor([p[1] for p in pairs], device=input_ids.device)
            return rows, cols

        def forward(
            self, input_ids: torch.Tensor, cells: tuple[torch.Tensor, torch.Tensor] | None = None
        ) -> torch.Tensor:
            rows, cols = self.positions(input_ids) if cells is None else cells
            if self.shift and self.training:
                rows, cols = shifted(rows), shifted(cols)
            return super().forward(input_ids) + self.row(rows) + self.col(cols)

    class CellsForCausalLM(Qwen2ForCausalLM):
        config_class = CellsConfig

        def __init__(self, config: CellsConfig) -> None:
            super().__init__(config)
            self.model.embed_tokens = CellEmbedding(config)
            self.post_init()

        def prepare_inputs_for_generation(self, input_ids: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            inputs = super().prepare_inputs_for_generation(input_ids, *args, **kwargs)
            step = inputs.get("input_ids")
            if config_walks(self.config) and step is not None:
                # a move's cell depends on the moves before it: the sequence's positions, then the step's
                rows, cols = self.model.embed_tokens.positions(input_ids)
                inputs["cells"] = (rows[:, -step.shape[1] :], cols[:, -step.shape[1] :])
            return inputs

        def forward(
            self,
            input_ids: torch.Tensor | None = None,
            attention_mask: torch.Tensor | None = None,
            position_ids: torch.Tensor | None = None,
            cells: tuple[torch.Tensor, torch.Tensor] | None = None,
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
