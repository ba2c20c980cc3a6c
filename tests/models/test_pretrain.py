"""The pretraining corpus (map reading and random walks, never a plan), its config, and `lakeshift pretrain`:
every answer agrees with the rules of the scorer, each example is reproducible alone, bad configs are one
line, and a pretrained run fine-tunes per format with the small-model preset."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift import extract, formats
from lakeshift.cli import main
from lakeshift.env import FrozenLakeMap
from lakeshift.errors import LakeshiftError
from lakeshift.models import pretrain
from lakeshift.models.pretrain import corpus_record, load_pretrain_config, moves_example, walk_example
from lakeshift.models.registry import BASE_MODELS
from tests.map_strategies import random_maps

_CELL = re.compile(r"\((\d+),(\d+)\)")


def _cells(text: str) -> list[tuple[int, int]]:
    return [(int(r) - 1, int(c) - 1) for r, c in _CELL.findall(text)]


@given(random_maps(), st.integers(0, 2**32))
@settings(max_examples=200, deadline=None)
def test_walk_answer_reads_the_map_and_simulates_the_moves(m: FrozenLakeMap, seed: int) -> None:
    question, answer = walk_example(m, random.Random(seed))
    moves = question.removeprefix("Walk: ").split(", ")
    assert 1 <= len(moves) <= 2 * m.size
    read, walk = answer.split("\n")
    head, holes = read.split(" holes ")
    assert _cells(head) == [m.start, m.goal]
    assert _cells(holes) == sorted(m.holes) and (holes == "none") == (not m.holes)
    rollout = m.simulate(moves)
    assert _cells(walk) == list(rollout.positions[1:])
    outcome = walk.rsplit(" ", 1)[1]
    assert outcome == ("hole" if rollout.fell_at else "goal" if rollout.success else "safe")


@given(random_maps(), st.integers(0, 2**32))
@settings(max_examples=200, deadline=None)
def test_moves_answer_is_the_walk_given_as_cells(m: FrozenLakeMap, seed: int) -> None:
    question, answer = moves_example(m, random.Random(seed))
    cells = _cells(question)
    assert cells[0] == m.start and not set(cells) & m.holes
    assert m.goal not in cells[:-1]  # the walk stops at the goal
    extraction = extract(answer)
    assert extraction.status == "ok" and extraction.span[1] == len(answer) - 1
    assert list(m.simulate(extraction.moves).positions) == cells


def test_a_record_is_the_map_only_prompt_plus_a_question_and_is_reproducible_alone() -> None:
    rec = {"id": "m7", "rows": ["SFH", "FHF", "FFG"]}
    a, b = corpus_record(rec, 7, seed=3), corpus_record(rec, 7, seed=3)
    assert a == b
    user, assistant = a["messages"][1]["content"], a["messages"][2]["content"]
    m = FrozenLakeMap.from_rows(rec["rows"])
    assert user.startswith(formats.render(m, a["map_format"]) + "\n")
    assert a["task"] in pretrain.TASKS and a["map_format"] in pretrain.CORPUS_INPUTS
    drawn = {(r["task"], r["map_format"]) for r in (corpus_record(rec, i, seed=3) for i in range(60))}
    assert len(drawn) == 6  # every task in every format
    # an answer in the \boxed{} syntax only where the question gave the path
    assert ("\\boxed{" in assistant) == (a["task"] == "moves")


def test_an_image_record_shows_its_map_as_an_image_block_and_asks_in_text() -> None:
    rec = {"id": "m7", "rows": ["SFH", "FHF", "FFG"]}
    drawn = [corpus_record(rec, i, seed=3, tasks=pretrain.TASKS, inputs=["image"]) for i in range(40)]
    assert drawn[5] == corpus_record(rec, 5, seed=3, tasks=pretrain.TASKS, inputs=["image"])
    for a in drawn:
        system, user, assistant = (msg["content"] for msg in a["messages"])
        assert a["input_format"] == a["map_format"] == "image" and a["images"] == ["images/m7.png"]
        # every content a list of blocks, as generate's image records (an Arrow column cannot mix them)
        assert system == [{"type": "text", "text": pretrain.SYSTEM_PROMPT}] and len(assistant) == 1
        assert user[0] == {"type": "image"}
        question = {"walk": "\nWalk: ", "moves": "\nPath: "}.get(a["task"])
        if question is None:  # a trace: the map alone, as the map-only prompt gives it, or A*'s target
            assert user[1:] == [] if a["trace"] != "astar" else user[1]["text"].startswith("\nTarget: ")
        else:
            assert user[1]["text"].startswith(question)
    assert {a["task"] for a in drawn} == set(pretrain.TASKS)


def test_an_image_corpus_renders_the_map_each_example_shows(tmp_path: Path) -> None:
    from PIL import Image

    from lakeshift.formats.image import render_rgb

    spec = pretrain.corpus_spec({3: 6, 4: 6}, 0.2)
    counts = pretrain.write_corpus(
        tmp_path, spec, 3, tasks=("trace",), traces=("grid",), walks_end_at_goal=True, inputs=("image",)
    )
    split = tmp_path / "pretrain"
    lines = (split / "sft" / "image__maptasks.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert counts["examples"] == len(records) == 12
    moved = 0
    for rec in records:
        (image,) = rec["images"]
        # the map the trace's first redrawn grid shows, with the goal where the walk ends
        rows = rec["messages"][2]["content"][0]["text"].split("Grid:\n")[1].split("\n")
        goal = next((r, row.split("  ").index("G")) for r, row in enumerate(rows) if "G" in row.split("  "))
        maps = {m["id"]: m for m in (json.loads(line) for line in (split / "maps.jsonl").open())}
        drawn = FrozenLakeMap.from_rows(maps[rec["id"]]["rows"])
        shown = dataclasses.replace(drawn, goal=goal) if goal != drawn.goal else drawn
        moved += shown is not drawn
        with Image.open(split / image) as png:
            assert (png.convert("RGB").tobytes()) == Image.fromarray(render_rgb(shown)).tobytes()
    assert moved  # a walk ended at a moved goal: its image is not the drawn map's


def test_a_text_model_is_refused_an_image_corpus_in_one_line(tmp_path: Path, capsys) -> None:
    config = _config(tmp_path, GOOD.replace("seed: 2", "inputs: [image]"))
    assert main(["pretrain", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "corpus.inputs [image]: --model micro is a text-only model" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_pretrain_a_vision_base_on_images_then_fine_tune_it(tmp_path: Path) -> None:
    from tests.model_fixtures import generate_split

    text = GOOD.replace("seed: 2", "inputs: [image]").replace("model: micro", "model: mini-vl")
    out = tmp_path / "base"
    assert main(["pretrain", str(_config(tmp_path, text)), "--out", str(out)]) == 0
    assert len(list((out / "corpus" / "pretrain" / "images").glob("*.png"))) == 24
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "done" and run["data"]["file"].endswith("image__maptasks.jsonl")
    data = tmp_path / "data"
    generate_split(data, "id-train", count=6, train=True, inputs=("image",), images=True)
    tuned = tmp_path / "tuned"
    args = ["train", "--data", str(data), "--input", "image", "--cot", "none", "--model", str(out)]
    assert main([*args, "--out", str(tuned), "--max-steps", "2", "--prompt", "map-only"]) == 0
    assert json.loads((tuned / "model" / "config.json").read_text())["map_cell_pixels"] == 28


#: The description sentences that compare shortest distances to the goal: planning knowledge.
_DISTANCE = re.compile(r"leads to a longer path|is just as short|is shorter, but")


@given(random_maps(max_size=7, hole_probs=(0.0, 0.2, 0.3)), st.integers(0, 2**20))
@settings(max_examples=120, deadline=None)
def test_a_trace_example_is_the_map_alone_and_a_cot_trace_of_a_random_walk_never_a_plan(
    m: FrozenLakeMap, index: int
) -> None:
    from lakeshift.traces import walk_completions

    rec = {"id": "m", "rows": m.rows}
    example = corpus_record(rec, index, seed=4, tasks=("trace",))
    assert example == corpus_record(rec, index, seed=4, tasks=("trace",))  # reproducible alone
    cot, user = example["trace"], example["messages"][1]["content"]
    answer = example["messages"][2]["content"]
    assert cot in pretrain.TRACE_COTS and not _DISTANCE.search(answer)
    moves = extract(answer).moves
    rendered = formats.render(m, example["map_format"])
    if cot == "astar":
        # a search for a named target that is neither the start nor the goal: never a plan to the goal
        assert user.startswith(rendered + "\nTarget: (")
        target = _cells(user.rsplit("Target: ", 1)[1])[0]
        assert target not in (m.start, m.goal, *m.holes)
        moved = FrozenLakeMap(m.size, m.holes, m.start, target)
        assert moved.simulate(moves).success and not m.simulate(moves).success
        assert re.search(rf"\({target[0] + 1},{target[1] + 1}\) g\d+ h0 goal\n", answer)
    else:
        # the map-only prompt, and the walk's trace in the CoT's own syntax
        assert user == rendered
        assert answer == walk_completions(m, moves, (cot,))[cot]
        rollout = m.simulate(moves)
        assert rollout.fell_at is None and not rollout.off_edge_moves


@given(random_maps(max_size=7, hole_probs=(0.0, 0.2, 0.3)), st.integers(0, 2**20))
@settings(max_examples=120, deadline=None)
def test_with_walks_end_at_goal_a_walk_ends_at_its_moved_goal_and_is_never_a_shortest_path(
    m: FrozenLakeMap, index: int
) -> None:
    from lakeshift.traces import walk_completions

    example = corpus_record(
        {"id": "m", "rows": m.rows}, index, seed=4, tasks=("trace",), walks_end_at_goal=True
    )
    cot, user, answer = example["trace"], example["messages"][1]["content"], example["messages"][2]["content"]
    if cot == "astar":
        return
    shown = formats.parse(user, example["map_format"])
    moved = FrozenLakeMap(m.size, m.holes, m.start, shown.goal)
    assert user == formats.render(moved, example["map_format"])  # only the goal moved
    moves = extract(answer).moves
    assert answer == walk_completions(moved, moves, (cot,))[cot]
    if moved.simulate(moves).success:
        # a detour; a one-move walk to the map's own goal is a start whose only way out is the goal
        assert len(moves) > (moved.optimal_length or 0) or (moved.goal == m.goal and len(moves) == 1)
    else:  # no detour drawn: the map's own goal, and a walk that stops short of it
        assert moved.goal == m.goal


def test_with_walks_end_at_goal_nearly_every_walk_reaches_the_goal() -> None:
    rec = {"id": "m", "rows": ["SFFF", "FHFH", "FFFH", "HFFG"]}
    reached = []
    for i in range(200):
        example = corpus_record(rec, i, seed=1, tasks=("trace",), walks_end_at_goal=True)
        if example["trace"] != "astar":
            shown = formats.parse(example["messages"][1]["content"], example["map_format"])
            moved = FrozenLakeMap(4, shown.holes, shown.player, shown.goal)
            reached.append(moved.simulate(extract(example["messages"][2]["content"]).moves).success)
    assert len(reached) > 150 and sum(reached) / len(reached) > 0.95


def test_every_trace_format_is_drawn_and_old_configs_keep_their_corpus() -> None:
    rec = {"id": "m", "rows": ["SFFF", "FHFH", "FFFH", "HFFG"]}
    drawn = {corpus_record(rec, i, seed=1, tasks=("trace",))["trace"] for i in range(200)}
    assert drawn == set(pretrain.TRACE_COTS)
    # a config without tasks (the shipped mini-cells-base) draws exactly what it drew before traces existed
    assert [corpus_record(rec, i, seed=1) for i in range(20)] == [
        corpus_record(rec, i, seed=1, tasks=("walk", "moves")) for i in range(20)
    ]


def test_a_trace_format_with_a_max_size_is_written_only_up_to_it() -> None:
    limits = {"grid": 4, "table+desc": 3}
    for rows in (
        ["SFF", "FHF", "FFG"],
        ["SFFF", "FHFH", "FFFH", "HFFG"],
        ["SFFFF"] + ["FFFFF"] * 3 + ["FFFFG"],
    ):
        rec = {"id": "m", "rows": rows}
        drawn = {corpus_record(rec, i, 1, ("trace",), trace_max_size=limits)["trace"] for i in range(300)}
        assert drawn == {c for c in pretrain.TRACE_COTS if len(rows) <= limits.get(c, 30)}
    unlimited = [corpus_record(rec, i, 1, ("trace",)) for i in range(50)]
    assert [corpus_record(rec, i, 1, ("trace",), trace_max_size={"grid": 5}) for i in range(50)] == unlimited


@pytest.mark.parametrize("walks_end_at_goal", [False, True])
def test_an_excluded_map_is_never_shown(tmp_path: Path, walks_end_at_goal: bool) -> None:
    from lakeshift.data.generate import generate_split

    # 3x3 maps with holes repeat often, so a corpus drawn without the exclusion shows test maps
    test_maps, _ = generate_split(pretrain.corpus_spec({3: 150}, 0.2), seed=9)
    excluded = frozenset(tuple(rec["rows"]) for rec in test_maps)
    spec = pretrain.corpus_spec({3: 300}, 0.2)

    def shown(data: Path) -> list[tuple[str, ...]]:
        rows = []
        sft = data / "pretrain" / "sft" / "text__maptasks.jsonl"
        for line in sft.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            p = formats.parse(rec["messages"][1]["content"], rec["map_format"])
            rows.append(tuple(FrozenLakeMap(3, p.holes, p.player, p.goal).rows))
        return rows

    kwargs = {"tasks": ("trace",), "traces": ("grid",), "walks_end_at_goal": walks_end_at_goal}
    free = pretrain.write_corpus(tmp_path / "free", spec, 3, **kwargs)
    assert sum(r in excluded for r in shown(tmp_path / "free")) > 10
    assert free == {"maps": 300, "examples": 300, "redrawn": 0, "dropped": 0}
    counts = pretrain.write_corpus(tmp_path / "clean", spec, 3, excluded=excluded, **kwargs)
    rows = shown(tmp_path / "clean")
    assert not set(rows) & excluded and len(rows) == counts["examples"]
    assert counts["maps"] == 300 and counts["redrawn"] > 10
    assert counts["examples"] + counts["dropped"] == 300 and (counts["dropped"] > 0) == walks_end_at_goal


def test_a_config_excludes_map_files_by_content(tmp_path: Path) -> None:
    from lakeshift.data.generate import generate_split
    from lakeshift.io import write_jsonl

    maps = tmp_path / "data" / "id-test" / "maps.jsonl"
    maps.parent.mkdir(parents=True)
    records = generate_split(pretrain.corpus_spec({4: 3}, 0.2), seed=1)[0]
    write_jsonl(maps, records)
    config = load_pretrain_config(
        _config(tmp_path, GOOD.replace("seed: 2", f"exclude: [{tmp_path / 'data'}]"))
    )
    assert pretrain.excluded_maps(config.exclude)[0] == {tuple(rec["rows"]) for rec in records}
    key = config.corpus_key()
    write_jsonl(maps, generate_split(pretrain.corpus_spec({4: 3}, 0.2), seed=2)[0])
    assert config.corpus_key() != key  # other test maps: another corpus
    assert load_pretrain_config(_config(tmp_path, GOOD)).corpus_key().keys() == key.keys() - {
        "exclude_sha256"
    }


def test_the_wide_base_reads_every_size_and_needs_the_ood_maps_it_excludes(tmp_path: Path, monkeypatch):
    from lakeshift.data.generate import generate_split
    from lakeshift.io import write_jsonl

    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(Path(__file__).resolve().parents[2] / "configs")
    with pytest.raises(LakeshiftError, match=r"corpus.exclude: runs/ood-data/val-id: no maps.jsonl there"):
        load_pretrain_config("configs/pretrain/base-mini-cells-trace-wide.yaml")
    splits = ("val-id", "val-ood", "id-test", "ood-size", "ood-dist")
    maps = generate_split(pretrain.corpus_spec({7: 2}, 0.1), seed=1)[0]
    for split in splits:
        write_jsonl(tmp_path / "runs/ood-data" / split / "maps.jsonl", maps)
    config = load_pretrain_config("configs/pretrain/base-mini-cells-trace-wide.yaml")
    assert [g.size for g in config.spec.groups] == list(range(3, 31))
    assert config.exclude == tuple(f"runs/ood-data/{split}" for split in splits)
    assert "exclude_sha256" in config.corpus_key()


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "base.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = "corpus:\n  seed: 2\n  maps: {3: 12, 4: 12}\ntrain:\n  model: micro\n  max_steps: 2\n  batch_size: 4\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("seed: 2", "sed: 2"), ":2: corpus.sed: unknown key"),
        (GOOD.replace("{3: 12, 4: 12}", "{3: 0}"), ":3: corpus.maps.3: must be an integer >= 1"),
        (GOOD.replace("{3: 12, 4: 12}", "{x: 3}"), ":3: corpus.maps.x: a map size must be an integer"),
        (GOOD.replace("{3: 12, 4: 12}", "{1: 3}"), "corpus.maps.1: size 1: size must be an integer >= 2"),
        (GOOD.replace("max_steps: 2", "max_steps: two"), ":6: train.max_steps: expected an integer"),
        (GOOD.replace("max_steps: 2", "lr_peak: 2"), ":6: train.lr_peak: unknown key"),
        (GOOD.replace("max_steps: 2", "bf16: 1"), ":6: train.bf16: expected true or false, got 1"),
        ("corpus:\n  maps: {3: 1}\n", "train: expected train: with at least model:"),
        (GOOD.replace("seed: 2", "tasks: [trace, plan]"), ":2: corpus.tasks: unknown name 'plan'"),
        (GOOD.replace("seed: 2", "tasks: trace"), ":2: corpus.tasks: expected a list of names"),
        (GOOD.replace("seed: 2", "traces: [grid, grid]"), ":2: corpus.traces: a name is listed twice"),
        (GOOD.replace("seed: 2", "traces: [none]"), ":2: corpus.traces: unknown name 'none'"),
        (
            GOOD.replace("seed: 2", "walks_end_at_goal: 1"),
            ":2: corpus.walks_end_at_goal: expected true or false",
        ),
        (GOOD.replace("max_steps: 2", "cells: {grids: all}"), ":6: train.cells.grids: expected one of first"),
        (
            GOOD.replace("seed: 2", "traces: [desc]\n  trace_max_size: {grid: 3}"),
            ":3: corpus.trace_max_size.grid: not a trace of this corpus (desc)",
        ),
        (
            GOOD.replace("seed: 2", "tasks: [trace]\n  traces: [grid]\n  trace_max_size: {grid: 3}"),
            "corpus.trace_max_size: maps of size 4 get no trace format (largest 3)",
        ),
        (
            GOOD.replace("seed: 2", "tasks: [trace]\n  trace_max_size: {grid: 0}"),
            "corpus.trace_max_size.grid: must be an integer >= 1",
        ),
        (
            GOOD.replace("seed: 2", "exclude: [no/such/data]"),
            ":2: corpus.exclude: no/such/data: no maps.jsonl",
        ),
        (GOOD.replace("seed: 2", "exclude: data/test"), ":2: corpus.exclude: expected a list of map files"),
        (GOOD.replace("seed: 2", "inputs: [grid, image]"), ":2: corpus.inputs: an image corpus shows images"),
        (GOOD.replace("seed: 2", "inputs: [png]"), ":2: corpus.inputs: unknown name 'png'"),
    ],
)
def test_bad_configs_are_one_line_naming_file_line_and_key(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(LakeshiftError, match=re.escape(needle)):
        load_pretrain_config(_config(tmp_path, text))


def test_a_config_names_a_named_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, GOOD.replace("model: micro", "model: gpt2"))
    assert main(["pretrain", str(config), "--out", str(tmp_path / "run")]) == 2
    assert "train.model 'gpt2': a base model is a named size" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_pretrain_then_fine_tune_from_the_run(tmp_path: Path, capsys) -> None:
    from tests.model_fixtures import generate_split

    config = _config(tmp_path, GOOD)
    out = tmp_path / "base"
    assert main(["pretrain", str(config), "--out", str(out)]) == 0
    assert "corpus: 100%" in capsys.readouterr().err  # the corpus's progress bar ran to its end
    sft = out / "corpus" / "pretrain" / "sft" / "text__maptasks.jsonl"
    assert len(sft.read_text().splitlines()) == 24
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "done" and run["hparams"]["max_steps"] == 2
    # another config into the same folder: its corpus is refused
    other = _config(tmp_path, GOOD.replace("seed: 2", "seed: 5"))
    assert main(["pretrain", str(other), "--out", str(out), "--resume"]) == 2

    data = tmp_path / "data"
    generate_split(data, "id-train", count=6, train=True)
    tuned = tmp_path / "tuned"
    args = ["train", "--data", str(data), "--input", "grid", "--cot", "none", "--model", str(out)]
    assert main([*args, "--out", str(tuned), "--max-steps", "2", "--prompt", "map-only"]) == 0
    hp = json.loads((tuned / "run.json").read_text())["hparams"]
    assert hp["preset"] == "scratch" and hp["tokenizer"] == "checkpoint"


#: The maps a shipped base's corpus excludes (``corpus.exclude``): the `lakeshift generate` that makes them.
EXCLUDED_MAPS = {
    "mini-cells-trace-wide-base": [
        "--suite",
        "configs/suites/suite-ood.yaml",
        "--seed",
        "24",
        "--out",
        "runs/ood-data",
    ],
}


@pytest.mark.parametrize("name", sorted(BASE_MODELS))
def test_the_shipped_base_model_matches_its_config_and_reads_every_format(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakeshift.cli import main as cli_main
    from lakeshift.data.records import sft_records
    from lakeshift.models.cells import CellSpec, CellVocab
    from lakeshift.models.registry import cell_spec, resolve_model
    from lakeshift.models.tokenizer import encode_checked, load_tokenizer

    spec = resolve_model(name)
    assert spec.kind == "path" and spec.small and not spec.vision
    folder = Path(spec.source)
    provenance = json.loads((folder / "base.json").read_text(encoding="utf-8"))
    root = Path(__file__).resolve().parents[2]
    if name in EXCLUDED_MAPS:  # its corpus key holds the sha256 of the maps it never showed: make them again
        monkeypatch.chdir(tmp_path)
        (tmp_path / "configs").symlink_to(root / "configs")
        generate = ["generate", *EXCLUDED_MAPS[name], "--inputs", "grid", "--cots", "none", "--no-images"]
        assert cli_main([*generate, "--no-progress"]) == 0
    config = load_pretrain_config(root / BASE_MODELS[name])
    assert provenance["corpus"] == json.loads(json.dumps(config.corpus_key()))
    assert provenance["hparams"]["batch_size"] == config.train["batch_size"]
    saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    # its cells spec is the one its config's model had, changed by the config's cells: mapping
    parent = cell_spec(resolve_model(config.train["model"]))
    assert CellSpec.from_legacy(saved) == parent.changed(config.train.get("cells") or {})
    tokenizer = load_tokenizer(folder)
    # its token ids (walked answer cells included) are the ones a fresh mini-cells model gets; markers, desc
    # and table words a checkpoint was saved without are the tokenizer's, set when it loads (a model that
    # does not compose its coordinates was saved without their shared tokens)
    fresh = CellVocab.from_tokenizer(tokenizer)
    stored = CellVocab.from_legacy(saved).with_words_of(fresh)
    # (but the wave's arrow cells, added since: a base never read a wave frame and keeps reading none)
    vocab = tokenizer.get_vocab()
    arrows = {vocab[piece] for a in "^v<>" for piece in (a, f"  {a}") if piece in vocab}
    fresh = dataclasses.replace(fresh, first=fresh.first - arrows, rest=fresh.rest - arrows)
    assert dataclasses.replace(stored, coord_base=fresh.coord_base) == fresh
    m = FrozenLakeMap.from_rows(["SFFFFFFFFF", *["FFFFFHFFFF"] * 8, "FFFFFFFFFG"])
    record = {"id": "big", "rows": m.rows, "optimal_path": m.optimal_path()}
    records = sft_records(record, "test", ("grid", "table", "desc"), ("none", "coords", "grid+desc"))
    for rec in records.values():
        for turn in rec["messages"]:
            encode_checked(tokenizer, turn["content"], "big")


def test_a_missing_base_checkpoint_says_how_to_rebuild_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakeshift.models import registry

    monkeypatch.setattr(registry, "_CHECKPOINTS", tmp_path)
    rebuild = r"lakeshift pretrain configs/pretrain/base-mini-cells.yaml --out runs/mini-cells-base"
    with pytest.raises(LakeshiftError, match=rebuild):
        registry.resolve_model("mini-cells-base")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("{3: 12, 4: 12}", "{3: 5, '03': 5}"), ":3: corpus.maps.03: map size 3 is given twice"),
        (
            GOOD.replace("seed: 2", "traces: [grid]"),
            ":2: corpus.traces: has no effect without the trace task",
        ),
        (
            GOOD.replace("seed: 2", "tasks: [walk]\n  walks_end_at_goal: true"),
            ":3: corpus.walks_end_at_goal: has no effect without the trace task",
        ),
        (
            GOOD.replace("seed: 2", "trace_max_size: {grid: 3}"),
            ":2: corpus.trace_max_size: has no effect without the trace task",
        ),
    ],
)
def test_a_pretrain_config_that_would_silently_drop_a_setting_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    config = _config(tmp_path, text)
    assert main(["pretrain", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert str(config) + needle in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()
