"""The paper's published numbers (``--reference paper``): the data file against a second transcription typed
separately below, and against the numbers parsed from the paper's text when ``../shared/paper/paper.txt``
is there; then the rows as ``lakeshift report`` writes them (Markdown, CSV, LaTeX)."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest
from conftest import REPO
from suite_fixtures import fake_study

from lakeshift.cli import main
from lakeshift.report.references import KNOWN, load

LABEL = "paper: Qwen2.5-VL-7B"

# Second transcription, typed from the paper again (not copied from paper.json), in the paper's own row
# layout: input, CoT, then ID 3-6 Avg | OOD random d_inf 7-10 Avg | OOD d_inf >= 6 7-10 Avg.
TABLE1 = """
image zero-shot  .14 .05 .03 .02 .06 | .02 .02 .01 .01 .01 | .01 .00 .00 .00 .00
image none       .89 .84 .72 .52 .74 | .51 .37 .23 .12 .31 | .02 .00 .00 .00 .01
image desc       .95 .87 .76 .62 .80 | .47 .35 .21 .14 .29 | .07 .03 .00 .01 .03
desc zero-shot   .41 .25 .23 .13 .26 | .12 .14 .10 .10 .12 | .01 .06 .04 .03 .03
desc none        .92 .91 .86 .64 .83 | .65 .55 .49 .41 .52 | .19 .08 .04 .02 .08
desc desc        .94 .92 .90 .67 .86 | .67 .63 .55 .46 .58 | .07 .02 .01 .01 .02
desc grid        .96 .89 .90 .70 .86 | .59 .47 .28 .12 .36 | .35 .17 .06 .01 .15
desc table       .99 .90 .93 .69 .88 | .64 .45 .33 .16 .40 | .28 .16 .07 .02 .13
desc grid+desc   .98 .93 .93 .69 .88 | .70 .51 .41 .26 .47 | .44 .28 .11 .07 .23
desc table+desc  .93 .93 .93 .71 .88 | .66 .52 .40 .32 .47 | .31 .21 .12 .09 .18
table zero-shot  .43 .24 .20 .08 .24 | .09 .08 .04 .04 .06 | .04 .03 .01 .01 .02
table none       .94 .89 .83 .59 .81 | .56 .41 .35 .27 .40 | .02 .01 .00 .00 .01
table desc       .96 .94 .83 .69 .85 | .57 .39 .34 .23 .39 | .04 .03 .00 .00 .02
table table      .99 .90 .93 .72 .89 | .73 .51 .35 .19 .45 | .38 .24 .07 .03 .18
table table+desc .97 .93 .95 .78 .91 | .81 .57 .41 .27 .51 | .48 .32 .12 .06 .25
grid zero-shot   .14 .13 .06 .03 .09 | .02 .01 .00 .02 .01 | .00 .01 .01 .01 .01
grid none        .95 .89 .83 .62 .82 | .55 .39 .34 .26 .38 | .04 .02 .00 .00 .01
grid desc        .94 .91 .86 .62 .83 | .53 .41 .35 .25 .39 | .10 .07 .01 .01 .05
grid grid        .98 .92 .97 .71 .90 | .74 .51 .39 .24 .47 | .43 .22 .07 .04 .19
grid grid+desc   .99 .93 .92 .79 .91 | .83 .68 .49 .35 .59 | .65 .55 .23 .20 .41
"""
# Table 3 (10x10 embedded): d_inf 2-5 Avg | d_inf 6-9 Avg.
TABLE3 = """
image none      .70 .46 .21 .03 .35 | .03 .01 .00 .00 .01
image desc      .69 .41 .16 .06 .33 | .01 .00 .00 .00 .00
desc none       .82 .75 .57 .34 .62 | .01 .01 .00 .00 .01
desc desc       .89 .80 .68 .41 .69 | .00 .00 .00 .00 .00
desc grid       .82 .76 .67 .49 .69 | .34 .20 .10 .04 .17
desc grid+desc  .82 .73 .61 .47 .66 | .36 .25 .17 .14 .23
table none      .88 .77 .54 .16 .59 | .01 .00 .00 .00 .00
table desc      .89 .76 .47 .09 .55 | .00 .01 .01 .00 .00
grid none       .86 .81 .55 .12 .58 | .00 .01 .00 .00 .00
grid desc       .84 .78 .45 .10 .54 | .00 .01 .00 .00 .00
grid grid       .89 .84 .77 .62 .78 | .46 .34 .17 .08 .26
grid grid+desc  .86 .84 .74 .61 .76 | .50 .33 .21 .10 .29
"""
# Table 5 (mean tokens of correct outputs): ID | OOD random d_inf | OOD d_inf >= 6.
TABLE5 = """
image zero-shot   328  562  564
image none         10   11   19
image desc         65   69  192
desc zero-shot    383  732  870
desc none          10   13   20
desc desc          69   89  141
desc grid         160  586 1317
desc table        437 1311 2990
desc grid+desc    213  771 1615
desc table+desc   471 1657 3123
table zero-shot   463  893  937
table none         10   11   19
table desc         69   75  180
table table       428 1517 2925
table table+desc  490 1909 3904
grid zero-shot    785 1387 1338
grid none          10   11   19
grid desc          67   77  157
grid grid         158  619 1194
grid grid+desc    220  831 1459
"""
T1_SPLITS = (("id-test", (3, 4, 5, 6)), ("ood-size", (7, 8, 9, 10)), ("ood-dist", (7, 8, 9, 10)))
T3_GROUPS = (("ID", (2, 3, 4, 5)), ("OOD", (6, 7, 8, 9)))
T5_SPLITS = ("id-test", "ood-size", "ood-dist")


def _rows(text: str) -> list[tuple[str, str, list[list[float]]]]:
    out = []
    for line in text.strip().splitlines():
        inp, cot, rest = line.split(None, 2)
        out.append((inp, cot, [[float(x) for x in part.split()] for part in rest.split("|")]))
    return out


def flatten(t1: list, t3: list, t5: list) -> dict[str, float]:
    """One ``{"table1 grid/none id-test 3": 0.95, ...}`` dict from the three transcriptions."""
    flat: dict[str, float] = {}
    for inp, cot, groups in t1:
        for (split, sizes), vals in zip(T1_SPLITS, groups, strict=True):
            for col, v in zip([*map(str, sizes), "Avg"], vals, strict=True):
                flat[f"table1 {inp}/{cot} {split} {col}"] = v
    for inp, cot, groups in t3:
        for (group, ds), vals in zip(T3_GROUPS, groups, strict=True):
            for col, v in zip([*map(str, ds), "Avg"], vals, strict=True):
                flat[f"table3 {inp}/{cot} {group} {col}"] = v
    for inp, cot, (vals,) in t5:
        for split, v in zip(T5_SPLITS, vals, strict=True):
            flat[f"table5 {inp}/{cot} {split}"] = v
    return flat


def from_reference() -> dict[str, float]:
    ref = load("paper")
    flat: dict[str, float] = {}
    for (inp, cot, split, size), v in ref.acc_by_size.items():
        flat[f"table1 {inp}/{cot} {split} {size}"] = v
    for (inp, cot, split), v in ref.avg_by_split.items():
        flat[f"table1 {inp}/{cot} {split} Avg"] = v
    for (inp, cot, d), v in ref.acc_by_dinf.items():
        flat[f"table3 {inp}/{cot} {'ID' if d <= 5 else 'OOD'} {d}"] = v
    for (inp, cot, group), v in ref.avg_by_dinf_group.items():
        flat[f"table3 {inp}/{cot} {group} Avg"] = v
    for (inp, cot, split), v in ref.length_by_split.items():
        flat[f"table5 {inp}/{cot} {split}"] = v
    return flat


def test_data_file_equals_the_second_transcription() -> None:
    expected = flatten(_rows(TABLE1), _rows(TABLE3), _rows(TABLE5))
    assert len(expected) == 20 * 15 + 12 * 10 + 20 * 3
    got = from_reference()
    assert sorted(got) == sorted(expected)
    wrong = {k: (got[k], v) for k, v in expected.items() if got[k] != v}
    assert not wrong
    ref = load("paper")
    assert ref.label == LABEL and "Out-of-Distribution Generalization" in ref.citation
    assert ref.formats("table1") == [(i, c) for i, c, _ in _rows(TABLE1)]  # the paper's row order
    assert sum(c == "zero-shot" for _, c in ref.formats("table1")) == 4


# ---- the numbers parsed from the paper's text ------------------------------------------------------
INPUTS = {"Image": "image", "Descr.": "desc", "Table": "table", "Grid": "grid"}
COTS = {
    "zero-shot": "zero-shot",
    "no CoT": "none",
    "Descr.": "desc",
    "Grid": "grid",
    "Table": "table",
    "Grid + Descr.": "grid+desc",
    "Table + Descr.": "table+desc",
}


def paper_text() -> str:
    env = os.environ.get("LAKESHIFT_REFERENCE_DATA")
    path = (Path(env).parents[1] if env else REPO.parent / "shared") / "paper" / "paper.txt"
    if not path.is_file():
        pytest.skip(f"the paper's text is not at {path}")
    return path.read_text(encoding="utf-8")


def parse_table(text: str, caption: str) -> list[tuple[str, str, list[float]]]:
    """Rows ``(input, cot, numbers)`` of the tab-separated table after ``caption``; a blank input cell is
    the input of the rows around it (the paper's multirow label: the first row takes the next label)."""
    start = text.index(caption)
    lines = text[start:].splitlines()[1:]
    rows: list[tuple[str, str, list[float]]] = []
    pending: list[tuple[str, list[float]]] = []
    current = ""
    for line in lines:
        cells = line.split("\t")
        if len(cells) < 3 or cells[1] not in COTS:
            if (rows or pending) and not line.strip():
                break
            continue
        inp, cot, nums = cells[0].strip(), cells[1].strip(), [float(x) for x in cells[2:]]
        if inp:
            current = INPUTS[inp]
            rows += [(current, c, n) for c, n in pending]
            pending = []
        if not current:
            pending.append((COTS[cot], nums))
        else:
            rows.append((current, COTS[cot], nums))
    return rows


def test_data_file_equals_the_numbers_in_the_papers_text() -> None:
    text = paper_text()
    t1 = parse_table(text, "Table 1: Influence of data format")
    t3 = parse_table(text, "Table 3: Generalization w.r.t. start-end distance")
    t5 = parse_table(text, "Table 5: Output length.")
    assert (len(t1), len(t3), len(t5)) == (20, 12, 20)
    assert all(len(n) == 15 for *_, n in t1) and all(len(n) == 10 for *_, n in t3)
    expected = flatten(
        [(i, c, [n[0:5], n[5:10], n[10:15]]) for i, c, n in t1],
        [(i, c, [n[0:5], n[5:10]]) for i, c, n in t3],
        [(i, c, [n]) for i, c, n in t5],
    )
    got = from_reference()
    assert sorted(got) == sorted(expected)
    assert {k: (got[k], v) for k, v in expected.items() if got[k] != v} == {}


# ---- the rows in lakeshift report's tables ---------------------------------------------------------
def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_report_with_no_local_runs_writes_the_papers_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--reference", "paper"]) == 0
    capsys.readouterr()
    t1 = _csv(out / "table1.csv")
    assert len(t1) == 20 and {r["Model"] for r in t1} == {LABEL}
    expected = flatten(_rows(TABLE1), _rows(TABLE3), _rows(TABLE5))
    names = {v: k for k, v in {"image": "Image", "desc": "Descr.", "table": "Table", "grid": "Grid"}.items()}
    cots = {"zero-shot": "zero-shot", "no CoT": "none", "Descr.": "desc", "Grid": "grid", "Table": "table"}
    cots |= {"Grid + Descr.": "grid+desc", "Table + Descr.": "table+desc"}
    short = {"id-test": "ID", "ood-size": "OOD", "ood-dist": "OOD d>=6"}
    for row in t1:
        inp, cot = names[row["Input format"]], cots[row["CoT format"]]
        for split, sizes in T1_SPLITS:
            for col in [*map(str, sizes), "Avg"]:
                head = f"{short[split]} {col}x{col}" if col != "Avg" else f"{short[split]} Avg"
                assert float(row[head]) == expected[f"table1 {inp}/{cot} {split} {col}"], (row, head)
            assert row[f"{short[split]} Pooled"] == ""  # not reported by the paper
    t3 = _csv(out / "table3.csv")
    assert len(t3) == 12 and t3[-1]["OOD Avg"] == "0.29" and t3[-1]["OOD Pooled"] == ""
    t5 = _csv(out / "table5.csv")
    assert len(t5) == 20 and float(t5[-1]["OOD maps (d_inf >= 6)"]) == 1459
    md = (out / "table1.md").read_text(encoding="utf-8")
    assert md.count(f"| {LABEL} |") == 20 and "| Grid | Grid + Descr. | paper: Qwen2.5-VL-7B | 0.99 |" in md
    tex = (out / "table3.tex").read_text(encoding="utf-8")
    assert tex.count(f"& {LABEL} &") == 12 and "0.50 & 0.33 & 0.21 & 0.10 & 0.29 & -" in tex
    assert "published values" in md and "published values" in tex
    assert (out / "fig_accuracy_vs_size.png").stat().st_size > 10_000


def _write_named(runs: Path, data: Path, name: str) -> None:
    """Rename every local run of a fake study to ``name``."""
    for p in runs.rglob("*.jsonl"):
        rows = [json.loads(x) for x in p.read_text().splitlines()]
        p.write_text("".join(json.dumps({**r, "model": name}) + "\n" for r in rows))


@pytest.mark.slow
def test_local_rows_before_the_papers_and_no_label_collision(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data, runs = fake_study(tmp_path, 2, per_size=3)
    _write_named(runs, data, LABEL)  # a local run that calls itself the paper's label
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--data", str(data), "--out", str(out), "--reference", "paper"]) == 0
    err = capsys.readouterr().err
    assert "the reference rows are 'paper: Qwen2.5-VL-7B (published)'" in err
    t1 = _csv(out / "table1.csv")
    local = [r for r in t1 if r["Model"] == LABEL]
    published = [r for r in t1 if r["Model"] == f"{LABEL} (published)"]
    assert len(published) == 20
    # The local rows are scored (Pooled filled), the published ones keep the paper's values.
    assert local and all(r["ID Pooled"] != "" for r in local) and all(r["ID Pooled"] == "" for r in published)
    gn = next(r for r in published if r["Input format"] == "Grid" and r["CoT format"] == "no CoT")
    assert gn["ID 3x3"] == "0.95"
    # Set apart: every published row comes after every local row.
    assert max(t1.index(r) for r in local) < min(t1.index(r) for r in published)


def test_unknown_reference_is_one_line_listing_the_known(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    assert main(["report", str(runs), "--out", str(tmp_path / "r"), "--reference", "papr"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "unknown reference" in err and all(name in err for name in KNOWN)
    assert not (tmp_path / "r").exists()


def test_no_runs_without_reference_is_still_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    assert main(["report", str(runs), "--out", str(tmp_path / "r")]) == 2
    assert re.search(r"no predictions files", capsys.readouterr().err)
