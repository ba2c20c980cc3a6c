"""End to end through the CLI: generate -> stats -> show -> export on a small suite; bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakeshift import formats
from lakeshift.cli import main
from lakeshift.data import records
from lakeshift.data.maps import load_maps, map_from_record

SUITE = """\
splits:
  - name: small-train
    train: true
    groups:
      - {size: 3, count: 6, hole_prob: 0.2}
      - {size: 4, count: 6, hole_prob: 0.2}
  - name: small-test
    exclude: [small-train]
    groups:
      - {size: 7, count: 4, hole_prob: 0.1, d_inf_min: 6}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    (root / "suite.yaml").write_text(SUITE)
    out = root / "data"
    assert (
        main(
            [
                "generate",
                "--suite",
                str(root / "suite.yaml"),
                "--out",
                str(out),
                "--workers",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_generate_writes_the_suite_and_second_run_is_a_noop(suite: Path, capsys) -> None:
    assert sorted(p.name for p in suite.iterdir()) == ["small-test", "small-train", "suite.json"]
    assert len(load_maps(suite / "small-train")) == 12
    before = {p: p.stat().st_mtime_ns for p in suite.rglob("*")}
    code, out, err = run(capsys, "generate", "--suite", str(suite.parent / "suite.yaml"), "--out", str(suite))
    assert code == 0 and "up to date" in err and "nothing to do" in err and out == ""
    assert {p: p.stat().st_mtime_ns for p in suite.rglob("*")} == before


def test_stats(suite: Path, capsys) -> None:
    code, out, _ = run(capsys, "stats", str(suite), "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["split"], r["size"], r["count"]) for r in rows] == [
        ("small-train", "3", 6),
        ("small-train", "4", 6),
        ("small-train", "all", 12),
        ("small-test", "7", 4),
    ]
    test_maps = load_maps(suite / "small-test")
    assert rows[3]["mean_d_inf"] == sum(r["d_inf"] for r in test_maps) / 4 == 6.0
    code, out, _ = run(capsys, "stats", str(suite / "small-test"))
    assert code == 0 and "mean d_inf" in out.splitlines()[0] and "small-test" in out


def test_show_prints_exactly_the_text(suite: Path, capsys) -> None:
    split = suite / "small-test"
    rec = load_maps(split)[2]
    m = map_from_record(rec)
    for fmt in ("desc", "table", "grid"):
        code, out, err = run(capsys, "show", str(split), "--id", rec["id"], "--format", fmt)
        assert code == 0 and err == ""
        assert out == formats.file_text(m, fmt)
    code, out, _ = run(
        capsys, "show", str(split), "--id", rec["id"], "--format", "table", "--style", "aligned"
    )
    assert out == formats.render(m, "table", style="aligned") + "\n"
    code, out, _ = run(
        capsys, "show", str(split), "--id", rec["id"], "--format", "grid", "--cot", "grid+desc"
    )
    expected = json.loads((split / "sft" / "grid__grid+desc.jsonl").read_text().splitlines()[2])
    assert out == expected["messages"][2]["content"]
    assert out.endswith("\\boxed{" + ", ".join(rec["optimal_path"]) + "}")
    code, out, _ = run(capsys, "show", str(split), "--id", rec["id"], "--format", "desc", "--prompt")
    assert out == records.prompt_messages(rec, "desc", None, "test")["messages"][1]["content"]
    code, out, _ = run(capsys, "show", str(split), "--id", rec["id"], "--format", "image")
    assert out == f"{split / 'images' / (rec['id'] + '.png')}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "{split}", "--id", "nope", "--format", "grid"],
        ["show", "{split}", "--id", "small-test-00000", "--format", "png"],
        ["show", "{split}", "--id", "small-test-00000", "--format", "grid", "--cot", "pictures"],
        ["show", "{root}/missing", "--id", "x", "--format", "grid"],
        ["generate", "--suite", "nope", "--out", "{root}/x"],
        ["generate", "--out", "{root}/x", "--sizes", "5", "--count", "3", "--d-inf", "6:"],
        ["generate", "--out", "{root}/x", "--sizes", "5", "--count", "3", "--inputs", "desc,png"],
        ["generate", "--suite", "paper", "--out", "{root}/x", "--id-source", "{root}/no-such-dir"],
        ["generate", "--suite", "{root}/suite.yaml", "--out", "{split}/..", "--seed", "9"],
        ["stats", "{root}/missing"],
        ["export", "{split}", "--format", "csv", "--out", "{root}/x.csv"],
        ["export", "{split}", "--sft", "grid__pictures", "--out", "{root}/x.parquet"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(suite: Path, capsys, argv: list[str]) -> None:
    argv = [a.format(split=suite / "small-test", root=suite.parent) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"lakeshift {argv[0]}: error: "), err
    assert not (suite.parent / "x").exists()


def test_impossible_constraint_message(suite: Path, capsys) -> None:
    code, _, err = run(
        capsys, "generate", "--out", str(suite.parent / "y"), "--sizes", "5", "--count", "3", "--d-inf", "6:"
    )
    assert code == 2 and "d_inf >= 6 on a 5x5 map" in err


def test_custom_split_and_export(suite: Path, capsys, tmp_path: Path) -> None:
    out = tmp_path / "big"
    code, _, _ = run(
        capsys,
        "generate",
        "--out",
        str(out),
        "--split",
        "big-train",
        "--train",
        "--sizes",
        "3",
        "4",
        "--count",
        "5",
        "--no-images",
        "--no-progress",
        "--workers",
        "1",
        "--cots",
        "none,grid",
    )
    assert code == 0
    assert sorted(p.name for p in (out / "big-train" / "sft").iterdir()) == [
        f"{i}__{c}.jsonl" for i in ("desc", "grid", "table") for c in ("grid", "none")
    ]
    datasets = pytest.importorskip("datasets")
    code, _, _ = run(capsys, "export", str(out / "big-train"), "--out", str(tmp_path / "maps.parquet"))
    assert code == 0
    ds = datasets.Dataset.from_parquet(str(tmp_path / "maps.parquet"))
    assert ds.num_rows == 10 and ds[0]["id"] == "big-train-00000"
    code, _, _ = run(
        capsys,
        "export",
        str(suite / "small-train"),
        "--sft",
        "image__none",
        "--format",
        "arrow",
        "--out",
        str(tmp_path / "img"),
    )
    assert code == 0
    ds = datasets.load_from_disk(str(tmp_path / "img"))
    assert ds.num_rows == 12 and ds[0]["images"][0].size == (192, 192)


@pytest.mark.parametrize("tie_break", [None, "direct", "priority"])
def test_custom_split_tie_break(tmp_path: Path, capsys, tie_break: str | None) -> None:
    extra = [] if tie_break is None else ["--tie-break", tie_break]
    argv = ["generate", "--out", str(tmp_path), "--split", "s", "--sizes", "5", "--count", "8"]
    code, _, _ = run(capsys, *argv, "--no-images", "--no-progress", *extra)
    assert code == 0
    for rec in load_maps(tmp_path / "s"):
        assert rec["optimal_path"] == map_from_record(rec).optimal_path(tie_break or "direct")


def test_unknown_tie_break_is_refused(tmp_path: Path, capsys) -> None:
    argv = ["generate", "--out", str(tmp_path / "x"), "--split", "s", "--sizes", "5", "--count", "2"]
    code, _, err = run(capsys, *argv, "--tie-break", "shortest")
    assert code == 2 and "unknown tie-break 'shortest'" in err
    assert not (tmp_path / "x").exists()
