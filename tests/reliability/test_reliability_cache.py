"""The study cache knows the code and what each stage made. A stage made by other lakeshift code (another
version, or an edited source file, even one edited while the stage ran) is never served from the cache: the
plan flags it and ``lakeshift run`` redoes it. So is a stage whose outputs were deleted or changed, and the
stages that read them; and a workdir holding another study's results is refused, not overwritten.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import lakeshift
from lakeshift._version import __version__
from lakeshift.cli import main
from lakeshift.studies import load_study
from lakeshift.studies import stages as study_stages
from tests.cli_checks import one_error_line, quiet_main

STUDY = """\
name: code-cache
data:
  splits:
    - name: id-train
      train: true
      groups:
        - {size: 3, count: 3, hole_prob: 0.2}
    - name: id-test
      exclude: [id-train]
      groups:
        - {size: 3, count: 2, hole_prob: 0.2}
  images: false
  inputs: [grid]
  cots: [none]
  workers: 1
train:
  model: micro
  prompt: map-only
  max_steps: 2
predict:
  splits: [id-test]
  max_new_tokens: 8
models:
  - {input: grid, cot: none}
report:
  examples: 2
  baselines: false
"""


def test_code_identity_is_the_version_and_a_hash_of_every_source_file() -> None:
    import hashlib

    # Recomputing by hand from the installed source gives the same hash: it covers every .py file. (The
    # planned value is the source as it was when a study was planned; recompute both now, back to back.)
    root = Path(lakeshift.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    ident = study_stages.source_identity()
    assert re.fullmatch(re.escape(__version__) + r"\+[0-9a-f]{12}", ident)
    assert ident.endswith(digest.hexdigest()[:12])


@pytest.mark.slow
def test_stages_made_by_other_code_are_flagged_and_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "study.yaml"
    config.write_text(STUDY)
    workdir = tmp_path / "work"
    argv = ["run", str(config), "--workdir", str(workdir)]
    current = study_stages.code_identity()

    # "Older code" made every stage (as planned and as on disk while each ran).
    monkeypatch.setattr(study_stages, "code_identity", lambda: "0.0.1+0123456789ab")
    monkeypatch.setattr(study_stages, "source_identity", lambda: "0.0.1+0123456789ab")
    assert main(argv) == 0
    markers = sorted((workdir / "stages").glob("*.json"))
    assert len(markers) == 4  # generate, train, predict, report
    assert {json.loads(m.read_text())["code"] for m in markers} == {"0.0.1+0123456789ab"}
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0
    assert "nothing to do: every stage is cached" in capsys.readouterr().err

    # The current code does not serve them: the plan flags each one, the run redoes each one.
    monkeypatch.setattr(study_stages, "code_identity", lambda: current)
    monkeypatch.setattr(study_stages, "source_identity", lambda: current)
    assert main([*argv, "--dry-run"]) == 0
    plan = capsys.readouterr().err
    assert "4 of 4 stages to do" in plan
    assert plan.count("(made by other code: 0.0.1+0123456789ab)") == 4
    assert main(argv) == 0
    log = capsys.readouterr().err
    assert log.count(f"made by 0.0.1+0123456789ab, now {current}): redoing it") == 4
    assert {json.loads(m.read_text())["code"] for m in markers} == {current}
    run = json.loads((workdir / "models" / "grid__none" / "run.json").read_text())
    assert run["status"] == "done" and run["global_step"] == 2  # retrained from scratch, not resumed
    assert main(argv) == 0
    assert "nothing to do: every stage is cached" in capsys.readouterr().err


def test_markers_without_a_code_field_count_as_older_code(tmp_path: Path) -> None:
    config = tmp_path / "study.yaml"
    config.write_text(STUDY)
    study = load_study(config, tmp_path / "work")
    stage = study.stages[0]
    stage.marker.parent.mkdir(parents=True)
    # A marker written before keys held the code: its key cannot match any key made now.
    stage.marker.write_text(json.dumps({"kind": "generate", "name": "data", "key": "0000000000"}))
    assert not stage.done() and stage.recorded_code() is None


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The config of a study and a workdir where it ran to the end (copied by each test that changes it)."""
    root = tmp_path_factory.mktemp("finished")
    config = root / "study.yaml"
    config.write_text(STUDY)
    with pytest.MonkeyPatch.context() as patch:
        # The source these tests plan with stays as it was (others may edit the checkout meanwhile).
        patch.setattr(study_stages, "SOURCE_ROOT", source_copy(root / "source"), raising=False)
        code, err = quiet_main(["run", config, "--workdir", root / "work"])
        assert code == 0, err
        yield config, root / "work"


def source_copy(copy: Path) -> Path:
    """A copy of the package's source (every ``.py`` file), which a test may edit or keep unedited."""
    source = Path(lakeshift.__file__).resolve().parent
    for path in source.rglob("*.py"):
        (copy / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy / path.relative_to(source))
    return copy


def copy_of(finished: tuple[Path, Path], tmp_path: Path) -> tuple[list[str], Path]:
    config, work = finished
    shutil.copytree(work, tmp_path / "work")  # times kept: a copy is the same outputs
    return ["run", str(config), "--workdir", str(tmp_path / "work")], tmp_path / "work"


def markers_of(work: Path) -> dict[str, str]:
    return {m.name: m.read_text() for m in sorted((work / "stages").glob("*.json"))}


@pytest.mark.slow
def test_deleted_or_changed_outputs_are_remade_with_what_reads_them(finished, tmp_path: Path) -> None:
    argv, work = copy_of(finished, tmp_path)
    code, err = quiet_main(argv)
    assert code == 0 and "nothing to do: every stage is cached" in err, err

    predictions = work / "predictions" / "grid__none" / "id-test.jsonl"
    rows = predictions.read_text()
    ids = [json.loads(line)["id"] for line in rows.splitlines()]
    predictions.unlink()
    code, err = quiet_main([*argv, "--dry-run"])
    assert "[todo  ] predict  grid__none/id-test (its outputs are missing or changed since it ran)" in err
    assert "[todo  ] report   report (a stage it reads is to be redone)" in err
    assert "[cached] train    grid__none" in err
    code, err = quiet_main(argv)
    assert code == 0, err
    assert [json.loads(line)["id"] for line in predictions.read_text().splitlines()] == ids
    rows = predictions.read_text()
    code, err = quiet_main(argv)
    assert code == 0 and "nothing to do: every stage is cached" in err, err

    predictions.write_text(rows.splitlines(keepends=True)[0])  # a file cut short
    code, err = quiet_main(argv)
    assert code == 0 and "its outputs are missing or changed since it ran: redoing it" in err, err
    assert predictions.read_text() == rows

    shutil.rmtree(work / "models" / "grid__none")
    code, err = quiet_main(argv)
    assert code == 0, err
    assert "== train: grid__none" in err and "1 of 4 stages" not in err
    assert json.loads((work / "models" / "grid__none" / "run.json").read_text())["status"] == "done"
    code, err = quiet_main(argv)
    assert code == 0 and "nothing to do: every stage is cached" in err, err


@pytest.mark.slow
def test_a_second_study_in_the_workdir_of_another_is_refused(finished, tmp_path: Path) -> None:
    argv, work = copy_of(finished, tmp_path)
    before = markers_of(work)
    other = tmp_path / "other.yaml"
    other.write_text(STUDY.replace("name: code-cache", "name: other-study"))
    for extra in ([], ["--dry-run"]):
        code, err = quiet_main(["run", other, "--workdir", work, *extra])
        one_error_line(code, err, f"workdir {work} holds the results of study 'code-cache'", "'other-study'")
    assert markers_of(work) == before
    assert {json.loads(m)["study"] for m in before.values()} == {"code-cache"}
    code, err = quiet_main(argv)  # its own study goes on there
    assert code == 0 and "nothing to do: every stage is cached" in err, err
    # A study that extends it is made to share its workdir (its data, its models here).
    arm = tmp_path / "arm.yaml"
    arm.write_text(f"extends: {finished[0]}\nname: code-cache-arm\n")
    code, err = quiet_main(["run", arm, "--workdir", work, "--dry-run"])
    assert code == 0 and "nothing to do: every stage is cached" in err, err


@pytest.mark.slow
def test_a_source_edit_while_a_stage_runs_is_never_recorded_as_that_stages_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lakeshift.cli

    # A copy of the package's source stands for the package on disk, so that the test can edit it.
    copy = source_copy(tmp_path / "source")
    monkeypatch.setattr(study_stages, "SOURCE_ROOT", copy)
    planned = study_stages.source_identity()
    monkeypatch.setattr(study_stages, "code_identity", lambda: planned)
    stage_main = lakeshift.cli.main

    def edit_while_reporting(argv: list[str]) -> int:
        if argv[0] == "report":  # the edit lands after the stage started
            edited = copy / "report" / "__init__.py"
            edited.write_text(edited.read_text() + "\n# edited while a study ran\n")
        return stage_main(argv)

    monkeypatch.setattr(lakeshift.cli, "main", edit_while_reporting)
    config = tmp_path / "study.yaml"
    config.write_text(STUDY)
    work = tmp_path / "work"
    code, err = quiet_main(["run", config, "--workdir", work])
    one_error_line(code, err, "source changed while stage report report ran", f"planned with {planned}")
    markers = {m.stem: json.loads(m.read_text()) for m in (work / "stages").glob("*.json")}
    assert markers["report"]["key"] == "unrecorded"  # never served: a rerun redoes it
    assert {markers[m]["code"] for m in ("generate", "train-grid__none")} == {planned}
    study = load_study(config, work)
    assert [s.kind for s in study.stages if not s.done()] == ["report"]
