"""``lakeshift export`` of a suite folder: a Hub dataset folder that ``datasets.load_dataset`` reads as a
``DatasetDict``, with its dataset card; and the map facts of an SFT export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_checks import one_error_line, quiet_main
from suite_fixtures import make_suite, write_jsonl

from lakeshift import FrozenLakeMap, render, score_output, user_prompt
from lakeshift.data.maps import load_maps
from lakeshift.formats.image import render_rgb

datasets = pytest.importorskip("datasets")
huggingface_hub = pytest.importorskip("huggingface_hub")

HUB_SPLITS = {
    "id-test": "id_test",
    "ood-size": "ood_size",
    "ood-dist": "ood_dist",
    "embed10-test": "embed10_test",
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hub")
    data = make_suite(root, per_size=2)
    out = root / "dataset"
    code, err = quiet_main(["export", data, "--out", out])
    assert code == 0, err
    assert f"datasets.load_dataset('{out}')" in err
    return data, out


def _load(out: Path, tmp_path: Path) -> datasets.DatasetDict:
    return datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))


def test_load_dataset_reads_the_suite_as_a_dataset_dict_with_valid_split_names(exported, tmp_path):
    data, out = exported
    suite = _load(out, tmp_path)
    assert isinstance(suite, datasets.DatasetDict)
    assert sorted(suite) == sorted([*HUB_SPLITS.values(), "id_train"])
    for name, hub in HUB_SPLITS.items():
        maps = load_maps(data / name)
        split = suite[hub]
        assert split["id"] == [m["id"] for m in maps]
        for key in ("size", "d_inf", "optimal_length"):
            assert split[key] == [m[key] for m in maps]


def test_each_row_has_the_image_the_question_in_every_format_and_the_answer(exported, tmp_path):
    _, out = exported
    row = _load(out, tmp_path)["ood_dist"][1]
    lake = FrozenLakeMap.from_rows(row["rows"])
    assert row["image"].mode == "RGB"
    assert row["image"].tobytes() == render_rgb(lake).tobytes()
    for fmt in ("desc", "table", "grid"):
        assert row[f"question_{fmt}"] == user_prompt("test", render(lake, fmt))
    assert row["question_image"] == user_prompt("test", None) and "<image>" in row["question_image"]
    assert row["answer"] == r"\boxed{" + ", ".join(row["optimal_path"]) + "}"
    assert score_output(row, row["answer"]).optimal


def test_the_card_is_what_the_hub_reads(exported):
    data, out = exported
    card = huggingface_hub.DatasetCard.load(out / "README.md")
    meta = card.data.to_dict()
    files = meta["configs"][0]["data_files"]
    assert {f["split"] for f in files} == {*HUB_SPLITS.values(), "id_train"}
    for f in files:
        assert list(out.glob(f["path"])), f["path"]
    counts = {s["name"]: s["num_examples"] for s in meta["dataset_info"]["splits"]}
    assert counts == {
        hub: len(load_maps(data / name)) for name, hub in {**HUB_SPLITS, "id-train": "id_train"}.items()
    }
    assert meta["license"] == "mit" and "lakeshift" in meta["tags"]
    text = card.text
    assert "On the Out-of-Distribution Generalization of Reasoning in Multimodal LLMs" in text
    assert "github.com/YanNeu/frozen_ood" in text
    assert "| `ood_dist` | all | 4 |" in text  # the statistics: 2 maps of each of the two sizes


def test_an_official_part_gets_its_own_licence_in_the_card(tmp_path):
    data = make_suite(tmp_path, per_size=1)
    maps = load_maps(data / "id-test")
    write_jsonl(data / "id-test" / "maps.jsonl", [m | {"official_id": str(i)} for i, m in enumerate(maps)])
    out = tmp_path / "dataset"
    code, err = quiet_main(["export", data, "--out", out, "--splits", "id-test,ood-dist"])
    assert code == 0, err
    card = huggingface_hub.DatasetCard.load(out / "README.md")
    assert card.data.license == "other" and card.data.license_link == "LICENSE.md"
    assert "Visual Spatial Planning" in (out / "LICENSE.md").read_text()
    assert "MIT License" in card.text and "Visual Spatial Planning" in card.text and "Mirage" in card.text
    suite = _load(out, tmp_path)
    assert sorted(suite) == ["id_test", "ood_dist"]
    assert suite["id_test"]["official_id"] == [str(i) for i in range(len(maps))]
    assert set(suite["ood_dist"]["official_id"]) == {None}


def test_a_split_too_big_for_one_shard_is_cut_into_several_that_load_in_order(
    exported, tmp_path, monkeypatch
):
    data, _ = exported
    monkeypatch.setattr("lakeshift.data.export.SHARD_BYTES", 1)  # every row a shard of its own
    out = tmp_path / "dataset"
    assert quiet_main(["export", data, "--out", out, "--splits", "ood-size"])[0] == 0
    names = sorted(p.name for p in (out / "data").iterdir())
    assert names == [f"ood_size-{i:05d}-of-00004.parquet" for i in range(4)]
    assert _load(out, tmp_path)["ood_size"]["id"] == [m["id"] for m in load_maps(data / "ood-size")]


def test_export_again_replaces_its_own_folder_and_refuses_anything_else(exported, tmp_path):
    data, _ = exported
    out = tmp_path / "dataset"
    assert quiet_main(["export", data, "--out", out, "--splits", "ood-size"])[0] == 0
    assert quiet_main(["export", data, "--out", out, "--splits", "id-test"])[0] == 0
    assert sorted(p.name for p in (out / "data").iterdir()) == ["id_test-00000-of-00001.parquet"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my notes\n")
    one_error_line(*quiet_main(["export", data, "--out", mine]), str(mine))
    assert (mine / "README.md").read_text() == "my notes\n"


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--splits", "id-test,nope"], ["--splits", "nope"]),
        (["--sft", "grid__none"], ["--sft"]),
        (["--format", "parquet"], ["not a split folder", "--format hub"]),
        (["--format", "csv"], ["unknown export format", "hub"]),
    ],
)
def test_impossible_exports_are_one_line(exported, tmp_path, argv, needles):
    data, _ = exported
    one_error_line(*quiet_main(["export", data, "--out", tmp_path / "x", *argv]), *needles)


def test_a_split_name_datasets_refuses_is_one_line(tmp_path):
    data = make_suite(tmp_path, per_size=1)
    (data / "id-test").rename(data / "id test")
    one_error_line(*quiet_main(["export", data, "--out", tmp_path / "x"]), "'id test'", "datasets")


def test_the_sft_export_carries_each_maps_size_and_distance(tmp_path):
    from model_fixtures import generate_split

    split = generate_split(tmp_path / "d", "id-test", sizes=(3, 4), count=2)
    out = tmp_path / "sft.parquet"
    code, err = quiet_main(["export", split, "--sft", "grid__none", "--out", out])
    assert code == 0, err
    rows = datasets.Dataset.from_parquet(str(out)).to_list()
    maps = {m["id"]: m for m in load_maps(split)}
    assert [r["id"] for r in rows] == list(maps)
    for r in rows:
        assert (r["size"], r["d_inf"], r["optimal_length"]) == tuple(
            maps[r["id"]][k] for k in ("size", "d_inf", "optimal_length")
        )
    assert json.loads(json.dumps(rows[0]["messages"]))[1]["role"] == "user"


def test_the_manual_shows_the_export_as_it_runs(tmp_path, monkeypatch):
    from test_readme import fenced_blocks

    page = Path(__file__).resolve().parents[2] / "docs" / "data.md"
    blocks = fenced_blocks(page)
    at = next(i for i, (lang, text) in enumerate(blocks) if "lakeshift export data/tiny" in text)
    commands = [line.split("#")[0].split() for line in blocks[at][1].splitlines() if line.strip()]
    shown = blocks[at + 1][1]
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        assert argv[0] == "lakeshift"
        code, err = quiet_main(argv[1:])
        assert code == 0, err
    assert err == shown
    row = _load(tmp_path / "frozenlake-tiny", tmp_path)["ood_dist"][0]
    python = next(text for lang, text in blocks[at + 2 :] if lang == "python")
    expected = f"# {(row['size'], row['d_inf'], row['optimal_length'], row['answer'])!r}"
    assert expected in python
