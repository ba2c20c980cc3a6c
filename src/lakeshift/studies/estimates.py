"""How long a study's training and prediction stages will take, for ``lakeshift run`` (``--dry-run`` and
its ``budget_minutes``): characters of the stages' conversations and answers, measured on the calibration
maps of :mod:`lakeshift.data.bounds`, turned into tokens and seconds at the models' measured speeds
(:mod:`lakeshift.models.resources`). A model without a measured speed gets no training estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from lakeshift import formats, traces
from lakeshift.data import records
from lakeshift.data.bounds import calibration_record, record_bytes
from lakeshift.formats.prompts import SYSTEM_PROMPT
from lakeshift.models.resources import DECODE_TOKENS_PER_S, PREFILL_TOKENS_PER_S, TRAIN_TOKENS_PER_S

#: An answer may run past its reference's length up to the cap (1.25 x the longest reference).
ANSWER_SLACK = 1.25
#: The structured tokenizer writes 2.3-3.2 characters per token (benchmarks/log.md, "Tokens").
CHARS_PER_TOKEN = 2.3
#: Loading a model and tokenizing its data, beyond a training stage's time budget (the demo's two 5-minute
#: stages took 311 and 318 s, 24,000 records each), and loading a model for predictions (1-5 s).
STAGE_OVERHEAD_S = 20.0
PREDICT_OVERHEAD_S = 2.0
#: No tokenizer averages more characters per token than this on a prompt (2.3-3.2 for the structured
#: tokenizer, about 4 for Qwen's on English): prompts are at least their characters / this.
MAX_CHARS_PER_TOKEN = 8


def answer_chars(n: int, input_format: str, cot: str) -> float:
    """Estimated characters of one ``n x n`` map's answer in ``cot`` (its record minus the no-CoT one's)."""
    return max(record_bytes(n, [input_format], [cot]) - record_bytes(n, [input_format], ["none"]), 0.0) + 60


@lru_cache(maxsize=256)
def conversation_chars(n: int, input_format: str, cot: str, prompt: str) -> float:
    """Characters of one ``n x n`` training conversation: the SFT record with the ``mirage`` prompt, or the
    map's rendering and the completion alone with ``map-only`` (lakeshift.models.data)."""
    if prompt != "map-only" or input_format == "image":
        return record_bytes(n, [input_format], [cot])
    m = records.map_of(calibration_record(n))
    return len(formats.render(m, input_format)) + len(traces.completion(m, m.optimal_path(), cot)) + 40


def prompt_chars(n: int, input_format: str, prompt: str) -> int:
    """Characters of the system and user turns of an ``n x n`` map's training prompt (``mirage``: the rule
    text with the map, ``map-only``: the map alone); an image counts for nothing."""
    rec = calibration_record(n)
    if prompt == "map-only":
        user = "" if input_format == "image" else formats.render(records.map_of(rec), input_format)
    else:
        turns = records.prompt_messages(rec, input_format, None, "train")["messages"]
        user = "".join(
            c if isinstance(c, str) else "".join(b.get("text", "") for b in c)
            for c in (m["content"] for m in turns if m["role"] == "user")
        )
    return len(SYSTEM_PROMPT) + len(user)


def train_seconds(
    groups: Sequence[tuple[int, int]],
    input_format: str,
    cot: str,
    model: str,
    *,
    epochs: float | None,
    max_minutes: float | None,
    max_steps: int | None = None,
    examples_per_step: int | None = None,
    prompt: str = "mirage",
) -> float | None:
    """Estimated seconds of one training run over the maps ``groups`` (``(size, count)``): the time budget
    if it ends the run first, else the tokens of ``max_steps`` steps of ``examples_per_step`` conversations
    (when both are given; they override epochs, as in training) or of ``epochs`` passes, at the model's
    measured rate; ``None``: unknown."""
    budget = max_minutes * 60 if max_minutes else None
    rate = TRAIN_TOKENS_PER_S.get(model)
    by_length = None
    maps = sum(c for _, c in groups)
    if rate and maps:
        chars = sum(c * conversation_chars(n, input_format, cot, prompt) for n, c in groups)
        if max_steps and examples_per_step:
            by_length = max_steps * examples_per_step * chars / maps / CHARS_PER_TOKEN / rate
        elif epochs:
            by_length = epochs * chars / CHARS_PER_TOKEN / rate
    known = [s for s in (budget, by_length) if s is not None]
    return STAGE_OVERHEAD_S + min(known) if known else None


def predict_seconds(
    groups: Sequence[tuple[int, int]], input_format: str, cot: str, prompt: str = "mirage"
) -> float:
    """Estimated seconds of greedy answers to the maps ``groups`` by continuous batching (no answer waits
    for another): every map's prompt read at the measured prefill rate, and its answer, as long as its
    reference with :data:`ANSWER_SLACK`, written at the measured decoding rate."""
    prompts = sum(c * prompt_chars(n, input_format, prompt) for n, c in groups) / CHARS_PER_TOKEN
    answers = sum(c * ANSWER_SLACK * answer_chars(n, input_format, cot) for n, c in groups) / CHARS_PER_TOKEN
    return PREDICT_OVERHEAD_S + prompts / PREFILL_TOKENS_PER_S + answers / DECODE_TOKENS_PER_S
