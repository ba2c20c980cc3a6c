"""What every prediction backend takes and gives (shared by :mod:`lakeshift.models.predict` and the
backends in :mod:`lakeshift.models.backends`, so neither imports the other): a prompt, the decoding
settings, one generated answer, and the :class:`Backend` protocol."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class PromptItem:
    """One prompt to answer.

    Attributes:
        id: the map id.
        messages: the system and user turns (trl conversational format, as in the SFT file).
        image_paths: absolute paths of the record's images (empty for text input).
        sample: which of the map's repeated samples this is (0 to ``--samples`` - 1).
        map_size: the map's size (``maps.jsonl``; ``None`` when unknown), for a model that resizes each
            map cell of an image (:attr:`lakeshift.models.registry.ModelSpec.cell_pixels`).
    """

    id: str
    messages: list[dict[str, Any]]
    image_paths: list[Path] = field(default_factory=list)
    sample: int = 0
    map_size: int | None = None


@dataclass
class Generation:
    """One answer: text, number of generated tokens (None if the backend cannot tell), why it stopped,
    ``error``: why there is no text (a prompt the server refuses; the text is then empty), and the forward
    passes that wrote it (``hf``'s continuous engines; more tokens than passes: drafts accepted)."""

    text: str
    n_output_tokens: int | None
    finish_reason: str | None = None
    error: str | None = None
    n_passes: int | None = None


@dataclass
class Decoding:
    """Decoding settings, recorded in every prediction row. ``temperature == 0`` means greedy.

    ``preset`` names a :data:`DECODING_PRESETS` entry whose settings these are (``None``: set one by one).
    A preset fixes what its source fixes and leaves every other setting (top-k, repetition penalty) to the
    model's own generation defaults, as that source does; sampling without a preset is plain temperature
    and top-p sampling (no top-k).
    """

    max_new_tokens: int | None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    preset: str | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"greedy": self.greedy, "max_new_tokens": self.max_new_tokens}
        if not self.greedy:
            out.update(temperature=self.temperature, top_p=self.top_p, seed=self.seed)
        if self.preset is not None and not self.greedy:
            out["preset"] = self.preset
        return out

    def sample_seed(self, item: PromptItem) -> int | None:
        """The seed of one request: the run's seed plus the sample index, so that a map's repeated samples
        differ on backends that seed each request (identical requests with one seed give one answer)."""
        return None if self.seed is None else self.seed + item.sample


#: Named decoding settings (``lakeshift predict --decoding``): ``(temperature, top_p, seed)``.
#: ``frozen_ood`` is the paper's evaluation script (the official repository's ``src/eval.py``):
#: ``generate(do_sample=True, temperature=0.7, top_p=0.9)`` after ``seed_everything(42)``.
DECODING_PRESETS: dict[str, tuple[float, float, int | None]] = {
    "greedy": (0.0, 1.0, None),
    "frozen_ood": (0.7, 0.9, 42),
}


def preset_decoding(name: str, max_new_tokens: int | None) -> Decoding:
    """The :class:`Decoding` of a named preset.

    Raises:
        KeyError: unknown preset (the CLI offers only :data:`DECODING_PRESETS`).
    """
    temperature, top_p, seed = DECODING_PRESETS[name]
    return Decoding(max_new_tokens, temperature, top_p, seed, preset=name)


#: How the ``hf`` backend decodes (:mod:`lakeshift.models.backends.hf`): ``speculative`` (continuous
#: batching whose greedy passes verify drafts from the map before: cells models with ``grids: coupled``),
#: ``continuous`` batching in slots (lakeshift's own text models and Qwen2), transformers ``generate``
#: (every model), or ``auto``: the first where it applies.
ENGINES = ("auto", "speculative", "continuous", "generate")

Emit = Callable[[PromptItem, Generation], None]


class Backend(Protocol):
    """What :func:`predict` needs from a backend."""

    name: str
    model_id: str

    def check(self, input_format: str) -> None:
        """Fails fast (LakeshiftError) on an impossible request, before any long work."""

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` for the model (None when unknown, e.g. a remote API)."""

    def run(self, items: list[PromptItem], decoding: Decoding, emit: Emit) -> None:
        """Answers every item, calling ``emit`` as each answer is ready."""


def batched(items: Iterable[PromptItem], size: int) -> Iterable[list[PromptItem]]:
    """Consecutive chunks of ``size`` items."""
    chunk: list[PromptItem] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
