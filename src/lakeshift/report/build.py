"""Building a report folder: score every run, aggregate, write the tables, figures, long-form CSVs and
``report.html``; and the compact summary printed in a terminal."""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.io import atomic_write, jsonl_stem, printable, write_jsonl
from lakeshift.report import analysis
from lakeshift.report.analysis import Cell, RunKey, run_key, run_sort_key
from lakeshift.report.figures import (
    plot_accuracy_vs_dinf,
    plot_accuracy_vs_length,
    plot_accuracy_vs_size,
    plot_verdicts,
)
from lakeshift.report.references import Reference
from lakeshift.report.tables import (
    Table,
    faithfulness_table,
    iter_unique,
    run_card,
    run_card_table,
    set_published_apart,
    split_order,
    split_table,
    table1,
    table3,
    table5,
    table10,
    verdict_table,
)
from lakeshift.scoring import ScoredRecord, ScoringMap, load_scoring_maps, score_predictions
from lakeshift.scoring.shards import read_prediction_set


@dataclass
class RunInput:
    """One predictions file to score.

    Attributes:
        path: The predictions JSONL.
        maps_path: Its ``maps.jsonl``.
        defaults: Metadata for records that lack it (``model``, ``input_format``, ``cot_format``).
        name: File stem for ``scored/<name>.jsonl``.
        paths: Every file of the set when it is split in shards (``lakeshift predict --shard``), read as
            one by :func:`lakeshift.scoring.shards.read_prediction_set`; empty: ``path`` alone.
    """

    path: Path
    maps_path: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    paths: list[Path] = field(default_factory=list)


@dataclass
class ReportResult:
    """What :func:`build_report` wrote and found."""

    out_dir: Path
    files: list[Path]
    n_records: int
    warnings: list[str]
    runs: list[RunKey]


def build_report(
    runs: Sequence[RunInput],
    out_dir: str | Path,
    *,
    compat: str | None = None,
    strict: bool = False,
    train_maps: str | Path | None = None,
    baselines: Sequence[str] = ("oracle", "greedy", "random"),
    check_trace: bool = True,
    n_examples: int = 600,
    images: bool = True,
    progress: bool = True,
    reference: str | Reference | None = None,
) -> ReportResult:
    """Scores every run and writes tables, plots, scored records and ``report.html`` into ``out_dir``.

    Args:
        runs: Predictions files with their maps files (may be empty with a ``reference``).
        out_dir: Output folder (created).
        compat: Extraction mode for every run.
        strict: Bad prediction records are errors instead of warnings.
        train_maps: A training split's ``maps.jsonl`` for the Figure 4 histogram.
        baselines: Reference policies added as rows for every maps file, answering the union of the maps
            that file's model runs were asked (their ``selection``).
        check_trace: Run the CoT faithfulness check.
        n_examples: Examples embedded in ``report.html`` (stratified by run, split, size and verdict).
        images: Embed map PNGs (``<split>/images/<id>.png`` next to the maps file) when present.
        progress: Show a tqdm bar on stderr.
        reference: Published results added as labelled rows of Tables 1, 3 and 5 and dashed curves
            (a :data:`lakeshift.report.references.KNOWN` name or a loaded :class:`Reference`).

    Raises:
        LakeshiftError: no runs (and no reference), unknown reference, unreadable inputs, or (``strict``)
            a bad prediction record.
    """
    from lakeshift.report import html as report_html
    from lakeshift.report import references

    ref = references.load(reference) if isinstance(reference, str) else reference
    if not runs and ref is None:
        raise LakeshiftError("no predictions files to report on")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs, warnings = _scoring_jobs(runs, strict, baselines)
    sampler = report_html.ExampleSampler(n_examples, n_strata_hint=max(1, len(jobs)))
    records, files = _score_jobs(jobs, out, sampler, warnings, compat, check_trace, images, progress)

    run_keys = sorted({run_key(r) for r in records}, key=run_sort_key)
    if ref is not None:
        taken = {k[0] for k in run_keys}
        moved = ref.relabel(taken)
        if moved.label != ref.label:
            warnings.append(f"a local run is named {ref.label!r}: the reference rows are {moved.label!r}")
        ref = moved
    cells = _Cells.of(records, run_keys)
    tables = _tables(cells, run_keys, records, ref)
    cards = run_card_table(_run_cards(jobs))
    if cards is not None:
        tables.insert(0, cards)
    for t in tables:
        files += t.write(out)
    for name, by, fields in (
        ("by_size", cells.by_split_size, ["split", "size"]),
        ("by_dinf", cells.by_split_dinf, ["split", "d_inf"]),
        ("by_length", cells.by_length, ["optimal_length"]),
        ("by_split", cells.by_split, ["split"]),
    ):
        files.append(_write_long_csv(out / f"{name}.csv", analysis.long_rows(by, fields)))
    figures = _figures(cells, run_keys, train_maps, ref, out)
    for paths in figures.values():
        files += paths.values()

    with atomic_write(out / "warnings.txt") as f:
        f.write("".join(printable(w) + "\n" for w in warnings))
    files.append(out / "warnings.txt")
    html_path = out / "report.html"
    report_html.write_report(
        html_path,
        tables=tables,
        figures={title: paths["png"] for title, paths in figures.items()},
        examples=sampler.examples(),
        maps_images=sampler.images,
        warnings=warnings,
        summary={
            "records": len(records),
            "runs": len(run_keys),
            "length_unit": cells.unit,
            "compat": compat or "lakeshift's (last box)",
            "decoding": ", ".join(sorted({str(r.decoding) for r in records if r.decoding})) or None,
            **({"reference": f"{ref.label}: {ref.citation}"} if ref is not None else {}),
        },
    )
    files.append(html_path)
    return ReportResult(out, files, len(records), warnings, run_keys)


_Job = tuple[str, Path, Mapping[str, ScoringMap], Any, dict[str, Any]]


def _run_cards(jobs: Sequence[_Job]) -> dict[str, dict[str, Any]]:
    """The run card (:func:`lakeshift.report.tables.run_card`) of every model whose predictions name its
    run folder (``model_path``, else ``model``, as ``lakeshift predict`` records them), by model name."""
    from lakeshift.io import read_json

    cards: dict[str, dict[str, Any]] = {}
    for _, _, _, pf, defaults in jobs:
        first = next(iter(pf.predictions.values()), None)
        meta = (first.meta if first is not None else None) or {}
        model = meta.get("model") or defaults.get("model")
        if not isinstance(model, str) or model in cards:
            continue
        for ref in (meta.get("model_path"), model):
            if not isinstance(ref, str) or not ref:
                continue
            found = None
            for base in (Path(ref), pf.path.parent / ref):
                for folder in (base, base.parent):  # the run folder, or its model/ inside it
                    if (folder / "run.json").is_file():
                        found = folder / "run.json"
                        break
                if found:
                    break
            if found is None:
                continue
            try:
                record = read_json(found)
            except LakeshiftError:
                continue  # a torn run.json: the report goes on without the card
            if isinstance(record, dict) and record.get("kind", "lakeshift-train") == "lakeshift-train":
                cards[model] = run_card(record)
                break
    return cards


def _scoring_jobs(
    runs: Sequence[RunInput], strict: bool, baselines: Sequence[str]
) -> tuple[list[_Job], list[str]]:
    """The predictions files to score, then the reference policies on the maps the models were asked."""
    from lakeshift.scoring import Prediction, PredictionsFile, selected_maps
    from lakeshift.scoring import baselines as bl

    maps_cache: dict[Path, dict[str, ScoringMap]] = {}
    for run in runs:
        mp = run.maps_path.resolve()
        if mp not in maps_cache:
            maps_cache[mp] = load_scoring_maps(mp)
    # Model runs are read first: the reference policies answer the same maps the models were asked.
    jobs: list[_Job] = []
    warnings: list[str] = []
    asked: dict[Path, dict[str, ScoringMap]] = {}
    given: dict[Path, set[str]] = {}  # policies whose predictions files are among the runs, per maps file
    for run in runs:
        mp = run.maps_path.resolve()
        pf = read_prediction_set(run.paths or [run.path], maps_cache[mp], strict=strict, maps_path=mp)
        warnings += pf.warnings
        jobs.append((run.name or jsonl_stem(run.path), mp, maps_cache[mp], pf, run.defaults))
        policies = {(p.meta or {}).get("policy") for p in pf.predictions.values()}
        if len(policies) == 1 and None not in policies:  # a `lakeshift baseline` file
            given.setdefault(mp, set()).update(str(p) for p in policies)
        else:
            asked.setdefault(mp, {}).update(selected_maps(maps_cache[mp], pf))
    for mp, maps in maps_cache.items():
        subset = asked.get(mp) or maps
        for policy in baselines:
            if policy in given.get(mp, ()):
                # Its own row would share the file's run name and count every map twice.
                warnings.append(f"{mp}: a {policy} baseline file is among the runs; its row is that file's")
                continue
            preds = {
                r["id"]: Prediction(
                    r["id"], r["output"], {k: v for k, v in r.items() if k not in ("id", "output")}, 0
                )
                for r in bl.baseline_predictions(subset.values(), policy)
            }
            split = next(iter(maps.values())).split or mp.parent.name
            jobs.append((f"baseline-{policy}__{split}", mp, subset, PredictionsFile(mp, preds, []), {}))
    return jobs, warnings


def _score_jobs(
    jobs: Sequence[_Job],
    out: Path,
    sampler: Any,
    warnings: list[str],
    compat: str | None,
    check_trace: bool,
    images: bool,
    progress: bool,
) -> tuple[list[ScoredRecord], list[Path]]:
    """Scores every job, writes ``scored/<name>.jsonl`` (names made unique) and feeds the example sampler."""
    from tqdm import tqdm

    records: list[ScoredRecord] = []
    files: list[Path] = []
    used_names: set[str] = set()
    answered_by: dict[tuple, Path] = {}  # (run, split, map id) -> the file that answered it
    for name, mp, maps, pf, defaults in tqdm(jobs, desc="scoring", unit="file", disable=not progress):
        scored = [
            # One model decoded two ways is two runs: the decoding joins the name, so they never pool.
            replace(rec, model=f"{rec.model or '?'}@{rec.decoding}")
            if rec.decoding not in (None, "greedy")
            else rec
            for rec in score_predictions(maps, pf, compat=compat, check_trace=check_trace, defaults=defaults)
        ]
        _check_one_answer_per_map(scored, pf.path, answered_by)
        n_short = [r.samples.n_samples_asked for r in scored if r.samples and r.samples.n_samples_asked]
        if n_short:
            warnings.append(f"{pf.path}: {short_samples_message(len(n_short), n_short)}")
        n_missing = sum(1 for r in scored if r.verdict == "missing")
        if n_missing and not name.startswith("baseline-"):
            warnings.append(f"{pf.path}: {n_missing} of {len(maps)} maps have no prediction (scored missing)")
        stem = name
        i = 2
        while stem in used_names:
            stem, i = f"{name}-{i}", i + 1
        used_names.add(stem)
        path = out / "scored" / f"{stem}.jsonl"
        write_jsonl(path, (r.to_json() for r in scored))
        files.append(path)
        sampler.offer(scored, pf, maps, compat=compat, images_dir=mp.parent / "images" if images else None)
        records += scored
    return records, files


def _check_one_answer_per_map(
    scored: Sequence[ScoredRecord], path: Path, answered_by: dict[tuple, Path]
) -> None:
    """Refuses a second file answering a run's maps: pooled, one model's 16 maps would count as 32 (and
    its interval shrink) though nothing new was measured.

    Raises:
        LakeshiftError: naming both files, the run and the split.
    """
    for rec in scored:
        key = (run_key(rec), rec.split, rec.id)
        first = answered_by.setdefault(key, path)
        if first != path:
            raise LakeshiftError(
                f"{first} and {path} both answer map {rec.id!r} of {rec.split} for run "
                f"{' / '.join(key[0])}: the same run's predictions twice would pool as one run of twice its "
                "maps; report one of them (or give them distinct 'model' names)"
            )


@dataclass
class _Cells:
    """The scored records counted by every grouping the tables and plots use."""

    by_split_size: dict[tuple, Cell]
    by_split_dinf: dict[tuple, Cell]
    by_split: dict[tuple, Cell]
    by_length: dict[tuple, Cell]
    model_runs: list[RunKey]
    unit: str

    @classmethod
    def of(cls, records: Sequence[ScoredRecord], run_keys: Sequence[RunKey]) -> _Cells:
        by_split_size = analysis.by_fields(records, "split", "size")
        test_records = [r for r in records if r.split in analysis.TEST_SPLITS[:3]] or records
        # Reference policies have no token counts: lengths are measured on model runs only.
        model_runs = [k for k in run_keys if k[1] != "baseline"] or list(run_keys)
        return cls(
            by_split_size=by_split_size,
            by_split_dinf=analysis.by_fields(records, "split", "d_inf"),
            by_split=analysis.by_fields(records, "split"),
            by_length=analysis.by_fields(test_records, "optimal_length"),
            model_runs=model_runs,
            unit=analysis.length_unit(c for k, c in by_split_size.items() if k[0] in model_runs),
        )


def _faithfulness_counts(records: Iterable[ScoredRecord]) -> dict[tuple, dict[str, int]]:
    """Per (run, split): traced outputs, faithful ones, answer agreement, divergence steps, successes."""
    faith: dict[tuple, dict[str, int]] = {}
    for r in records:
        trace = r.trace
        if trace is None or trace.faithful is None:
            continue
        f = faith.setdefault(
            (run_key(r), r.split),
            dict.fromkeys(
                (
                    "traced",
                    "faithful",
                    "agree",
                    "agree_n",
                    "div_steps",
                    "diverged",
                    "success",
                    "faithful_success",
                ),
                0,
            ),
        )
        f["traced"] += 1
        f["faithful"] += bool(trace.faithful)
        if trace.answer_agrees is not None:
            f["agree_n"] += 1
            f["agree"] += bool(trace.answer_agrees)
        if trace.divergence_step is not None:
            f["diverged"] += 1
            f["div_steps"] += trace.divergence_step
        if r.success:
            f["success"] += 1
            f["faithful_success"] += bool(trace.faithful)
    return faith


def _tables(
    cells: _Cells, run_keys: Sequence[RunKey], records: Sequence[ScoredRecord], ref: Reference | None
) -> list[Table]:
    """Every table with at least one row (the reference's rows only in Tables 1, 3 and 5)."""
    tables = (
        split_table(cells.by_split, run_keys),
        table1(cells.by_split_size, run_keys, ref),
        table3(cells.by_split_dinf, run_keys, ref),
        table5(cells.by_split_size, cells.model_runs, cells.unit, reference=ref),
        table5(cells.by_split_size, cells.model_runs, cells.unit, correct_only=False),
        table10(cells.by_split_size, cells.model_runs, cells.unit),
        verdict_table(cells.by_split, run_keys),
        faithfulness_table(cells.by_split, _faithfulness_counts(records)),
    )
    return [set_published_apart(t, ref) for t in tables if t is not None and (t.rows or records)]


def _figures(
    cells: _Cells,
    run_keys: Sequence[RunKey],
    train_maps: str | Path | None,
    ref: Reference | None,
    out: Path,
) -> dict[str, dict[str, Path]]:
    """Writes the four figures; returns ``{caption: {"png": path, "svg": path}}``."""
    train_hist = None
    if train_maps is not None:
        from lakeshift.io import read_jsonl

        train_hist = analysis.training_lengths(rec for _, rec in read_jsonl(train_maps))
    size_note = dinf_note = ""
    if ref is not None:
        size_note = f"; dashed: {ref.label} ({ref.sources.get('table1')}, same formats)"
        if any(k[1] == ref.embed_split for k in cells.by_split_dinf) or not run_keys:
            dinf_note = f"; dashed on {ref.embed_split}: {ref.label} ({ref.sources.get('table3')})"
    length_note = " (the paper's Figure 4 is not tabulated: no reference curve)" if ref is not None else ""
    if not run_keys:  # the reference alone: only the figures it has curves for
        return {
            "Accuracy vs start-goal distance (rows: input format" + dinf_note + ")": plot_accuracy_vs_dinf(
                cells.by_split_dinf, run_keys, out, ref
            ),
            "Accuracy vs map size (rows: input format" + size_note + ")": plot_accuracy_vs_size(
                cells.by_split_size, run_keys, out, ref
            ),
        }
    return {
        "Accuracy vs optimal path length (paper Figure 4; one panel per input format)"
        + length_note: plot_accuracy_vs_length(cells.by_length, run_keys, train_hist, out),
        "Accuracy vs start-goal distance (rows: input format; columns: split" + dinf_note + ")": (
            plot_accuracy_vs_dinf(cells.by_split_dinf, run_keys, out, ref)
        ),
        "Accuracy vs map size (rows: input format" + size_note + ")": plot_accuracy_vs_size(
            cells.by_split_size, run_keys, out, ref
        ),
        "Verdict breakdown (one panel per split)": plot_verdicts(cells.by_split, run_keys, out),
    }


def _write_long_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    with atomic_write(path) as f:
        if rows:
            # Only some rows have the repeated-sampling columns.
            fieldnames = iter_unique(k for row in rows for k in row)
            w = csv.DictWriter(f, fieldnames=fieldnames, lineterminator="\n")
            w.writeheader()
            for row in rows:
                w.writerow(
                    {
                        k: "" if v is None else printable(v) if isinstance(v, str) else v
                        for k, v in row.items()
                    }
                )
    return path


def fmt_summary(summary: Mapping[str, Any]) -> str:
    """The text ``lakeshift score`` prints: accuracy with Wilson interval overall and per size, verdicts."""
    n, k = summary["n"], summary["success"]
    lo, hi = analysis.wilson(k, n)
    lines = [f"accuracy {k}/{n} = {k / n if n else math.nan:.3f}  (95% CI {lo:.3f}-{hi:.3f})"]
    for size, (ks, ns) in summary["by_size"].items():
        lo, hi = analysis.wilson(ks, ns)
        lines.append(f"  {size}x{size}: {ks}/{ns} = {ks / ns:.3f}  ({lo:.3f}-{hi:.3f})")
    lines.append("verdicts: " + ", ".join(f"{v} {c}" for v, c in summary["verdicts"].items() if c))
    samples = summary.get("samples")
    if samples:
        k = "-".join(str(x) for x in sorted({min(samples["k"]), max(samples["k"])})) if samples["k"] else "?"
        lines.append(
            f"repeated samples (k = {k}): pass@k {samples['pass']}/{n} = {samples['pass'] / n:.3f}, "
            f"maj@k {samples['maj']}/{n} = {samples['maj'] / n:.3f}"
        )
        if samples.get("short"):
            lines.append(f"warning: {short_samples_message(samples['short'], samples['asked'])}")
    return "\n".join(lines)


def short_samples_message(n_short: int, asked: Iterable[int]) -> str:
    """The warning for maps whose pass@k and maj@k were computed over fewer samples than their rows asked."""
    k = "/".join(str(a) for a in sorted(set(asked))) or "?"
    return (
        f"{n_short} maps hold fewer samples than asked (k = {k}): their pass@k and maj@k are over the "
        "samples present (n_samples_asked in the scored records)"
    )


def terminal_summary(report_dir: Path, width: int = 80) -> str:
    """The table ``lakeshift report`` and ``lakeshift run``/``demo`` print: one row per run (its model
    name), then per split the accuracy with its 95% Wilson interval, read from the report's
    ``by_split.csv``. The split columns go in as many blocks (each repeating the model column) as ``width``
    needs; the full tables stay in the report files. Empty when the report has no ``by_split.csv``."""
    path = report_dir / "by_split.csv"
    if not path.is_file():
        return ""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    runs: dict[tuple[str, str, str], dict[str, str]] = {}
    for row in rows:
        if row["n"] and int(row["n"]):
            runs.setdefault((row["model"], row["input_format"], row["cot_format"]), {})[row["split"]] = (
                f"{float(row['acc']):.2f} ({float(row['lo']):.2f}-{float(row['hi']):.2f})"
            )
    # A run is its model name, unless two runs share it (one model name, two formats): then its formats too.
    names = Counter(model for model, _, _ in runs)
    cells = {printable(m if names[m] == 1 else f"{m} ({i} / {c})"): v for (m, i, c), v in runs.items()}
    cells = {m: {printable(s): v for s, v in by_split.items()} for m, by_split in cells.items()}
    splits = sorted({split for by_split in cells.values() for split in by_split}, key=split_order)
    if not splits:
        return ""
    name_width = max(len("model"), *(len(m) for m in cells))
    cell_width = max(len("0.00 (0.00-0.00)"), *(len(s) for s in splits))
    per_block = max(1, (width - name_width) // (cell_width + 2))
    lines = [f"Accuracy per split, 95% interval (the full tables: {report_dir / 'summary.md'}):"]
    for start in range(0, len(splits), per_block):
        block = splits[start : start + per_block]
        lines.append("")
        lines.append("model".ljust(name_width) + "".join(f"  {s:<{cell_width}}" for s in block).rstrip())
        for model, by_split in cells.items():
            values = "".join(f"  {by_split.get(s, '-'):<{cell_width}}" for s in block)
            lines.append((model.ljust(name_width) + values).rstrip())
    if any(row.get("maj_at_k") for row in rows):
        lines += ["", "Runs with repeated samples show their first sample; pass@k and maj@k: summary.md."]
    return "\n".join(lines)
