"""Edited data is never answered, scored or reported as if it were the data a file was made from.

A predictions row is tied to everything its prompt and its score come from: the SFT file (``data_sha256``)
and the split's ``maps.jsonl`` (``maps_sha256``: a ``map-only`` prompt is built from it and every answer is
scored against it), and each row's ``size`` to its map. Resuming into, or reporting, rows made from another
version is refused in one line naming the file and the field. A study whose data were edited after its
``generate`` stage wrote them makes the edited split again (and says which file changed) instead of keeping
the edit. A model is named in predictions and reports as ``--model`` was given, not by its absolute path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeshift.cli import main
from lakeshift.data.maps import record_from_map
from lakeshift.env import FrozenLakeMap
from tests.cli_checks import one_error_line, quiet_main
from tests.model_fixtures import FakeOpenAI
from tests.suite_fixtures import ZERO_SHOT_STUDY

SUITE = """\
splits:
  - name: small-test
    groups:
      - {size: 3, count: 3, hole_prob: 0.2}
      - {size: 4, count: 2, hole_prob: 0.2}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    s = FakeOpenAI({}, failures=())
    yield s
    s.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "suite.yaml").write_text(SUITE)
    out = tmp_path / "data"
    argv = ["generate", "--suite", str(tmp_path / "suite.yaml"), "--out", str(out), "--workers", "1"]
    assert main([*argv, "--no-progress", "--no-images", "--inputs", "grid", "--cots", "none"]) == 0
    return out


def _predict(data: Path, out: Path, server: FakeOpenAI, *extra: str) -> tuple[int, str]:
    argv = ["predict", "--backend", "openai", "--model", "fake", "--base-url", server.url, "--data", data]
    return quiet_main([*argv, "--split", "small-test", "--input", "grid", "--out", out, *extra])


def _report(runs: Path, data: Path, out: Path) -> tuple[int, str]:
    return quiet_main(["report", runs, "--data", data, "--out", out, "--no-images", "--no-baselines"])


def _replace_map(maps: Path, index: int, m: FrozenLakeMap) -> None:
    """Puts another (valid) map in line ``index`` of ``maps``, under the same id."""
    lines = maps.read_text().splitlines()
    old = json.loads(lines[index])
    lines[index] = json.dumps(record_from_map(m, old["id"], old["split"]))
    maps.write_text("\n".join(lines) + "\n")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_map_only_prediction_records_the_maps_file_and_an_edited_map_is_not_resumed_or_reported(
    data: Path, tmp_path: Path, server: FakeOpenAI
) -> None:
    maps = data / "small-test" / "maps.jsonl"
    preds = tmp_path / "runs" / "fake" / "small-test.jsonl"
    code, err = _predict(data, preds, server, "--prompt", "map-only", "--limit", "2")
    assert code == 0, err
    digest = hashlib.sha256(maps.read_bytes()).hexdigest()
    assert {row["maps_sha256"] for row in _rows(preds)} == {digest}
    # The same size, another map: the SFT file (the prompt as written) does not change, the prompt does.
    assert json.loads(maps.read_text().splitlines()[0])["size"] == 3
    _replace_map(maps, 0, FrozenLakeMap(3, frozenset({(1, 1)}), (0, 0), (2, 2)))
    before = preds.read_bytes()
    code, err = _predict(data, preds, server, "--prompt", "map-only")
    one_error_line(code, err, f"{preds}, line 1: field 'maps_sha256': answers another version of", str(maps))
    assert preds.read_bytes() == before  # nothing appended
    code, err = _report(preds.parent.parent, data, tmp_path / "report")
    one_error_line(code, err, f"{preds}, line 1: field 'maps_sha256'", str(maps.resolve()))
    code, err = quiet_main(["score", "--maps", maps, "--predictions", preds])
    one_error_line(code, err, f"{preds}, line 1: field 'maps_sha256'", str(maps))


def test_a_row_whose_size_is_not_its_maps_is_refused(data: Path, tmp_path: Path, server: FakeOpenAI) -> None:
    maps = data / "small-test" / "maps.jsonl"
    preds = tmp_path / "runs" / "fake" / "small-test.jsonl"
    assert _predict(data, preds, server, "--limit", "2")[0] == 0
    # Rows without the maps hash (a file written before it was recorded) are still checked map by map.
    rows = [{k: v for k, v in row.items() if k != "maps_sha256"} for row in _rows(preds)]
    preds.write_text("".join(json.dumps(row) + "\n" for row in rows))
    # (the rows are written as the answers come, in any order)
    line = 1 + [row["id"] for row in rows].index("small-test-00000")
    assert rows[line - 1]["size"] == 3
    _replace_map(maps, 0, FrozenLakeMap(4, frozenset({(1, 1)}), (0, 0), (3, 3)))
    code, err = _predict(data, preds, server)
    one_error_line(code, err, f"{preds}, line {line}: field 'size': 3, but map 'small-test-00000' of {maps}")
    assert "has size 4" in err
    code, err = _report(preds.parent.parent, data, tmp_path / "report")
    one_error_line(code, err, f"{preds}, line {line}: field 'size': 3", "has size 4")


def test_the_model_is_named_as_given_and_its_path_is_kept_in_model_path(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lakeshift

    base = Path(lakeshift.__file__).parent / "checkpoints" / "mini-cells-base"
    shutil.copytree(base, tmp_path / "models" / "mine")
    monkeypatch.chdir(tmp_path)
    out = Path("runs") / "mine" / "small-test.jsonl"
    argv = ["predict", "--model", "models/mine", "--data", "data", "--split", "small-test", "--input", "grid"]
    argv += ["--cot", "none", "--prompt", "map-only", "--limit", "1", "--max-new-tokens", "2"]
    code, err = quiet_main([*argv, "--out", str(out)])
    assert code == 0, err
    [row] = _rows(out)
    assert row["model"] == "models/mine"
    assert row["model_path"] == str((tmp_path / "models" / "mine").resolve())
    code, err = _report(Path("runs"), Path("data"), Path("report"))
    assert code == 0, err
    for name in ("summary.md", "summary.tex", "by_split.csv", "fig_verdicts.svg", "report.html"):
        text = (tmp_path / "report" / name).read_text()
        assert "models/mine" in text and str(tmp_path) not in text, name


@pytest.mark.parametrize("edited", ["maps.jsonl", "sft/grid__none.jsonl"])
def test_a_study_makes_an_edited_split_again_and_says_which_file_changed(
    tmp_path: Path, server: FakeOpenAI, edited: str
) -> None:
    config = tmp_path / "study.yaml"
    config.write_text(ZERO_SHOT_STUDY.format(url=server.url, name="edited", count=3))
    work = tmp_path / "work"
    argv = ["run", config, "--workdir", work]
    code, err = quiet_main(argv)
    assert code == 0, err
    split = work / "data" / "small-test"
    files = {p: p.read_bytes() for p in sorted(split.rglob("*")) if p.is_file()}
    report = (work / "report" / "by_split.csv").read_bytes()

    path = split / edited
    if edited == "maps.jsonl":  # another valid map under the same id: what its answer is scored against
        _replace_map(path, 0, FrozenLakeMap(3, frozenset({(1, 1)}), (0, 0), (2, 2)))
    else:
        lines = path.read_text().splitlines()
        first = json.loads(lines[0])
        first["messages"][1]["content"] += " (edited)"
        path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert path.read_bytes() != files[path]

    code, plan = quiet_main([*argv, "--dry-run"])
    assert code == 0, plan
    code, err = quiet_main(argv)
    assert code == 0, err
    # The split is the generator's again, byte for byte, so what was made from it stands.
    assert {p: p.read_bytes() for p in sorted(split.rglob("*")) if p.is_file()} == files
    assert f"[todo  ] generate data (its outputs are missing or changed since it ran: {path} was edited)" in (
        plan
    )
    assert f"{path} was edited: removing {split} to make it again" in err
    assert "== predict: fake/small-test: still cached" in err
    assert (work / "report" / "by_split.csv").read_bytes() == report
    code, err = quiet_main(argv)
    assert code == 0 and "nothing to do: every stage is cached" in err, err
