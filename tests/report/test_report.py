"""Report tables against an independent recount on a small fixture; files, formats and plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from suite_fixtures import make_suite, noisy_predictions

from lakeshift.env import FrozenLakeMap
from lakeshift.report import RunInput, build_report, terminal_summary


def recount(data: Path, runs: Path, folder: str, split: str, size: int) -> float:
    """Accuracy computed without lakeshift.scoring: env.simulate on the boxed words, missing = wrong."""
    preds = {}
    for line in (runs / folder / f"{split}.jsonl").read_text().splitlines():
        r = json.loads(line)
        preds[r["id"]] = r["output"]
    ok = n = 0
    for line in (data / split / "maps.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["size"] != size:
            continue
        n += 1
        out = preds.get(rec["id"], "")
        if "\\boxed{" not in out:
            continue
        content = out[out.rindex("\\boxed{") + 7 : out.rindex("}")]
        moves = [w.strip() for w in content.split(",") if w.strip()]
        ok += FrozenLakeMap.from_rows(rec["rows"]).simulate(moves).success
    return ok / n


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("rep")
    data = make_suite(root)
    runs = root / "runs"
    noisy_predictions(data, runs, "grid__none", 1)
    noisy_predictions(data, runs, "grid__grid+desc", 2, cot="grid+desc")
    inputs = [
        RunInput(
            p,
            data / p.stem / "maps.jsonl",
            {"model": p.parent.name, "input_format": "grid", "cot_format": p.parent.name.split("__")[1]},
            p.parent.name + p.stem,
        )
        for p in sorted(runs.rglob("*.jsonl"))
    ]
    out = root / "out"
    build_report(inputs, out, train_maps=data / "id-train" / "maps.jsonl", progress=False, n_examples=60)
    return data, runs, out


def _csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_table1_equals_independent_recount(report: tuple[Path, Path, Path]) -> None:
    data, runs, out = report
    rows = {r["Model"]: r for r in _csv(out / "table1.csv")}
    assert {"baseline-oracle", "baseline-greedy", "baseline-random", "grid__none", "grid__grid+desc"} <= set(
        rows
    )
    for folder in ("grid__none", "grid__grid+desc"):
        row = rows[folder]
        for short, split, sizes in (
            ("ID", "id-test", (3, 4, 5, 6)),
            ("OOD", "ood-size", (7, 8)),
            ("OOD d>=6", "ood-dist", (7, 8)),
        ):
            accs = [recount(data, runs, folder, split, s) for s in sizes]
            for s, acc in zip(sizes, accs, strict=True):
                assert float(row[f"{short} {s}x{s}"]) == pytest.approx(acc, abs=1e-4)
            assert float(row[f"{short} Avg"]) == pytest.approx(sum(accs) / len(accs), abs=1e-4)
    for key, value in rows["baseline-oracle"].items():
        if key not in ("Input format", "CoT format", "Model") and value:
            assert float(value) == 1.0


def test_table3_and_long_csvs(report: tuple[Path, Path, Path]) -> None:
    data, runs, out = report
    t3 = {r["Model"]: r for r in _csv(out / "table3.csv")}
    maps = [json.loads(x) for x in (data / "embed10-test" / "maps.jsonl").read_text().splitlines()]
    preds = {
        json.loads(x)["id"]: json.loads(x)["output"]
        for x in (runs / "grid__none" / "embed10-test.jsonl").read_text().splitlines()
    }
    for d in sorted({m["d_inf"] for m in maps}):
        group = "ID" if d <= 5 else "OOD"
        sel = [m for m in maps if m["d_inf"] == d]
        ok = 0
        for m in sel:
            out_text = preds.get(m["id"], "")
            if "\\boxed{" in out_text:
                content = out_text[out_text.rindex("\\boxed{") + 7 : out_text.rindex("}")]
                moves = [w.strip() for w in content.split(",") if w.strip()]
                ok += FrozenLakeMap.from_rows(m["rows"]).simulate(moves).success
        assert float(t3["grid__none"][f"{group} {d}"]) == pytest.approx(ok / len(sel), abs=1e-4)
    by_size = _csv(out / "by_size.csv")
    row = next(
        r for r in by_size if r["model"] == "grid__none" and r["split"] == "id-test" and r["size"] == "3"
    )
    n, k = int(row["n"]), int(row["k"])
    assert float(row["lo"]) <= k / n <= float(row["hi"])
    assert int(row["missing"]) + int(row["success"]) <= n
    assert {"optimal_length"} <= set(_csv(out / "by_length.csv")[0])


def test_all_outputs_written(report: tuple[Path, Path, Path]) -> None:
    _, _, out = report
    for stem in ("table1", "table3", "table5", "table10", "verdicts", "faithfulness"):
        for ext in ("md", "csv", "tex"):
            assert (out / f"{stem}.{ext}").stat().st_size > 0, (stem, ext)
    for fig in ("fig_accuracy_vs_length", "fig_accuracy_vs_dinf", "fig_accuracy_vs_size", "fig_verdicts"):
        assert (out / f"{fig}.png").read_bytes()[:4] == b"\x89PNG"
        assert "<svg" in (out / f"{fig}.svg").read_text()[:2000]
    tex = (out / "table1.tex").read_text()
    assert "\\begin{tabular}" in tex and "\\multicolumn" in tex and "$d_\\infty$" in tex
    md = (out / "table5.md").read_text()
    assert "tokens" in md and "| Grid | Grid + Descr. |" in md
    html = (out / "report.html").read_text()
    assert "http://" not in html and "https://" not in html  # self-contained
    assert "data:image/png;base64," in html
    scored = list((out / "scored").glob("*.jsonl"))
    assert len(scored) == 8 + 4 * 3
    rec = json.loads(scored[0].read_text().splitlines()[0])
    assert {"id", "success", "verdict", "moves"} <= set(rec)


def test_verdict_table_partial_credit_equals_the_scored_records(report: tuple[Path, Path, Path]) -> None:
    _, _, out = report
    rows = {(r["Model"], r["Split"]): r for r in _csv(out / "verdicts.csv")}
    for path in (out / "scored").glob("grid__*.jsonl"):
        scored = [json.loads(line) for line in path.read_text().splitlines()]
        row = rows[(scored[0]["model"], scored[0]["split"])]
        n = len(scored)
        assert float(row["first move"]) == pytest.approx(
            sum(r["first_move_optimal"] for r in scored) / n, abs=1e-4
        )
        assert float(row["progress"]) == pytest.approx(
            sum(max(0.0, r["progress"]) for r in scored) / n, abs=1e-4
        )
    oracle = rows[("baseline-oracle", "id-test")]
    assert float(oracle["first move"]) == 1.0 and float(oracle["progress"]) == 1.0


def test_the_terminal_summary_puts_every_split_of_every_run_within_the_width(tmp_path: Path) -> None:
    """Splits that do not fit go into further blocks, each with the model column; a run without a split
    shows '-' there."""
    splits = ["id-test", "ood-size", "ood-dist", "val-id", "val-ood"]
    rows = [
        {
            "model": model,
            "input_format": "grid",
            "cot_format": "none",
            "split": split,
            "n": 200,
            "acc": 0.5 + i / 100,
            "lo": 0.4,
            "hi": 0.6 + j / 100,
        }
        for i, model in enumerate(["baseline-greedy", "grid__coords@player30-maj8@frozen_ood"])
        for j, split in enumerate(splits)
        if (model, split) != ("baseline-greedy", "val-ood")
    ]
    with (tmp_path / "by_split.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for width, blocks in ((200, 1), (80, 3), (40, 5)):
        lines = terminal_summary(tmp_path, width).splitlines()[1:]
        headers = [line.split()[1:] for line in lines if line.startswith("model ")]
        assert len(headers) == blocks and [s for h in headers for s in h] == splits
        if width >= 80:
            assert all(len(line) <= width for line in lines)
        table = " ".join(lines)
        assert "0.51 (0.40-0.64)" in table and "0.50 (0.40-0.60)" in table
        greedy = [line.split()[1:] for line in lines if line.startswith("baseline-greedy ")]
        assert greedy[-1][-1] == "-"
    assert "maj@k" not in terminal_summary(tmp_path)
    rows[0]["maj_at_k"] = 0.55  # a run with repeated samples: its first sample is what the table shows
    with (tmp_path / "by_split.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert terminal_summary(tmp_path).endswith("first sample; pass@k and maj@k: summary.md.")
    assert terminal_summary(tmp_path / "absent") == ""


def test_the_terminal_summary_keeps_runs_of_one_model_name_apart(tmp_path: Path) -> None:
    """One model name scored in two formats is two runs: two rows, each naming its formats."""
    rows = [
        {
            "model": "m",
            "input_format": inp,
            "cot_format": "none",
            "split": "id-test",
            "n": 100,
            "acc": acc,
            "lo": 0.1,
            "hi": 0.9,
        }
        for inp, acc in (("grid", 0.25), ("table", 0.75))
    ]
    with (tmp_path / "by_split.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    rows_shown = {
        line.split("  ")[0]: line.split()[-2] for line in terminal_summary(tmp_path).splitlines()[3:]
    }
    assert rows_shown == {"m (grid / none)": "0.25", "m (table / none)": "0.75"}


def test_no_runs_is_an_error(tmp_path: Path) -> None:
    from lakeshift.errors import LakeshiftError

    with pytest.raises(LakeshiftError, match="no predictions"):
        build_report([], tmp_path)
