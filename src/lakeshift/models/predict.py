"""Generating predictions with any backend, written incrementally so an interrupted run resumes.

Every backend implements :class:`Backend`: ``run(items, emit)`` calls ``emit(item, generation)`` as soon as
an answer is ready (in any order); :func:`predict` appends one JSON line per answer and flushes it, so a
crash loses at most the answers in flight. Rerunning with the same ``--out`` skips every id already there
(after checking the file was produced with the same model, formats, split and decoding settings, and from
the same data: :func:`lakeshift.scoring.data_version_problem`).

Default ``max_new_tokens`` (``hf`` and ``vllm``): 1.25 x the longest reference completion of the split's
SFT file for the chosen CoT format, counted with the model's own tokenizer, plus 16. The split's longest
references are on its largest maps, so the budget fits the format on the hardest maps with room for a model
that is a little more verbose; a model that loops is cut there and scored as a failure. The ``openai``
backend sends no limit unless ``--max-new-tokens`` is given: zero-shot models reason at their own length.

The prompt (``mirage`` or ``map-only``, see :mod:`lakeshift.models.data`) is recorded in every row; the
command defaults to the one the run was trained with (``run.json``).

Decoding: greedy unless a temperature is given or a preset is named (``--decoding``,
:data:`~lakeshift.models.generation.DECODING_PRESETS`; ``frozen_ood`` is the paper's evaluation script). The
settings are recorded in every row (``decoding``; with a preset other than greedy, its name in
``decoding.preset``).

Repeated sampling (``--samples K``, sampled decoding only): each map is asked K times and its row is written
once all K answers are in. The row's ``output`` (and ``n_output_tokens``, ``finish_reason``) is the first
sample, so the file scores like a one-sample file; ``samples`` lists all K (``output``, ``n_output_tokens``,
``finish_reason``, in sample order) and ``n_samples`` is K. Scoring adds pass@k and maj@k from them
(:func:`lakeshift.scoring.score_predictions`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lakeshift.config import number_problem
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS
from lakeshift.io import dumps, file_sha256
from lakeshift.models import cells
from lakeshift.models.data import PROMPTS, SftSet, load_sft, prompt_turns, reference_completion
from lakeshift.models.generation import (
    DECODING_PRESETS,
    ENGINES,
    Backend,
    Decoding,
    Generation,
    PromptItem,
    preset_decoding,
)
from lakeshift.models.train_options import PROMPT_HELP, parse_sizes
from lakeshift.options import option
from lakeshift.scoring import data_version_problem
from lakeshift.traces import COT_FORMATS

BACKENDS = ("hf", "vllm", "openai")


def parse_shard_option(text: str) -> str:
    """``--shard I/N`` checked while the command line is parsed
    (:func:`lakeshift.scoring.shards.parse_shard`), at most as many shards as the ``workers`` rule allows:
    each is a worker of its own, and scoring them together reads every one."""
    import argparse

    from lakeshift.scoring.shards import parse_shard

    try:
        count = parse_shard(text)[1]
    except LakeshiftError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--shard ")) from None
    problem = number_problem(count, "workers")
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r}: the number of shards {problem.split(', got ')[0]}")
    return text


@dataclass
class PredictOptions:
    """Everything ``lakeshift predict`` accepts (``None``: the run's, the model's or the backend's default,
    see :func:`predict`). Each field is an :func:`lakeshift.options.option`; those marked ``study`` are the
    keys of a study's ``predict:`` sections (besides ``splits``, which makes one stage per split)."""

    model: str = option(required=True, help="run folder, checkpoint folder, hub id, or API model name")
    name: str | None = option(
        help="the model's name in predictions and reports (default: --model as given; the path is kept in "
        "'model_path')"
    )
    backend: str = option("hf", choices=BACKENDS, study=True)
    data: str = option(required=True)
    split: str = option("id-test")
    input_format: str | None = option(
        flag="--input", choices=INPUT_FORMATS, help="default: the run's (run.json)"
    )
    cot_format: str | None = option(
        flag="--cot", choices=COT_FORMATS, help="default: the run's (run.json), else none"
    )
    prompt: str | None = option(
        choices=PROMPTS,
        help=f"default: the run's (run.json), else mirage; recorded in every row. {PROMPT_HELP}",
        study=True,
    )
    out: str = option(required=True, help="predictions JSONL (appended to; finished ids are skipped)")
    shard: str | None = option(
        parse=parse_shard_option,
        metavar="I/N",
        help="answer only part I of N of the selected maps (every N-th map from the I-th, I = 1..N), into "
        "its own file: --out P.jsonl writes P.shard-I-of-N.jsonl; run N workers at once and score or report "
        "the N files together (`lakeshift score --predictions P.shard-*.jsonl`)",
    )
    sizes: list[int] | None = option(parse=parse_sizes, help="maps of these sizes only, e.g. 7,8")
    per_size: int | None = option(
        rule="positive_int",
        metavar="N",
        help="the first N maps of each map size (file order), so a quick evaluation covers every size",
        study=True,
    )
    limit: int | None = option(
        rule="positive_int", help="the first N maps only (after --sizes and --per-size)", study=True
    )
    max_new_tokens: int | None = option(
        rule="tokens",
        help="default (hf, vllm): 1.25 x the longest reference completion of the split for the CoT format "
        "+ 16, at most the model's context; openai: no limit sent",
        study=True,
    )
    decoding: str | None = option(
        choices=tuple(DECODING_PRESETS),
        help="a named decoding (instead of --temperature, --top-p, --seed): greedy, or frozen_ood, the "
        "paper's evaluation script (sampling at temperature 0.7, top-p 0.9, seed 42; other settings the "
        "model's own generation defaults); recorded in every row",
        study=True,
    )
    temperature: float | None = option(rule="nonnegative_float", help="0 = greedy (default)", study=True)
    top_p: float | None = option(
        rule="probability", help="nucleus sampling, in (0, 1] (default 1; needs --temperature > 0)"
    )
    seed: int | None = option(rule="seed", help="sampling seed (default 0; recorded; unused when greedy)")
    samples: int = option(
        1,
        rule="samples",
        metavar="K",
        help="answers per map (sampled decoding only): the row keeps all K, `score` and `report` add "
        "pass@k and maj@k (default 1)",
        study=True,
    )
    batch_size: int | None = option(
        rule="batch_size",
        help="hf: prompts decoded at once (default: continuous, chosen from the model's size and the free "
        "memory; generate, 32 CPU, 128 GPU)",
        study=True,
    )
    engine: str = option(
        "auto",
        choices=ENGINES,
        help="hf: speculative (continuous batching whose greedy passes verify drafts from the map before: "
        "cells models with grids: coupled), continuous (continuous batching in slots: lakeshift's own text "
        "models and Qwen2), generate (transformers generate, every model) or auto (the first that "
        "applies); the same greedy answers",
        study=True,
    )
    base_url: str = option("https://api.openai.com/v1", help="openai: endpoint base URL", study=True)
    api_key_env: str = option("OPENAI_API_KEY", help="openai: environment variable with the key", study=True)
    concurrency: int = option(8, rule="workers", help="openai: requests in flight", study=True)
    max_retries: int = option(6, rule="retries", help="openai: retries per request (429, 5xx, network)")
    timeout: float = option(600.0, rule="seconds", help="openai: seconds per request")


# Fields that must agree between the rows already in an output file and a resumed run.
_RESUME_KEYS = (
    "model", "backend", "input_format", "cot_format", "prompt", "split", "decoding", "n_samples", "shard",
)  # fmt: skip


def items_from(sft: SftSet) -> list[PromptItem]:
    """The prompts (system + user turns) of an SFT set, with absolute image paths."""
    return [
        PromptItem(
            r["id"],
            prompt_turns(r),
            [sft.split_dir / p for p in r.get("images", [])],
            map_size=sft.sizes.get(r["id"]),
        )
        for r in sft.records
    ]


def check_decoding(
    temperature: float = 0.0,
    top_p: float | None = None,
    decoding: str | None = None,
    samples: int = 1,
) -> None:
    """Refuses decoding settings that would be dropped or mean nothing, before any model is loaded.

    Raises:
        LakeshiftError: an unknown preset, ``top_p`` with greedy decoding (greedy takes the likeliest
            token, so nucleus sampling would be left out of every row unrecorded), repeated greedy samples.
    """
    if decoding is not None and decoding not in DECODING_PRESETS:
        raise LakeshiftError(f"--decoding {decoding}: unknown (choose from {', '.join(DECODING_PRESETS)})")
    if samples < 1:
        raise LakeshiftError(f"--samples {samples}: must be >= 1")
    greedy = DECODING_PRESETS[decoding][0] == 0 if decoding is not None else temperature == 0
    if top_p is not None and decoding is None and greedy:
        raise LakeshiftError(
            f"--top-p {top_p}: nucleus sampling needs --temperature > 0 (greedy decoding takes the likeliest "
            "token, so top-p would not apply)"
        )
    if samples > 1 and greedy:
        raise LakeshiftError(
            f"--samples {samples}: greedy decoding answers every sample alike; sample with "
            "--decoding frozen_ood or --temperature > 0"
        )


def context_length(spec: Any) -> int | None:
    """The positions a model has for prompt and answer together (``max_position_embeddings`` of its config,
    or of its ``text_config``), or ``None`` when its config does not say (an API model)."""
    config = getattr(spec, "config", None) or {}
    for holder in (config, config.get("text_config") or {}):
        value = holder.get("max_position_embeddings") if isinstance(holder, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def bounded_max_new_tokens(max_new_tokens: int | None, given: bool, spec: Any) -> int | None:
    """``max_new_tokens`` within the model's context (:func:`context_length`): a given value beyond it is
    refused, a default beyond it is capped there (with a note on stderr).

    Raises:
        LakeshiftError: ``--max-new-tokens`` at least the model's positions, which leave the prompt none.
    """
    context = context_length(spec)
    if max_new_tokens is None or context is None or max_new_tokens < context:
        return max_new_tokens
    where = f"{spec.source}/config.json" if getattr(spec, "kind", None) == "path" else spec.name
    if given:
        raise LakeshiftError(
            f"--max-new-tokens {max_new_tokens}: the model has {context} positions for the prompt and the "
            f"answer together (max_position_embeddings of {where}); give fewer"
        )
    import sys

    print(
        f"lakeshift predict: the default --max-new-tokens {max_new_tokens} is beyond the model's {context} "
        f"positions (max_position_embeddings of {where}); capped at {context - 1}",
        file=sys.stderr,
    )
    return context - 1


def default_max_new_tokens(full: SftSet, backend: Backend) -> int | None:
    """1.25 x the longest reference completion (model tokens) + 16; None when tokens cannot be counted.

    Raises:
        LakeshiftError: the SFT file has no reference completions to measure.
    """
    refs = [c for c in (reference_completion(r) for r in full.records) if c]
    if not refs:
        raise LakeshiftError(
            f"{full.path}: no reference completions to size max_new_tokens; pass --max-new-tokens"
        )
    # The longest in characters is (nearly) the longest in tokens; measure a few to be safe and fast.
    longest = sorted(refs, key=len, reverse=True)[:8]
    counts = [backend.count_tokens(text) for text in longest]
    if any(c is None for c in counts):
        return None
    return math.ceil(1.25 * max(c for c in counts if c is not None)) + 16


def maps_file(sft: SftSet) -> Path:
    """The ``maps.jsonl`` of an SFT set's split: the maps a ``map-only`` prompt is made of, and those its
    answers are scored against."""
    return sft.split_dir / "maps.jsonl"


def data_versions(sft: SftSet) -> dict[str, tuple[str, Path]]:
    """What a predictions row is tied to, by the field that records it: the hash and path of the SFT file
    (``data_sha256``, the prompts as written) and of the split's ``maps.jsonl`` (``maps_sha256``, the maps a
    ``map-only`` prompt is built from and every answer is scored against), when there is one."""
    versions = {"data_sha256": (sft.sha256, sft.path)}
    maps = maps_file(sft)
    if maps.is_file():
        versions["maps_sha256"] = (file_sha256(maps), maps)
    return versions


def _read_done(
    out: Path, expect: dict[str, Any], versions: Mapping[str, tuple[str, Path]], sizes: Mapping[str, int]
) -> set[str]:
    """Ids already in ``out``; drops a torn last line left by a crash; checks the settings match and that
    the rows answer this version of the data (:func:`lakeshift.scoring.data_version_problem`: the SFT
    file and the maps file by their hashes, each map by its size; a regenerated or edited split keeps its
    ids)."""
    if not out.is_file():
        return set()
    raw = out.read_bytes()
    good = raw if raw.endswith(b"\n") or not raw else raw[: raw.rfind(b"\n") + 1]
    done: set[str] = set()
    try:
        text = good.decode("utf-8")
    except UnicodeDecodeError as err:
        bad_line = good.count(b"\n", 0, err.start) + 1
        raise LakeshiftError(
            f"{out}, line {bad_line} (byte offset {err.start}): not UTF-8 text; not a predictions file?"
        ) from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            why = getattr(err, "msg", "nested too deeply")
            raise LakeshiftError(f"{out}, line {lineno}: malformed JSON ({why})") from None
        if not isinstance(row, dict) or "id" not in row:
            raise LakeshiftError(f"{out}, line {lineno}: expected a prediction record (an object with 'id')")
        row.setdefault("prompt", "mirage")  # rows written before --prompt existed
        for key in _RESUME_KEYS:
            if row.get(key) != expect.get(key):
                raise LakeshiftError(
                    f"{out}, line {lineno}: field {key!r} is {row.get(key)!r} "
                    f"but this run has {expect.get(key)!r}; "
                    "use another --out (or delete the file) instead of mixing settings"
                )
        problem = data_version_problem(f"{out}, line {lineno}", row, versions, sizes)
        if problem:
            raise LakeshiftError(problem)
        done.add(str(row["id"]))
    if len(good) != len(raw):
        # A crash mid-write leaves a torn line: cut it so the file stays valid JSONL.
        with out.open("r+b") as f:
            f.truncate(len(good))
    return done


def predict(
    backend: Backend,
    data: str | Path,
    split: str,
    input_format: str,
    cot_format: str,
    out: str | Path,
    *,
    sizes: list[int] | None = None,
    per_size: int | None = None,
    limit: int | None = None,
    prompt: str = "mirage",
    max_new_tokens: int | None = None,
    temperature: float = 0.0,
    top_p: float | None = None,
    seed: int | None = None,
    decoding: str | None = None,
    samples: int = 1,
    name: str | None = None,
    shard: tuple[int, int] | None = None,
) -> dict[str, int]:
    """Writes predictions for one split and format pair to ``out`` (JSONL), resuming where it stopped.

    Maps are selected as :func:`~lakeshift.models.data.load_sft` does: ``sizes``, then the first ``per_size``
    of each size, then the first ``limit``, in file order; with ``shard=(i, n)`` only the i-th of n
    interleaved parts of that selection (:func:`lakeshift.scoring.shards.shard_items`; ``out`` is then that
    shard's own file, see :func:`lakeshift.scoring.shards.shard_path`). ``decoding`` names a preset, which
    replaces
    ``temperature``, ``top_p`` (``None``: 1; given, it needs sampling) and ``seed``; ``samples`` answers per
    map (see the module docstring). ``max_new_tokens`` must leave the model's context room for the prompt;
    its default is capped there (:func:`bounded_max_new_tokens`).

    Returns:
        ``{"done_before": n, "written": n, "total": n}``.

    Raises:
        LakeshiftError: bad input (missing data, image input for a text model, unreachable API, a
            prediction file written with other settings, decoding settings :func:`check_decoding`
            refuses, ``max_new_tokens`` beyond the model's context), before any generation starts.
    """
    out = Path(out)
    check_decoding(temperature, top_p, decoding, samples)
    # Local files first: a malformed data file is found before an API is contacted.
    full = load_sft(data, split, input_format, cot_format, need_assistant=False)
    sft = load_sft(
        data,
        split,
        input_format,
        cot_format,
        sizes=sizes,
        per_size=per_size,
        limit=limit,
        need_assistant=False,
        prompt=prompt,
    )
    backend.check(input_format)
    spec = getattr(backend, "spec", None)
    cells.check_sizes(getattr(spec, "model_type", None), sft.selected_sizes(), str(sft.path))
    given = max_new_tokens is not None
    max_new_tokens = bounded_max_new_tokens(max_new_tokens, given, spec)  # before a default is measured
    if max_new_tokens is None and backend.name != "openai":
        max_new_tokens = bounded_max_new_tokens(default_max_new_tokens(full, backend), False, spec)
    if decoding is not None:
        settings = preset_decoding(decoding, max_new_tokens)
    else:
        top_p = 1.0 if top_p is None else top_p
        settings = Decoding(max_new_tokens, temperature, top_p, seed if temperature > 0 else None)
    # The model's name: --name, else --model as given (a backend resolves a local folder to its absolute
    # path, which is kept in model_path).
    as_given = getattr(spec, "name", None)
    label = name or (as_given if isinstance(as_given, str) and as_given else backend.model_id)
    base: dict[str, Any] = {
        "model": label,
        "backend": backend.name,
        "input_format": input_format,
        "cot_format": cot_format,
        "prompt": prompt,
        "split": split,
        "decoding": settings.record(),
    }
    if samples > 1:
        base["n_samples"] = samples
    if label != backend.model_id:
        base["model_path"] = backend.model_id
    selection = {k: v for k, v in (("sizes", sizes), ("per_size", per_size), ("limit", limit)) if v}
    if selection:
        base["selection"] = selection  # the scorer counts missing maps within this subset only
    items = items_from(sft)
    if shard is not None:
        from lakeshift.scoring.shards import shard_items

        # Every row keeps the whole selection: the merged shards are scored against all of it.
        base["shard"] = {"index": shard[0], "count": shard[1]}
        selected = len(items)
        items = shard_items(items, *shard)
        if not items:
            raise LakeshiftError(
                f"--shard {shard[0]}/{shard[1]}: the selection has {selected} maps, so this shard has none "
                f"(split it into at most {selected} shards)"
            )
    versions = data_versions(sft)  # what every row records, and what the rows there must answer
    done = _read_done(out, base, versions, sft.sizes)
    todo = [item for item in items if item.id not in done]
    stats = {
        "done_before": len(done & {item.id for item in items}),
        "written": 0,
        "total": len(items),
    }
    if not todo:
        return stats
    from tqdm.auto import tqdm

    out.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=len(items), initial=stats["done_before"], desc="predict", unit="map")
    tokens, passes, start = 0, 0, time.time()
    # A map's answers until all its samples are in (only complete maps are written).
    pending: dict[str, list[Generation | None]] = {}
    with out.open("a", encoding="utf-8") as f:

        def emit(item: PromptItem, gen: Generation) -> None:
            nonlocal tokens, passes
            tokens += gen.n_output_tokens or 0
            passes += gen.n_passes or 0
            answers = pending.setdefault(item.id, [None] * samples)
            answers[item.sample] = gen
            if any(a is None for a in answers):
                return
            del pending[item.id]
            answered = [
                {"output": a.text, "n_output_tokens": a.n_output_tokens, "finish_reason": a.finish_reason}
                | ({"n_passes": a.n_passes} if a.n_passes is not None else {})
                | ({"error": a.error} if a.error else {})
                for a in answers
                if a is not None
            ]
            row: dict[str, Any] = {"id": item.id, **answered[0]}
            if samples > 1:
                row["samples"] = answered
            row.update(base)
            engine = getattr(backend, "engine", None)
            if engine is not None:
                row["engine"] = engine
            if item.id in sft.sizes:
                row["size"] = sft.sizes[item.id]
            row.update({field: digest for field, (digest, _) in versions.items()})
            f.write(dumps(row) + "\n")
            f.flush()
            stats["written"] += 1
            bar.update(1)
            if tokens:
                postfix = {"tok/s": f"{tokens / max(time.time() - start, 1e-9):.0f}"}
                if passes:  # tokens each forward pass wrote (above 1: drafts accepted)
                    postfix["tok/pass"] = f"{tokens / passes:.1f}"
                bar.set_postfix(postfix, refresh=False)

        asks = [replace(item, sample=k) for item in todo for k in range(samples)]
        try:
            backend.run(asks, settings, emit)
        finally:
            bar.close()
    return stats


def make_backend(name: str, model: str, **kwargs: Any) -> Backend:
    """Instantiates a backend by name (imports are lazy: vLLM and torch load only when used)."""
    if name == "hf":
        from lakeshift.models.backends.hf import HFBackend

        return HFBackend(model, **kwargs)
    if name == "vllm":
        from lakeshift.models.backends.vllm import VLLMBackend

        return VLLMBackend(model, **kwargs)
    if name == "openai":
        from lakeshift.models.backends.openai import OpenAIBackend

        return OpenAIBackend(model, **kwargs)
    raise LakeshiftError(f"--backend {name}: unknown (choose from {', '.join(BACKENDS)})")
