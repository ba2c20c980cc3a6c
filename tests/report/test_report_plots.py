"""The report's figures stay readable at 12-20 runs: small multiples, legends outside every axes, Wilson
bands only where informative, grey baselines, the paper's curves dashed with ``--reference paper``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_fixtures import fake_study, run_inputs

from lakeshift import report
from lakeshift.report import analysis, build, figures
from lakeshift.report.references import load


@pytest.fixture(scope="module")
def cells20(tmp_path_factory: pytest.TempPathFactory) -> tuple[build._Cells, list, dict]:
    """20 fake runs, scored, with the baselines: the groupings the figures are drawn from."""
    root = tmp_path_factory.mktemp("plots20")
    data, runs = fake_study(root, 20, per_size=8)
    jobs, _ = build._scoring_jobs(run_inputs(data, runs), False, ("oracle", "greedy", "random"))
    records = []
    for _name, _mp, maps, pf, defaults in jobs:
        records += build.score_predictions(maps, pf, check_trace=False, defaults=defaults)
    keys = sorted({analysis.run_key(r) for r in records}, key=analysis.run_sort_key)
    train = analysis.training_lengths(json.loads(x) for x in (data / "id-train" / "maps.jsonl").open())
    return build._Cells.of(records, keys), keys, train


def _boxes(fig) -> tuple[list, list]:
    """Window extents of every axes and of every legend (axes legends and figure legends)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax.get_window_extent(renderer) for ax in fig.axes]
    legends = [ax.get_legend().get_window_extent(renderer) for ax in fig.axes if ax.get_legend()]
    legends += [lg.get_window_extent(renderer) for lg in fig.legends]
    return axes, legends


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


def _figures(cells: build._Cells, keys: list, train: dict, ref=None) -> dict:
    return {
        "length": report.fig_accuracy_vs_length(cells.by_length, keys, train),
        "dinf": report.fig_accuracy_vs_dinf(cells.by_split_dinf, keys, ref),
        "size": report.fig_accuracy_vs_size(cells.by_split_size, keys, ref),
        "verdicts": report.fig_verdicts(cells.by_split, keys),
    }


@pytest.mark.slow
@pytest.mark.parametrize("with_reference", [False, True])
def test_legends_lie_outside_every_axes_and_each_other(cells20: tuple, with_reference: bool) -> None:
    cells, keys, train = cells20
    plt = figures._plt()
    for name, fig in _figures(cells, keys, train, load("paper") if with_reference else None).items():
        axes, legends = _boxes(fig)
        assert legends, name
        for lg in legends:
            assert not any(_overlap(lg, ax) for ax in axes), name
        for i, a in enumerate(legends):
            assert not any(_overlap(a, b) for b in legends[i + 1 :]), name
        plt.close(fig)


def test_small_multiples_one_row_per_input_with_shared_axes(cells20: tuple) -> None:
    cells, keys, train = cells20
    fig = report.fig_accuracy_vs_length(cells.by_length, keys, train)
    panels = fig.axes[1:]  # under the histogram
    assert [ax.get_title() for ax in panels] == ["Descr. input", "Table input", "Grid input"]
    assert len({ax.get_ylim() for ax in panels}) == 1 and len({ax.get_xlim() for ax in fig.axes}) == 1
    # Each panel holds only its input's runs (plus 3 baselines): no panel shows all 20.
    # (an error bar's caps are lines too, marked "_")
    model_lines = [
        [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", None, "", "_")] for ax in panels
    ]
    assert [len(x) for x in model_lines] == [4, 8, 8]
    figures._plt().close(fig)


def test_a_variant_keeps_its_marker_in_every_panel(cells20: tuple) -> None:
    """Two arms (``epochs/...``, ``compute/...``): a reader matches an arm across panels by its marker."""
    cells, keys, train = cells20
    fig = report.fig_accuracy_vs_length(cells.by_length, keys, train)
    markers: dict[str, set] = {}
    for ax in fig.axes[1:]:
        for ln in ax.get_lines():
            label = ln.get_label()
            if "(" in label and not label.endswith("(baseline)"):
                markers.setdefault(label.split("(")[1].rstrip(")"), set()).add(ln.get_marker())
    assert set(markers) == {"epochs", "compute"}
    assert all(len(m) == 1 for m in markers.values()) and markers["epochs"] != markers["compute"]
    figures._plt().close(fig)


def test_baselines_grey_bands_only_when_few_lines_and_large_n(cells20: tuple) -> None:
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgb

    cells, keys, train = cells20
    fig = report.fig_accuracy_vs_length(cells.by_length, keys, train)
    for ax in fig.axes[1:]:
        greys = [ln for ln in ax.get_lines() if ln.get_label().endswith("(baseline)")]
        assert len(greys) == 3
        assert all(len(set(to_rgb(ln.get_color()))) == 1 for ln in greys)  # r == g == b
        # 4-8 model lines per panel: more than BAND_MAX_LINES, so no band at all.
        assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
    figures._plt().close(fig)
    # Two runs only: bands, but only over the points with at least BAND_MIN_N maps (lengths 1-4 here).
    two = [("a", "grid", "none"), ("b", "grid", "grid")]
    ns = {1: 40, 2: 40, 3: 30, 4: 30, 5: 29, 6: 10}
    by_length = {(k, x): analysis.Cell(n=n, k=n // 2) for k in two for x, n in ns.items()}
    few = report.fig_accuracy_vs_length(by_length, two, train)
    bands = [c for c in few.axes[1].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2
    for band in bands:
        xs = {float(x) for p in band.get_paths() for x, _ in p.vertices}
        assert xs == {1.0, 2.0, 3.0, 4.0}
    figures._plt().close(few)
    four = report.fig_accuracy_vs_length(
        by_length | {(("c", "grid", "desc"), 1): analysis.Cell(50, 9)},
        [*two, ("c", "grid", "desc"), ("d", "grid", "grid+desc")],
        train,
    )
    assert not [c for c in four.axes[1].collections if isinstance(c, PolyCollection)]
    figures._plt().close(four)


def test_reference_curves_dashed_for_the_formats_run(cells20: tuple) -> None:
    cells, keys, _ = cells20
    ref = load("paper")
    fig = report.fig_accuracy_vs_size(cells.by_split_size, keys, ref)
    dashed = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    labels = {ln.get_label() for ln in dashed}
    # The local pairings the paper also ran (grid/none, desc/grid, ...), none it did not (table/grid).
    assert "Grid + Descr. (paper: Qwen2.5-VL-7B)" in labels and "no CoT (paper: Qwen2.5-VL-7B)" in labels
    assert all(ln.get_label().endswith("(paper: Qwen2.5-VL-7B)") for ln in dashed)
    grid_row = next(ax for ax in fig.axes if ax.get_ylabel().startswith("Grid input"))
    gd = next(ln for ln in grid_row.get_lines() if ln.get_label() == "Grid + Descr. (paper: Qwen2.5-VL-7B)")
    assert list(gd.get_xdata()) == [3, 4, 5, 6, 7, 8, 9, 10]
    assert list(gd.get_ydata()) == [0.99, 0.93, 0.92, 0.79, 0.83, 0.68, 0.49, 0.35]
    table_row = next(ax for ax in fig.axes if ax.get_ylabel().startswith("Table input"))
    assert not [ln for ln in table_row.get_lines() if ln.get_label() == "Grid (paper: Qwen2.5-VL-7B)"]
    figures._plt().close(fig)
    fig = report.fig_accuracy_vs_dinf(cells.by_split_dinf, keys, ref)
    cols = [ax.get_title() for ax in fig.axes if ax.get_title()]
    embed = cols.index("embed10-test")
    dashed_cols = {
        i % len(cols)
        for i, ax in enumerate(fig.axes)
        if any(ln.get_linestyle() == "--" for ln in ax.get_lines())
    }
    assert dashed_cols == {embed}
    figures._plt().close(fig)


def test_reference_only_figures(tmp_path: Path) -> None:
    ref = load("paper")
    fig = report.fig_accuracy_vs_size({}, [], ref)
    rows = [ax.get_ylabel().split("\n")[0] for ax in fig.axes[::2]]
    assert rows == ["Image input", "Descr. input", "Table input", "Grid input"]
    assert sum(ln.get_linestyle() == "--" for ax in fig.axes for ln in ax.get_lines()) == 2 * 20
    figures._plt().close(fig)
