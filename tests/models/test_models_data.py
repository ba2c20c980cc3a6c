"""Selecting maps (``--sizes``, ``--per-size``, ``--limit``) and the ``map-only`` prompt of ``load_sft``."""

from __future__ import annotations

import pytest
from model_fixtures import generate_split

from lakeshift import formats
from lakeshift.data.maps import load_maps, map_from_record
from lakeshift.errors import LakeshiftError
from lakeshift.models.data import load_sft


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("d")
    generate_split(root, "id-test", sizes=(3, 4, 5), count=3, inputs=formats.TEXT_FORMATS, cots=("grid",))
    return root


@pytest.mark.parametrize("fmt", formats.TEXT_FORMATS)
def test_map_only_user_turn_is_the_rendered_map_of_the_same_id(data, fmt):
    mirage = load_sft(data, "id-test", fmt, "grid")
    short = load_sft(data, "id-test", fmt, "grid", prompt="map-only")
    assert short.prompt == "map-only" and mirage.prompt == "mirage"
    maps = {m["id"]: m for m in load_maps(data / "id-test")}
    for long_rec, rec in zip(mirage.records, short.records, strict=True):
        text = formats.render(map_from_record(maps[rec["id"]]), fmt)
        assert [m["role"] for m in rec["messages"]] == ["system", "user", "assistant"]
        assert rec["messages"][1]["content"] == text
        # The same map text the generator put inside the Mirage prompt; the other turns are untouched.
        assert text in long_rec["messages"][1]["content"] and len(long_rec["messages"][1]["content"]) > 1000
        assert rec["messages"][0] == long_rec["messages"][0] and rec["messages"][2] == long_rec["messages"][2]


def test_per_size_takes_the_first_maps_of_each_size_in_file_order(data):
    by_size: dict[int, list[str]] = {}
    for m in load_maps(data / "id-test"):
        by_size.setdefault(m["size"], []).append(m["id"])
    picked = [r["id"] for r in load_sft(data, "id-test", "grid", "grid", per_size=2).records]
    assert picked == [i for s in (3, 4, 5) for i in by_size[s][:2]]
    picked = [r["id"] for r in load_sft(data, "id-test", "grid", "grid", sizes=[4, 5], per_size=1).records]
    assert picked == [by_size[4][0], by_size[5][0]]
    picked = [r["id"] for r in load_sft(data, "id-test", "grid", "grid", per_size=2, limit=3).records]
    assert picked == [*by_size[3][:2], by_size[4][0]]


def test_bad_prompt_and_per_size_without_maps_are_clear(data, tmp_path):
    with pytest.raises(LakeshiftError, match="--prompt"):
        load_sft(data, "id-test", "grid", "grid", prompt="short")
    split = tmp_path / "x" / "id-test"
    (split / "sft").mkdir(parents=True)
    (split / "sft" / "grid__grid.jsonl").write_bytes((data / "id-test/sft/grid__grid.jsonl").read_bytes())
    with pytest.raises(LakeshiftError, match="--per-size needs"):
        load_sft(tmp_path / "x", "id-test", "grid", "grid", per_size=1)
    with pytest.raises(LakeshiftError, match="map-only needs"):
        load_sft(tmp_path / "x", "id-test", "grid", "grid", prompt="map-only")
