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
    """

    id: str
    messages: list[dict[str, Any]]
    image_paths: list[Path] = field(default_factory=list)


@dataclass
class Generation:
    """One answer: text, number of generated tokens (None if the backend cannot tell), why it stopped."""

    text: str
    n_output_tokens: int | None
    finish_reason: str | None = None


@dataclass
class Decoding:
    """Decoding settings, recorded in every prediction row. ``temperature == 0`` means greedy."""

    max_new_tokens: int | None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"greedy": self.greedy, "max_new_tokens": self.max_new_tokens}
        if not self.greedy:
            out.update(temperature=self.temperature, top_p=self.top_p, seed=self.seed)
        return out


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
