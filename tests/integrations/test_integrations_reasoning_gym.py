"""reasoning-gym entry point: entries from ``create_dataset``, rewards equal to ``lakeshift score``."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# CI installs the extra, so a missing reasoning-gym fails there instead of skipping quietly.
reasoning_gym = (
    importlib.import_module("reasoning_gym") if os.environ.get("CI") else pytest.importorskip("reasoning_gym")
)

from reasoning_gym.coaching.base_curriculum import DefaultCurriculumContext, RangeAttributeMode  # noqa: E402

from lakeshift import formats  # noqa: E402
from lakeshift.cli import main  # noqa: E402
from lakeshift.data.maps import map_from_record  # noqa: E402
from lakeshift.errors import LakeshiftError  # noqa: E402
from lakeshift.formats import prompts  # noqa: E402
from lakeshift.integrations import reasoning_gym as lakeshift_rg  # noqa: E402
from lakeshift.scoring import score_output, scoring_map  # noqa: E402

NAME = lakeshift_rg.DATASET_NAME
OOD = {"min_grid_size": 7, "max_grid_size": 10, "hole_prob": 0.1, "min_d_inf": 6}


def outputs_for(entry: dict) -> list[str]:
    """Hand-made outputs covering every verdict on the entry's map."""
    path = entry["metadata"]["map"]["optimal_path"]
    letters = "".join(m[0] for m in path)
    return [
        entry["answer"],
        f"Thinking... \\boxed{{{letters}}}",
        ", ".join(path),  # what reasoning-gym's <answer> extraction passes on
        "\\boxed{" + ", ".join(path[:-1]) + "}",  # stops short
        "\\boxed{" + ", ".join([*path, "UP", "UP"]) + "}",  # walks on
        "\\boxed{" + ", ".join(["LEFT"] * 5 + ["UP"] * 5 + path) + "}",  # off-edge moves, start may move
        "\\boxed{" + ", ".join(["DOWN"] * 12) + "}",
        "\\boxed{go right}",
        "no box at all",
        "",
    ]


def test_create_dataset_gives_solvable_entries_in_the_chosen_format() -> None:
    data = reasoning_gym.create_dataset(NAME, seed=3, size=8, input_format="table", legend=False, **OOD)
    assert len(data) == 8 and len(list(data)) == 8
    for i, entry in enumerate(data):
        rec = entry["metadata"]["map"]
        m = map_from_record(rec)
        assert m.size == 7 + i % 4 and m.d_inf >= 6
        # legend=False: the paper's exact prompt
        assert entry["question"] == prompts.user_prompt("test", formats.render(m, "table"))
        assert score_output(scoring_map(rec), entry["answer"]).optimal
        assert data.score_answer(entry["answer"], entry) == 1.0
        json.dumps(entry)  # entries are plain data, so they can be saved as JSON lines


def test_same_seed_same_entries_other_seed_other_maps() -> None:
    a = reasoning_gym.create_dataset(NAME, seed=11, size=6)
    b = reasoning_gym.create_dataset(NAME, seed=11, size=6)
    c = reasoning_gym.create_dataset(NAME, seed=12, size=6)
    assert list(a) == list(b)
    assert [e["metadata"]["map"]["rows"] for e in a] != [e["metadata"]["map"]["rows"] for e in c]
    assert a[5] == b[5]  # an entry regenerated alone equals the one met by iterating
    with pytest.raises(IndexError):
        a[6]


@pytest.mark.parametrize("partial_credit", [False, True])
def test_rewards_are_lakeshift_score_verdicts(tmp_path: Path, partial_credit: bool) -> None:
    """Every reward equals what ``lakeshift score`` (the CLI) says about the same outputs on the same maps."""
    data = reasoning_gym.create_dataset(NAME, seed=5, size=4, partial_credit=partial_credit, **OOD)
    score_fn = reasoning_gym.get_score_answer_fn(NAME)  # built from the default config
    n_outputs = len(outputs_for(data[0]))
    maps, rewards = [], []
    preds: list[list[dict]] = [[] for _ in range(n_outputs)]  # one predictions file per output kind
    for entry in data:
        rec = entry["metadata"]["map"]
        maps.append(rec)
        for k, text in enumerate(outputs_for(entry)):
            rewards.append(data.score_answer(text, entry))
            assert score_fn(text, entry) == rewards[-1]
            boxed = text if "\\boxed{" in text or not text else "\\boxed{" + text + "}"
            preds[k].append({"id": rec["id"], "output": boxed})
    maps_file, scored = tmp_path / "maps.jsonl", tmp_path / "scored.jsonl"
    maps_file.write_text("".join(json.dumps(r) + "\n" for r in maps))
    verdicts = []
    for k in range(n_outputs):
        pred_file = tmp_path / f"pred-{k}.jsonl"
        pred_file.write_text("".join(json.dumps(p) + "\n" for p in preds[k]))
        assert (
            main(["score", "--maps", str(maps_file), "--predictions", str(pred_file), "--out", str(scored)])
            == 0
        )
        verdicts.append([json.loads(line) for line in scored.read_text().splitlines()])
    expected = []
    for i in range(len(maps)):
        for by_sample in verdicts:
            row = by_sample[i]
            if row["success"]:
                expected.append(1.0)
            else:
                expected.append(0.5 * max(0.0, row["progress"]) if partial_credit else 0.0)
    assert rewards == pytest.approx(expected)
    assert 0.0 < sum(rewards) < len(rewards)  # both successes and failures were met
    if partial_credit:
        assert any(0.0 < r < 1.0 for r in rewards)


def test_a_composite_dataset_mixes_it_in_and_scores_extracted_answers_through_lakeshift() -> None:
    """reasoning-gym's own pipeline: a ``composite`` of this dataset and one of reasoning-gym's, answers
    taken from ``<answer>`` tags by ``reasoning_gym.utils.extract_answer``, rewards from the composite."""
    from reasoning_gym.composite import DatasetSpec
    from reasoning_gym.utils import extract_answer

    specs = [
        DatasetSpec(NAME, 1.0, {"min_grid_size": 4, "max_grid_size": 5}),
        DatasetSpec("chain_sum", 1.0, {}),
    ]
    data = reasoning_gym.create_dataset("composite", seed=4, size=12, datasets=specs)
    ours = [e for e in data if e["metadata"]["source_dataset"] == NAME]
    assert ours and len(ours) < len(data)
    for entry in ours:
        path = entry["metadata"]["map"]["optimal_path"]
        right = extract_answer(f"<think>...</think><answer>{', '.join(path)}</answer>")
        wrong = extract_answer(f"<answer>{', '.join(path[:-1])}</answer>")  # stops short of the goal
        assert data.score_answer(right, entry) == 1.0
        assert data.score_answer(wrong, entry) == 0.0


def test_no_answer_scores_zero() -> None:
    data = reasoning_gym.create_dataset(NAME, seed=1, size=1, partial_credit=True)
    assert [data.score_answer(text, data[0]) for text in (None, "", "  ")] == [0.0] * 3


def test_a_failure_never_earns_a_solution_reward() -> None:
    # S G H: RIGHT reaches the goal, the second RIGHT falls in; the scorer's progress is 1.0 (last safe cell).
    rec = {"id": "g", "rows": ["SGH", "FFF", "FFF"], "optimal_path": ["RIGHT"]}
    entry = {"metadata": {"map": rec, "partial_credit": True, "source_index": 0}}
    assert score_output(scoring_map(rec), "\\boxed{RIGHT, RIGHT}").progress == 1.0
    score_fn = reasoning_gym.get_score_answer_fn(NAME)
    assert score_fn("\\boxed{RIGHT, RIGHT}", entry) == lakeshift_rg.FAILURE_CREDIT
    assert score_fn("\\boxed{RIGHT}", entry) == 1.0


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    lo=st.integers(2, 8),
    span=st.integers(0, 2),
    d_inf=st.integers(1, 3),
    idx=st.integers(0, 99),
)
def test_every_entry_meets_its_config(seed: int, lo: int, span: int, d_inf: int, idx: int) -> None:
    hi = lo + span
    data = lakeshift_rg.FrozenLakeDataset(
        lakeshift_rg.FrozenLakeConfig(
            min_grid_size=lo, max_grid_size=hi, min_d_inf=min(d_inf, lo - 1), seed=seed, size=100
        )
    )
    entry = data[idx]
    m = map_from_record(entry["metadata"]["map"])
    assert m.size == lo + idx % (span + 1) and m.d_inf >= min(d_inf, lo - 1)
    assert data.score_answer(entry["answer"], entry) == 1.0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"input_format": "image"}, "input_format 'image' is not a text format"),
        ({"min_grid_size": 5, "max_grid_size": 4}, "max_grid_size 4 is below min_grid_size 5"),
        ({"min_d_inf": 0}, "min_d_inf must be an integer >= 1, got 0"),
        ({"min_d_inf": 3, "max_d_inf": 2}, "grid size 4: empty d_inf range 3..2"),
        ({"legend": "yes"}, "legend must be true or false, got 'yes'"),
        ({"hole_prob": 1.5}, "hole_prob must be a probability in [0, 1)"),
        ({"size": 0}, "size must be an integer >= 1"),
        ({"max_grid_size": "9"}, "max_grid_size must be an integer >= 2, got '9'"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(config: dict, message: str) -> None:
    with pytest.raises(LakeshiftError) as err:
        reasoning_gym.create_dataset(NAME, **config)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(NAME)


def test_curriculum_runs_by_size() -> None:
    curriculum = reasoning_gym.factory.create_curriculum(NAME)
    seen = []
    while True:
        config = curriculum.generate_configuration({"seed": 7, "size": 4})
        sizes = {e["metadata"]["map"]["size"] for e in lakeshift_rg.FrozenLakeDataset(config)}
        seen.append((config.min_grid_size, config.max_grid_size, sizes))
        if not curriculum.increment_attr_level("grid_size"):
            break
    assert [(lo, hi) for lo, hi, _ in seen] == [(3, n) for n in lakeshift_rg.GRID_SIZE_LEVELS]
    assert all(sizes <= set(range(lo, hi + 1)) for lo, hi, sizes in seen)
    assert seen[-1][2] == {3, 4, 5, 6}  # 4 entries take turns over the sizes from 3
    curriculum.set_attr_level("grid_size", 7)
    ctx = DefaultCurriculumContext(mode=RangeAttributeMode.UPPER_BOUND)
    config = curriculum.generate_configuration({"seed": 7, "size": 3}, ctx)
    assert {e["metadata"]["map"]["size"] for e in lakeshift_rg.FrozenLakeDataset(config)} == {10}


@pytest.mark.parametrize(
    ("input_format", "symbols"),
    [("grid", ["P", "G", "X", "."]), ("table", ["@", "*", "#", "_"]), ("desc", [])],
)
def test_the_question_says_what_its_symbols_mean_and_names_moves_as_answers_do(
    input_format: str, symbols: list[str]
) -> None:
    """By default the question is readable alone: the map's symbols and coordinates explained, the moves
    named as the reference answer writes them; the paper's exact prompt stays one option away."""
    data = reasoning_gym.create_dataset(NAME, seed=2, size=4, input_format=input_format)
    paper = reasoning_gym.create_dataset(NAME, seed=2, size=4, input_format=input_format, legend=False)
    for entry, exact in zip(data, paper, strict=True):
        question = entry["question"]
        legend = next(line for line in question.splitlines() if line.startswith(("Legend:", "Rows are")))
        for symbol in symbols:
            assert f" {symbol} " in f" {legend} ", (symbol, legend)
        assert "Rows are numbered from 1 at the top" in question or input_format == "grid"
        assert "'L' (left)" not in question and "LEFT, RIGHT, UP or DOWN" in question
        answer_moves = entry["answer"].removeprefix("\\boxed{").removesuffix("}").split(", ")
        assert all(move in question for move in answer_moves)
        assert exact["question"] == prompts.user_prompt(
            "test", formats.render(map_from_record(exact["metadata"]["map"]), input_format)
        )
        assert "'L' (left)" in exact["question"] and "Legend" not in exact["question"]
        assert entry["metadata"]["map"] == exact["metadata"]["map"]  # only the wording differs


def test_curriculum_reaches_the_papers_ood_settings() -> None:
    """Through reasoning-gym's curriculum API: the default level is the dataset's default (ID holes, any
    distance); the levels reach OOD-size (7-10), OOD-dist (d_inf >= 6) and the OOD hole probability."""
    curriculum = reasoning_gym.factory.create_curriculum(NAME)
    assert set(curriculum.attributes) == {"grid_size", "d_inf", "hole_prob"}
    start = curriculum.generate_configuration({"seed": 7, "size": 4})
    assert (start.min_d_inf, start.hole_prob) == (1, 0.2)
    curriculum.set_attr_level("grid_size", lakeshift_rg.GRID_SIZE_LEVELS.index(10))
    curriculum.set_attr_level("d_inf", lakeshift_rg.D_INF_LEVELS.index(6))
    curriculum.set_attr_level("hole_prob", lakeshift_rg.HOLE_PROB_LEVELS.index(0.1))
    ood_dist = curriculum.generate_configuration(
        {"seed": 7, "size": 8}, DefaultCurriculumContext(mode=RangeAttributeMode.LAST_K, k=4)
    )
    assert (ood_dist.min_grid_size, ood_dist.max_grid_size, ood_dist.min_d_inf) == (7, 10, 6)
    data = reasoning_gym.create_dataset(NAME, **vars(ood_dist))
    assert {e["metadata"]["map"]["size"] for e in data} == {7, 8, 9, 10}
    assert all(e["metadata"]["map"]["d_inf"] >= 6 for e in data)
    assert all(e["metadata"]["difficulty"]["hole_prob"] == 0.1 for e in data)


def test_every_curriculum_level_gives_a_dataset() -> None:
    """The attributes move independently, so a distance beyond a small map's reach is capped at the
    farthest its maps allow (``n - 1``) instead of making the configuration impossible."""
    curriculum = reasoning_gym.factory.create_curriculum(NAME)
    for size_level in range(len(lakeshift_rg.GRID_SIZE_LEVELS)):
        for d_level in range(len(lakeshift_rg.D_INF_LEVELS)):
            for hole_level in range(len(lakeshift_rg.HOLE_PROB_LEVELS)):
                curriculum.set_attr_level("grid_size", size_level)
                curriculum.set_attr_level("d_inf", d_level)
                curriculum.set_attr_level("hole_prob", hole_level)
                config = curriculum.generate_configuration({"seed": 1, "size": 2})
                for entry in lakeshift_rg.FrozenLakeDataset(config):
                    rec = entry["metadata"]["map"]
                    assert rec["d_inf"] >= min(config.min_d_inf, rec["size"] - 1)


def test_importing_again_keeps_one_registration() -> None:
    importlib.reload(lakeshift_rg)
    assert reasoning_gym.factory.DATASETS[NAME][0].__name__ == "FrozenLakeDataset"
    assert reasoning_gym.create_dataset(NAME, seed=1, size=1)[0]["answer"].startswith("\\boxed{")


@pytest.mark.parametrize(
    "entry", [None, {"question": "q", "answer": "a"}, {"metadata": {}}, {"metadata": None}, "an entry"]
)
def test_scoring_against_what_is_not_an_entry_is_one_clear_error(entry) -> None:
    """An entry of another dataset, or none, is named in a LakeshiftError (never a TypeError or KeyError),
    by the dataset's ``score_answer`` and by reasoning-gym's ``get_score_answer_fn`` alike."""
    data = reasoning_gym.create_dataset(NAME, seed=1, size=1)
    score_fn = reasoning_gym.get_score_answer_fn(NAME)
    for score in (data.score_answer, score_fn):
        with pytest.raises(LakeshiftError, match="score_answer needs an entry of this dataset"):
            score(data[0]["answer"], entry)
