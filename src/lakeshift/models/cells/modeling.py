"""The cells model in transformers' classes: Qwen2 whose token embedding adds the row, column and player
flag of the position rule (:mod:`lakeshift.models.cells.positions`), registered with the Auto classes as
``model_type`` ``lakeshift_cells`` by :func:`register`, so checkpoints save and load like any other. With
``attention: local`` its attention layers follow the locality rule (:mod:`lakeshift.models.cells.local`):
a local token's keys are gathered by position, each with a learned vector of its slot added to its key and
value, so its cost does not depend on the sequence's length; every other token attends as in Qwen2.

torch and transformers are imported when :func:`register` runs, not with this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models.cells.local import SELF, SLOTS, Keys, TokenReader
from lakeshift.models.cells.positions import EDGES, MAX_CELL, MAX_FRAME, CellWalker, PositionRule
from lakeshift.models.cells.spec import CellSpec
from lakeshift.models.cells.vocab import CellVocab

MODEL_TYPE = "lakeshift_cells"
#: ``order``: row and column r enter as r / ORDER_SCALE (a 10x10 map spans 0.1-1).
ORDER_SCALE = 10.0

_registered: dict[str, Any] = {}

#: The parts a cells model has beyond Qwen2's, each with the spec field and the value of it that makes the
#: part (``None``: every cells model has it). The model is built from :func:`parts`, and a checkpoint's
#: weights are checked against the same table (:func:`weight_mismatch`).
PARTS: dict[str, tuple[str, Any] | None] = {
    "row": None,
    "col": None,
    "player": ("player", True),
    "order": ("order", True),
    "frame": ("grids", "coupled"),
    "edge": ("grids", "coupled"),
    "slot_keys": ("attention", "local"),
    "slot_values": ("attention", "local"),
}
#: The parts each attention layer holds (the others are the cells embedding's).
LAYER_PARTS = ("slot_keys", "slot_values")
_EMBEDDING_WEIGHT = re.compile(r"model\.embed_tokens\.(\w+)\.\w+")
_LAYER_WEIGHT = re.compile(r"model\.layers\.\d+\.self_attn\.(slot_\w+)\.\w+")


def check_sizes(model_type: str | None, sizes: Iterable[int], where: str) -> None:
    """Refuses maps with more rows and columns than a cells model has positions for (any other model
    passes).

    Raises:
        LakeshiftError: naming ``where`` and the largest size.
    """
    largest = max(sizes, default=0)
    if model_type == MODEL_TYPE and largest >= MAX_CELL:
        raise LakeshiftError(
            f"{where}: {largest}x{largest} maps: a cells model has row and column positions up to "
            f"{MAX_CELL - 1} only (cells beyond would all get position 0)"
        )


def shifted(index: Any, limit: int = MAX_CELL) -> Any:
    """``index`` (a batch of row, column or map-number indices, 0 = none) moved by a random offset per
    sequence, so that the largest stays below ``limit``: training on small maps then trains every
    embedding, as a relative position (random position offsets, Cho et al. 2024)."""
    import torch

    room = (limit - 1 - index.max(dim=1, keepdim=True).values).clamp(min=0)
    offset = (torch.rand(room.shape, device=index.device) * (room + 1)).floor().long()
    return torch.where(index > 0, index + offset, index)


def parts(spec: CellSpec) -> dict[str, bool]:
    """Which parts of :data:`PARTS` a cells model of ``spec`` has.

    Example:
        >>> [part for part, on in parts(CellSpec(grids="coupled")).items() if on]
        ['row', 'col', 'frame', 'edge']
    """
    return {part: need is None or getattr(spec, need[0]) == need[1] for part, need in PARTS.items()}


def part_weights(spec: CellSpec, layers: int) -> dict[str, str]:
    """The weight names of the parts a cells model of ``spec`` with ``layers`` attention layers has (as its
    ``state_dict`` and ``model.safetensors`` name them), each with its part."""
    names: dict[str, str] = {}
    for part, on in parts(spec).items():
        if on and part in LAYER_PARTS:
            names.update({f"model.layers.{i}.self_attn.{part}.weight": part for i in range(layers)})
        elif on:
            names[f"model.embed_tokens.{part}.weight"] = part
    return names


def part_of(name: str) -> str | None:
    """The cells part a weight name belongs to (a known one of :data:`PARTS` or not), or None for a weight
    of Qwen2's own (the token embedding's included)."""
    match = _EMBEDDING_WEIGHT.fullmatch(name) or _LAYER_WEIGHT.fullmatch(name)
    return match.group(1) if match else None


def weight_mismatch(spec: CellSpec, names: Iterable[str], layers: int) -> tuple[str, str, bool] | None:
    """The first cells weight on which a model of ``spec`` (``layers`` attention layers) and a checkpoint
    holding the weights ``names`` disagree, or None: ``(name, part, needed)``, ``needed`` true for a weight
    the spec makes that the checkpoint lacks (it would start from random weights), false for one the
    checkpoint holds that the spec does not make (loading would drop it). Parts in :data:`PARTS` order.

    Example:
        >>> weight_mismatch(CellSpec(), ["model.embed_tokens.row.weight", "model.embed_tokens.col.weight",
        ...     "model.embed_tokens.frame.weight"], 2)
        ('model.embed_tokens.frame.weight', 'frame', False)
    """
    held = {name: part for name in names if (part := part_of(name)) is not None}
    made = part_weights(spec, layers)
    order = {part: i for i, part in enumerate(PARTS)}
    disagree = [(name, part, True) for name, part in made.items() if name not in held]
    disagree += [(name, part, False) for name, part in held.items() if name not in made]
    disagree.sort(key=lambda d: (order.get(d[1], len(order)), not d[2], d[0]))
    return disagree[0] if disagree else None


def spec_of(model: Any) -> CellSpec:
    """The cells spec of a loaded cells model."""
    return CellSpec.from_json(model.config.cells)


def set_spec(model: Any, spec: CellSpec) -> None:
    """Switches a loaded cells model to ``spec`` (saved with it). A model that gets the player flag or the
    ordered part without having had it starts with zero weights for it, so that it computes what it computed
    before; a part the spec drops is removed.

    Raises:
        LakeshiftError: ``spec`` changes a field fixed when the model was made (``CellSpec.changed``).
    """
    import torch

    spec_of(model).changed(spec.to_json())  # a fixed field's change is refused
    embedding = model.model.embed_tokens
    weight = embedding.weight
    hidden, where = weight.shape[1], {"device": weight.device, "dtype": weight.dtype}
    makers = {
        "player": lambda: torch.nn.Embedding(2, hidden, padding_idx=0, **where),
        "order": lambda: torch.nn.Linear(2, hidden, bias=False, **where),
        "frame": lambda: torch.nn.Embedding(MAX_FRAME, hidden, padding_idx=0, **where),
        "edge": lambda: torch.nn.Embedding(EDGES, hidden, padding_idx=0, **where),
    }
    has = parts(spec)
    for name, make in makers.items():
        if has[name] and getattr(embedding, name) is None:
            part = make()
            torch.nn.init.zeros_(part.weight)
            setattr(embedding, name, part)
        elif not has[name]:
            setattr(embedding, name, None)
    model.config.cells = spec.to_json()
    embedding.configure(spec, CellVocab.from_config(model.config.cell_vocab))
    for layer in model.model.layers:
        layer.self_attn.set_local(has["slot_keys"])


def set_vocab(model: Any, vocab: CellVocab) -> None:
    """Gives a loaded cells model the token ids of ``vocab`` (saved with it): a legacy checkpoint stored
    without some of them gets its tokenizer's."""
    model.config.cell_vocab = vocab.to_config()
    model.model.embed_tokens.configure(spec_of(model), vocab)


def key_tensor(keys: Sequence[Sequence[Keys]], device: Any, offsets: Sequence[int] | None = None) -> Any:
    """The locality rule's keys of a batch as a tensor ``(batch, tokens, SLOTS)``, ``-1`` for a missing key
    and in every slot of a token that attends fully; ``offsets`` (per sequence) moves each key to the
    column of the key tensor its sequence's first token is at."""
    import torch

    full = (-1,) * SLOTS
    tensor = torch.tensor([[k or full for k in seq] for seq in keys], dtype=torch.long, device=device)
    if offsets is None:
        return tensor
    moved = tensor + torch.tensor(list(offsets), dtype=torch.long, device=device)[:, None, None]
    return torch.where(tensor >= 0, moved, tensor)


def register() -> tuple[type, type]:
    """Defines and registers the config and model classes with transformers (once); returns them."""
    if _registered:
        return _registered["config"], _registered["model"]
    import torch
    from torch import nn
    from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.qwen2.modeling_qwen2 import (
        Qwen2Attention,
        Qwen2RotaryEmbedding,
        apply_rotary_pos_emb,
        eager_attention_forward,
    )

    def stacked(indices: Sequence[tuple[list[int], ...]], device: Any) -> tuple[torch.Tensor, ...]:
        """Per-sequence ``(rows, cols, flags, map numbers, edges)`` as batch tensors."""
        return tuple(torch.tensor(list(column), device=device) for column in zip(*indices, strict=True))

    def read(readers: Sequence[TokenReader], seqs: list[list[int]], device: Any) -> tuple[Any, Any]:
        """Each sequence fed to its reader: the batch's channels (:func:`stacked`) and its keys
        (:func:`key_tensor`; None without ``attention: local``)."""
        fed = [reader.feed(ids) for reader, ids in zip(readers, seqs, strict=True)]
        keys = key_tensor([k for _, k in fed], device) if readers and readers[0].keys is not None else None
        return stacked([c for c, _ in fed], device), keys

    class CellsAttention(Qwen2Attention):
        """Qwen2's attention; under ``attention: local`` (:meth:`set_local`) a token that the locality rule
        makes local attends only to its keys, each key and value plus the learned vector of its slot. The
        keys are the cells embedding's of the same pass (``CellEmbedding.keys``: per query, :data:`SLOTS`
        positions in the key tensor the layer gets, ``-1`` none; a query whose :data:`SELF` slot is ``-1``
        attends as in Qwen2), read from there because trl's loss calls the decoder directly."""

        slot_keys: Any
        slot_values: Any

        @classmethod
        def adopt(cls, attention: Qwen2Attention, embedding: CellEmbedding) -> None:
            """Makes a built Qwen2 attention layer one of this class in place (no new weights, so a model
            without ``attention: local`` draws the same random weights as before the class existed)."""
            attention.__class__ = cls
            object.__setattr__(attention, "embedding", embedding)  # not a submodule: the decoder owns it
            attention.slot_keys = attention.slot_values = None
            attention.set_local(parts(CellSpec.from_json(attention.config.cells))["slot_keys"])

        def set_local(self, on: bool) -> None:
            """Adds (zero vectors, for a model switched to it) or removes the slot vectors."""
            if on and self.slot_keys is None:
                width = self.config.num_key_value_heads * self.head_dim
                where = {"device": self.k_proj.weight.device, "dtype": self.k_proj.weight.dtype}
                self.slot_keys = nn.Embedding(SLOTS, width, **where)
                self.slot_values = nn.Embedding(SLOTS, width, **where)
                nn.init.zeros_(self.slot_keys.weight)
                nn.init.zeros_(self.slot_values.weight)
            elif not on:
                self.slot_keys = self.slot_values = None

        def forward(
            self,
            hidden_states: torch.Tensor,
            position_embeddings: tuple[torch.Tensor, torch.Tensor],
            attention_mask: torch.Tensor | None,
            cache: Any = None,
            **kwargs: Any,
        ) -> tuple[torch.Tensor, None]:
            local_keys = self.embedding.keys
            if local_keys is None or self.slot_keys is None:
                return super().forward(hidden_states, position_embeddings, attention_mask, cache, **kwargs)
            shape = (*hidden_states.shape[:-1], -1, self.head_dim)
            query = self.q_proj(hidden_states).view(shape).transpose(1, 2)
            key = self.k_proj(hidden_states).view(shape).transpose(1, 2)
            value = self.v_proj(hidden_states).view(shape).transpose(1, 2)
            query, key = apply_rotary_pos_emb(query, key, *position_embeddings)
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)
            local = local_keys[..., SELF] >= 0  # (batch, queries)
            out = self.gathered(query, key, value, local_keys)
            full_rows = (~local).any(dim=1).nonzero().flatten()
            if len(full_rows):
                interface = ALL_ATTENTION_FUNCTIONS.get_interface(
                    self.config._attn_implementation, eager_attention_forward
                )
                every = len(full_rows) == len(local)
                mask = attention_mask
                if mask is not None and not every and mask.shape[0] == len(local):
                    mask = mask[full_rows]
                # a mask over fewer queries than the pass has: every later query is local
                span = mask.shape[-2] if mask is not None else local.shape[1]
                pick = (lambda t: t) if every else (lambda t: t[full_rows])
                full, _ = interface(
                    self,
                    pick(query)[:, :, :span],
                    pick(key),
                    pick(value),
                    mask,
                    dropout=0.0,
                    scaling=self.scaling,
                    **kwargs,
                )
                rows = out[full_rows]
                head = torch.where(local[full_rows, :span, None, None], rows[:, :span], full.to(out.dtype))
                rows = torch.cat((head, rows[:, span:]), dim=1) if span < rows.shape[1] else head
                out = rows if every else out.index_copy(0, full_rows, rows)
            return self.o_proj(out.reshape(*hidden_states.shape[:-1], -1).contiguous()), None

        def gathered(
            self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, local_keys: torch.Tensor
        ) -> torch.Tensor:
            """Attention of every query over its :data:`SLOTS` gathered keys, ``(batch, queries, heads,
            head dim)`` (a query without local keys gets its own slot only: the caller replaces it)."""
            assert self.slot_keys is not None and self.slot_values is not None  # set_local(True)
            batch, heads, queries, dim = query.shape
            groups = self.config.num_key_value_heads
            index = local_keys.clamp(min=0)
            rows = torch.arange(batch, device=index.device)[:, None, None]
            slots = (SLOTS, groups, dim)
            keys = key.transpose(1, 2)[rows, index] + self.slot_keys.weight.view(slots)  # (b, q, s, g, d)
            values = value.transpose(1, 2)[rows, index] + self.slot_values.weight.view(slots)
            grouped = query.view(batch, groups, heads // groups, queries, dim)
            scores = torch.einsum("bgmqd,bqsgd->bgmqs", grouped, keys) * self.scaling
            missing = (local_keys < 0) & (torch.arange(SLOTS, device=index.device) != SELF)
            scores = scores.masked_fill(missing[:, None, None], torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores.float(), dim=-1).to(values.dtype)
            out = torch.einsum("bgmqs,bqsgd->bqgmd", weights, values)
            return out.reshape(batch, queries, heads, dim)

    class CellsConfig(Qwen2Config):
        """Qwen2's config with the cells spec (``cells``) and the token ids its rule reads (``cell_vocab``);
        a config of an earlier generation, with flat ``cell_*`` keys, is read into both."""

        model_type = MODEL_TYPE

        def __init__(
            self,
            cells: Mapping[str, Any] | None = None,
            cell_vocab: Mapping[str, Any] | None = None,
            **kwargs: Any,
        ) -> None:
            legacy = {key: kwargs.pop(key) for key in [k for k in kwargs if k.startswith("cell_")]}
            if cells is not None:
                spec = CellSpec.from_json(cells, "config.json: cells")
            else:
                spec = CellSpec.from_legacy(legacy) if legacy else CellSpec()
            if cell_vocab is not None:
                vocab = CellVocab.from_config(cell_vocab)
            else:
                vocab = CellVocab.from_legacy(legacy)
            self.cells = spec.to_json()
            self.cell_vocab = vocab.to_config()
            super().__init__(**kwargs)

    class CellEmbedding(nn.Embedding):
        """Token embedding plus the row and column embeddings of the position rule (and, with ``player``,
        its player flag's; with ``order``, the ordered part; with ``grids: coupled``, the map number's and the
        edge's)."""

        def __init__(self, config: CellsConfig) -> None:
            super().__init__(config.vocab_size, config.hidden_size, config.pad_token_id)
            spec = CellSpec.from_json(config.cells)
            has, hidden = parts(spec), config.hidden_size
            self.row = nn.Embedding(MAX_CELL, hidden, padding_idx=0)
            self.col = nn.Embedding(MAX_CELL, hidden, padding_idx=0)
            self.player = nn.Embedding(2, hidden, padding_idx=0) if has["player"] else None
            self.order = nn.Linear(2, hidden, bias=False) if has["order"] else None
            self.frame = nn.Embedding(MAX_FRAME, hidden, padding_idx=0) if has["frame"] else None
            self.edge = nn.Embedding(EDGES, hidden, padding_idx=0) if has["edge"] else None
            self.configure(spec, CellVocab.from_config(config.cell_vocab))
            self._offsets: tuple[torch.Tensor, torch.Tensor] | None = None
            self.keys: torch.Tensor | None = None

        def configure(self, spec: CellSpec, vocab: CellVocab) -> None:
            """Reads tokens by ``spec``'s rule over ``vocab`` (its parts are :func:`set_spec`'s to change)."""
            self.rule = PositionRule.of(spec, vocab)
            self.shift = spec.offsets == "random"
            self.no_sequence = spec.sequence == "none"
            base = dict(vocab.coord_base) if spec.coordinates == "composed" else {}
            self.composed = sorted(base)  # the coordinate tokens (token ids) whose vectors are composed
            # (plain lists, made into tensors per device when used: checkpoints hold no extra buffers)
            self._lists = {
                "coordinates": sorted(self.rule.coords),
                "tokens": self.composed,
                "base": [base[t] for t in self.composed],
                "rows": [self.rule.coords[t][0] for t in self.composed],
                "cols": [self.rule.coords[t][1] for t in self.composed],
            }
            self._tensors: dict[tuple[str, str], torch.Tensor] = {}

        def index(self, name: str, device: Any) -> torch.Tensor:
            key = (name, str(device))
            if key not in self._tensors:
                self._tensors[key] = torch.tensor(self._lists[name], dtype=torch.long, device=device)
            return self._tensors[key]

        def indices(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
            """Rows, columns, player flags, map numbers and edges of a batch (:class:`CellWalker` per
            sequence)."""
            walked = [CellWalker(self.rule).feed(seq) for seq in input_ids.tolist()]
            return stacked(walked, input_ids.device)

        def forward(
            self,
            input_ids: torch.Tensor,
            cells: tuple[torch.Tensor, ...] | None = None,
            keys: torch.Tensor | None = None,
        ) -> torch.Tensor:
            if cells is None and self.rule.local:
                readers = [TokenReader(self.rule) for _ in input_ids]
                cells, keys = read(readers, input_ids.tolist(), input_ids.device)
            # the locality rule's keys of this pass, for the attention layers (None: every token attends
            # fully)
            self.keys = keys if self.rule.local else None
            rows, cols, *more = self.indices(input_ids) if cells is None else cells
            # (the player flags, map numbers and edges, zero where a caller passes rows and columns only)
            flags, frames, edges = (*more, *(torch.zeros_like(rows),) * 3)[:3]
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
                frames = torch.where(grid, shifted(frames, MAX_FRAME), frames)
            if self.composed:
                lookup = torch.arange(self.num_embeddings, device=input_ids.device)
                lookup[self.index("tokens", input_ids.device)] = self.index("base", input_ids.device)
                input_ids = lookup[input_ids]
            embedded = super().forward(input_ids) + self.cell_vectors(rows, cols)
            if self.player is not None:
                embedded = embedded + self.player(flags)
            if self.frame is not None:
                embedded = embedded + self.frame(frames)
            return embedded + self.edge(edges) if self.edge is not None else embedded

        def cell_vectors(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
            """The vectors of cells (0: none) at ``rows`` and ``cols``: their lookup embeddings and, with
            ``order``, their ordered part."""
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

    class CellsRotaryEmbedding(Qwen2RotaryEmbedding):
        """Qwen2's rotary embedding, the identity (cos 1, sin 0) while the cells embedding's spec says
        ``sequence: none``, whoever calls the decoder (trl calls it without the causal LM's ``forward``).

        (Not zero position ids: transformers reads position ids that restart as packed sequences and would
        let each token attend to itself only.)"""

        def __init__(self, config: CellsConfig, embedding: CellEmbedding) -> None:
            super().__init__(config)
            object.__setattr__(self, "embedding", embedding)  # not a submodule: the decoder owns it

        def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            cos, sin = super().forward(x, position_ids)
            if self.embedding.no_sequence:
                return torch.ones_like(cos), torch.zeros_like(sin)
            return cos, sin

    class CellsForCausalLM(Qwen2ForCausalLM):
        config_class = CellsConfig

        def __init__(self, config: CellsConfig) -> None:
            super().__init__(config)
            self.model.embed_tokens = CellEmbedding(config)
            self.model.rotary_emb = CellsRotaryEmbedding(config, self.model.embed_tokens)
            for layer in self.model.layers:
                CellsAttention.adopt(layer.self_attn, self.model.embed_tokens)
            if self.model.embed_tokens.composed:
                self.lm_head = ComposedHead(config, self.model.embed_tokens)
            self._walkers: list[TokenReader] = []
            self._walked = 0
            self.post_init()

        @property
        def local(self) -> bool:
            """Whether the model's attention follows the locality rule (``attention: local``)."""
            return bool(self.model.embed_tokens.rule.local)

        def prepare_inputs_for_generation(self, input_ids: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            inputs = super().prepare_inputs_for_generation(input_ids, *args, **kwargs)
            step = inputs.get("input_ids")
            if step is not None:
                # A token's cell depends on the tokens before it: one walker per sequence reads each
                # step's tokens after the earlier ones (a new batch, or any other length, starts afresh).
                batch, total, new = input_ids.shape[0], input_ids.shape[1], step.shape[1]
                walkers = self._walkers if len(self._walkers) == batch and self._walked == total - new else []
                if not walkers:
                    walkers = [TokenReader(self.model.embed_tokens.rule) for _ in range(batch)]
                    new = total
                cells, keys = read(walkers, input_ids[:, total - new :].tolist(), input_ids.device)
                self._walkers, self._walked = walkers, total
                inputs["cells"] = tuple(t[:, -step.shape[1] :] for t in cells)
                if self.local:  # (positions in the sequence generate gives: the cache's columns)
                    inputs["local_keys"] = keys[:, -step.shape[1] :]
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
            keys = kwargs.pop("local_keys", None)
            if cells is not None and input_ids is not None and kwargs.get("inputs_embeds") is None:
                kwargs["inputs_embeds"] = self.model.embed_tokens(input_ids, cells, keys)
                input_ids = None
            elif kwargs.get("inputs_embeds") is not None:
                self.model.embed_tokens.keys = None  # embedded by the caller: no keys of this pass
            return super().forward(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kwargs
            )

    AutoConfig.register(MODEL_TYPE, CellsConfig)
    AutoModelForCausalLM.register(CellsConfig, CellsForCausalLM)
    _registered.update(config=CellsConfig, model=CellsForCausalLM)
    return CellsConfig, CellsForCausalLM
