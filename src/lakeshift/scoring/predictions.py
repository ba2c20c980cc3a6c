"""Prediction files: reading and checking them, scoring every row (and its samples), and summaries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.scoring.extraction import Extraction
from lakeshift.scoring.records import SampleScore, ScoredRecord
from lakeshift.scoring.verdicts import VERDICTS, ScoringMap, judge, score_output
from lakeshift.traces.vocabulary import COT_FORMATS


@dataclass
class Prediction:
    """One usable predictions record.

    Attributes:
        id: Map id.
        output: Raw output text, or ``None`` when the record had none (scored ``no_answer``).
        meta: The record's other fields.
        lineno: Its line in the file.
    """

    id: str
    output: str | None
    meta: dict[str, Any]
    lineno: int


@dataclass
class PredictionsFile:
    """A predictions file read against a maps table, with every problem found.

    Attributes:
        path: The file.
        predictions: ``{map id: Prediction}``.
        warnings: Messages naming file and line (malformed lines, unknown ids, duplicates, missing output).
        unknown_ids: Records whose id is not in the maps.
        malformed: Lines that are not a record with an id.
        duplicates: Records whose id an earlier record has.
        without_output: Records with no ``output`` field at all (a maps file has none).
    """

    path: Path
    predictions: dict[str, Prediction]
    warnings: list[str]
    unknown_ids: int = 0
    malformed: int = 0
    duplicates: int = 0
    without_output: int = 0


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _samples(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(s, Mapping) and isinstance(s.get("output"), str) for s in value)
    )


def _selection(value: Any) -> bool:
    if not isinstance(value, Mapping) or not set(value) <= {"sizes", "per_size", "limit", "ids"}:
        return False
    ids = value.get("ids")
    if ids is not None and not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
        return False
    sizes = value.get("sizes")
    if sizes is not None and not (isinstance(sizes, list) and all(_count(n) for n in sizes)):
        return False
    # select_maps refuses a per_size or a limit below 1: such a selection is bad metadata, dropped.
    return all(value.get(k) is None or (_count(value[k]) and value[k] >= 1) for k in ("per_size", "limit"))


# Metadata of prediction records that scoring and reports use, with the type each must have: a record with
# `"model": [1]` or `"selection": "all"` gets a warning and loses the field instead of breaking a report.
_META_CHECKS: dict[str, Any] = {
    **{k: (lambda v: isinstance(v, str)) for k in ("model", "input_format", "cot_format", "split", "policy")},
    "n_output_tokens": _count,
    "size": _count,
    "selection": _selection,
    "samples": _samples,
    "n_samples": _count,
    "decoding": lambda v: isinstance(v, Mapping),
    "error": lambda v: isinstance(v, str),
}


def read_predictions(
    path: str | Path, maps: Mapping[str, ScoringMap], strict: bool = False
) -> PredictionsFile:
    """Reads a predictions JSONL file (``id``, ``output``, optional metadata), or a harness log as the
    predictions rows :func:`lakeshift.scoring.harness_logs.prediction_rows` makes of it.

    Without ``strict``, bad records become warnings: a malformed line or an id not in ``maps`` is skipped
    (its map, if any, stays ``missing``); a record without a string ``output`` is kept as ``no_answer``; a
    duplicate id with a different output makes that map ``no_answer`` (ambiguous), an identical duplicate
    is ignored.

    Raises:
        LakeshiftError: missing file, or (with ``strict``) the first problem, naming file and line.
    """
    import json

    path = Path(path)
    if not path.is_file():
        raise LakeshiftError(f"{path}: no such file")
    result = PredictionsFile(path, {}, [])

    def problem(msg: str) -> None:
        if strict:
            raise LakeshiftError(msg)
        result.warnings.append(msg)

    from lakeshift.io import iter_lines
    from lakeshift.scoring import harness_logs

    # A line that is not UTF-8 is an error even without ``strict``: the file is binary or wrongly encoded,
    # not one torn record (iter_lines names the line and byte offset).
    lines: Iterable[tuple[int, Any]] = (
        harness_logs.prediction_rows(path) if harness_logs.is_harness_log(path) else iter_lines(path)
    )
    for lineno, line in lines:
        where = f"{path}, line {lineno}"
        if isinstance(line, str):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as err:
                result.malformed += 1
                problem(f"{where}: malformed JSON ({getattr(err, 'msg', 'nested too deeply')})")
                continue
        else:
            rec = line
        if not isinstance(rec, dict):
            result.malformed += 1
            problem(f"{where}: expected a JSON object, got {type(rec).__name__}")
            continue
        if "id" not in rec:
            result.malformed += 1
            problem(f"{where}: missing field 'id'")
            continue
        pid = str(rec["id"])
        if pid not in maps:
            result.unknown_ids += 1
            problem(f"{where}: field 'id': {pid!r} is not in the maps file")
            continue
        output = rec.get("output")
        result.without_output += "output" not in rec
        if not isinstance(output, str):
            what = "missing field 'output'" if "output" not in rec else "field 'output' is not a string"
            problem(f"{where}: {what} (scored no_answer)")
            output = None
        meta = {k: v for k, v in rec.items() if k not in ("id", "output")}
        for key, valid in _META_CHECKS.items():
            if meta.get(key) is not None and not valid(meta[key]):
                problem(f"{where}: field {key!r} has the wrong type ({meta[key]!r}; ignored)")
                del meta[key]
        previous = result.predictions.get(pid)
        if previous is not None:
            result.duplicates += 1
            if previous.output == output:
                problem(f"{where}: field 'id': duplicate of line {previous.lineno} (same output, ignored)")
                continue
            problem(
                f"{where}: field 'id': duplicate of line {previous.lineno} with a different output "
                "(map scored no_answer)"
            )
            meta = {**previous.meta, "duplicate": True}
            output = None
            lineno = previous.lineno
        result.predictions[pid] = Prediction(pid, output, meta, lineno)
    return result


def stale_data_message(where: str, recorded: Any, data_file: Path, field: str = "data_sha256") -> str:
    """The error for predictions made from another version of ``data_file`` (same ids, other maps), whose
    hash the row recorded in ``field``."""
    return (
        f"{where}: field {field!r}: answers another version of {data_file} (sha256 {str(recorded)[:12]}; "
        "the file changed since: regenerated?); predict again into another --out (or delete the file)"
    )


def data_version_problem(
    where: str,
    row: Mapping[str, Any],
    versions: Mapping[str, tuple[str | None, Path]],
    sizes: Mapping[str, int],
) -> str | None:
    """Why a predictions row does not answer the data it is read with, or ``None``: a recorded hash that
    differs from the file's now (``versions``: by the field that records it, ``data_sha256`` for the SFT
    file, ``maps_sha256`` for the split's ``maps.jsonl``, each with the file's hash now, ``None`` where the
    file is not there), or a recorded ``size`` that is not the size of the map with its id (``sizes``, by
    id). Rows without the fields are not checked.

    Args:
        where: the row's file and line, which the message starts with.
        row: the row's fields.
        versions: each hash field's ``(hash, file)`` now.
        sizes: map size by id.
    """
    for field, (digest, path) in versions.items():
        recorded = row.get(field)
        if digest is not None and recorded is not None and recorded != digest:
            return stale_data_message(where, recorded, path, field)
    size, mid = row.get("size"), str(row.get("id"))
    if size is not None and mid in sizes and size != sizes[mid]:
        maps = versions.get("maps_sha256", (None, Path("maps.jsonl")))[1]
        return (
            f"{where}: field 'size': {size!r}, but map {mid!r} of {maps} has size {sizes[mid]} (the map "
            "changed since it was answered); predict again into another --out (or delete the file)"
        )
    return None


def check_data_version(
    preds: PredictionsFile, maps_path: str | Path, maps: Mapping[str, ScoringMap] | None = None
) -> None:
    """Refuses predictions made from another version of the data than the maps they are scored with
    (:func:`data_version_problem`): each ``lakeshift predict`` row records ``data_sha256``, the hash of the
    SFT file it answered (``<split>/sft/<input>__<cot>.jsonl``, next to ``maps.jsonl``), ``maps_sha256``,
    the hash of ``maps.jsonl``, and its map's ``size`` (checked against ``maps``, the maps by id, when
    given); a regenerated or edited split keeps its ids but not its maps, so old answers would be scored
    against new maps. Rows without the fields, or whose file is not there, are not checked.

    Raises:
        LakeshiftError: the first stale row (file, line, field).
    """
    from lakeshift.io import file_sha256

    maps_path = Path(maps_path)
    maps_hash = file_sha256(maps_path) if maps_path.is_file() else None
    sizes = {mid: sm.record["size"] for mid, sm in (maps or {}).items()}
    sft_dir = maps_path.parent / "sft"
    hashes: dict[Path, str | None] = {}
    for pred in preds.predictions.values():
        meta = pred.meta or {}
        versions: dict[str, tuple[str | None, Path]] = {}  # (the SFT file first, as predict checks them)
        inp, cot = meta.get("input_format"), meta.get("cot_format")
        if isinstance(inp, str) and isinstance(cot, str):
            sft_file = sft_dir / f"{inp}__{cot}.jsonl"
            if sft_file not in hashes:
                hashes[sft_file] = file_sha256(sft_file) if sft_file.is_file() else None
            versions["data_sha256"] = (hashes[sft_file], sft_file)
        versions["maps_sha256"] = (maps_hash, maps_path)
        problem = data_version_problem(
            f"{preds.path}, line {pred.lineno}", {**meta, "id": pred.id}, versions, sizes
        )
        if problem:
            raise LakeshiftError(problem)


#: Prediction metadata copied into scored records (other metadata stays in the predictions file).
META_FIELDS: tuple[str, ...] = ("model", "input_format", "cot_format", "split", "n_output_tokens", "policy")


def decoding_label(decoding: Mapping[str, Any]) -> str:
    """A predictions row's ``decoding`` in words: its preset (``frozen_ood``), ``greedy``, or
    ``sampled temperature=0.7 top_p=0.9 seed=0``."""
    if decoding.get("preset"):
        return str(decoding["preset"])
    if decoding.get("greedy", True):
        return "greedy"
    settings = (f"{k}={decoding.get(k)}" for k in ("temperature", "top_p", "seed"))
    return "sampled " + " ".join(settings)


def majority_index(plans: Sequence[Sequence[str]]) -> int | None:
    """The sample whose plan is the most frequent of ``plans`` (one per sample, in sample order; an empty
    plan does not vote), the first of them; among equally frequent plans, the one met first. ``None`` when
    no sample has a plan."""
    counts = Counter(tuple(p) for p in plans if p)
    if not counts:
        return None
    top = max(counts.values())
    return next(i for i, p in enumerate(plans) if p and counts[tuple(p)] == top)


def score_samples(sm: ScoringMap, outputs: Sequence[str], compat: str | None = None) -> dict[str, Any]:
    """pass@k and maj@k of one map's K sampled outputs (:mod:`lakeshift.scoring`, "Repeated samples").

    Returns:
        ``n_samples``, ``samples_success`` (how many succeed), ``pass_at_k`` and ``maj_at_k``.
    """
    scored = [score_output(sm, o, compat=compat, check_trace=False) for o in outputs]
    winner = majority_index([r.moves for r in scored])
    return {
        "n_samples": len(outputs),
        "samples_success": sum(r.success for r in scored),
        "pass_at_k": any(r.success for r in scored),
        "maj_at_k": winner is not None and scored[winner].success,
    }


def score_predictions(
    maps: Mapping[str, ScoringMap],
    preds: PredictionsFile,
    *,
    compat: str | None = None,
    check_trace: bool = True,
    defaults: Mapping[str, Any] | None = None,
) -> Iterator[ScoredRecord]:
    """Scored records for every map (file order), ``missing`` where the file has no prediction.

    Args:
        maps: The maps table.
        preds: The predictions read by :func:`read_predictions`.
        compat: Extraction mode.
        check_trace: Run the faithfulness check.
        defaults: Metadata for records that do not carry it (e.g. ``model`` from the run folder name).

    Yields:
        A :class:`ScoredRecord` per map (``ScoredRecord.to_json()`` is the row a scored file holds): the
        :class:`Verdict` of :func:`judge`, the map's ``split``, ``size``, ``d_inf``, ``optimal_length``, the
        prediction's metadata (:data:`META_FIELDS`), its ``decoding`` (:func:`decoding_label`),
        ``n_output_chars`` and ``compat``; a prompt the server would not answer is ``no_answer`` with its
        ``error`` as the detail (:func:`refusal`); when the file has repeated samples, every record also
        has the :class:`SampleScore` of :func:`score_samples` (a record without ``samples`` counts its
        ``output`` as its one sample).
    """
    defaults = dict(defaults or {})
    # A map without a prediction belongs to the run all the others do: the model and formats they agree
    # on (a report would otherwise count an interrupted run's missing maps as a run of its own).
    run_meta = {**defaults, **_shared_meta(preds)}
    sampled = any("samples" in (p.meta or {}) for p in preds.predictions.values())
    no_samples = SampleScore(n_samples=0, samples_success=0, pass_at_k=False, maj_at_k=False)
    missing = Extraction((), "missing", "no prediction for this map")
    no_output = Extraction((), "no_answer", "no output in the predictions record")
    for mid, sm in selected_maps(maps, preds).items():
        pred = preds.predictions.get(mid)
        samples = no_samples if sampled else None
        if pred is None:
            meta = run_meta
            verdict = judge(sm, missing)
            n_chars = None
        else:
            pm = pred.meta
            meta = {**defaults, **{k: pm[k] for k in META_FIELDS if k in pm}} if pm else defaults
            if pred.output is None:
                verdict = judge(sm, no_output)
                if pm.get("duplicate"):
                    verdict = replace(verdict, detail="duplicate id with different outputs")
                n_chars = 0
            else:
                cot = meta.get("cot_format")
                # A CoT format lakeshift does not know (another tool's name) is scored without a trace check.
                known = cot is None or cot in COT_FORMATS
                verdict = score_output(
                    sm,
                    pred.output,
                    compat=compat,
                    cot=cot if known else None,
                    check_trace=check_trace and known,
                )
                n_chars = len(pred.output)
                if sampled:
                    outputs = [s["output"] for s in pm.get("samples") or [{"output": pred.output}]]
                    asked = pm.get("n_samples")
                    # A row short of its samples is scored over those present and says so.
                    short = asked if isinstance(asked, int) and asked > len(outputs) else None
                    samples = SampleScore(**score_samples(sm, outputs, compat), n_samples_asked=short)
            refused = refusal(pred)
            if refused is not None:  # no text to score: the reason is the detail
                verdict = judge(sm, refused)
        r = sm.record
        # Run metadata given as null stays in the row as null (ScoredRecord.extra).
        run = {k: meta[k] for k in ("model", "input_format", "cot_format", "policy") if k in meta}
        decoding = pred.meta.get("decoding") if pred is not None else None
        yield ScoredRecord.of(
            mid,
            verdict,
            split=r.get("split", meta.get("split")),
            size=r["size"],
            d_inf=r["d_inf"],
            optimal_length=sm.optimal_length,
            n_output_tokens=meta.get("n_output_tokens"),
            n_output_chars=n_chars,
            compat=compat,
            decoding=decoding_label(decoding) if isinstance(decoding, Mapping) else None,
            samples=samples,
            **{k: v for k, v in run.items() if v is not None},
            extra={k: v for k, v in run.items() if v is None},
        )


def refusal(pred: Prediction) -> Extraction | None:
    """The ``no_answer`` of a prompt the server would not answer: a row with an ``error`` (why, as the
    ``openai`` backend records it) and no output text, its detail that reason; ``None`` for any other row
    (an output with text is scored, whatever its ``error``; a duplicate id stays ambiguous)."""
    error = (pred.meta or {}).get("error")
    if not isinstance(error, str) or not error.strip() or (pred.output or "").strip():
        return None
    if (pred.meta or {}).get("duplicate"):
        return None
    return Extraction((), "no_answer", f"the server gave no answer: {error.strip()}")


def _shared_meta(preds: PredictionsFile) -> dict[str, Any]:
    """The run metadata (model, formats, policy) that every prediction of a file agrees on."""
    shared: dict[str, Any] = {}
    metas = [p.meta or {} for p in preds.predictions.values()]
    for key in ("model", "input_format", "cot_format", "policy"):
        values = {m.get(key) for m in metas}
        if len(values) == 1 and None not in values:
            shared[key] = values.pop()
    return shared


def selected_maps(maps: Mapping[str, ScoringMap], preds: PredictionsFile) -> Mapping[str, ScoringMap]:
    """The maps a predictions file is meant to answer: the union of the subsets named by its records'
    ``selection`` fields (``lakeshift predict --per-size/--sizes/--limit``, see
    :func:`lakeshift.data.maps.select_maps`; a harness log's ``ids``, the maps it evaluated), or every map
    as soon as one record has no selection."""
    selections = []
    for p in preds.predictions.values():
        selection = (p.meta or {}).get("selection")
        if not isinstance(selection, Mapping) or not selection:
            return maps
        if selection not in selections:
            selections.append(selection)
    if not selections:
        return maps
    from lakeshift.data.maps import select_maps

    records = [sm.record for sm in maps.values()]
    wanted: set[str] = set()
    for sel in selections:
        if sel.get("ids") is not None:
            wanted.update(sel["ids"])
            continue
        chosen = select_maps(
            records, sizes=sel.get("sizes"), per_size=sel.get("per_size"), limit=sel.get("limit")
        )
        wanted.update(str(rec["id"]) for rec in chosen)
    return {mid: sm for mid, sm in maps.items() if mid in wanted}


def summarize(records: Iterable[ScoredRecord]) -> dict[str, Any]:
    """Counts for a one-screen summary: total, successes, verdicts, accuracy per size; with repeated
    samples, ``samples``: the sample counts seen (``k``), the maps passed and won by majority, and the
    maps scored over fewer samples than their row asked (``short``, with the counts asked, ``asked``)."""
    total = 0
    ok = 0
    verdicts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    by_size: dict[int, list[int]] = {}
    samples: dict[str, Any] = {"k": set(), "pass": 0, "maj": 0, "short": 0, "asked": set()}
    for rec in records:
        total += 1
        ok += bool(rec.success)
        if rec.samples is not None:
            samples["k"].add(rec.samples.n_samples)
            samples["pass"] += bool(rec.samples.pass_at_k)
            samples["maj"] += bool(rec.samples.maj_at_k)
            if rec.samples.n_samples_asked is not None:
                samples["short"] += 1
                samples["asked"].add(rec.samples.n_samples_asked)
        verdicts[rec.verdict] = verdicts.get(rec.verdict, 0) + 1
        cell = by_size.setdefault(int(rec.size), [0, 0])
        cell[0] += bool(rec.success)
        cell[1] += 1
    out = {"n": total, "success": ok, "verdicts": verdicts, "by_size": dict(sorted(by_size.items()))}
    if samples["k"]:
        samples["k"] = sorted(samples["k"] - {0})
        samples["asked"] = sorted(samples["asked"])
        out["samples"] = samples
    return out
