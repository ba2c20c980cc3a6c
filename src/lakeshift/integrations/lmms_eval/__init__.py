"""lmms-eval entry point: FrozenLake tasks for ``lmms-eval --include_path``, scored by lakeshift's scorer.

The task folder :data:`TASKS_DIR` ships inside the package::

    lmms-eval --model qwen2_5_vl --model_args pretrained=Qwen/Qwen2.5-VL-7B-Instruct \\
        --include_path "$(python -c 'import lakeshift.integrations.lmms_eval as m; print(m.TASKS_DIR)')" \\
        --tasks frozenlake_image --log_samples --output_path results/

``lakeshift lmms-eval-tasks --out DIR [--data DATA_DIR]`` writes the same folder, for the maps of your own
split folders (e.g. the official ID maps imported with ``lakeshift generate --id-source``).

Tasks and groups
----------------
The paper's conditions: one task ``frozenlake_<split>_<input>`` per test split of the paper's suite
(:data:`SPLITS`) and input format (``image``, ``desc``, ``table``, ``grid``) with Mirage's prompt, and
``frozenlake_<split>_<input>_map-only`` with the ``map-only`` prompt (the map alone, as ``lakeshift
predict --prompt map-only``); one group ``frozenlake_<input>`` (``frozenlake_<input>_map-only``) per input
format and prompt holding its splits' tasks, each reported on its own (a group never pools splits or input
formats: none of the paper's numbers does). A task's documents are the split's ``maps.jsonl`` records
(``maps/<split>.jsonl`` in the folder, loaded with lmms-eval's ``json`` builder); the shipped ones are
``lakeshift generate --suite paper`` with seed 0.

The CoT format is the model's, not the prompt's (the prompt is the same for every CoT), so each prompt is
generated once and its answer scored in whatever CoT it is written: the verdict does not depend on the
CoT, and the trace's faithfulness is checked in the format read from the answer (``lakeshift score``
without a ``cot_format``).

* Prompt: exactly what ``lakeshift predict`` sends (:func:`lakeshift.data.records.prompt_messages`,
  Mirage's test prompt, or :func:`lakeshift.models.data.map_only_user`): text input puts the rendered map
  in it; image input is the gymnasium frame of the map (:func:`lakeshift.formats.image.render_image`).
  ``doc_to_text`` keeps Mirage's ``<image>`` placeholder (the Qwen2.5-VL wrappers put the image first and
  drop it); ``doc_to_messages`` (chat models) puts the image where the placeholder stands, with lakeshift's
  system prompt, as ``lakeshift predict`` does.
* Decoding: greedy, ``max_new_tokens`` 1.25 x the longest reference completion of the split in any CoT
  counted in characters (on this ASCII text no tokenizer makes more tokens than characters), so a model
  trained on any CoT has room for its trace, and no stop string but the model's end of turn.
* ``process_results`` is :func:`lakeshift.scoring.score_output` on the map: the per-sample log
  (``--log_samples``) holds the same record ``lakeshift score`` writes (``verdict``, ``moves``,
  ``progress``, ``trace_*``), plus ``size``, ``d_inf`` and ``score`` (1.0 on success, for lmms-eval's
  standard errors).
* Metrics: ``accuracy`` (all maps) and ``accuracy_<n>x<n>`` (maps of that size; a size with no map under
  ``--limit`` is not reported).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lakeshift import traces
from lakeshift.data import records
from lakeshift.data.maps import load_maps, map_from_record
from lakeshift.errors import LakeshiftError
from lakeshift.formats import INPUT_FORMATS, prompts
from lakeshift.scoring import score_output, scoring_map

TASKS_DIR = Path(__file__).parent / "tasks"
#: The paper suite's test splits, one group each.
SPLITS: tuple[str, ...] = ("id-test", "ood-size", "ood-dist", "embed10-test")
TASK_PREFIX = "frozenlake"
#: The prompts a task can send (``lakeshift predict --prompt``): the paper's, and the map alone.
PROMPTS: tuple[str, ...] = ("mirage", "map-only")
TEMPLATE_FILE = "_frozenlake_template_yaml"
#: ``max_new_tokens`` is this many times the longest reference completion (as ``lakeshift predict``).
TOKEN_MARGIN = 1.25
_VARIANT = "test"


def task_name(split: str, input_format: str, prompt: str = "mirage") -> str:
    """``frozenlake_ood-dist_grid`` (Mirage's prompt), ``frozenlake_ood-dist_grid_map-only``."""
    return f"{TASK_PREFIX}_{split}_{input_format}" + ("" if prompt == "mirage" else f"_{prompt}")


def group_name(input_format: str, prompt: str = "mirage") -> str:
    """``frozenlake_image`` (Mirage's prompt), ``frozenlake_image_map-only``: the splits of one condition."""
    return f"{TASK_PREFIX}_{input_format}" + ("" if prompt == "mirage" else f"_{prompt}")


def _ident(name: str) -> str:
    """A format name as part of a Python identifier (``grid+desc`` -> ``grid_desc``)."""
    return name.replace("+", "_")


# --------------------------------------------------------------------------------------------------------
# Task functions (the folder's utils.py re-exports :func:`task_functions`)
# --------------------------------------------------------------------------------------------------------
def doc_to_visual_image(doc: Mapping[str, Any]) -> list[Any]:
    """The gymnasium frame of the document's map (the PNG ``lakeshift generate`` writes)."""
    from lakeshift.formats.image import render_image

    return [render_image(map_from_record(doc))]


def doc_to_visual_none(doc: Mapping[str, Any]) -> list[Any]:
    """Text input: no image."""
    return []


def doc_to_target(doc: Mapping[str, Any]) -> str:
    """The map's optimal plan, ``\\boxed{RIGHT, DOWN}``."""
    return traces.boxed(doc["optimal_path"])


def _prompt(doc: Mapping[str, Any], input_format: str, prompt: str = "mirage") -> dict[str, Any]:
    record = records.prompt_messages(doc, input_format, None, _VARIANT)
    if prompt == "map-only":
        from lakeshift.models.data import map_only_user

        system = record["messages"][0]
        record = {**record, "messages": [system, map_only_user(dict(doc), input_format)]}
    return record


def _text(input_format: str, prompt: str = "mirage") -> Callable[..., str]:
    def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Any = None) -> str:
        user = _prompt(doc, input_format, prompt)["messages"][1]["content"]
        if isinstance(user, str):
            return user
        return "".join(block["text"] if block["type"] == "text" else "<image>" for block in user)

    return doc_to_text


def _messages(input_format: str, prompt: str = "mirage") -> Callable[..., list[dict[str, Any]]]:
    def doc_to_messages(
        doc: Mapping[str, Any], lmms_eval_specific_kwargs: Any = None
    ) -> list[dict[str, Any]]:
        out = []
        for message in _prompt(doc, input_format, prompt)["messages"]:
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            out.append(
                {
                    "role": message["role"],
                    "content": [
                        {"type": "image", "url": doc_to_visual_image(doc)[0]} if b["type"] == "image" else b
                        for b in blocks
                    ],
                }
            )
        return out

    return doc_to_messages


def score_record(doc: Mapping[str, Any], output: str, cot: str | None = None) -> dict[str, Any]:
    """What the per-sample log holds for one output: the scorer's record and the map's facts (``cot``
    ``None``: the trace is checked in the CoT format read from the output, as ``lakeshift score`` does)."""
    sm = scoring_map(doc, f"map {doc.get('id')}")
    scored = score_output(sm, output, cot=cot)
    return {
        "id": sm.id,
        "size": sm.map.size,
        "d_inf": sm.map.d_inf,
        "score": 1.0 if scored.success else 0.0,
        **scored.to_json(),
    }


def _results(cot: str | None) -> Callable[[Mapping[str, Any], Sequence[str]], dict[str, Any]]:
    def process_results(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, Any]:
        record = score_record(doc, results[0] if results else "", cot)
        n = record["size"]
        return {"accuracy": record, f"accuracy_{n}x{n}": record}

    return process_results


def accuracy(items: Sequence[Mapping[str, Any]]) -> float:
    """Share of successes among the per-map records (NaN when there are none)."""
    if not items:
        return math.nan
    return sum(1.0 for item in items if item["success"]) / len(items)


def _suffix(prompt: str) -> str:
    """A prompt as part of a function name (``map-only`` -> ``_map_only``; Mirage's has none)."""
    return "" if prompt == "mirage" else "_" + prompt.replace("-", "_")


def task_functions() -> dict[str, Callable[..., Any]]:
    """Every function the task YAMLs name, by name (``doc_to_text_grid``, ``doc_to_text_grid_map_only``,
    ``process_results``; ``process_results_grid_desc`` checks the trace as that CoT, for task folders of
    earlier versions)."""
    functions: dict[str, Callable[..., Any]] = {
        "doc_to_visual_image": doc_to_visual_image,
        "doc_to_visual_none": doc_to_visual_none,
        "doc_to_target": doc_to_target,
        "accuracy": accuracy,
        "process_results": _results(None),
    }
    for fmt in INPUT_FORMATS:
        for prompt in PROMPTS:
            functions[f"doc_to_text_{fmt}{_suffix(prompt)}"] = _text(fmt, prompt)
            functions[f"doc_to_messages_{fmt}{_suffix(prompt)}"] = _messages(fmt, prompt)
    for cot in traces.COT_FORMATS:
        functions[f"process_results_{_ident(cot)}"] = _results(cot)
    return functions


# --------------------------------------------------------------------------------------------------------
# Writing the folder
# --------------------------------------------------------------------------------------------------------
_UTILS = '''"""The FrozenLake tasks' functions: lakeshift.integrations.lmms_eval (lakeshift's scorer)."""

from lakeshift.integrations.lmms_eval import task_functions

globals().update(task_functions())
'''

_TEMPLATE = """# lakeshift's FrozenLake tasks (lakeshift.integrations.lmms_eval): `lakeshift lmms-eval-tasks`.
dataset_path: json
test_split: test
output_type: generate_until
doc_to_target: !function utils.doc_to_target
metadata:
  version: 2.0
"""


def max_new_tokens(maps: Sequence[Mapping[str, Any]], cots: Sequence[str] = traces.COT_FORMATS) -> int:
    """:data:`TOKEN_MARGIN` x the longest reference completion in any of ``cots``, in characters, rounded up
    to 64."""
    longest = max(
        len(traces.completion(map_from_record(r), r["optimal_path"], cot)) for r in maps for cot in cots
    )
    return 64 * math.ceil(TOKEN_MARGIN * longest / 64)


def _task_yaml(split: str, input_format: str, prompt: str, sizes: Sequence[int], tokens: int) -> str:
    visual = "image" if input_format == "image" else "none"
    metrics = "".join(
        f"  - metric: {name}\n    aggregation: !function utils.accuracy\n    higher_is_better: true\n"
        for name in ["accuracy", *(f"accuracy_{n}x{n}" for n in sizes)]
    )
    functions = f"{input_format}{_suffix(prompt)}"
    return (
        f"task: {task_name(split, input_format, prompt)}\n"
        f"include: {TEMPLATE_FILE}\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    test: maps/{split}.jsonl\n"
        f"doc_to_visual: !function utils.doc_to_visual_{visual}\n"
        f"doc_to_text: !function utils.doc_to_text_{functions}\n"
        f"doc_to_messages: !function utils.doc_to_messages_{functions}\n"
        "process_results: !function utils.process_results\n"
        "generation_kwargs:\n"
        f"  max_new_tokens: {tokens}\n"
        "  temperature: 0\n"
        "  do_sample: false\n"
        "  until: []\n"
        f"metric_list:\n{metrics}"
    )


def _group_yaml(input_format: str, prompt: str, splits: Sequence[str]) -> str:
    tasks = "".join(f"  - {task_name(split, input_format, prompt)}\n" for split in splits)
    # No aggregate metric: the group lists its splits' accuracies side by side, never pooled.
    return f"group: {group_name(input_format, prompt)}\ntask:\n{tasks}metadata:\n  version: 2.0\n"


def task_files(maps_by_split: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, str]:
    """The task folder's files, ``{relative path: text}``, for the given maps of each split."""
    files = {"utils.py": _UTILS, TEMPLATE_FILE: _TEMPLATE}
    for split, maps in maps_by_split.items():
        if not maps:
            raise LakeshiftError(f"split {split}: no maps")
        files[f"maps/{split}.jsonl"] = "".join(json.dumps(r) + "\n" for r in maps)
        sizes = sorted({int(r["size"]) for r in maps})
        tokens = max_new_tokens(maps)
        for fmt in INPUT_FORMATS:
            for prompt in PROMPTS:
                yaml = _task_yaml(split, fmt, prompt, sizes, tokens)
                files[f"{task_name(split, fmt, prompt)}.yaml"] = yaml
    for fmt in INPUT_FORMATS:
        for prompt in PROMPTS:
            files[f"{group_name(fmt, prompt)}.yaml"] = _group_yaml(fmt, prompt, list(maps_by_split))
    return files


def paper_maps(splits: Sequence[str] = SPLITS, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The maps of the paper suite's ``splits``, as ``lakeshift generate --suite paper --seed SEED`` makes."""
    from lakeshift.data import build_suite, paper_suite

    with tempfile.TemporaryDirectory() as tmp:
        build_suite(
            paper_suite(), tmp, seed=seed, suite_name="paper", images=False, input_formats=("grid",),
            cot_formats=("none",), progress=False, log=lambda _msg: None,
        )  # fmt: skip
        return {split: load_maps(Path(tmp) / split / "maps.jsonl") for split in splits}


def split_maps(data: str | Path, splits: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The maps of ``data/<split>/maps.jsonl`` for each split (validated as ``lakeshift score`` does).

    Raises:
        LakeshiftError: a missing or malformed maps file.
    """
    return {split: load_maps(Path(data) / split / "maps.jsonl") for split in splits}


def write_tasks(out: str | Path, maps_by_split: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Path]:
    """Writes the task folder (see the module docstring) into ``out``, removing the task files and maps of
    an earlier one that this one has not; returns the files written."""
    from lakeshift.io import atomic_write

    out = Path(out)
    files = task_files(maps_by_split)
    written = []
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as f:
            f.write(text)
        written.append(path)
    # A task of an earlier folder left in place would still be found by --include_path (and a group of
    # another layout with it); only lakeshift's own task files and maps go.
    stale = [*out.glob(f"{TASK_PREFIX}_*.yaml"), *out.glob("maps/*.jsonl")]
    for path in stale:
        if path.relative_to(out).as_posix() not in files:
            path.unlink()
    return written


# --------------------------------------------------------------------------------------------------------
# tiny-vl for lmms-eval
# --------------------------------------------------------------------------------------------------------
def _vocabulary_texts() -> list[str]:
    """Prompts in every input format and completions in every CoT, on maps of sizes 3 to 10."""
    from lakeshift.data.generate import Group, SplitSpec, generate_map

    texts = [prompts.SYSTEM_PROMPT]
    for size in range(3, 11):
        rec = generate_map(SplitSpec("vocabulary", (Group(size, 1, 0.2),)), 0, 0)
        m = map_from_record(rec)
        for fmt in INPUT_FORMATS:
            texts.append(_text(fmt)(rec))
        texts.extend(traces.completion(m, rec["optimal_path"], cot) for cot in traces.COT_FORMATS)
    return texts


def save_tiny_vl(out: str | Path) -> Path:
    """Saves tiny-vl (:func:`lakeshift.models.registry.build_tiny_vl`, random weights) into ``out`` so that
    lmms-eval's ``qwen2_5_vl`` wrapper loads it from the path offline."""
    from lakeshift.models.registry import build_tiny_vl

    out = Path(out)
    model, processor = build_tiny_vl(_vocabulary_texts())
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
