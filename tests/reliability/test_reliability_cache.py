"""The study cache knows the code. A stage made by other lakeshift code (another version,
or an edited source file) is never served from the cache: the plan flags it and ``lakeshift run`` redoes it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import lakeshift
from lakeshift._version import __version__
from lakeshift.cli import main
from lakeshift.studies import load_study
from lakeshift.studies import stages as study_stages

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
    # cached value is the source as it was when first asked; recompute both now, back to back.)
    root = Path(lakeshift.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    ident = study_stages.code_identity.__wrapped__()
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

    # "Older code" made every stage.
    monkeypatch.setattr(study_stages, "code_identity", lambda: "0.0.1+0123456789ab")
    assert main(argv) == 0
    markers = sorted((workdir / "stages").glob("*.json"))
    assert len(markers) == 4  # generate, train, predict, report
    assert {json.loads(m.read_text())["code"] for m in markers} == {"0.0.1+0123456789ab"}
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0
    assert "nothing to do: every stage is cached" in capsys.readouterr().err

    # The current code does not serve them: the plan flags each one, the run redoes each one.
    monkeypatch.setattr(study_stages, "code_identity", lambda: current)
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
