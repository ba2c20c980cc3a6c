"""What models cost to run: measured training and decoding speeds by model, and the memory of a GRPO step.

The speeds give ``lakeshift run --dry-run`` its stage times (:mod:`lakeshift.studies.estimates`); the GRPO
estimate lets ``lakeshift train --method grpo`` refuse, before the model loads, a batch the machine cannot
hold. Nothing here imports torch: the callers pass the model's shape.
"""

from __future__ import annotations

from lakeshift.data.bounds import format_bytes
from lakeshift.errors import LakeshiftError

#: Training tokens per second by ``--model`` on 2 CPU cores (fp32, structured tokenizer, batch 32;
#: benchmarks/log.md, "Learning"; the progress bar's tok/s). Models without a measured rate get no
#: estimate.
TRAIN_TOKENS_PER_S: dict[str, float] = {
    "mini": 6000.0,
    "mini-cells": 6000.0,
    "mini-cells-shift": 6000.0,
    "mini-cells-compose": 6000.0,
    "mini-cells-base": 6000.0,
    "mini-cells-trace-base": 6000.0,
    "mini-cells-trace-player-base": 5300.0,  # grid / none, 10 epochs of 1,000 maps
    "mini-cells-trace-wide-base": 5300.0,  # the player base's rate (the same model)
}
#: Greedy decoding of a small model (the cells models) by the hf backend's continuous engine on 2 CPU cores,
#: tokens written and prompt tokens read per second (benchmarks/bench_predict.py; benchmarks/README.md).
DECODE_TOKENS_PER_S = 3000.0
PREFILL_TOKENS_PER_S = 12000.0

#: Bytes held per token of a training batch, per value of the model's logits: the logits and their
#: log-softmax. A micro run (vocabulary 2,278, hidden 64, 2 layers, 72-token sequences) grew by 15 KB per
#: token from 256 to 1,024 completions per step, 1.6 logits per token.
LOGITS_COPIES = 2
#: Values kept per hidden unit, layer and token for the backward pass (attention and MLP inputs and
#: outputs); with gradient checkpointing only the layer inputs are kept.
ACTIVATION_VALUES = 16


def grpo_memory(
    *,
    completions: int,
    generated_at_once: int,
    tokens: int,
    hidden: int,
    layers: int,
    vocab: int,
    kv_width: int,
    n_params: int,
    value_bytes: int,
    checkpointing: bool,
) -> float:
    """Estimated peak bytes of a GRPO step beyond what does not grow with the batch: one copy of the
    weights, then the larger of the training forward over ``completions`` sequences of ``tokens`` tokens
    (logits and activations) and the generation of ``generated_at_once`` sequences (their KV cache)."""
    per_layer = 1 if checkpointing else ACTIVATION_VALUES
    train_token = value_bytes * (LOGITS_COPIES * vocab + per_layer * hidden * layers)
    generate_token = value_bytes * 2 * kv_width * layers
    batch = max(completions * tokens * train_token, generated_at_once * tokens * generate_token)
    return n_params * value_bytes + batch


def check_grpo_memory(need: float, available: float, what: str) -> None:
    """Refuses a GRPO run whose batch cannot fit (``what`` names the options that set it).

    Raises:
        LakeshiftError: one line with the estimate, the memory available and what to lower.
    """
    if need > available:
        raise LakeshiftError(
            f"{what}: a GRPO step would need about {format_bytes(need)} of memory, more than the "
            f"{format_bytes(available)} available; lower --num-generations or --batch-size "
            "(or --max-completion-length)"
        )
