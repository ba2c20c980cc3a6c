"""Reports: the paper's tables (Markdown, CSV, LaTeX), plots (PNG + SVG) and a self-contained ``report.html``.

:func:`build_report` scores every run (a predictions file with its maps file), adds the reference policies
of :mod:`lakeshift.scoring.baselines` for every maps file seen (on the maps the models of that file were
asked, e.g. the ``--per-size`` subset, so that baseline and model rows share their n), and writes into
``out_dir``:

* ``table1.*`` (accuracy, rows input x CoT x model; ID 3-6, OOD ``ood-size`` 7-10, OOD ``ood-dist`` 7-10,
  each with ``Avg`` = mean over sizes as in the paper and ``Pooled`` = all maps of the group),
  ``table3.*`` (``embed10-test`` by ``d_inf`` 2-5 / 6-9), ``table5.*`` (mean length of correct outputs per
  group, mean over sizes), ``table10.*`` (the same per size), ``table5_all.*`` (all outputs), ``verdicts.*``
  (verdict shares and partial credit per run and split) and ``faithfulness.*`` (CoT traces);
* long-form CSVs with counts and 95% Wilson intervals: ``by_size.csv``, ``by_dinf.csv``, ``by_length.csv``;
* plots ``fig_accuracy_vs_length``, ``fig_accuracy_vs_dinf``, ``fig_accuracy_vs_size``, ``fig_verdicts``
  (``.png`` and ``.svg``), small multiples readable at 20 runs: a row of panels per input format with shared
  axes, colour = CoT format (the same in every figure), marker = run of the same formats, legends beside the
  panels (never over data), reference policies grey, 95% Wilson bands only over points of
  :data:`BAND_MIN_N` maps or more in panels of at most :data:`BAND_MAX_LINES` lines;
* ``scored/<run>.jsonl`` (one scored record per map), ``report.html`` and ``warnings.txt``.

With ``reference="paper"`` (:mod:`lakeshift.report.references`) the paper's published Qwen2.5-VL-7B numbers
are added as rows of Tables 1, 3 and 5, labelled ``paper: Qwen2.5-VL-7B`` (moved aside if a local run has that
name), with the columns the paper does not report (``Pooled``, the embedded column of Table 5) empty, and
as dashed curves where the x-axis matches: accuracy vs size (Table 1) and vs d_inf on ``embed10-test``
(Table 3), for the formats run locally (all of them with no local run).

Decoding: a run whose predictions were not decoded greedily is named ``<model>@<decoding>`` (e.g.
``grid__none@frozen_ood``; :func:`lakeshift.scoring.decoding_label`), so one model decoded two ways gives two
rows, never one pooled row; ``report.html``'s summary lists the decodings seen. Repeated samples
(``lakeshift predict --samples``) add pass@k and maj@k to the summary table and the long-form CSVs.
"""

from lakeshift.report.build import ReportResult, RunInput, build_report, fmt_summary, terminal_summary
from lakeshift.report.figures import (
    BAND_MAX_LINES,
    BAND_MIN_N,
    BASELINE_STYLES,
    COT_COLORS,
    POINT_MIN_N,
    REFERENCE_STYLE,
    SIZE_PANELS,
    VARIANT_MARKERS,
    VERDICT_COLORS,
    fig_accuracy_vs_dinf,
    fig_accuracy_vs_length,
    fig_accuracy_vs_size,
    fig_verdicts,
    plot_accuracy_vs_dinf,
    plot_accuracy_vs_length,
    plot_accuracy_vs_size,
    plot_verdicts,
)
from lakeshift.report.tables import (
    COT_NAMES,
    EMBED_SPLIT,
    INPUT_NAMES,
    LABELS,
    TABLE1_GROUPS,
    TABLE3_GROUPS,
    Table,
    faithfulness_table,
    iter_unique,
    ordered_runs,
    run_labels,
    split_order,
    split_table,
    table1,
    table3,
    table5,
    table10,
    verdict_table,
)

__all__ = [
    "BAND_MAX_LINES",
    "BAND_MIN_N",
    "BASELINE_STYLES",
    "COT_COLORS",
    "COT_NAMES",
    "EMBED_SPLIT",
    "INPUT_NAMES",
    "LABELS",
    "POINT_MIN_N",
    "REFERENCE_STYLE",
    "SIZE_PANELS",
    "TABLE1_GROUPS",
    "TABLE3_GROUPS",
    "VARIANT_MARKERS",
    "VERDICT_COLORS",
    "ReportResult",
    "RunInput",
    "Table",
    "build_report",
    "faithfulness_table",
    "fig_accuracy_vs_dinf",
    "fig_accuracy_vs_length",
    "fig_accuracy_vs_size",
    "fig_verdicts",
    "fmt_summary",
    "iter_unique",
    "ordered_runs",
    "plot_accuracy_vs_dinf",
    "plot_accuracy_vs_length",
    "plot_accuracy_vs_size",
    "plot_verdicts",
    "run_labels",
    "split_order",
    "split_table",
    "table1",
    "table3",
    "table5",
    "table10",
    "terminal_summary",
    "verdict_table",
]
