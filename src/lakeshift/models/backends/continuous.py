"""Continuous batching for text decoders: a lean decoding loop over a fixed number of slots, each slot
answering one prompt, a finished slot taking the next waiting prompt at once (as vLLM does), so that no row
waits for the longest one of its batch.

The model is a transformers causal LM whose attention layers store keys and values through the ``cache``
they are given (Qwen2 and the cells model built on it, :data:`SUPPORTED`); only its own ``forward`` runs.

The KV cache is preallocated (:class:`SlotCache`): per layer, keys and values of shape ``(slots, kv heads,
capacity, head dim)``. Every slot writes its next token into one shared column ``t``; a slot's own tokens
are its columns from ``begin`` to ``t``, every other column is masked out. A prompt admitted at ``t`` is
prefilled into the columns just before ``t`` (``t`` never drops below the longest prompt, so there is room).
Keys are stored rotated by the slot's own positions (0 at its first prompt token, as left padding gives
``generate``), so where a slot's columns lie does not change what it computes. When ``t`` reaches the
capacity, the live columns move left (one copy per layer). Attention reads only the columns from the oldest
live slot's ``begin`` on.

What keeps the outputs those of ``generate`` on the same prompts:

- each slot's positions are its own, its padding and the other slots' columns masked out;
- the cells model's rows, columns and flags (and, under ``attention: local``, each token's keys) come from
  one :class:`~lakeshift.models.cells.TokenReader` per slot, fed the prompt and then each generated token
  (the rules are causal); a local key's position in the slot's sequence is its column less the slot's
  ``begin``. A step in which every live slot's token is local attends to its gathered keys only: it builds
  no mask over the cache and its cost does not grow with the columns;
- greedy picks the argmax; sampling applies temperature, then top-k, then top-p (``generate``'s warpers, in
  its order) and draws from one generator seeded by the decoding's seed, so a run is repeatable.

Floating-point sums over batches of another shape can differ in the last bits, so an exact tie between two
tokens may break the other way; the tests and ``benchmarks/bench_predict.py`` compare the outputs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lakeshift.models.cells.local import SELF, SLOTS
from lakeshift.models.cells.modeling import key_tensor
from lakeshift.models.cells.positions import CHANNELS

#: ``model_type`` values whose layers this loop can drive (their attention calls ``cache.update``).
SUPPORTED = ("qwen2", "lakeshift_cells")
#: The most slots on a CPU: larger batches of a small model gain little more tokens/s per core there.
MAX_SLOTS_CPU = 256
MAX_SLOTS_GPU = 1024
#: Prompts prefilled in one forward pass (their attention scores are held at once).
PREFILL_ROWS = 64
#: Share of the free memory the cache may take when the slot count is chosen.
CACHE_MEMORY_SHARE = 0.25
#: The attention function the loop registers with transformers (``AttentionInterface``) for an ``sdpa``
#: model: SDPA with grouped-query attention done by the kernel. transformers' own ``sdpa`` copies every key
#: and value once per query head group when a mask is given (``repeat_kv``), which at long cache lengths
#: costs more than the attention itself; the results are the same.
ATTENTION = "lakeshift_slots_sdpa"


@dataclass(frozen=True)
class Finished:
    """One answered prompt: its index in the prompts given, the generated ids (the stop token included),
    and why it ended (``stop`` or ``length``)."""

    index: int
    tokens: list[int]
    reason: str


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: greedy when ``temperature`` is 0, else sampled with these settings
    (``top_k`` ``None`` or 0: no top-k; ``top_p`` 1: no top-p) from a generator seeded with ``seed``."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    seed: int = 0


def supports(model: Any) -> bool:
    """Whether :func:`decode` can drive ``model``."""
    config = model.config
    return (
        getattr(config, "model_type", None) in SUPPORTED
        and not getattr(config, "use_sliding_window", False)
        and getattr(config, "_attn_implementation", "sdpa") in ("sdpa", "eager")
    )


def cache_bytes_per_slot(model: Any, capacity: int) -> int:
    """Bytes of keys and values one slot holds at ``capacity`` columns."""
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    itemsize = next(model.parameters()).element_size()
    return 2 * config.num_hidden_layers * config.num_key_value_heads * capacity * head_dim * itemsize


def choose_slots(model: Any, prompts: int, capacity: int, free_bytes: int, cuda: bool) -> int:
    """The slot count: as many as the prompts, at most :data:`MAX_SLOTS_CPU` (GPU: :data:`MAX_SLOTS_GPU`),
    and no more than :data:`CACHE_MEMORY_SHARE` of ``free_bytes`` holds."""
    per_slot = cache_bytes_per_slot(model, capacity)
    by_memory = int(free_bytes * CACHE_MEMORY_SHARE) // max(per_slot, 1)
    return max(1, min(prompts, MAX_SLOTS_GPU if cuda else MAX_SLOTS_CPU, by_memory))


class SlotCache:
    """The preallocated keys and values of every slot, in the role of transformers' ``Cache``: a decoder
    layer hands it the new (rotated) keys and values and attends to what it returns.

    A prefill (``rows`` set) writes the new prompts of the slots ``rows`` at columns ``start`` on and returns
    just them (a prompt attends to itself). A decoding step (``rows`` ``None``) writes every slot's token at
    column ``start`` and returns the columns ``window`` to ``start``.
    """

    def __init__(self, model: Any, slots: int, capacity: int) -> None:
        import torch

        config = model.config
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        weight = next(model.parameters())
        shape = (slots, config.num_key_value_heads, capacity, head_dim)
        self.keys = [weight.new_zeros(shape) for _ in range(config.num_hidden_layers)]
        self.values = [weight.new_zeros(shape) for _ in range(config.num_hidden_layers)]
        self.capacity = capacity
        self.rows: torch.Tensor | None = None
        self.start = 0
        self.window = 0

    def update(self, key: Any, value: Any, layer_idx: int, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        end = self.start + key.shape[2]
        if self.rows is not None:
            keys[self.rows, :, self.start : end] = key
            values[self.rows, :, self.start : end] = value
            return key, value
        keys[:, :, self.start : end] = key
        values[:, :, self.start : end] = value
        return keys[:, :, self.window : end], values[:, :, self.window : end]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.start

    def move_left(self, shift: int, width: int) -> None:
        """Moves columns ``shift`` to ``shift + width`` to the front."""
        for tensors in (self.keys, self.values):
            for i, t in enumerate(tensors):
                tensors[i][:, :, :width] = t[:, :, shift : shift + width].clone()

    def keep(self, rows: Any) -> None:
        """Keeps only the slots ``rows`` (in that order)."""
        self.keys = [t[rows].contiguous() for t in self.keys]
        self.values = [t[rows].contiguous() for t in self.values]


Walker = Callable[[], Any]  # a new TokenReader (``feed(ids) -> (channels, keys)``), or None: no cells


def decode(
    model: Any,
    prompts: Sequence[list[int]],
    *,
    max_new_tokens: int,
    stop_ids: Sequence[int],
    slots: int,
    sampling: Sampling,
    on_finished: Callable[[Finished], None],
    new_walker: Walker | None = None,
) -> None:
    """Answers every prompt (token ids, the chat template applied), calling ``on_finished`` as each ends.

    Prompts are admitted in the order given. ``new_walker`` makes the cells model's position walker of a
    slot (None: the model takes no cell positions).
    """
    import torch

    if not prompts:
        return
    device = next(model.parameters()).device
    longest = max(len(p) for p in prompts)
    capacity = longest + 2 * max_new_tokens
    slots = max(1, min(slots, len(prompts)))
    cache = SlotCache(model, slots, capacity)
    state = _Slots(slots, max_new_tokens, longest, device)
    choose = _chooser(sampling, device)
    stops = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    attention = model.config._attn_implementation
    if attention == "sdpa":
        _register_attention()
        model.config._attn_implementation = ATTENTION
    try:
        with torch.inference_mode():
            _loop(model, prompts, cache, state, choose, stops, new_walker, on_finished, max_new_tokens)
    finally:
        model.config._attn_implementation = attention


def _loop(
    model: Any,
    prompts: Sequence[list[int]],
    cache: SlotCache,
    state: _Slots,
    choose: Callable[[Any], Any],
    stops: Any,
    new_walker: Walker | None,
    on_finished: Callable[[Finished], None],
    max_new_tokens: int,
) -> None:
    """:func:`decode`'s loop: admit waiting prompts into free slots, else decode one step of every slot."""
    import torch

    device = state.device
    waiting = deque(range(len(prompts)))
    walkers: list[Any] = [None] * len(state.request)

    def finish(slot: int, reason: str) -> None:
        n = int(state.counts[slot])
        on_finished(Finished(state.request[slot], state.out[slot, :n].tolist(), reason))
        state.release(slot)
        walkers[slot] = None

    def settle(rows: list[int], chosen: Any) -> None:
        """Records the tokens ``chosen`` for the slots ``rows``; ends the slots that stop."""
        index = torch.tensor(rows, dtype=torch.long, device=device)
        state.out[index, state.counts[index]] = chosen
        state.counts[index] += 1
        state.tokens[index] = chosen
        stopped = torch.isin(chosen, stops)
        full = state.counts[index] >= max_new_tokens
        for i in torch.nonzero(stopped | full).flatten().tolist():
            finish(rows[i], "stop" if bool(stopped[i]) else "length")

    while waiting or state.any_live():
        free = state.free_slots()
        if waiting and free:
            admitted = [(slot, waiting.popleft()) for slot in free[: min(len(waiting), PREFILL_ROWS)]]
            for slot, _ in admitted:
                walkers[slot] = new_walker() if new_walker is not None else None
            logits = _prefill(model, cache, state, admitted, prompts, walkers)
            settle([slot for slot, _ in admitted], choose(logits))
            continue  # admit again before decoding: a slot that ended at once is free again
        if not waiting and state.sparse():
            keep = state.live_slots()
            cache.keep(torch.tensor(keep, dtype=torch.long, device=device))
            state.keep(keep)
            walkers = [walkers[s] for s in keep]
        if state.t >= cache.capacity:
            shift = state.compact()
            cache.move_left(shift, state.t)
        logits = _step(model, cache, state, walkers)
        live = state.live_slots()
        settle(live, choose(logits[live]))


class _Slots:
    """What the loop knows of each slot: its request, its columns, its position and its tokens so far."""

    def __init__(self, slots: int, max_new_tokens: int, longest: int, device: Any) -> None:
        import torch

        self.device = device
        self.longest = longest
        self.t = longest  # the column the next decoding step writes
        self.request: list[int] = [-1] * slots
        self.live = torch.zeros(slots, dtype=torch.bool, device=device)
        self.begin = torch.full((slots,), longest, dtype=torch.long, device=device)
        self.positions = torch.zeros(slots, dtype=torch.long, device=device)
        self.tokens = torch.zeros(slots, dtype=torch.long, device=device)
        self.counts = torch.zeros(slots, dtype=torch.long, device=device)
        self.out = torch.zeros((slots, max_new_tokens), dtype=torch.long, device=device)

    def any_live(self) -> bool:
        return bool(self.live.any())

    def live_slots(self) -> list[int]:
        return [int(i) for i in self.live.nonzero().flatten().tolist()]

    def free_slots(self) -> list[int]:
        return [int(i) for i in (~self.live).nonzero().flatten().tolist()]

    def sparse(self) -> bool:
        """Fewer than half the slots live: worth dropping the others from the batch."""
        live = int(self.live.sum())
        return 0 < live <= len(self.request) // 2

    def release(self, slot: int) -> None:
        self.live[slot] = False
        self.request[slot] = -1

    def keep(self, rows: list[int]) -> None:
        index = self._index(rows)
        self.request = [self.request[r] for r in rows]
        for name in ("live", "begin", "positions", "tokens", "counts", "out"):
            setattr(self, name, getattr(self, name)[index])

    def compact(self) -> int:
        """Moves the live columns to the front: returns by how many columns (``t`` is then the longest live
        span, and never below the longest prompt, so that a prompt still fits before it)."""
        first = int(self.begin[self.live].min()) if self.any_live() else self.t
        width = max(self.t - first, self.longest)
        shift = self.t - width
        self.begin = (self.begin - shift).clamp(min=0)
        self.t = width
        return shift

    def _index(self, rows: list[int]) -> Any:
        import torch

        return torch.tensor(rows, dtype=torch.long, device=self.device)


def _cells(walked: Sequence[tuple[list[int], ...]], width: int, device: Any) -> tuple[Any, ...]:
    """Per-slot lists of the cells rule's channels (rows, cols, flags, map numbers), left-padded with 0 to
    ``width``, as tensors."""
    import torch

    return tuple(
        torch.tensor([[0] * (width - len(part)) + part for part in column], dtype=torch.long, device=device)
        for column in zip(*walked, strict=True)
    )


def _prefill(
    model: Any,
    cache: SlotCache,
    state: _Slots,
    admitted: list[tuple[int, int]],
    prompts: Sequence[list[int]],
    walkers: list[Any],
) -> Any:
    """Writes the admitted prompts into their slots' columns just before ``t``; returns the logits of
    their last tokens."""
    import torch

    device = state.device
    ids = [prompts[r] for _, r in admitted]
    width = max(len(p) for p in ids)
    pads = torch.tensor([width - len(p) for p in ids], dtype=torch.long, device=device)
    input_ids = torch.tensor([[0] * (width - len(p)) + p for p in ids], dtype=torch.long, device=device)
    steps = torch.arange(width, device=device)
    positions = (steps[None, :] - pads[:, None]).clamp(min=0)
    # a token sees the prompt's tokens up to itself; a padding token sees itself only (no empty row)
    visible = (steps[None, None, :] <= steps[None, :, None]) & (steps[None, None, :] >= pads[:, None, None])
    visible |= torch.eye(width, dtype=torch.bool, device=device)[None]
    rows = torch.tensor([s for s, _ in admitted], dtype=torch.long, device=device)
    cache.rows, cache.start = rows, state.t - width
    kwargs: dict[str, Any] = {}
    if walkers[admitted[0][0]] is not None:
        fed = [walkers[s].feed(p) for (s, _), p in zip(admitted, ids, strict=True)]
        kwargs["cells"] = _cells([channels for channels, _ in fed], width, device)
        if _local(model):
            keys = [[None] * (width - len(p)) + k for (_, k), p in zip(fed, ids, strict=True)]
            kwargs["local_keys"] = key_tensor(keys, device, pads.tolist())
    try:
        logits = _forward(model, input_ids, positions, visible[:, None], cache, kwargs)
    finally:
        cache.rows = None
    lengths = torch.tensor([len(p) for p in ids], dtype=torch.long, device=device)
    state.begin[rows] = state.t - lengths
    state.positions[rows] = lengths
    state.counts[rows] = 0
    state.live[rows] = True
    for slot, request in admitted:
        state.request[slot] = request
    return logits


def _step(model: Any, cache: SlotCache, state: _Slots, walkers: list[Any]) -> Any:
    """One decoding step of every slot (a free slot computes on its stale token; its result is unused)."""
    import torch

    device = state.device
    window = int(state.begin[state.live].min())
    cache.start, cache.window = state.t, window
    kwargs: dict[str, Any] = {}
    every_local = False
    if any(w is not None for w in walkers):
        # (a free slot reads nothing and attends to itself only: it never makes a step attend fully)
        fed = [
            w.feed([tok]) if w is not None else (([0],) * CHANNELS, [_ITSELF])
            for w, tok in zip(walkers, state.tokens.tolist(), strict=True)
        ]
        kwargs["cells"] = _cells([channels for channels, _ in fed], 1, device)
        if _local(model):
            firsts = [
                b - window if w is not None else state.t - window
                for b, w in zip(state.begin.tolist(), walkers, strict=True)
            ]
            kwargs["local_keys"] = key_tensor([keys for _, keys in fed], device, firsts)
            every_local = bool((kwargs["local_keys"][:, 0, SELF] >= 0).all())
    visible = None
    if not every_local:
        columns = torch.arange(window, state.t + 1, device=device)
        visible = ((columns[None, :] >= state.begin[:, None]) | (columns[None, :] == state.t))[:, None, None]
    logits = _forward(model, state.tokens[:, None], state.positions[:, None], visible, cache, kwargs)
    state.positions += 1
    state.t += 1
    return logits


def _local(model: Any) -> bool:
    """Whether ``model`` is a cells model under ``attention: local``."""
    return bool(getattr(model, "local", False))


#: The keys of a free slot's stale token: itself (position 0, moved to its column).
_ITSELF = tuple(0 if slot == SELF else -1 for slot in range(SLOTS))


def _forward(
    model: Any, input_ids: Any, positions: Any, visible: Any | None, cache: SlotCache, kwargs: dict
) -> Any:
    """The model's logits at the last position, attention restricted to ``visible`` (``None``: every token
    is local, its keys in ``kwargs``)."""
    import torch

    mask = None
    if visible is not None:
        dtype = next(model.parameters()).dtype
        mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
        mask.masked_fill_(~visible, torch.finfo(dtype).min)
    out = model(
        input_ids=input_ids,
        position_ids=positions,
        attention_mask={"full_attention": mask},
        cache=cache,
        use_cache=True,
        logits_to_keep=1,
        **kwargs,
    )
    return out.logits[:, -1].float()


def _chooser(sampling: Sampling, device: Any) -> Callable[[Any], Any]:
    """The next-token rule: argmax, or a seeded draw after temperature, top-k and top-p."""
    import torch

    if sampling.temperature == 0.0:
        return lambda logits: logits.argmax(dim=-1)
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = LogitsProcessorList([TemperatureLogitsWarper(sampling.temperature)])
    if sampling.top_k:
        warpers.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(sampling.top_p))
    generator = torch.Generator(device=device)
    generator.manual_seed(sampling.seed)

    def draw(logits: Any) -> Any:
        probs = torch.softmax(warpers(None, logits), dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    return draw


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, _sdpa_grouped)


def _sdpa_grouped(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, scaling: float | None = None, **_: Any
) -> tuple[Any, None]:
    """transformers' attention-function signature: SDPA, grouped-query heads left to the kernel."""
    import torch

    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
    )
    return out.transpose(1, 2).contiguous(), None
