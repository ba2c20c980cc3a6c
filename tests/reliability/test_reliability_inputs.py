"""Every unreadable input is one clear line (exit 2) in every reader.

Non-UTF-8 and binary files name the file and the line with its byte offset; wrong JSON types
(``"size": "five"``, ``"start": "0,0"``) name file, line and field; ``stats`` and ``export`` validate maps
as ``score`` does (one validator, :func:`lakeshift.data.maps.check_map_record`); a corrupt or missing PNG
in an
image export is an error. A hypothesis property test feeds arbitrary bytes to the readers of ``stats``,
``show``, ``score``, ``baseline``, ``report`` and ``export`` and checks that none ever raises (which the
real CLI would print as a traceback).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_fixtures import FakeOpenAI

from lakeshift.cli import main
from tests.cli_checks import one_error_line, quiet_main

SUITE = """\
splits:
  - name: small-train
    train: true
    groups:
      - {size: 3, count: 3, hole_prob: 0.2}
  - name: small-test
    exclude: [small-train]
    groups:
      - {size: 4, count: 3, hole_prob: 0.1}
"""
MAP_ID = "small-test-00000"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A suite folder (grid and image SFT files, PNGs) with an oracle predictions file in ``runs/``."""
    root = tmp_path_factory.mktemp("inputs")
    (root / "suite.yaml").write_text(SUITE)
    argv = ["generate", "--suite", str(root / "suite.yaml"), "--out", str(root / "data"), "--workers", "1"]
    assert main([*argv, "--no-progress", "--inputs", "grid,image", "--cots", "none"]) == 0
    maps = root / "data" / "small-test" / "maps.jsonl"
    preds = root / "runs" / "m" / "small-test.jsonl"
    assert main(["baseline", "--maps", str(maps), "--policy", "oracle", "--out", str(preds)]) == 0
    return root


@pytest.fixture
def work(data: Path, tmp_path: Path) -> Path:
    """A private copy of the suite and runs, free to corrupt."""
    shutil.copytree(data, tmp_path / "w")
    return tmp_path / "w"


def maps_of(w: Path) -> Path:
    return w / "data" / "small-test" / "maps.jsonl"


def sft_of(w: Path, name: str = "grid__none") -> Path:
    return w / "data" / "small-test" / "sft" / f"{name}.jsonl"


def preds_of(w: Path) -> Path:
    return w / "runs" / "m" / "small-test.jsonl"


#: Every reader of maps.jsonl, as argv for a working copy ``w``.
MAP_READERS: dict[str, Callable[[Path], list[str | Path]]] = {
    "stats": lambda w: ["stats", w / "data"],
    "show": lambda w: ["show", w / "data" / "small-test", "--id", MAP_ID, "--format", "grid"],
    "export": lambda w: ["export", w / "data" / "small-test", "--out", w / "x.parquet"],
    "score": lambda w: ["score", "--maps", maps_of(w), "--predictions", preds_of(w)],
    "baseline": lambda w: ["baseline", "--maps", maps_of(w), "--policy", "greedy"],
    "report": lambda w: ["report", w / "runs", "--data", w / "data", "--out", w / "rep", "--no-baselines"],
    "predict": lambda w: [
        *("predict", "--backend", "openai", "--model", "fake", "--base-url", "http://127.0.0.1:9/v1"),
        *("--data", w / "data", "--split", "small-test", "--input", "grid", "--out", w / "p.jsonl"),
        *("--per-size", "1"),
    ],
    "train": lambda w: [
        *("train", "--data", w / "data", "--split", "small-test", "--input", "grid", "--cot", "none"),
        *("--model", "micro", "--prompt", "map-only", "--max-steps", "1", "--out", w / "run"),
    ],
}


def _rewrite_line(path: Path, index: int, change: Callable[[dict], None]) -> None:
    lines = path.read_text().splitlines()
    rec = json.loads(lines[index])
    change(rec)
    lines[index] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")


# ----- non-UTF-8 and binary files ---------------------------------------------------------------------------
@pytest.mark.parametrize("reader", sorted(MAP_READERS))
def test_maps_that_are_not_utf8_name_file_line_and_offset(reader: str, work: Path) -> None:
    maps = maps_of(work)
    lines = maps.read_bytes().split(b"\n")
    offset = len(lines[0]) + 1 + 10  # the 11th byte of line 2
    lines[1] = lines[1][:10] + b"\xff\xfe" + lines[1][10:]
    maps.write_bytes(b"\n".join(lines))
    code, err = quiet_main(MAP_READERS[reader](work))
    one_error_line(code, err, str(maps), "line 2", f"byte offset {offset}", "not UTF-8")


@pytest.mark.parametrize(
    ("reader", "target"),
    [
        ("score", preds_of),
        ("report", preds_of),
        ("export", lambda w: sft_of(w)),
        ("predict", lambda w: sft_of(w)),
        ("train", lambda w: sft_of(w)),
    ],
)
def test_other_inputs_that_are_binary(reader: str, target: Callable[[Path], Path], work: Path) -> None:
    path = target(work)
    first = path.read_bytes().split(b"\n")[0] + b"\n"  # a good first record, then binary garbage
    path.write_bytes(first + bytes(range(128, 256)) + b"\n")
    argv = MAP_READERS[reader](work)
    if reader == "export":
        argv += ["--sft", "grid__none"]
    code, err = quiet_main(argv)
    one_error_line(code, err, str(path), "line 2", f"byte offset {len(first)}", "not UTF-8")


def test_a_study_config_that_is_not_utf8(tmp_path: Path) -> None:
    config = tmp_path / "study.yaml"
    config.write_bytes(b"name: x\nworkdir: \xe9t\xe9\n")
    code, err = quiet_main(["run", config, "--dry-run"])
    one_error_line(code, err, str(config), "line 2", "not UTF-8")


def test_a_run_json_that_is_not_utf8_or_has_wrong_types(work: Path) -> None:
    run = work / "model"
    run.mkdir()
    (run / "run.json").write_bytes(b'{"input_format": "\xff"}')
    argv = MAP_READERS["predict"](work)
    argv[argv.index("fake")] = run
    argv.remove("--input")
    argv.remove("grid")
    code, err = quiet_main(argv)
    one_error_line(code, err, str(run / "run.json"), "not UTF-8")
    (run / "run.json").write_text(json.dumps({"input_format": ["grid"]}))
    code, err = quiet_main(argv)
    one_error_line(code, err, str(run / "run.json"), "field 'input_format'")


# ----- wrong JSON types -------------------------------------------------------------------------------------
BAD_FIELDS = {
    "size": "five",
    "start": "0,0",
    "goal": [0],
    "rows": "SFFG",
    "d_inf": 2.5,
    "holes": True,
    "optimal_path": ["UP", 3],
    "id": {"a": 1},
}


@pytest.mark.parametrize("reader", sorted(MAP_READERS))
@pytest.mark.parametrize("field", sorted(BAD_FIELDS))
def test_wrong_types_in_maps_name_file_line_and_field(reader: str, field: str, work: Path) -> None:
    maps = maps_of(work)
    _rewrite_line(maps, 1, lambda rec: rec.update({field: BAD_FIELDS[field]}))
    code, err = quiet_main(MAP_READERS[reader](work))
    one_error_line(code, err, str(maps), "line 2", f"field {field!r}")


@pytest.mark.parametrize("reader", ["stats", "export", "show", "score"])
def test_stats_and_export_validate_maps_as_score_does(reader: str, work: Path) -> None:
    """A map whose rows disagree with its start (or that has no goal) is refused by every reader."""
    maps = maps_of(work)

    def move_start(rec: dict) -> None:
        rec["start"] = rec["goal"]

    _rewrite_line(maps, 0, move_start)
    code, err = quiet_main(MAP_READERS[reader](work))
    one_error_line(code, err, str(maps), "line 1", "invalid map", "field 'start'")
    _rewrite_line(maps, 0, lambda rec: rec.update(rows=[r.replace("G", "F") for r in rec["rows"]]))
    code, err = quiet_main(MAP_READERS[reader](work))
    one_error_line(code, err, str(maps), "line 1", "invalid map")


def test_size_must_agree_with_rows(work: Path) -> None:
    maps = maps_of(work)
    _rewrite_line(maps, 2, lambda rec: rec.update(size=9))
    code, err = quiet_main(MAP_READERS["stats"](work))
    one_error_line(code, err, str(maps), "line 3", "field 'size' is 9")


@pytest.mark.parametrize(
    ("field", "value"),
    [("messages", "hello"), ("messages", [1, 2]), ("id", [1]), ("images", "images/x.png")],
)
def test_wrong_types_in_sft_records(field: str, value: object, work: Path) -> None:
    name = "image__none" if field == "images" else "grid__none"
    sft = sft_of(work, name)
    _rewrite_line(sft, 0, lambda rec: rec.update({field: value}))
    for argv in (
        [*MAP_READERS["export"](work), "--sft", name],
        [*MAP_READERS["predict"](work)[:-2], "--input", name.split("__")[0]],
    ):
        code, err = quiet_main(argv)
        one_error_line(code, err, str(sft), "line 1", f"field {field!r}")


def test_wrong_types_in_prediction_metadata_are_warnings_not_crashes(work: Path) -> None:
    preds = preds_of(work)
    _rewrite_line(preds, 0, lambda rec: rec.update(model=[1], selection="all", n_output_tokens="many"))
    code, err = quiet_main(["score", "--maps", maps_of(work), "--predictions", preds, "--strict"])
    one_error_line(code, err, str(preds), "line 1", "field")
    code, err = quiet_main(MAP_READERS["report"](work))
    assert code == 0, err
    assert "field 'model' has the wrong type" in err and "Traceback" not in err


# ----- images -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["missing", "truncated", "not-a-png"])
def test_a_bad_png_in_an_image_export_is_an_error(damage: str, work: Path) -> None:
    png = work / "data" / "small-test" / "images" / f"{MAP_ID}.png"
    if damage == "missing":
        png.unlink()
    elif damage == "truncated":
        png.write_bytes(png.read_bytes()[:200])
    else:
        png.write_bytes(b"hello, not an image\n")
    out = work / "img.parquet"
    argv = ["export", work / "data" / "small-test", "--sft", "image__none", "--out", out]
    code, err = quiet_main(argv)
    one_error_line(code, err, str(png), "field 'images'")
    assert not out.exists()


def test_a_corrupt_png_in_a_report_is_an_error(work: Path) -> None:
    png = work / "data" / "small-test" / "images" / f"{MAP_ID}.png"
    png.write_bytes(png.read_bytes()[:100])
    code, err = quiet_main(MAP_READERS["report"](work))
    one_error_line(code, err, str(png), "not a readable PNG")


def test_predict_on_a_corrupt_png_is_an_error(work: Path) -> None:
    png = work / "data" / "small-test" / "images" / f"{MAP_ID}.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    server = FakeOpenAI({}, failures=())
    try:
        argv = [
            *("predict", "--backend", "openai", "--model", "fake", "--base-url", server.url),
            *(
                "--data",
                work / "data",
                "--split",
                "small-test",
                "--input",
                "image",
                "--out",
                work / "p.jsonl",
            ),
        ]
        code, err = quiet_main(argv)
    finally:
        server.close()
    one_error_line(code, err, str(png))


# ----- property: arbitrary bytes never crash a reader -------------------------------------------------------
FUZZ_READERS = {
    "stats": lambda w: ["stats", w / "data", "--json"],
    "show": lambda w: [
        "show",
        w / "data" / "small-test",
        "--id",
        MAP_ID,
        "--format",
        "grid",
        "--cot",
        "none",
    ],
    "score": lambda w: ["score", "--maps", maps_of(w), "--predictions", preds_of(w)],
    "baseline": lambda w: ["baseline", "--maps", maps_of(w), "--policy", "random", "--out", w / "b.jsonl"],
    "export": lambda w: [
        "export",
        w / "data" / "small-test",
        "--sft",
        "grid__none",
        "--out",
        w / "x.parquet",
    ],
    "report": lambda w: [
        *("report", w / "runs", "--data", w / "data", "--out", w / "rep"),
        *("--no-baselines", "--examples", "2", "--no-images"),
    ],
}
FUZZ_TARGETS = {
    "maps": maps_of,
    "predictions": preds_of,
    "sft": sft_of,
    "split.json": lambda w: w / "data" / "small-test" / "split.json",
}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.floats(allow_nan=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def damaged(draw: st.DrawFn, original: bytes) -> bytes:
    """Random bytes, the original with bytes spliced in, or the original with one field's value replaced."""
    how = draw(st.sampled_from(["bytes", "splice", "field", "truncate"]))
    if how == "bytes":
        return draw(st.binary(max_size=200))
    if how == "splice":
        at = draw(st.integers(0, len(original)))
        return original[:at] + draw(st.binary(min_size=1, max_size=8)) + original[at:]
    if how == "truncate":
        return original[: draw(st.integers(0, len(original)))]
    with contextlib.suppress(ValueError):  # one JSON document (split.json) rather than JSON lines
        doc = json.loads(original)
        doc[draw(st.sampled_from(sorted(doc)))] = draw(JSON_VALUES)
        return json.dumps(doc, indent=2).encode()
    lines = original.decode().splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    rec = json.loads(lines[i])
    if isinstance(rec, dict) and rec:
        key = draw(st.sampled_from(sorted(rec)))
        rec[key] = draw(JSON_VALUES)
    lines[i] = json.dumps(rec)
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.data())
def test_no_reader_ever_crashes_on_arbitrary_bytes(data: Path, draw: st.DataObject) -> None:
    reader = draw.draw(st.sampled_from(sorted(FUZZ_READERS)), label="reader")
    target = draw.draw(st.sampled_from(sorted(FUZZ_TARGETS)), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp) / "w"
        shutil.copytree(data, w)
        path = FUZZ_TARGETS[target](w)
        path.write_bytes(draw.draw(damaged(path.read_bytes()), label="content"))
        code, err = quiet_main(FUZZ_READERS[reader](w))
    assert code in (0, 2), err
    if code == 2:
        assert len([line for line in err.splitlines() if ": error: " in line]) == 1, err


@pytest.mark.parametrize("content", [b'{"data": {"sha256": "\xff"}}', b"[1, 2]", b'{"data": 5}', b"{"])
def test_train_resume_on_a_broken_run_json_is_one_line(content: bytes, work: Path) -> None:
    out = work / "run"
    out.mkdir()
    (out / "run.json").write_bytes(content)
    code, err = quiet_main([*MAP_READERS["train"](work), "--resume"])
    one_error_line(code, err, str(out / "run.json"))


STUDY = """\
name: s
data:
  splits:
    - name: id-train
      train: true
      groups:
        - {{size: 3, count: 4, hole_prob: 0.2}}
    - name: id-test
      groups:
        - {{size: 3, count: 2, hole_prob: 0.2}}
  workers: 1
train:
  model: micro
predict:
  splits: {splits}
models:
  - {{input: grid, cot: none}}
report:
  train_maps: {train_maps}
"""


@pytest.mark.parametrize(
    ("splits", "train_maps", "message"),
    [
        ("[]", "'{work}/data/id-train/maps.jsonl'", ":15: predict.splits: no split named"),
        ("[id-test]", "missing.jsonl", ":19: report.train_maps: missing.jsonl: no such file"),
    ],
)
def test_a_study_naming_no_split_or_a_missing_train_maps_file_is_refused_when_planned(
    splits: str, train_maps: str, message: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(splits=splits, train_maps=train_maps.format(work=work)))
    code, err = quiet_main(["run", path, "--workdir", work, "--dry-run"])
    one_error_line(code, err, str(path) + message)
    assert not work.exists()


def test_a_train_maps_file_the_study_itself_writes_is_planned(tmp_path: Path) -> None:
    work = tmp_path / "work"
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(splits="[id-test]", train_maps=f"'{work}/data/id-train/maps.jsonl'"))
    code, err = quiet_main(["run", path, "--workdir", work, "--dry-run"])
    assert code == 0, err


@pytest.mark.parametrize("command", ["train", "predict"])
def test_an_empty_sizes_list_is_refused_not_read_as_every_size(command: str, work: Path) -> None:
    code, err = quiet_main([*MAP_READERS[command](work), "--sizes", ""])
    one_error_line(code, err, "argument --sizes", "leave --sizes out for every size")
