"""inspect_ai entry point: the task ``lakeshift/frozenlake``, its scorer and a plan-majority reducer.

Installed with ``pip install 'lakeshift[inspect]'``, which registers this module under the ``inspect_ai``
entry-point group, so that::

    inspect eval lakeshift/frozenlake -T split=ood-dist -T input=grid -T cot=grid+desc --model openai/gpt-4o
    inspect eval lakeshift/frozenlake -T split=ood-dist --model lakeshift/runs/grid__none

(the second a model lakeshift trained, through the model provider ``lakeshift`` registered here too).

Samples
-------
One sample per map of a split, the sizes taking turns (:func:`interleave_sizes`), with the prompts
``lakeshift predict`` sends (the system turn and the user turn of ``<split>/sft/<input>__<cot>.jsonl``,
images as :class:`~inspect_ai.model.ContentImage` PNG data URLs). They come from ``data`` (a folder
written by ``lakeshift generate``) or, without it, from lakeshift's generator: the ``suite``'s split
(``paper`` or ``tiny``) with ``seed`` is generated once into ``$LAKESHIFT_CACHE/inspect/`` (default
``~/.cache/lakeshift/inspect/``), the same maps as ``lakeshift generate --suite SUITE --seed SEED``.
``per_size`` keeps the first N maps of each size. The ``-T`` arguments are checked as the CLI checks
its options (:func:`check_task_arguments`). Each sample's ``id`` is the map id, its ``target`` the
optimal plan (``\\boxed{RIGHT, DOWN}``) and its metadata the map's ``size``, ``d_inf``,
``optimal_length``, ``split``, ``input_format`` and ``cot_format``.

Scoring
-------
:func:`frozenlake_scorer` runs :func:`lakeshift.scoring.score_output` on the completion (``compat`` as in
``lakeshift score --compat``): the value is 1.0 for ``success`` else 0.0, the answer the simulated plan,
the explanation the verdict, and the metadata the scored record (``progress``, ``fell_at``, ...; the CoT
faithfulness fields ``trace_*`` for traced formats). Metrics: accuracy with its standard error, and
accuracy grouped by map size and by start-goal distance (:func:`map_groups`: ``7x7 maps (n=25)``,
``d_inf 6 maps (n=25)``, in increasing order).

Decoding and repeated samples
-----------------------------
``decoding`` is a :data:`lakeshift.models.generation.DECODING_PRESETS` name (default ``greedy``:
temperature 0; ``frozen_ood``: temperature 0.7, top-p 0.9, seed 42, the paper's evaluation script), set as
the task's generate config, which inspect's own options (``--temperature``) override. A model lakeshift
trained runs through the provider ``lakeshift/RUN_DIR`` registered here (:func:`lakeshift_provider`,
:mod:`lakeshift.integrations.inspect_ai_model`: lakeshift's own backend, greedy at temperature 0);
inspect's ``hf`` provider samples unless given ``-M do_sample=false``, which greedy decoding needs.

``samples=K`` runs K epochs reduced three ways: ``mean`` (the mean success over the samples), ``max``
(pass@k) and :func:`plan_majority` (maj@k: the verdict of the most frequent plan, as ``lakeshift score``
counts it). Epoch ``e`` asks with the run's seed plus ``e - 1`` (:func:`epoch_seeded_generate`), as
``lakeshift predict --samples`` seeds sample ``e - 1``: a provider that honours the seed would otherwise
answer every epoch alike.
"""

from __future__ import annotations

import base64
import difflib
import os
from pathlib import Path
from typing import Any

from lakeshift.config import number_problem
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS
from lakeshift.models.data import PROMPTS, load_sft, prompt_turns
from lakeshift.models.generation import DECODING_PRESETS
from lakeshift.scoring import COMPAT_MODES, load_scoring_maps, majority_index, score_output
from lakeshift.traces import COT_FORMATS, boxed

try:
    from inspect_ai import Epochs, Task, task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageSystem,
        ChatMessageUser,
        Content,
        ContentImage,
        ContentText,
        GenerateConfig,
        ModelAPI,
        modelapi,
    )
    from inspect_ai.scorer import (
        Metric,
        SampleScore,
        Score,
        Scorer,
        ScoreReducer,
        Target,
        Value,
        accuracy,
        metric,
        score_reducer,
        scorer,
        stderr,
    )
    from inspect_ai.solver import Generate, Solver, TaskState, solver
    from inspect_ai.solver import generate as plain_generate
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"lakeshift.integrations.inspect_ai needs inspect_ai ({err}): pip install 'lakeshift[inspect]'"
    ) from err


@modelapi(name="lakeshift")
def lakeshift_provider() -> type[ModelAPI]:
    """The model provider ``lakeshift/MODEL`` (:mod:`lakeshift.integrations.inspect_ai_model`), imported when
    an eval names it, so the task alone never loads torch."""
    from lakeshift.integrations.inspect_ai_model import LakeshiftModelAPI

    return LakeshiftModelAPI


#: Named suites the task can generate without a ``data`` folder.
GENERATED_SUITES = ("paper", "tiny")

try:  # inspect's CLI prints this kind of error as its message alone, without a traceback
    from inspect_ai._util.error import PrerequisiteError as _OneLine
except ImportError:  # pragma: no cover - a future inspect without it: the error keeps its traceback
    _OneLine = Exception  # type: ignore[misc,assignment,unused-ignore]


try:  # the generate config of the running eval: the task's, under inspect's own options (--seed)
    from inspect_ai.model._generate_config import active_generate_config as _active_config
except ImportError:  # pragma: no cover - a future inspect without it: epochs keep the task's seed
    _active_config = None


class TaskArgumentError(LakeshiftError, _OneLine):
    """A bad ``-T`` argument or input folder of :func:`frozenlake`, as one line in inspect's CLI."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def cache_root() -> Path:
    """Where generated splits are kept: ``$LAKESHIFT_CACHE/inspect`` (default ``~/.cache/lakeshift``)."""
    return Path(os.environ.get("LAKESHIFT_CACHE") or Path.home() / ".cache" / "lakeshift") / "inspect"


def generated_data(suite: str, seed: int, split: str, input_format: str, cot_format: str) -> Path:
    """A suite folder holding ``split`` (and the splits it depends on) of a named suite, generated by
    :func:`lakeshift.data.suites.build_suite` on first use and reused after (the suite's cache checks it).

    Raises:
        LakeshiftError: an unknown suite or split (naming the known ones).
    """
    from lakeshift.data import build_suite, load_suite
    from lakeshift.io import output_lock

    if suite not in GENERATED_SUITES:
        raise LakeshiftError(
            f"-T suite={suite}: the task generates {', '.join(GENERATED_SUITES)}; for another suite run "
            "`lakeshift generate` and pass -T data=FOLDER"
        )
    specs = {s.name: s for s in load_suite(suite)}
    if split not in specs:
        raise LakeshiftError(f"-T split={split}: not a split of suite {suite} ({', '.join(specs)})")
    needed: list[str] = []

    def need(name: str) -> None:
        spec = specs[name]
        for dep in (*spec.exclude, *([spec.embed_source] if spec.embed_source else [])):
            need(dep)
        if name not in needed:
            needed.append(name)

    need(split)
    out = cache_root() / f"{suite}-seed{seed}-{split}-{input_format}__{cot_format}"
    with output_lock(out, "lakeshift inspect task"):
        build_suite(
            [specs[n] for n in needed],
            out,
            seed=seed,
            suite_name=suite,
            images=input_format == "image",
            input_formats=[input_format],
            cot_formats=[cot_format],
            progress=False,
            log=lambda message: None,
        )
    return out


def _content(message: dict[str, Any], images: list[str]) -> str | list[Content]:
    content = message["content"]
    if isinstance(content, str):
        return content
    parts: list[Content] = []
    for part in content:
        if part.get("type") == "image":
            parts.append(ContentImage(image=images.pop(0)))
        else:
            parts.append(ContentText(text=part.get("text", "")))
    return parts


def _messages(record: dict[str, Any], split_dir: Path) -> list[ChatMessage]:
    """The system and user turns of an SFT record as inspect messages (images as PNG data URLs)."""
    images = [
        "data:image/png;base64," + base64.b64encode((split_dir / p).read_bytes()).decode("ascii")
        for p in record.get("images", [])
    ]
    out: list[ChatMessage] = []
    for message in prompt_turns(record):
        content = _content(message, images)
        if message["role"] == "system":
            out.append(ChatMessageSystem(content=content))
        else:
            out.append(ChatMessageUser(content=content))
    return out


def interleave_sizes(records: list[dict[str, Any]], maps: dict[str, Any]) -> list[dict[str, Any]]:
    """The records with the sizes taking turns (smallest first, each size in file order), so that the first
    N samples (inspect's ``--limit N``) hold every size alike instead of the smallest size alone."""
    by_size: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        sm = maps.get(record["id"])
        by_size.setdefault(sm.map.size if sm is not None else -1, []).append(record)
    groups = [by_size[size] for size in sorted(by_size)]
    return [
        group[rank]
        for rank in range(max(map(len, groups), default=0))
        for group in groups
        if rank < len(group)
    ]


def frozenlake_samples(
    data: str | Path,
    split: str,
    input_format: str,
    cot_format: str,
    *,
    prompt: str = "mirage",
    per_size: int | None = None,
) -> list[Sample]:
    """The inspect samples of a split folder (see the module docstring).

    Raises:
        LakeshiftError: what :func:`lakeshift.models.data.load_sft` raises (a missing split or format pair,
            a malformed record), or a split without ``maps.jsonl``.
    """
    sft = load_sft(
        data, split, input_format, cot_format, per_size=per_size, need_assistant=False, prompt=prompt
    )
    maps = load_scoring_maps(sft.split_dir / "maps.jsonl")
    samples = []
    for record in interleave_sizes(sft.records, maps):
        sm = maps.get(record["id"])
        if sm is None:
            raise LakeshiftError(f"{sft.path}: id {record['id']!r} is not in {sft.split_dir / 'maps.jsonl'}")
        plan = sm.record.get("optimal_path") or []
        samples.append(
            Sample(
                input=_messages(record, sft.split_dir),
                target=boxed(plan),
                id=record["id"],
                metadata={
                    "size": sm.record["size"],
                    "d_inf": sm.record["d_inf"],
                    "optimal_length": sm.optimal_length,
                    "split": split,
                    "input_format": input_format,
                    "cot_format": cot_format,
                },
            )
        )
    return samples


#: How :func:`map_groups` names a group: inspect's viewer strips trailing digits from the names of a
#: grouped metric, so no name ends in one.
GROUP_LABELS = {"size": "{value}x{value} maps (n={n})", "d_inf": "d_inf {value} maps (n={n})"}


@metric
def map_groups(metric: Metric, group_key: str) -> Metric:
    """``metric`` per value of the sample metadata's ``group_key`` (``size`` or ``d_inf``), in increasing
    order, each named with its value and number of samples (:data:`GROUP_LABELS`: ``7x7 maps (n=25)``).

    ``metric`` and ``group_key`` are the parameters inspect's viewer reads to show the groups together.
    """
    label = GROUP_LABELS[group_key]

    def compute(scores: list[SampleScore]) -> Value:
        groups: dict[Any, list[SampleScore]] = {}
        for score in scores:
            value = (score.sample_metadata or {}).get(group_key)
            groups.setdefault(value, []).append(score)
        return {
            label.format(value=value, n=len(members)): metric(members)
            for value, members in sorted(groups.items(), key=lambda item: item[0])
        }

    return compute


@scorer(metrics=[accuracy(), stderr(), map_groups(accuracy(), "size"), map_groups(accuracy(), "d_inf")])
def frozenlake_scorer(maps: str, cot: str, compat: str | None = None, check_trace: bool = True) -> Scorer:
    """lakeshift's verdict on a completion (see the module docstring).

    Args:
        maps: The split's ``maps.jsonl`` (samples are matched by id).
        cot: The CoT format, for the faithfulness check.
        compat: Extraction mode (``lakeshift score --compat``).
        check_trace: Run the CoT faithfulness check.
    """
    scoring_maps = load_scoring_maps(maps)

    async def score(state: TaskState, target: Target) -> Score:
        sm = scoring_maps.get(str(state.sample_id))
        if sm is None:
            raise LakeshiftError(f"sample {state.sample_id!r} is not a map of {maps}")
        rec = score_output(sm, state.output.completion, compat=compat, cot=cot, check_trace=check_trace)
        return Score(
            value=1.0 if rec.success else 0.0,
            answer=", ".join(rec.moves),
            explanation=rec.verdict,
            metadata=rec.to_json(),
        )

    return score


@score_reducer(name="plan_majority")
def plan_majority() -> ScoreReducer:
    """maj@k over epochs: the score of the most frequent plan (:func:`lakeshift.scoring.majority_index` on
    the scorer's ``moves``: samples without a plan do not vote, a tie goes to the plan met first); 0.0 when
    no epoch has a plan."""

    def reduce(scores: list[Score]) -> Score:
        plans = [(s.metadata or {}).get("moves") or [] for s in scores]
        winner = majority_index(plans)
        if winner is None:
            return Score(value=0.0, explanation="no sample has a plan")
        chosen = scores[winner]
        return Score(
            value=chosen.value, answer=chosen.answer, explanation=chosen.explanation, metadata=chosen.metadata
        )

    return reduce


@solver(name="epoch_seeded_generate")
def epoch_seeded_generate(seed: int | None = None) -> Solver:
    """inspect's ``generate`` with the seed of epoch ``e`` (1-based) set to the run's seed plus ``e - 1``.

    The run's seed is the eval's active one (the task's decoding preset, or inspect's ``--seed``), else
    ``seed``; without any, the request goes unseeded.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        base = _active_config().seed if _active_config is not None else None
        base = seed if base is None else base
        if base is None:
            return await generate(state)
        return await generate(state, seed=base + state.epoch - 1)

    return solve


#: The rule (:data:`lakeshift.config.NUMBER_RULES`) of each numeric ``-T`` argument, as the CLI checks the
#: option of the same meaning.
TASK_NUMBER_RULES = {"seed": "seed", "per_size": "positive_int", "samples": "positive_int"}


def check_task_arguments(args: dict[str, Any], unknown: dict[str, Any]) -> None:
    """Refuses what ``lakeshift predict`` would refuse on its command line, as one line naming the ``-T``.

    Raises:
        LakeshiftError: an unknown argument name, a number outside its rule (``samples=0``, ``seed=-1``,
            ``per_size=abc``), or a name argument that is not one of its choices.
    """
    if unknown:
        name = sorted(unknown)[0]
        close = difflib.get_close_matches(name, list(args), n=1)
        hint = f"did you mean {close[0]}?" if close else "see docs/harnesses.md"
        raise LakeshiftError(f"-T {name}={unknown[name]}: not an argument of lakeshift/frozenlake ({hint})")
    for name, rule in TASK_NUMBER_RULES.items():
        value = args[name]
        if value is None and name == "per_size":
            continue
        problem = number_problem(value, rule)
        if problem:
            raise LakeshiftError(f"-T {name}={value}: {problem}")
    choices = {
        "input": INPUT_FORMATS,
        "cot": COT_FORMATS,
        "prompt": PROMPTS,
        "decoding": tuple(DECODING_PRESETS),
        "suite": GENERATED_SUITES,
    }
    for name, allowed in choices.items():
        if args[name] not in allowed:
            raise LakeshiftError(f"-T {name}={args[name]}: unknown (choose from {', '.join(allowed)})")
    if args["compat"] not in COMPAT_MODES:
        raise LakeshiftError(f"-T compat={args['compat']}: unknown (choose from frozen_ood, vsp)")
    for name in ("split", "data"):
        if args[name] is not None and not isinstance(args[name], str):
            raise LakeshiftError(f"-T {name}={args[name]}: expected a name, got {type(args[name]).__name__}")


@task
def frozenlake(
    split: str = "id-test",
    input: str = "grid",
    cot: str = "none",
    data: str | None = None,
    suite: str = "paper",
    seed: int = 0,
    prompt: str = "mirage",
    per_size: int | None = None,
    compat: str | None = None,
    decoding: str = "greedy",
    samples: int = 1,
    **unknown: Any,
) -> Task:
    """FrozenLake planning on one split, input format and CoT format of lakeshift (see the module docstring).

    Args:
        split: The split (``id-test``, ``ood-size``, ``ood-dist``, ``embed10-test``, ...).
        input: How the prompt shows the map: ``image``, ``desc``, ``table`` or ``grid``.
        cot: The CoT format the model was trained on (for the faithfulness check), ``none`` without one.
        data: A folder written by ``lakeshift generate`` (default: generate ``suite`` with ``seed``).
        suite: The named suite generated without ``data``: ``paper`` or ``tiny``.
        seed: Its seed.
        prompt: ``mirage`` (the paper's) or ``map-only`` (the map alone; see ``lakeshift predict``).
        per_size: The first N maps of each size only.
        compat: Extraction mode: ``frozen_ood`` (the paper's evaluator) or ``vsp``; default lakeshift's.
        decoding: A decoding preset: ``greedy`` or ``frozen_ood``.
        samples: Answers per map (epochs), reduced to mean, pass@k (max) and maj@k (plan majority).
        unknown: Refused: inspect would otherwise drop a misspelt ``-T`` with a warning and run the default.
    """
    args = {
        "split": split, "input": input, "cot": cot, "data": data, "suite": suite, "seed": seed,
        "prompt": prompt, "per_size": per_size, "compat": compat, "decoding": decoding, "samples": samples,
    }  # fmt: skip
    try:
        check_task_arguments(args, unknown)
        return _frozenlake_task(
            split, input, cot, data, suite, seed, prompt, per_size, compat, decoding, samples
        )
    except LakeshiftError as err:
        raise TaskArgumentError(str(err)) from None


def _frozenlake_task(
    split: str,
    input: str,
    cot: str,
    data: str | None,
    suite: str,
    seed: int,
    prompt: str,
    per_size: int | None,
    compat: str | None,
    decoding: str,
    samples: int,
) -> Task:
    temperature, top_p, decoding_seed = DECODING_PRESETS[decoding]
    if samples > 1 and temperature == 0:
        raise LakeshiftError(
            f"-T samples={samples}: greedy decoding answers every sample alike; add -T decoding=frozen_ood"
        )
    folder = Path(data) if data else generated_data(suite, seed, split, input, cot)
    dataset = frozenlake_samples(folder, split, input, cot, prompt=prompt, per_size=per_size)
    config = GenerateConfig(temperature=temperature, top_p=top_p if temperature else None, seed=decoding_seed)
    return Task(
        dataset=MemoryDataset(dataset, name=f"frozenlake-{split}-{input}__{cot}"),
        solver=epoch_seeded_generate(decoding_seed) if samples > 1 else plain_generate(),
        scorer=frozenlake_scorer(str(folder / split / "maps.jsonl"), cot, compat),
        config=config,
        epochs=Epochs(samples, ["mean", "max", plan_majority()]) if samples > 1 else None,
        metadata={"split": split, "input_format": input, "cot_format": cot, "decoding": decoding},
    )
