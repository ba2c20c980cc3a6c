"""Predictions stored compressed (``*.jsonl.gz``, as committed results are) are read exactly as plain ones by
``lakeshift score`` and ``lakeshift report``; a file present both ways, or a gzip file cut short, is one clear
error."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from cli_checks import one_error_line, quiet_main
from suite_fixtures import make_suite, noisy_predictions

MADE_AT = (b"<dc:date>", b"generated")


def _compress(folder: Path) -> None:
    for path in sorted(folder.rglob("*.jsonl")):
        with path.open("rb") as src, gzip.GzipFile(path.with_name(path.name + ".gz"), "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()


def _report_files(folder: Path, runs: Path) -> dict[str, bytes]:
    """Every file of a report, without the lines that hold when it was made, and with the predictions
    files its warnings name written as ``RUNS/.../NAME.jsonl``."""

    def normal(line: bytes) -> bytes:
        return line.replace(bytes(runs), b"RUNS").replace(b".jsonl.gz", b".jsonl")

    return {
        str(p.relative_to(folder)): b"\n".join(
            normal(line) for line in p.read_bytes().splitlines() if not any(m in line for m in MADE_AT)
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_report_of_compressed_predictions_is_the_report_of_the_plain_ones(tmp_path: Path) -> None:
    data = make_suite(tmp_path, per_size=3)
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    noisy_predictions(data, plain, "grid__grid+desc", 5, cot="grid+desc")
    noisy_predictions(data, plain, "grid__none", 6)
    shutil.copytree(plain, packed)
    _compress(packed)
    assert not list(packed.rglob("*.jsonl")) and len(list(packed.rglob("*.jsonl.gz"))) == 8
    for runs in (plain, packed):
        code, err = quiet_main(["report", runs, "--out", tmp_path / f"report-{runs.name}", "--data", data])
        assert code == 0, err
    assert _report_files(tmp_path / "report-plain", plain) == _report_files(
        tmp_path / "report-packed", packed
    )
    scored = []
    for predictions in (plain / "grid__none" / "id-test.jsonl", packed / "grid__none" / "id-test.jsonl.gz"):
        out = tmp_path / f"scored-{predictions.parent.parent.name}.jsonl"
        argv = [
            "score",
            "--maps",
            data / "id-test" / "maps.jsonl",
            "--predictions",
            predictions,
            "--out",
            out,
        ]
        assert quiet_main(argv)[0] == 0
        scored.append(out.read_bytes())
    assert scored[0] == scored[1] and scored[0]


def test_a_file_both_plain_and_compressed_is_refused_not_counted_twice(tmp_path: Path) -> None:
    data = make_suite(tmp_path, per_size=3)
    runs = tmp_path / "runs"
    noisy_predictions(data, runs, "grid__none", 6)
    plain = runs / "grid__none" / "id-test.jsonl"
    with gzip.open(plain.with_name(plain.name + ".gz"), "wb") as f:
        f.write(plain.read_bytes())
    code, err = quiet_main(["report", runs, "--out", tmp_path / "rep", "--data", data])
    one_error_line(code, err, "id-test.jsonl.gz", "also there uncompressed (id-test.jsonl)")
    code, err = quiet_main(
        ["score", "--maps", data / "id-test" / "maps.jsonl", "--predictions", runs / "grid__none"]
    )
    one_error_line(code, err, "also there uncompressed")


@pytest.mark.parametrize("command", ["score", "report"])
@pytest.mark.parametrize("where", ["within-the-records", "before-the-first-record"])
def test_a_compressed_file_cut_short_is_one_error_naming_it(tmp_path: Path, command: str, where: str) -> None:
    data = make_suite(tmp_path, per_size=3)
    runs = tmp_path / "runs"
    noisy_predictions(data, runs, "grid__none", 6)
    _compress(runs)
    packed = runs / "grid__none" / "id-test.jsonl.gz"
    whole = packed.read_bytes()
    packed.write_bytes(whole[: len(whole) // 2 if where == "within-the-records" else 12])
    if command == "score":
        argv = ["score", "--maps", data / "id-test" / "maps.jsonl", "--predictions", runs / "grid__none"]
    else:  # a file that cannot be read from its start is not passed over as some other kind of file
        argv = ["report", runs, "--out", tmp_path / "rep", "--data", data]
    code, err = quiet_main(argv)
    one_error_line(code, err, str(packed), "not a complete gzip file")
