"""The files a user gives: nothing lost, no tracebacks, no bad input accepted (no training here).

Hostile YAML (unknown tags, self-referencing aliases, deep nesting, alias bombs) is one line in every YAML
reader; suite files and pretraining configs are validated before anything reads them; every reader of
``maps.jsonl`` validates it as ``score`` does (duplicate ids, empty files, ``optimal_length``/``d_inf``
that disagree with the map, unsolvable maps); outputs never land in a folder holding an input or in a
folder that is not a previous run; a lock follows links; written files get the umask's mode; a report
counts an interrupted run's missing maps against it; predictions of an older version of the data are
refused; a study's model names stay inside its workdir, and its dry run refuses what the run would.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
from model_fixtures import FakeOpenAI

from lakeshift.errors import LakeshiftError
from tests.cli_checks import one_error_line, quiet_main

REPO = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


SUITE = """\
splits:
  - {name: id-train, train: true, groups: [{size: 3, count: 4, hole_prob: 0.2}]}
  - name: id-test
    exclude: [id-train]
    groups: [{size: 3, count: 6, hole_prob: 0.2}, {size: 4, count: 6, hole_prob: 0.2}]
"""


def generate(root: Path, seed: int = 0, *extra: str) -> None:
    """The suite above into ``root`` (grid x none SFT files, no images), through the CLI."""
    suite = root.parent / "suite.yaml"
    suite.write_text(SUITE)
    argv = ["generate", "--suite", suite, "--out", root, "--seed", str(seed), "--inputs", "grid"]
    code, err = quiet_main(
        [*argv, "--cots", "none", "--no-images", "--workers", "1", "--no-progress", *extra]
    )
    assert code == 0, err


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder: id-train (4 maps) and id-test (12 maps of sizes 3 and 4), grid x none SFT files."""
    root = tmp_path_factory.mktemp("data") / "data"
    generate(root)
    return root


@pytest.fixture
def work(data: Path, tmp_path: Path) -> Path:
    """A private copy of the data folder, free to corrupt."""
    shutil.copytree(data, tmp_path / "data")
    return tmp_path / "data"


# ----- hostile YAML: one line in every reader ---------------------------------------------------------------
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)
HOSTILE = {
    "unknown tag": ("splits: !foo 1\n", ":1: invalid YAML (could not determine a constructor for the tag"),
    "tag on a mapping": ("splits: !foo {a: 1}\n", ":1: invalid YAML (unknown tag '!foo' on a mapping)"),
    "self alias": ("splits: &x [*x]\n", ":1: invalid YAML (an alias refers to a value that contains it)"),
    "deep nesting": ("splits: " + "[" * 50_000 + "]" * 50_000 + "\n", "invalid YAML (nested more than 64"),
    "billion laughs": (LAUGHS, "invalid YAML (more than 100,000 values once its aliases are expanded"),
}
YAML_READERS = {
    "generate": lambda path, tmp: ["generate", "--suite", path, "--out", tmp / "out", "--no-progress"],
    "pretrain": lambda path, tmp: ["pretrain", path, "--out", tmp / "out"],
    "run": lambda path, tmp: ["run", path, "--dry-run", "--workdir", tmp / "out"],
}


@pytest.mark.parametrize("reader", sorted(YAML_READERS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_yaml_is_one_line_in_every_reader(case: str, reader: str, tmp_path: Path) -> None:
    text, message = HOSTILE[case]
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    code, err = quiet_main(YAML_READERS[reader](path, tmp_path))
    one_error_line(code, err, str(path), message)
    assert not (tmp_path / "out").exists()


def test_every_yaml_reader_goes_through_the_one_loader() -> None:
    """Only ``lakeshift.config`` imports PyYAML: every reader gets its limits and line numbers."""
    src = REPO / "src" / "lakeshift"
    users = [p.relative_to(src).as_posix() for p in src.rglob("*.py") if "import yaml" in p.read_text()]
    assert users == ["config.py"]


def test_shared_aliases_and_real_configs_still_load(tmp_path: Path) -> None:
    from lakeshift.config import load_yaml

    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {size: 3, count: 2}\nsplits: [*b, *b]\n")
    assert load_yaml(path).data == {"base": {"size": 3, "count": 2}, "splits": [{"size": 3, "count": 2}] * 2}
    for config in sorted((REPO / "configs").glob("*.yaml")):
        load_yaml(config)


# ----- suite files: validated before anything uses them -----------------------------------------------------
GROUP = "{size: 3, count: 2, hole_prob: 0.1}"
BAD_SPLITS = {
    "size a string": (
        '[{name: a, groups: [{size: "5", count: 2, hole_prob: 0.1}]}]',
        "size must be an integer",
    ),
    "count a string": ('[{name: a, groups: [{size: 5, count: "2", hole_prob: 0.1}]}]', "count must be an"),
    "groups a number": ("[{name: a, groups: 5}]", "field 'groups' must be a list of groups, got 5"),
    "name a number": (f"[{{name: 7, groups: [{GROUP}]}}]", "field 'name' must be a string, got 7"),
    "train a string": (
        f'[{{name: a, train: "no", groups: [{GROUP}]}}]',
        "field 'train' must be true or false",
    ),
    "embed size a string": (
        f'[{{name: a, groups: [{GROUP}]}}, {{name: b, embed_source: a, embed_size: "10"}}]',
        "field 'embed_size' must be an integer, got '10'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SPLITS))
def test_bad_suite_files_are_one_line_naming_the_file(case: str, tmp_path: Path) -> None:
    splits, message = BAD_SPLITS[case]
    path = tmp_path / "suite.yaml"
    path.write_text(f"splits: {splits}\n")
    code, err = quiet_main(["generate", "--suite", path, "--out", tmp_path / "out", "--no-progress"])
    one_error_line(code, err, str(path), message)
    # The same splits inline in a study: the study file and line.
    study = tmp_path / "study.yaml"
    study.write_text(f"name: s\ndata:\n  splits: {splits}\nmodels: [{{input: grid, cot: none}}]\n")
    code, err = quiet_main(["run", study, "--dry-run", "--workdir", tmp_path / "w"])
    one_error_line(code, err, f"{study}:3", message)


def test_a_suite_file_beyond_the_machine_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text("splits: [{name: a, groups: [{size: 3, count: 100000000000, hole_prob: 0.1}]}]\n")
    code, err = quiet_main(["generate", "--suite", path, "--out", tmp_path / "out", "--no-progress"])
    one_error_line(code, err, str(path), "100,000,000,000 maps")
    assert not (tmp_path / "out").exists()


# ----- pretraining configs ----------------------------------------------------------------------------------
PRETRAIN = "corpus:\n  seed: 2\n  maps: {3: 12}\ntrain:\n  model: micro\n  max_steps: 2\n"


def test_yaml_numbers_of_a_pretraining_config_arrive_as_numbers(tmp_path: Path) -> None:
    from lakeshift.models.pretrain import load_pretrain_config

    path = tmp_path / "base.yaml"
    path.write_text(PRETRAIN + "  lr: 1e-3\n  weight_decay: 1e-2\n")  # YAML 1.1: both are strings
    config = load_pretrain_config(path)
    assert config.train["lr"] == 1e-3 and config.train["weight_decay"] == 1e-2
    assert isinstance(config.train["lr"], float) and isinstance(config.train["weight_decay"], float)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (PRETRAIN + "  seed: 8589934592\n", ":7: train.seed: must be an integer in [0, 2**32)"),
        (
            PRETRAIN.replace("seed: 2", "seed: 8589934592"),
            ":2: corpus.seed: must be an integer in [0, 2**32)",
        ),
        (PRETRAIN.replace("{3: 12}", "{3: 12, 31: 2}"), ":3: corpus.maps.31: map sizes go up to 30"),
        ("name: [a, b]\n" + PRETRAIN, ":1: name: expected a name (a string), got ['a', 'b']"),
        (PRETRAIN.replace("{3: 12}", "{3: 100000000000}"), ":3: corpus.maps.3: must be at most 2147483647"),
        (PRETRAIN.replace("{3: 12}", "{3: 2000000000}"), "corpus.maps: 2,000,000,000 maps up to 3x3"),
    ],
    ids=["train seed 2**33", "corpus seed 2**33", "size 31", "name a list", "10**11 maps", "2*10**9 maps"],
)
def test_bad_pretraining_configs_are_one_line_before_any_work(
    text: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "base.yaml"
    path.write_text(text)
    code, err = quiet_main(["pretrain", path, "--out", tmp_path / "run"])
    one_error_line(code, err, str(path), message)
    assert not (tmp_path / "run").exists()


# ----- run folders: a non-empty folder that is not a run, a folder holding an input -------------------------
def _users_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    (folder / "checkpoint-1").mkdir(parents=True)
    (folder / "checkpoint-1" / "notes.txt").write_text("my own checkpoint\n")
    (folder / "README.md").write_text("my readme\n")
    (folder / "metrics.jsonl").write_text('{"mine": 1}\n')
    return folder


def test_train_refuses_a_folder_that_is_not_a_run(data: Path, tmp_path: Path) -> None:
    folder = _users_folder(tmp_path)
    before = snapshot(folder)
    argv = ["train", "--data", data, "--input", "grid", "--cot", "none", "--model", "micro", "--out", folder]
    code, err = quiet_main([*argv, "--max-steps", "2"])
    one_error_line(code, err, f"--out {folder} is a folder that is not empty and not a previous run folder")
    assert snapshot(folder) == before


def test_pretrain_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    folder = _users_folder(tmp_path)
    before = snapshot(folder)
    config = tmp_path / "base.yaml"
    config.write_text(PRETRAIN)
    code, err = quiet_main(["pretrain", config, "--out", folder])
    one_error_line(code, err, f"--out {folder} is a folder that is not empty and not a previous run folder")
    assert snapshot(folder) == before


def test_train_refuses_an_output_folder_holding_its_input(work: Path) -> None:
    before = snapshot(work)
    out = work / "id-train" / "sft"
    argv = ["train", "--data", work, "--input", "grid", "--cot", "none", "--model", "micro", "--out", out]
    code, err = quiet_main([*argv, "--max-steps", "2"])
    one_error_line(code, err, f"--out {out} is a folder holding the input {out / 'grid__none.jsonl'}")
    assert snapshot(work) == before


# ----- maps readers validate as score does ------------------------------------------------------------------
def _maps_lines(work: Path) -> list[dict]:
    path = work / "id-test" / "maps.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_maps(work: Path, records: list[dict]) -> None:
    (work / "id-test" / "maps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _duplicate_line(work: Path) -> str:
    recs = _maps_lines(work)
    _write_maps(work, [*recs, recs[3]])
    return f"line 13: duplicate map id {recs[3]['id']!r} (also on line 4)"


def _duplicate_id(work: Path) -> str:
    recs = _maps_lines(work)
    recs[5]["id"] = recs[2]["id"]
    _write_maps(work, recs)
    return f"line 6: duplicate map id {recs[2]['id']!r} (also on line 3)"


def _empty(work: Path) -> str:
    (work / "id-test" / "maps.jsonl").write_text("")
    return "maps.jsonl: no maps in file"


def _wrong_optimal_length(work: Path) -> str:
    recs = _maps_lines(work)
    recs[1]["optimal_length"] = 99
    _write_maps(work, recs)
    shortest = len(recs[1]["optimal_path"])
    return f"line 2: field 'optimal_length' is 99, but the map's shortest plan has {shortest}"


def _wrong_d_inf(work: Path) -> str:
    recs = _maps_lines(work)
    recs[0]["d_inf"] += 1
    _write_maps(work, recs)
    return "line 1: field 'd_inf' is"


def _unsolvable(work: Path) -> str:
    recs = _maps_lines(work)
    recs[2].update(rows=["SFF", "HHH", "FFG"], start=[0, 0], goal=[2, 2], d_inf=2, holes=3, size=3)
    _write_maps(work, recs)
    return "line 3: field 'rows': an unsolvable map (no safe path from start to goal)"


CORRUPTIONS = {
    f.__name__.strip("_"): f
    for f in (_duplicate_line, _duplicate_id, _empty, _wrong_optimal_length, _wrong_d_inf, _unsolvable)
}
MAPS_READERS = {
    "stats": lambda w: ["stats", w / "id-test"],
    "show": lambda w: ["show", w / "id-test", "--id", "id-test-00000", "--format", "grid"],
    "score": lambda w: ["score", "--maps", w / "id-test" / "maps.jsonl", "--predictions", w / "oracle.jsonl"],
    "export": lambda w: ["export", w / "id-test", "--out", w / "maps.parquet"],
}


@pytest.mark.parametrize("reader", sorted(MAPS_READERS))
@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_every_maps_reader_refuses_what_score_refuses(work: Path, corruption: str, reader: str) -> None:
    maps = work / "id-test" / "maps.jsonl"
    assert (
        quiet_main(["baseline", "--maps", maps, "--policy", "oracle", "--out", work / "oracle.jsonl"])[0] == 0
    )
    message = CORRUPTIONS[corruption](work)
    code, err = quiet_main(MAPS_READERS[reader](work))
    one_error_line(code, err, str(maps), message)


def test_oracle_answers_are_optimal_and_stats_average_true_lengths(work: Path) -> None:
    """The records that pass are the ones whose numbers a report can trust."""
    from lakeshift.data.maps import load_maps
    from lakeshift.data.stats import split_stats

    recs = load_maps(work / "id-test")
    rows = {r["size"]: r for r in split_stats("id-test", recs)}
    assert rows["all"]["mean_optimal_length"] == sum(len(r["optimal_path"]) for r in recs) / len(recs)


# ----- numbers without bounds -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--sizes", "3", "--count", "2", "--seed", "-1"],
            "argument --seed: must be an integer in [0, 2**32)",
        ),
        (["--sizes", "3", "3", "--count", "2"], "--sizes 3 3: size 3 is given twice"),
    ],
)
def test_generate_bounds_its_numbers(extra: list[str], message: str, tmp_path: Path) -> None:
    code, err = quiet_main(["generate", "--out", tmp_path / "out", "--no-progress", *extra])
    one_error_line(code, err, message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("reward", ["success=-1", "success=1,progress=-1"])
def test_negative_reward_weights_are_refused(reward: str, data: Path, tmp_path: Path) -> None:
    argv = [
        "train",
        "--method",
        "grpo",
        "--data",
        data,
        "--input",
        "grid",
        "--cot",
        "none",
        "--model",
        "micro",
    ]
    code, err = quiet_main([*argv, "--out", tmp_path / "out", "--reward", reward])
    one_error_line(code, err, f"--reward {reward}: weight of", "is negative")
    assert not (tmp_path / "out").exists()


# ----- one lock per file, readable outputs ------------------------------------------------------------------
def test_an_output_and_a_link_to_it_share_one_lock(tmp_path: Path) -> None:
    from lakeshift.io import lock_path, output_lock

    target = tmp_path / "x.jsonl"
    target.write_text("")
    link = tmp_path / "elsewhere" / "link.jsonl"
    link.parent.mkdir()
    link.symlink_to(target)
    assert lock_path(link) == lock_path(target)
    with output_lock(target), pytest.raises(LakeshiftError, match="is being written by another"):  # noqa: SIM117
        with output_lock(link):
            pass


def test_written_files_get_the_mode_of_any_new_file(data: Path, tmp_path: Path) -> None:
    from lakeshift.io import atomic_write

    mask = os.umask(0o022)
    os.umask(mask)
    with atomic_write(tmp_path / "plain.txt") as f:
        f.write("x")
    maps = data / "id-test" / "maps.jsonl"
    assert (
        quiet_main(["baseline", "--maps", maps, "--policy", "oracle", "--out", tmp_path / "o.jsonl"])[0] == 0
    )
    expected = 0o666 & ~mask
    assert (tmp_path / "plain.txt").stat().st_mode & 0o777 == expected
    assert (tmp_path / "o.jsonl").stat().st_mode & 0o777 == expected


# ----- reports and stale predictions ------------------------------------------------------------------------
def _by_split(out: Path) -> list[dict[str, str]]:
    with (out / "by_split.csv").open() as f:
        return list(csv.DictReader(f))


def test_a_partial_run_is_scored_against_every_map_it_was_asked(data: Path, tmp_path: Path) -> None:
    """6 of 12 maps answered, all correctly: the run scores 6/12 (as `score` says), in one row."""
    maps = data / "id-test" / "maps.jsonl"
    oracle = tmp_path / "oracle.jsonl"
    assert quiet_main(["baseline", "--maps", maps, "--policy", "oracle", "--out", oracle])[0] == 0
    rows = [json.loads(line) for line in oracle.read_text().splitlines()][:6]
    run = tmp_path / "runs" / "runA" / "id-test.jsonl"
    run.parent.mkdir(parents=True)
    extra = {"model": "runA", "input_format": "grid", "cot_format": "none", "split": "id-test"}
    run.write_text("".join(json.dumps({"id": r["id"], "output": r["output"], **extra}) + "\n" for r in rows))
    out = tmp_path / "report"
    code, err = quiet_main(["report", tmp_path / "runs", "--data", data, "--out", out, "--no-baselines"])
    assert code == 0, err
    (row,) = _by_split(out)
    assert (row["model"], row["input_format"], row["cot_format"]) == ("runA", "grid", "none")
    assert (row["n"], row["k"]) == ("12", "6")


def test_a_baseline_file_among_the_runs_is_not_pooled_with_the_reports_own(
    data: Path, tmp_path: Path
) -> None:
    maps = data / "id-test" / "maps.jsonl"
    baseline = tmp_path / "runs" / "base" / "id-test.jsonl"
    assert quiet_main(["baseline", "--maps", maps, "--policy", "oracle", "--out", baseline])[0] == 0
    out = tmp_path / "report"
    code, err = quiet_main(["report", tmp_path / "runs", "--data", data, "--out", out, "--no-images"])
    assert code == 0, err
    oracle = [r for r in _by_split(out) if r["model"] == "baseline-oracle"]
    assert [(r["n"], r["k"]) for r in oracle] == [("12", "12")]


@pytest.fixture
def server():
    s = FakeOpenAI({}, failures=())
    yield s
    s.close()


def _predict(data: Path, out: Path, server: FakeOpenAI, *extra: str) -> tuple[int, str]:
    argv = ["predict", "--backend", "openai", "--model", "fake", "--base-url", server.url, "--data", data]
    return quiet_main([*argv, "--split", "id-test", "--input", "grid", "--out", out, *extra])


def test_predictions_of_an_older_version_of_the_data_are_refused(
    work: Path, tmp_path: Path, server: FakeOpenAI
) -> None:
    preds = tmp_path / "runs" / "fake" / "id-test.jsonl"
    assert _predict(work, preds, server)[0] == 0
    maps = work / "id-test" / "maps.jsonl"
    assert quiet_main(["score", "--maps", maps, "--predictions", preds])[0] == 0
    generate(work, 9, "--force")  # the same ids, other maps
    before = preds.read_bytes()
    code, err = _predict(work, preds, server)
    one_error_line(code, err, f"{preds}, line 1: field 'data_sha256': answers another version of")
    assert preds.read_bytes() == before
    code, err = quiet_main(["score", "--maps", maps, "--predictions", preds])
    one_error_line(code, err, f"{preds}, line 1: field 'data_sha256'", str(work / "id-test" / "sft"))
    code, err = quiet_main(
        ["report", preds.parent, "--data", work, "--out", tmp_path / "report", "--no-images"]
    )
    one_error_line(code, err, f"{preds}, line 1: field 'data_sha256'")


def test_a_shard_without_maps_is_refused(data: Path, tmp_path: Path, server: FakeOpenAI) -> None:
    code, err = _predict(data, tmp_path / "p.jsonl", server, "--shard", "20/20")
    one_error_line(code, err, "--shard 20/20: the selection has 12 maps, so this shard has none")
    assert not list(tmp_path.glob("p*.jsonl"))


# ----- studies: names inside the workdir, others' files untouched, dry runs that check ----------------------
STUDY = """\
name: s
data:
  splits:
    - {name: id-train, train: true, groups: [{size: 3, count: 4, hole_prob: 0.2}]}
    - {name: id-test, exclude: [id-train], groups: [{size: 3, count: 2, hole_prob: 0.2}]}
  inputs: [grid]
  cots: [none]
train: {model: micro, prompt: map-only, max_steps: 2}
models:
  - {input: grid, cot: none}
"""


def _study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["../../victim2", "a/b", "..", ".hidden", "-x"])
def test_a_model_name_is_one_folder_name(name: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim2"
    victim.mkdir()
    (victim / "mine.txt").write_text("mine\n")
    study = _study(
        tmp_path,
        STUDY.replace("{input: grid, cot: none}", f"{{name: {json.dumps(name)}, input: grid, cot: none}}"),
    )
    for extra in (["--dry-run"], []):
        code, err = quiet_main(["run", study, "--workdir", tmp_path / "w" / "x", *extra])
        one_error_line(code, err, f"{study}:10", "must be one folder name")
    assert (victim / "mine.txt").read_text() == "mine\n"


def test_a_workdir_holding_someone_elses_data_is_not_replaced(tmp_path: Path) -> None:
    workdir = tmp_path / "myproj"
    mine = workdir / "data" / "id-train" / "maps.jsonl"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own maps\n")
    study = _study(tmp_path, STUDY)
    for extra in (["--dry-run"], []):
        code, err = quiet_main(["run", study, "--workdir", workdir, *extra])
        one_error_line(code, err, f"{workdir / 'data'} exists but was not written by study 's'")
    assert mine.read_text() == "my own maps\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("max_steps: 2", "max_steps: 2, seed: 8589934592"),
            ":8: train.seed: must be an integer in [0, 2**32)",
        ),
        (
            ("max_steps: 2", "max_steps: 2, max_length: 5"),
            ":8: train.max_length: 5 tokens: the shortest prompts",
        ),
        (
            ("model: micro", "model: micro-cells, cells: {grids: bogus}"),
            ":8: train.cells.grids: expected one of first, every, next, coupled, got 'bogus'",
        ),
        (("max_steps: 2", "max_steps: 2, cells: {grids: every}"), "--cells: needs a cells model"),
        (("model: micro", "model: no-such-model"), ":8: train.model: --model no-such-model: unknown model"),
        (("model: micro", "model: ./runs/absent"), ":8: train.model: --model ./runs/absent: unknown model"),
        (
            ("prompt: map-only", "prompt: mapless"),
            "train.prompt: expected one of mirage, map-only, got 'mapless'",
        ),
    ],
)
def test_a_dry_run_refuses_what_the_run_would(change: tuple[str, str], message: str, tmp_path: Path) -> None:
    study = _study(tmp_path, STUDY.replace(*change))
    code, err = quiet_main(["run", study, "--dry-run", "--workdir", tmp_path / "w"])
    one_error_line(code, err, str(study), message)
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("split", "group"),
    [("id-train", "size: 3, count: 4"), ("id-test", "size: 3, count: 2")],
    ids=["id-train", "id-test"],
)
def test_a_dry_run_refuses_a_cells_model_on_maps_beyond_its_positions(
    split: str, group: str, tmp_path: Path
) -> None:
    """Rows and columns past 30 would all get position 0: the plan says so, as train and predict would."""
    text = STUDY.replace(group, "size: 31, count: 1").replace("model: micro", "model: micro-cells")
    study = _study(tmp_path, text)
    code, err = quiet_main(["run", study, "--dry-run", "--workdir", tmp_path / "w"])
    one_error_line(
        code, err, f"{study}:8: train.model: micro-cells: split {split}: 31x31 maps: a cells model has row"
    )
    assert not (tmp_path / "w").exists()
