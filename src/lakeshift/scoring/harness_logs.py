"""Harness logs read as predictions: inspect ``.eval`` logs and lmms-eval ``--log_samples`` files.

``lakeshift report`` (and ``lakeshift score --predictions``) take these logs where they take predictions
files: :func:`prediction_rows` turns a log into the rows ``lakeshift predict`` writes (the interface of
docs/scoring-and-reports.md, "The predictions format"), so they are scored and reported by the same code.
The evaluated subset comes from the log as the row's ``selection`` (``{"ids": [...]}``): maps a harness was
never asked (``--limit``, ``per_size``) are not counted as missing, maps it was asked but did not answer
(an interrupted run) are.

* **inspect** (``*.eval``, or ``*.json`` with ``--log-format json``; the task ``lakeshift/frozenlake``,
  other tasks' logs are passed over): a row per sample id, ``output`` the
  completion of epoch 1 and, with several epochs, ``samples`` all of them (``n_samples`` the epochs asked);
  ``model`` inspect's model name; ``split``, ``input_format``, ``cot_format`` and the ``decoding`` preset
  from the task's metadata; ``maps`` the maps file the task's scorer read; ``selection`` the ids of the
  evaluated dataset (after ``--limit`` and ``--sample-id``). Reading needs ``inspect_ai`` (the ``inspect``
  extra), imported only when an ``.eval`` file is read.
* **lmms-eval** (``*_samples_frozenlake_<split>_<input>[_map-only].jsonl``, lakeshift's tasks): a row per
  logged document, ``output`` the raw response, the id from the scorer's record (``accuracy.id``, else
  ``doc.id``); ``split`` and ``input_format`` from the task name; ``model`` the folder lmms-eval wrote into
  (named after the model); greedy decoding (the tasks' setting); ``selection`` the logged ids (lmms-eval
  logs every document it evaluated). The CoT format is the model's, not the task's: it is left to the
  report's folder defaults.

This module is part of the core: it imports no ML library.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.io import first_record, iter_lines, parse_json_line

#: ``<date>_samples_<task>.jsonl``: the per-sample file lmms-eval writes with ``--log_samples``.
LMMS_SAMPLES = re.compile(r"_samples_(?P<task>frozenlake_[^/]+?)\.jsonl$")
_INPUTS = ("image", "desc", "table", "grid")


#: How an inspect log in its JSON format begins (``--log-format json``).
_INSPECT_JSON = re.compile(rb'^\{\s*"version":\s*\d+,\s*"status":\s*"[a-z]+",\s*"eval":\s*\{')
#: The task whose logs hold FrozenLake answers (the name inspect records, with or without the package).
TASK_NAMES = ("lakeshift/frozenlake", "frozenlake")


def is_inspect_log(path: Path) -> bool:
    """Whether ``path`` is an inspect log: its ``.eval`` format (a zip archive) or its JSON format."""
    if path.suffix not in (".eval", ".json") or not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head[:4] == b"PK\x03\x04" if path.suffix == ".eval" else bool(_INSPECT_JSON.match(head))


def is_frozenlake_log(path: Path) -> bool:
    """Whether the inspect log ``path`` is one of the task ``lakeshift/frozenlake`` (its header read alone);
    without ``inspect_ai`` every log is taken, and reading it says what is missing."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        return True
    try:
        return read_eval_log(str(path), header_only=True).eval.task in TASK_NAMES
    except Exception:  # a damaged log: reading it in full names the problem
        return True


def is_lmms_samples(path: Path, first: Mapping[str, Any] | None = None) -> bool:
    """Whether ``path`` is an lmms-eval ``--log_samples`` file: JSONL rows with ``doc_id`` and responses."""
    if not path.name.endswith(".jsonl"):
        return False
    first = first_record(path) if first is None else first
    return first is not None and "doc_id" in first and ("resps" in first or "filtered_resps" in first)


def is_harness_log(path: Path, first: Mapping[str, Any] | None = None) -> bool:
    """Whether ``path`` is a log :func:`prediction_rows` reads."""
    return is_inspect_log(path) or is_lmms_samples(path, first)


def harness_logs(folder: Path, recursive: bool = True) -> list[Path]:
    """The inspect logs of ``lakeshift/frozenlake`` in ``folder`` (and its subfolders), sorted; logs of
    other tasks are passed over. lmms-eval's files are JSONL and found with the predictions files."""
    find = folder.rglob if recursive else folder.glob
    found = sorted({*find("*.eval"), *find("*.json")})
    return [p for p in found if is_inspect_log(p) and is_frozenlake_log(p)]


def prediction_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """The predictions rows of a harness log, each with its place in the log (1-based) for messages.

    Raises:
        LakeshiftError: not a log this module reads, an unreadable log, or (``.eval``) no ``inspect_ai``.
    """
    path = Path(path)
    if is_inspect_log(path):
        return list(enumerate(_inspect_rows(path), start=1))
    if is_lmms_samples(path):
        return list(_lmms_rows(path))
    raise LakeshiftError(f"{path}: not an inspect .eval log nor an lmms-eval --log_samples file")


def _inspect_rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise LakeshiftError(
            f"{path}: reading inspect logs needs inspect_ai (pip install 'lakeshift[inspect]')"
        ) from None
    try:
        log = read_eval_log(str(path))
    except Exception as err:  # inspect raises its own and pydantic's errors for a damaged log
        raise LakeshiftError(f"{path}: not a readable inspect log ({type(err).__name__}: {err})") from None
    ev = log.eval
    if ev.task not in TASK_NAMES:
        raise LakeshiftError(f"{path}: a log of inspect's task {ev.task!r}, not of lakeshift/frozenlake")
    meta = dict(ev.metadata or {})
    args = dict(ev.task_args or {})
    base: dict[str, Any] = {"model": str(ev.model), "harness": "inspect"}
    for key, arg in (("split", "split"), ("input_format", "input"), ("cot_format", "cot")):
        value = meta.get(key, args.get(arg))
        if isinstance(value, str):
            base[key] = value
    preset = meta.get("decoding", args.get("decoding"))
    if isinstance(preset, str):
        base["decoding"] = {"preset": preset, "greedy": preset == "greedy"}
    maps = _scorer_maps(ev)
    if maps is not None:
        base["maps"] = maps
    ids = [str(i) for i in (ev.dataset.sample_ids or [])]
    epochs = ev.config.epochs or 1
    by_id: dict[str, list[Any]] = {}
    for sample in log.samples or []:
        by_id.setdefault(str(sample.id), []).append(sample)
    if not ids:
        ids = list(by_id)
    if ids:
        base["selection"] = {"ids": ids}
    if epochs > 1:
        base["n_samples"] = epochs
    for sid, samples in by_id.items():
        samples.sort(key=lambda s: s.epoch)
        answers = [
            {
                "output": s.output.completion if s.output is not None else None,
                "n_output_tokens": s.output.usage.output_tokens if s.output and s.output.usage else None,
            }
            for s in samples
            if s.error is None
        ]
        row: dict[str, Any] = {"id": sid}
        if answers:
            row.update(answers[0])
        if epochs > 1 and answers:
            row["samples"] = [a for a in answers if isinstance(a["output"], str)]
        yield {**row, **base}


def _scorer_maps(ev: Any) -> str | None:
    """The maps file lakeshift's scorer was given (its ``maps`` option), recorded in the log's header."""
    for scorer in ev.scorers or []:
        options = getattr(scorer, "options", None) or {}
        if isinstance(options.get("maps"), str):
            return str(options["maps"])
    return None


def _lmms_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    m = LMMS_SAMPLES.search(path.name)
    base: dict[str, Any] = {"model": path.parent.name, "harness": "lmms-eval", "decoding": {"greedy": True}}
    if m is not None:
        task = m.group("task").removeprefix("frozenlake_")
        task = task.removesuffix("_map-only")
        split, sep, inp = task.rpartition("_")
        if sep and inp in _INPUTS:
            base.update(split=split, input_format=inp)
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        rec = parse_json_line(line, f"{path}, line {lineno}")
        if not isinstance(rec, dict):
            raise LakeshiftError(f"{path}, line {lineno}: expected a JSON object, got {type(rec).__name__}")
        scored: Mapping[str, Any] = rec["accuracy"] if isinstance(rec.get("accuracy"), Mapping) else {}
        doc: Mapping[str, Any] = rec["doc"] if isinstance(rec.get("doc"), Mapping) else {}
        mid = scored.get("id", doc.get("id"))
        if mid is None:
            raise LakeshiftError(
                f"{path}, line {lineno}: no map id (neither 'accuracy.id' nor 'doc.id'): not a log of "
                "lakeshift's lmms-eval tasks"
            )
        rows.append((lineno, {"id": str(mid), "output": _response(rec), **base}))
    selection = {"ids": [row["id"] for _, row in rows]}
    for lineno, row in rows:
        yield lineno, {**row, "selection": selection}


def _response(rec: Mapping[str, Any]) -> str | None:
    """The model's raw output of an lmms-eval sample (``resps``, else ``filtered_resps``; lists unwrapped)."""
    for key in ("resps", "filtered_resps"):
        value: Any = rec.get(key)
        while isinstance(value, Sequence) and not isinstance(value, str) and value:
            value = value[0]
        if isinstance(value, str):
            return value
    return None
