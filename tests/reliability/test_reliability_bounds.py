"""Resource bounds up front: ``generate`` estimates memory, disk and time from sizes, counts and formats and
refuses (one line, exit 2, nothing written) what the machine cannot hold or what would take absurdly long;
``--max-memory-gb`` and ``--max-hours`` move the bounds. Generating one map needs memory near its size, not
``n^4``.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakeshift.cli import main
from lakeshift.data import bounds, records
from lakeshift.data.generate import Group, SplitSpec, _bitboard, generate_map
from lakeshift.io import dumps, free_disk

CUSTOM = ["generate", "--split", "s", "--no-images", "--workers", "1", "--no-progress"]


def _generate(out: Path, *argv: str) -> int:
    return main([*CUSTOM, "--out", str(out), *argv])


def test_a_huge_size_is_refused_at_once_with_the_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert _generate(out, "--sizes", "1000", "--count", "1") == 2
    assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "1 maps up to 1000x1000: about" in err and "GB of memory" in err and "--max-memory-gb" in err
    assert not out.exists()


def test_an_absurd_count_in_a_suite_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "splits:\n  - name: s\n    groups:\n      - {size: 5, count: 1000000000, hole_prob: 0.2}\n"
    )
    out = tmp_path / "out"
    argv = ["generate", "--suite", str(suite), "--out", str(out), "--no-images", "--max-memory-gb", "1e6"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "1,000,000,000 maps up to 5x5" in err and "9 days" in err and err.count("\n") == 1
    assert not out.exists()


def test_max_memory_gb_moves_the_bound_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--sizes", "30", "--count", "2", "--inputs", "grid", "--cots", "none,grid"]
    assert _generate(tmp_path / "a", *argv, "--max-memory-gb", "0.01") == 2
    assert "more than the 10 MB of --max-memory-gb 0.01" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    assert _generate(tmp_path / "b", *argv, "--max-memory-gb", "4") == 0
    assert len((tmp_path / "b" / "s" / "maps.jsonl").read_text().splitlines()) == 2


def test_max_hours_refuses_long_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--sizes", "200", "--count", "40", "--max-hours", "0.001", "--max-memory-gb", "1000"]
    assert _generate(tmp_path / "a", *argv) == 2
    assert "more than --max-hours 0.001" in capsys.readouterr().err


def test_the_disk_estimate_is_an_upper_estimate_within_a_small_factor(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sizes, count = (20, 40), 3
    argv = ["--sizes", *map(str, sizes), "--count", str(count), "--hole-prob", "0.1"]
    assert _generate(out, *argv) == 0
    meta = json.loads((out / "s" / "split.json").read_text())
    inputs = sorted({Path(f).stem.split("__")[0] for f in meta["sft_files"]})
    cots = sorted({Path(f).stem.split("__")[1] for f in meta["sft_files"]})
    written = sum(p.stat().st_size for p in (out / "s").rglob("*") if p.is_file())
    est = bounds.estimate([(n, count) for n in sizes], inputs, cots, images=False, workers=1)
    assert written <= est.disk_bytes <= 4 * written


def test_record_bytes_match_real_records_on_a_straight_map() -> None:
    # The calibration maps themselves, at a size outside the calibration range: the cubic is exact there.
    rec = bounds.calibration_record(40)
    made = records.sft_records(rec, "test", ["grid"], ["grid+desc"], "images/x.png")
    real = len(dumps(next(iter(made.values()))).encode()) + 1
    assert bounds.record_bytes(40, ["grid"], ["grid+desc"]) == pytest.approx(real, rel=0.02)


def test_free_disk_of_a_path_not_made_yet_is_its_nearest_folders(tmp_path: Path) -> None:
    ahead = free_disk(tmp_path / "not" / "made" / "yet.jsonl")
    assert 0 < ahead < float("inf")
    assert ahead == pytest.approx(free_disk(tmp_path), rel=0.01)


def test_generating_a_large_map_needs_memory_near_its_size_not_n4() -> None:
    spec = SplitSpec("s", (Group(250, 1, 0.1),))
    tracemalloc.start()
    try:
        rec = generate_map(spec, 0, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rec["size"] == 250 and len(rec["rows"]) == 250
    # A cache of n^2 single-bit integers of n^2 bits would take ~250 MB; the BFS layers take ~10 MB.
    assert peak < 40e6, peak


@given(st.integers(2, 40), st.data())
def test_bitboard_sets_exactly_the_cells_bits(n: int, data: st.DataObject) -> None:
    bit_of = [r * (n + 1) + c for r in range(n) for c in range(n)]
    cells = data.draw(st.lists(st.integers(0, n * n - 1), unique=True))
    expected = 0
    for c in cells:
        expected |= 1 << bit_of[c]
    assert _bitboard(cells, bit_of, n * (n + 1)) == expected
