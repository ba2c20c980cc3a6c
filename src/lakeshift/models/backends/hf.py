"""The ``hf`` backend: transformers ``generate``, batched with left padding and the KV cache.

Prompts are sorted by length so each batch pads little; generation stops at the end-of-turn token
(``<|im_end|>``) or the tokenizer's end-of-sequence token. Greedy unless a temperature is given; a decoding
preset passes only the settings it names to ``generate``, as the script it reproduces does, so the others
come from the model's ``generation_config`` (transformers' defaults where it is silent, e.g. top-k 50).

Engines (``engine``): ``continuous`` (text models of the types in ``continuous.SUPPORTED``: lakeshift's own
models and Qwen2 checkpoints) decodes in slots with continuous batching
(:mod:`lakeshift.models.backends.continuous`): a finished row's slot takes the next prompt at once, the slot
count is chosen from the model's size and the free memory, and the loop runs the model's ``forward`` only.
``speculative`` is ``continuous`` whose greedy passes each verify a draft per slot
(:mod:`lakeshift.models.backends.drafts`): for a cells model with ``grids: coupled`` the tokens of the map
before at the same cells, for another model prompt lookup; what the model agrees with is accepted at once
(sampled decoding goes token by token). ``generate`` (every other model, image input included, or when
asked) calls transformers ``generate`` on batches of prompts of similar length, with a static
(preallocated) KV cache where the model accepts one (the default dynamic cache grows by concatenation,
copying the whole cache at every token). ``auto`` chooses ``speculative`` for a cells model with
``grids: coupled``, else ``continuous`` where it applies, else ``generate``. All give the same greedy
answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models.backends import continuous
from lakeshift.models.data import open_image
from lakeshift.models.generation import ENGINES, Decoding, Emit, Generation, PromptItem, batched
from lakeshift.models.registry import check_modality, load_model, load_processing, resolve_model, tokenizer_of
from lakeshift.models.tokenizer import IM_END, encode_checked

# ``generate``'s batches: 32 decode several times faster than batch 1 on 2 CPU cores; GPUs take far larger.
DEFAULT_BATCH_CPU = 32
DEFAULT_BATCH_GPU = 128


class HFBackend:
    """Local generation with transformers (CPU or one GPU).

    Args:
        model: a named run folder, checkpoint folder or hub id (resolved without loading weights).
        batch_size: prompts decoded at once: the slots of ``continuous`` (default: chosen from the model's
            size and the free memory), the batch of ``generate`` (default 32 on CPU, 128 on GPU).
        engine: ``auto``, ``continuous`` or ``generate`` (module doc).
    """

    name = "hf"

    def __init__(self, model: str, batch_size: int | None = None, engine: str = "auto", **_: Any) -> None:
        if engine not in ENGINES:
            raise LakeshiftError(f"--engine {engine}: unknown (choose from {', '.join(ENGINES)})")
        self.spec = resolve_model(model)
        if self.spec.kind == "named":
            raise LakeshiftError(
                f"--model {model}: a named size has random weights; train it first (lakeshift train) "
                "and pass "
                "the run folder"
            )
        self.model_id = str(Path(model).resolve()) if Path(model).exists() else model
        self.batch_size = batch_size
        self.engine = engine
        self.last_batch_size: int | None = None  # the batch (or slots) of the last run
        self._model: Any = None
        self._processing: Any = None
        self._static_cache = not self.spec.vision

    def check(self, input_format: str) -> None:
        check_modality(self.spec, input_format)

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch

        cuda = torch.cuda.is_available()
        self._processing = load_processing(self.spec)
        self._model = load_model(self.spec, dtype=torch.bfloat16 if cuda else torch.float32)
        self._model.eval()
        if cuda:
            self._model.to("cuda")
        tokenizer = tokenizer_of(self._processing)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        fits = not self.spec.vision and continuous.supports(self._model)
        if self.engine in ("continuous", "speculative") and not fits:
            raise LakeshiftError(
                f"--engine {self.engine}: {self.spec.name} is not a text model of the types "
                f"{', '.join(continuous.SUPPORTED)}; use --engine generate"
            )
        if self.engine == "auto":
            self.engine = "continuous" if fits else "generate"
            if fits and _draws_coupled_maps(self._model):
                self.engine = "speculative"

    @property
    def tokenizer(self) -> Any:
        self._load()
        return tokenizer_of(self._processing)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def stop_ids(self) -> list[int]:
        """End-of-turn and end-of-sequence ids (any of them ends an answer)."""
        tokenizer = self.tokenizer
        ids = {tokenizer.eos_token_id}
        im_end = tokenizer.convert_tokens_to_ids(IM_END)
        if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
            ids.add(im_end)
        configured = self._model.generation_config.eos_token_id
        ids.update(configured if isinstance(configured, list) else [configured])
        return sorted(i for i in ids if i is not None)

    def _encode(self, batch: list[PromptItem]) -> Any:
        processing = self._processing
        texts = [
            processing.apply_chat_template(item.messages, add_generation_prompt=True, tokenize=False)
            for item in batch
        ]
        if self.spec.vision:
            images = [
                open_image(path, self.spec.cell_pixels, item.map_size)
                for item in batch
                for path in item.image_paths
            ]
            enc = processing(
                text=texts, images=images or None, padding=True, padding_side="left", return_tensors="pt"
            )
        else:
            # The chat template already wrote every special token; adding BOS/EOS again would corrupt it.
            enc = processing(texts, padding=True, return_tensors="pt", add_special_tokens=False)
        unk = self.tokenizer.unk_token_id
        if unk is not None and bool((enc["input_ids"] == unk).any()):
            # A silent <unk> would be answered and scored as if the model had read the map.
            for item, text in zip(batch, texts, strict=True):
                encode_checked(self.tokenizer, text, f"--model {self.spec.name}: prompt of {item.id}")
        return enc

    def _generate(self, enc: Any, kwargs: dict[str, Any]) -> Any:
        """``generate`` with a static KV cache when the model supports it, else the dynamic one."""
        import torch

        with torch.inference_mode():
            if self._static_cache:
                try:
                    return self._model.generate(**enc, **kwargs, cache_implementation="static")
                except (ValueError, NotImplementedError, TypeError) as err:
                    if not _is_cache_error(err):
                        raise
                    self._static_cache = False
            return self._model.generate(**enc, **kwargs)

    def run(self, items: list[PromptItem], decoding: Decoding, emit: Emit) -> None:
        self._load()
        # Longest first: similar lengths share a batch, and memory trouble shows up at once, not at the end.
        lengths = {item.id: self.count_tokens(json_text(item)) for item in items}
        ordered = sorted(items, key=lambda it: -lengths[it.id])
        if self.engine in ("continuous", "speculative"):
            self._run_continuous(ordered, decoding, emit)
        else:
            self._run_generate(ordered, decoding, emit)

    def _answer(self, item: PromptItem, tokens: list[int], emit: Emit, passes: int | None = None) -> None:
        """Emits ``tokens`` cut after the first stop token (``passes``: the passes that wrote them)."""
        stop = set(self.stop_ids())
        n, reason = len(tokens), "length"
        for i, tok in enumerate(tokens):
            if tok in stop:
                n, reason = i + 1, "stop"
                break
        text = self.tokenizer.decode(tokens[:n], skip_special_tokens=True)
        emit(item, Generation(text, n, reason, n_passes=passes))

    def _run_continuous(self, ordered: list[PromptItem], decoding: Decoding, emit: Emit) -> None:
        import torch

        from lakeshift.data.bounds import available_memory
        from lakeshift.models.backends.drafts import NgramDrafts
        from lakeshift.models.cells import MODEL_TYPE, MapDrafts, TokenReader

        model = self._model
        prompts = [self._encode(batch)["input_ids"][0].tolist() for batch in batched(ordered, 1)]
        max_new = decoding.max_new_tokens or model.generation_config.max_new_tokens or 256
        drafts = None
        if self.engine == "speculative" and decoding.greedy:
            drafts = MapDrafts if _draws_coupled_maps(model) else NgramDrafts
        longest = max((len(p) for p in prompts), default=0)
        capacity = continuous.capacity(longest, max_new, drafts is not None)
        cuda = model.device.type == "cuda"
        free = torch.cuda.mem_get_info()[0] if cuda else int(available_memory())
        slots = self.batch_size or continuous.choose_slots(model, len(prompts), capacity, free, cuda)
        self.last_batch_size = slots
        new_walker = None
        if model.config.model_type == MODEL_TYPE:
            rule = model.model.embed_tokens.rule
            new_walker = lambda: TokenReader(rule)  # noqa: E731
        sampling = continuous.Sampling()
        if not decoding.greedy:
            # a preset leaves top-k to the model's generation defaults, as ``generate`` does
            top_k = model.generation_config.top_k if decoding.preset is not None else None
            sampling = continuous.Sampling(decoding.temperature, decoding.top_p, top_k, decoding.seed or 0)
        continuous.decode(
            model,
            prompts,
            max_new_tokens=max_new,
            stop_ids=self.stop_ids(),
            slots=slots,
            sampling=sampling,
            on_finished=lambda done: self._answer(ordered[done.index], done.tokens, emit, done.passes),
            new_walker=new_walker,
            drafts=drafts,
        )

    def _run_generate(self, ordered: list[PromptItem], decoding: Decoding, emit: Emit) -> None:
        import torch

        tokenizer = self.tokenizer
        stop = self.stop_ids()
        device = self._model.device
        batch_size = self.batch_size or (DEFAULT_BATCH_GPU if device.type == "cuda" else DEFAULT_BATCH_CPU)
        self.last_batch_size = batch_size
        for index, batch in enumerate(batched(ordered, batch_size)):
            enc = self._encode(batch).to(device)
            kwargs: dict[str, Any] = {
                "max_new_tokens": decoding.max_new_tokens,
                "eos_token_id": stop,
                "pad_token_id": tokenizer.pad_token_id,
                "use_cache": True,
            }
            if decoding.greedy:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            else:
                # Seeded per batch: the same items in the same batches give the same samples.
                torch.manual_seed((decoding.seed or 0) + index)
                kwargs.update(do_sample=True, temperature=decoding.temperature, top_p=decoding.top_p)
                if decoding.preset is None:
                    kwargs["top_k"] = None  # plain temperature + top-p; a preset keeps the model's top-k
            out = self._generate(enc, kwargs)
            for item, tokens in zip(batch, out[:, enc["input_ids"].shape[1] :].tolist(), strict=True):
                self._answer(item, tokens, emit)


def _is_cache_error(err: Exception) -> bool:
    return "cache" in str(err).lower()


def json_text(item: PromptItem) -> str:
    """The text of a prompt (for length sorting only)."""
    parts = []
    for message in item.messages:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "".join(parts)


def _draws_coupled_maps(model: Any) -> bool:
    """Whether ``model`` is a cells model with ``grids: coupled`` (whose maps the drafts are read from)."""
    from lakeshift.models.cells import MODEL_TYPE, spec_of

    return bool(model.config.model_type == MODEL_TYPE and spec_of(model).grids == "coupled")
