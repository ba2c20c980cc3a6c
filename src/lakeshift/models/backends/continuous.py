"""Continuous batching for text decoders: a lean decoding loop over a fixed number of slots, each slot
answering one prompt, a finished slot taking the next waiting prompt at once (as vLLM does), so that no row
waits for the longest one of its batch; with ``drafts``, speculative decoding whose drafts come from the
text already there (:mod:`lakeshift.models.backends.drafts`: for a cells model the map before).

The model is a transformers causal LM whose attention layers store keys and values through the ``cache``
they are given (Qwen2 and the cells model built on it, :data:`SUPPORTED`); only its own ``forward`` runs.

The KV cache is preallocated (:class:`SlotCache`): per layer, keys and values of shape ``(slots, kv heads,
capacity, head dim)``. A slot's tokens are its columns from ``begin`` to its end (``begin`` + the tokens it
holds); every other column is masked out. A pass writes each slot's block (its last chosen token and its
draft, padded to the longest draft) from the slot's own end on. A prompt admitted is prefilled into the
columns just before the frontier (the last live slot's end, never below the longest prompt, so there is
room). Keys are stored rotated by the slot's own positions (0 at its first prompt token, as left padding
gives ``generate``), so where a slot's columns lie does not change what it computes. When a pass would not
fit, every live slot's columns move left to end at one column (one gather per layer). Attention reads only
the columns from the oldest live slot's ``begin`` on.

What keeps the outputs those of ``generate`` on the same prompts:

- each slot's positions are its own, its padding and the other slots' columns masked out;
- the cells model's rows, columns and flags (and, under ``attention: local``, each token's keys) come from
  one :class:`~lakeshift.models.cells.TokenReader` per slot, fed the prompt and then each token the slot
  accepts (the rules are causal; a draft is read by a fork of the reader); a local key's position in the
  slot's sequence is its column less the slot's ``begin``. A pass in which every token is local attends to
  its gathered keys only: it builds no mask over the cache and its cost does not grow with the columns;
  otherwise the mask covers the queries up to the last one that attends fully;
- greedy picks the argmax; a draft's tokens are accepted while each equals the argmax after the tokens
  before it, then the argmax after the last accepted one: the tokens one step at a time would give. The
  model's choices after the first rejected token become the next draft's first tokens (Jacobi decoding:
  under ``attention: local`` a frame's tokens depend on the frame before and themselves only, so a frame
  settles in a few passes);
- sampling (one token per pass) applies temperature, then top-k, then top-p (``generate``'s warpers, in its
  order) and draws from one generator seeded by the decoding's seed, so a run is repeatable.

Floating-point sums over batches of another shape can differ in the last bits, so an exact tie between two
tokens may break the other way; the tests and ``benchmarks/bench_predict.py`` compare the outputs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lakeshift.models.backends.drafts import Drafts
from lakeshift.models.cells.local import SELF, SLOTS
from lakeshift.models.cells.modeling import key_tensor
from lakeshift.models.cells.positions import CHANNELS

#: ``model_type`` values whose layers this loop can drive (their attention calls ``cache.update``).
SUPPORTED = ("qwen2", "lakeshift_cells")
#: The most slots on a CPU: larger batches of a small model gain little more tokens/s per core there.
MAX_SLOTS_CPU = 256
MAX_SLOTS_GPU = 1024
#: With drafts on a CPU, the tokens one pass computes at most (every slot's block is padded to the longest
#: draft): a pass there is bound by its compute, not by its count (benchmarks/README.md).
PASS_TOKENS_CPU = 8192
#: Prompts prefilled in one forward pass (their attention scores are held at once).
PREFILL_ROWS = 64
#: The longest draft a pass verifies per slot (a map of 29x29 cells and its text is shorter).
MAX_DRAFT = 1024
#: Under ``attention: local``, the block positions (from a slot's last token on) where a draft may hold a
#: token that attends fully (a frame's header); a later one ends the draft.
FULL_LEAD = 8
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
    why it ended (``stop`` or ``length``) and the forward passes that wrote them (its prompt's included:
    tokens per pass is 1 without drafts)."""

    index: int
    tokens: list[int]
    reason: str
    passes: int = 1


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
    just them (a prompt attends to itself). A decoding pass (:meth:`place`) writes each slot's block of
    tokens at the slot's own next column and returns the columns ``window`` to the end of the last block.
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
        self.limit = 0
        self.columns: torch.Tensor | None = None  # per slot, the columns of its block (None: all at start)

    def place(self, ends: Any, width: int, window: int) -> None:
        """Sets the next pass: slot ``s`` writes ``width`` tokens from column ``ends[s]`` on; attention reads
        the columns from ``window`` on."""
        import torch

        first, last = int(ends.min()), int(ends.max())
        self.start, self.window, self.limit = first, window, last + width
        self.columns = None
        if first != last:
            self.columns = ends[:, None] + torch.arange(width, device=ends.device)[None, :]

    def update(self, key: Any, value: Any, layer_idx: int, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        end = self.start + key.shape[2]
        if self.rows is not None:
            keys[self.rows, :, self.start : end] = key
            values[self.rows, :, self.start : end] = value
            return key, value
        if self.columns is None:
            keys[:, :, self.start : end] = key
            values[:, :, self.start : end] = value
        else:
            slots = self._slots(keys)
            keys[slots, :, self.columns] = key.transpose(1, 2)
            values[slots, :, self.columns] = value.transpose(1, 2)
        return keys[:, :, self.window : self.limit], values[:, :, self.window : self.limit]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.start

    def realign(self, shifts: Any, width: int) -> None:
        """Moves each slot's columns left by its ``shifts`` into the first ``width`` columns."""
        import torch

        index = torch.arange(width, device=shifts.device)[None, :] + shifts[:, None]
        index = index.clamp(0, self.capacity - 1)
        for tensors in (self.keys, self.values):
            for t in tensors:
                spread = index[:, None, :, None].expand(t.shape[0], t.shape[1], width, t.shape[3])
                t[:, :, :width] = t.gather(2, spread)

    def keep(self, rows: Any) -> None:
        """Keeps only the slots ``rows`` (in that order)."""
        self.keys = [t[rows].contiguous() for t in self.keys]
        self.values = [t[rows].contiguous() for t in self.values]

    def _slots(self, keys: Any) -> Any:
        import torch

        return torch.arange(keys.shape[0], device=keys.device)[:, None]


Walker = Callable[[], Any]  # a new TokenReader (``feed(ids) -> (channels, keys)``), or None: no cells


def capacity(longest: int, max_new_tokens: int, drafts: bool) -> int:
    """The cache columns :func:`decode` allocates: the longest prompt, twice the new tokens (room before a
    realignment) and, with drafts, the longest block a pass writes."""
    return longest + 2 * max_new_tokens + (min(MAX_DRAFT, max_new_tokens) if drafts else 0)


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
    drafts: Callable[[], Drafts] | None = None,
) -> None:
    """Answers every prompt (token ids, the chat template applied), calling ``on_finished`` as each ends.

    Prompts are admitted in the order given. ``new_walker`` makes the cells model's position walker of a
    slot (None: the model takes no cell positions). ``drafts`` makes a slot's draft source: greedy decoding
    then verifies drafts (sampled decoding refuses them).
    """
    import torch

    if not prompts:
        return
    if drafts is not None and sampling.temperature != 0.0:
        raise ValueError("drafts are verified by greedy decoding only")
    device = next(model.parameters()).device
    longest = max(len(p) for p in prompts)
    slots = max(1, min(slots, len(prompts)))
    cache = SlotCache(model, slots, capacity(longest, max_new_tokens, drafts is not None))
    state = _Slots(slots, longest, device)
    choose = _chooser(sampling, device)
    attention = model.config._attn_implementation
    if attention == "sdpa":
        _register_attention()
        model.config._attn_implementation = ATTENTION
    loop = _Loop(model, prompts, cache, state, stop_ids, max_new_tokens, on_finished, new_walker, drafts)
    try:
        with torch.inference_mode():
            loop.run_drafted() if drafts is not None else loop.run(choose)
    finally:
        model.config._attn_implementation = attention


class _Loop:
    """:func:`decode`'s loop: admit waiting prompts into free slots, else run one pass of every slot."""

    def __init__(
        self,
        model: Any,
        prompts: Sequence[list[int]],
        cache: SlotCache,
        state: _Slots,
        stop_ids: Sequence[int],
        max_new_tokens: int,
        on_finished: Callable[[Finished], None],
        new_walker: Walker | None,
        new_drafts: Callable[[], Drafts] | None,
    ) -> None:
        import torch

        self.model, self.prompts, self.cache, self.state = model, prompts, cache, state
        self.stop_set = set(stop_ids)
        self.stops = torch.tensor(sorted(self.stop_set), dtype=torch.long, device=state.device)
        self.max_new = max_new_tokens
        self.on_finished = on_finished
        self.new_walker = new_walker
        self.waiting = deque(range(len(prompts)))
        self.walkers: list[Any] = [None] * len(state.request)
        self.new_drafts = new_drafts
        self.drafts: list[Drafts | None] = [None] * len(state.request)
        self.guesses: list[list[int]] = [[] for _ in state.request]  # the last pass's own next tokens

    def run(self, choose: Callable[[Any], Any]) -> None:
        """One token per pass (any decoding rule)."""
        state = self.state
        while self.waiting or state.any_live():
            if self.admit(choose):
                continue
            self.compact()
            self.make_room(1)
            logits, _ = _step(self.model, self.cache, state, self.walkers, [[]] * len(self.walkers), False)
            state.positions += 1
            live = state.live_slots()
            self.settle(live, choose(logits[live, 0]))

    def run_drafted(self) -> None:
        """Greedy, each pass verifying each slot's draft: the longest prefix of it that the model's own
        choices agree with is accepted, and the model's next token after it."""
        state = self.state
        greedy = _chooser(Sampling(), state.device)
        while self.waiting or state.any_live():
            if self.admit(greedy):
                continue
            self.compact()
            longest = MAX_DRAFT
            if state.device.type == "cpu":
                longest = max(1, PASS_TOKENS_CPU // len(state.request) - 1)
            last, counts = state.tokens.tolist(), state.counts.tolist()
            drafts = [
                self.draft(slot, min(longest, self.max_new - counts[slot] - 1), last[slot])
                if r >= 0 and self.drafts[slot].ready  # type: ignore[union-attr]
                else []
                for slot, r in enumerate(state.request)
            ]
            width = 1 + max(len(d) for d in drafts)
            self.make_room(width)
            if width == 1:  # no draft anywhere: a step as :meth:`run`'s
                logits, read = _step(self.model, self.cache, state, self.walkers, drafts, False)
                state.positions += 1
                live = state.live_slots()
                for slot in live:
                    self.drafts[slot].feed([last[slot]], read[slot] if read else None)  # type: ignore[union-attr]
                    if self.guesses[slot]:
                        self.guesses[slot] = []
                self.settle(live, greedy(logits[live, 0]))
                continue
            logits, _ = _step(self.model, self.cache, state, self.walkers, drafts, True)
            chosen = logits.argmax(dim=-1).tolist()
            for slot in state.live_slots():
                draft, own = drafts[slot], chosen[slot]
                agreed = 0
                while agreed < len(draft) and draft[agreed] == own[agreed]:
                    agreed += 1
                self.guesses[slot] = own[agreed + 1 : len(draft) + 1]
                self.accept(slot, [last[slot], *draft[:agreed]], [*draft[:agreed], own[agreed]])

    def admit(self, choose: Callable[[Any], Any]) -> bool:
        """Prefills waiting prompts into free slots (if both); whether it did."""
        state = self.state
        free = state.free_slots()
        if not (self.waiting and free):
            return False
        admitted = [(slot, self.waiting.popleft()) for slot in free[: min(len(self.waiting), PREFILL_ROWS)]]
        for slot, _ in admitted:
            self.walkers[slot] = self.new_walker() if self.new_walker is not None else None
            self.drafts[slot] = self.new_drafts() if self.new_drafts is not None else None
            self.guesses[slot] = []
        logits = _prefill(self.model, self.cache, state, admitted, self.prompts, self.walkers, self.drafts)
        self.settle([slot for slot, _ in admitted], choose(logits))
        return True  # admit again before decoding: a slot that ended at once is free again

    def compact(self) -> None:
        """Drops the free slots from the batch when most are free and no prompt waits."""
        state = self.state
        if not self.waiting and state.sparse():
            keep = state.live_slots()
            self.cache.keep(state.index(keep))
            state.keep(keep)
            self.walkers = [self.walkers[s] for s in keep]
            self.drafts = [self.drafts[s] for s in keep]
            self.guesses = [self.guesses[s] for s in keep]

    def make_room(self, width: int) -> None:
        """Realigns the slots' columns if a pass of ``width`` tokens would not fit."""
        state = self.state
        if state.frontier() + width > self.cache.capacity:
            shifts, width = state.realign()
            self.cache.realign(shifts, width)

    def draft(self, slot: int, longest: int, after: int) -> list[int]:
        """The slot's draft after its last token ``after``, at most ``longest`` tokens: the map draft, its
        first tokens replaced by the model's own choices of the last pass (under ``attention: local`` a
        token after a wrong one is still right when its own input was: a frame converges in a few
        passes)."""
        drafts = self.drafts[slot]
        if drafts is None:
            return []
        proposed = drafts.draft(after, longest)
        guesses = self.guesses[slot][: len(proposed)]
        return guesses + proposed[len(guesses) :]

    def accept(self, slot: int, consumed: list[int], chosen: list[int]) -> None:
        """The slot's pass: ``consumed`` (its input tokens now in the cache) read by its walker, ``chosen``
        its new tokens (the last one is the next pass's input)."""
        state = self.state
        walker, drafts = self.walkers[slot], self.drafts[slot]
        channels = walker.feed(consumed)[0] if walker is not None else None
        assert drafts is not None  # (run_drafted: every slot has its drafts)
        drafts.feed(consumed, channels)
        state.positions[slot] += len(consumed)
        state.passes[slot] += 1
        count = int(state.counts[slot])
        chosen = chosen[: self.max_new - count]
        reason = None
        for i, tok in enumerate(chosen):
            if tok in self.stop_set:
                chosen, reason = chosen[: i + 1], "stop"
                break
        state.out[slot].extend(chosen)
        state.counts[slot] = count + len(chosen)
        state.tokens[slot] = chosen[-1]
        if reason is None and count + len(chosen) >= self.max_new:
            reason = "length"
        if reason is not None:
            self.finish(slot, reason)

    def settle(self, rows: list[int], chosen: Any) -> None:
        """Records the tokens ``chosen`` for the slots ``rows``; ends the slots that stop."""
        import torch

        state = self.state
        index = state.index(rows)
        state.counts[index] += 1
        state.passes[index] += 1
        state.tokens[index] = chosen
        for slot, tok in zip(rows, chosen.tolist(), strict=True):
            state.out[slot].append(tok)
        stopped = torch.isin(chosen, self.stops)
        full = state.counts[index] >= self.max_new
        for i in (stopped | full).nonzero().flatten().tolist():
            self.finish(rows[i], "stop" if bool(stopped[i]) else "length")

    def finish(self, slot: int, reason: str) -> None:
        state = self.state
        passes = int(state.passes[slot])
        self.on_finished(Finished(state.request[slot], list(state.out[slot]), reason, passes))
        state.release(slot)
        self.walkers[slot] = self.drafts[slot] = None


class _Slots:
    """What the loop knows of each slot: its request, its columns, its position and its tokens so far.

    A live slot's tokens in the cache are its columns ``begin`` to ``begin + positions`` (its end); the
    token chosen last (``tokens``) is not in the cache yet: the next pass reads it.
    """

    def __init__(self, slots: int, longest: int, device: Any) -> None:
        import torch

        self.device = device
        self.longest = longest
        self.request: list[int] = [-1] * slots
        self.live = torch.zeros(slots, dtype=torch.bool, device=device)
        self.begin = torch.full((slots,), longest, dtype=torch.long, device=device)
        self.positions = torch.zeros(slots, dtype=torch.long, device=device)
        self.tokens = torch.zeros(slots, dtype=torch.long, device=device)
        self.counts = torch.zeros(slots, dtype=torch.long, device=device)
        self.passes = torch.zeros(slots, dtype=torch.long, device=device)
        self.out: list[list[int]] = [[] for _ in range(slots)]

    def any_live(self) -> bool:
        return bool(self.live.any())

    def live_slots(self) -> list[int]:
        return [int(i) for i in self.live.nonzero().flatten().tolist()]

    def free_slots(self) -> list[int]:
        return [int(i) for i in (~self.live).nonzero().flatten().tolist()]

    def ends(self) -> Any:
        return self.begin + self.positions

    def frontier(self) -> int:
        """Where a new prompt ends: the last live slot's end, at least the longest prompt."""
        if not self.any_live():
            return self.longest
        return max(self.longest, int(self.ends()[self.live].max()))

    def sparse(self) -> bool:
        """Fewer than half the slots live: worth dropping the others from the batch."""
        live = int(self.live.sum())
        return 0 < live <= len(self.request) // 2

    def release(self, slot: int) -> None:
        self.live[slot] = False
        self.request[slot] = -1
        self.out[slot] = []

    def keep(self, rows: list[int]) -> None:
        index = self.index(rows)
        self.request = [self.request[r] for r in rows]
        self.out = [self.out[r] for r in rows]
        for name in ("live", "begin", "positions", "tokens", "counts", "passes"):
            setattr(self, name, getattr(self, name)[index])

    def realign(self) -> tuple[Any, int]:
        """Moves every live slot's columns so that all end at the same column, as far left as the longest
        span (never below the longest prompt, so that a prompt still fits before it); returns each slot's
        shift and that column."""
        import torch

        width = max(self.longest, int(self.positions[self.live].max()) if self.any_live() else 0)
        shifts = torch.where(self.live, self.ends() - width, torch.zeros_like(self.begin))
        self.begin = torch.where(self.live, width - self.positions, self.begin)
        return shifts, width

    def index(self, rows: list[int]) -> Any:
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
    drafts: list[Drafts | None],
) -> Any:
    """Writes the admitted prompts into their slots' columns just before the frontier; returns the logits
    of their last tokens."""
    import torch

    device = state.device
    ids = [prompts[r] for _, r in admitted]
    width = max(len(p) for p in ids)
    frontier = state.frontier()
    pads = torch.tensor([width - len(p) for p in ids], dtype=torch.long, device=device)
    input_ids = torch.tensor([[0] * (width - len(p)) + p for p in ids], dtype=torch.long, device=device)
    steps = torch.arange(width, device=device)
    positions = (steps[None, :] - pads[:, None]).clamp(min=0)
    # a token sees the prompt's tokens up to itself; a padding token sees itself only (no empty row)
    visible = (steps[None, None, :] <= steps[None, :, None]) & (steps[None, None, :] >= pads[:, None, None])
    visible |= torch.eye(width, dtype=torch.bool, device=device)[None]
    rows = torch.tensor([s for s, _ in admitted], dtype=torch.long, device=device)
    cache.rows, cache.start = rows, frontier - width
    kwargs: dict[str, Any] = {}
    cells = walkers[admitted[0][0]] is not None
    fed = [walkers[s].feed(p) for (s, _), p in zip(admitted, ids, strict=True)] if cells else []
    for i, ((slot, _), p) in enumerate(zip(admitted, ids, strict=True)):
        if drafts[slot] is not None:
            drafts[slot].feed(p, fed[i][0] if cells else None)  # type: ignore[union-attr]
    if cells:
        kwargs["cells"] = _cells([channels for channels, _ in fed], width, device)
        if _local(model):
            keys = [[None] * (width - len(p)) + k for (_, k), p in zip(fed, ids, strict=True)]
            kwargs["local_keys"] = key_tensor(keys, device, pads.tolist())
    try:
        logits = _forward(model, input_ids, positions, visible[:, None], cache, kwargs, 1)[:, -1]
    finally:
        cache.rows = None
    lengths = torch.tensor([len(p) for p in ids], dtype=torch.long, device=device)
    state.begin[rows] = frontier - lengths
    state.positions[rows] = lengths
    state.counts[rows] = 0
    state.passes[rows] = 0
    state.live[rows] = True
    for slot, request in admitted:
        state.request[slot] = request
        state.out[slot] = []
    return logits


def _step(
    model: Any, cache: SlotCache, state: _Slots, walkers: list[Any], drafts: list[list[int]], fork: bool
) -> tuple[Any, list[Any]]:
    """One pass of every slot over its last token and its draft (``drafts``, per slot): the logits after
    each, ``(slots, 1 + longest draft, vocab)``, and the channels the walkers read (none without walkers).
    The walkers read the pass's tokens (``fork``: copies of them do, the loop feeding the walkers what it
    accepts). Under ``attention: local`` a draft is cut before its first token past the block's first
    :data:`FULL_LEAD` that attends fully (such a query reads every column; ``drafts`` is updated to what
    the pass verifies). A free slot computes on its stale token, its result unused; a slot's block beyond
    its draft is padding, read by nothing."""
    import torch

    device = state.device
    tokens = state.tokens.tolist()
    read: list[Any] = []  # per slot: channels and keys of its block (None: a free slot)
    if any(w is not None for w in walkers):
        for slot, w in enumerate(walkers):
            if w is None:
                read.append(None)
                continue
            channels, keys = (w.fork() if fork else w).feed([tokens[slot], *drafts[slot]])
            if _local(model):
                cut = next((i for i in range(FULL_LEAD, len(keys)) if keys[i] is None), len(keys))
                drafts[slot] = drafts[slot][: cut - 1]
                channels, keys = tuple(c[:cut] for c in channels), keys[:cut]
            read.append((channels, keys))
    width = 1 + max(len(d) for d in drafts)
    window = int(state.begin[state.live].min())
    free = ~state.live
    state.begin[free] = window
    state.positions[free] = 0
    ends = state.ends()
    cache.place(ends, width, window)
    ids = [[tok, *d, *[0] * (width - 1 - len(d))] for tok, d in zip(tokens, drafts, strict=True)]
    kwargs: dict[str, Any] = {}
    every_local = False
    fed: list[Any] = []
    if read:
        for block in read:
            # (a free slot and padding read nothing and attend to themselves only: they never make a pass
            # attend fully)
            if block is None:
                fed.append((([0] * width,) * CHANNELS, [_ITSELF] * width))
                continue
            channels, keys = block
            pad = width - len(keys)
            if pad:
                channels, keys = tuple(c + [0] * pad for c in channels), keys + [_ITSELF] * pad
            fed.append((channels, keys))
        kwargs["cells"] = _cells([channels for channels, _ in fed], width, device)
        if _local(model):
            keys = key_tensor([keys for _, keys in fed], device, (state.begin - window).tolist())
            # padding and free slots: their own columns (a reader's keys are its positions in the slot)
            own = (ends - window)[:, None] + torch.arange(width, device=device)[None, :]
            padding = keys[..., SELF] == _PAD
            keys[..., SELF] = torch.where(padding, own, keys[..., SELF])
            kwargs["local_keys"] = keys
            every_local = bool((keys[..., SELF] >= 0).all())
    visible = None
    if not every_local:
        queries = width  # (local model: the mask up to the last query that attends fully)
        if "local_keys" in kwargs:
            full = (kwargs["local_keys"][..., SELF] < 0).any(dim=0)
            queries = int(full.nonzero().max()) + 1
        columns = torch.arange(window, cache.limit, device=device)
        last = ends[:, None] + torch.arange(queries, device=device)[None, :]  # (slots, queries)
        visible = (columns[None, None, :] >= state.begin[:, None, None]) & (
            columns[None, None, :] <= last[:, :, None]
        )
        visible = visible[:, None]
    input_ids = torch.tensor(ids, dtype=torch.long, device=device)
    positions = state.positions[:, None] + torch.arange(width, device=device)[None, :]
    return _forward(model, input_ids, positions, visible, cache, kwargs, width), [c for c, _ in fed]


def _local(model: Any) -> bool:
    """Whether ``model`` is a cells model under ``attention: local``."""
    return bool(getattr(model, "local", False))


#: The keys of a free slot's stale token and of padding: itself (``_PAD``, :func:`_step` puts its column).
_PAD = -2
_ITSELF = tuple(_PAD if slot == SELF else -1 for slot in range(SLOTS))


def _forward(
    model: Any, input_ids: Any, positions: Any, visible: Any | None, cache: SlotCache, kwargs: dict, keep: int
) -> Any:
    """The model's logits at the last ``keep`` positions, ``(rows, keep, vocab)``, attention restricted to
    ``visible`` (``None``: every token is local, its keys in ``kwargs``; covering fewer queries than the
    pass: the later ones are local)."""
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
        logits_to_keep=keep,
        **kwargs,
    )
    return out.logits.float()


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
