"""The typed cells spec: its fields and combinations are checked in one place, its command-line and config
forms read back what they write, checkpoints of every earlier config generation load into it, and every
shipped base gives each token the cells and each prompt the answer it gave before the spec existed."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift.errors import LakeshiftError
from lakeshift.models.cells import (
    FIELDS,
    CellSpec,
    CellVocab,
    check_overrides,
    format_overrides,
    parse_overrides,
)
from lakeshift.models.cells.spec import ATTENTIONS, GRIDS, MAP_FORMATS, OFFSETS, SEQUENCE_POSITIONS, WALKS
from lakeshift.models.tokenizer import build_structured_tokenizer


@st.composite
def specs(draw: Any) -> CellSpec:
    grids, walk = draw(st.sampled_from(GRIDS)), draw(st.sampled_from(WALKS))
    extra = draw(st.lists(st.sampled_from(MAP_FORMATS[1:]), unique=True))
    return CellSpec(
        grids=grids,
        walk=walk,
        maps=("grid", *extra),
        player=draw(st.booleans()) and grids in ("next", "coupled") and walk == "trace",
        order=draw(st.booleans()),
        offsets=draw(st.sampled_from(OFFSETS)),
        sequence=draw(st.sampled_from(SEQUENCE_POSITIONS)),
        attention=draw(st.sampled_from(ATTENTIONS)) if grids == "coupled" and walk != "none" else "full",
    )


@given(specs(), specs())
@settings(max_examples=80, deadline=None)
def test_a_spec_changed_by_another_s_fields_in_command_line_form_becomes_the_other(a, b) -> None:
    overrides = {k: v for k, v in b.to_json().items() if k != "coordinates"}
    assert a.replace(parse_overrides(format_overrides(overrides))) == b
    assert CellSpec.from_json(json.loads(json.dumps(b.to_json()))) == b


def test_maps_are_one_spelling_whatever_their_order() -> None:
    assert CellSpec(maps=("desc", "grid")).maps == ("grid", "desc")
    assert CellSpec(maps=("desc", "grid")) == CellSpec(maps=("grid", "desc"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"grids": "all"}, "--cells.grids: expected one of first, every, next, coupled, got 'all'"),
        ({"sequence": "alibi"}, "--cells.sequence: expected one of rope, none, got 'alibi'"),
        ({"walk": True}, "--cells.walk: expected one of none, answer, trace, got True"),
        ({"maps": ["table"]}, "--cells.maps: grid maps are always read: list grid"),
        (
            {"maps": ["grid", "image"]},
            "--cells.maps: expected map formats among grid, table, desc, got 'image'",
        ),
        ({"maps": "grid"}, "--cells.maps: expected a list of map formats"),
        ({"order": "yes"}, "--cells.order: expected true or false, got 'yes'"),
        ({"size": 3}, "--cells.size: unknown cells field"),
        (
            {"player": True},
            "--cells: player: the flag marks the cell stated moves reached: it needs grids: next",
        ),
        ({"player": True, "grids": "next"}, "it needs grids: next or coupled and walk: trace"),
        ({"attention": "sparse"}, "--cells.attention: expected one of full, local, got 'sparse'"),
        (
            {"attention": "local"},
            "--cells: attention: local reads each map's cells and the answer's walked cells: it needs "
            "grids: coupled and walk: answer or trace",
        ),
        ({"attention": "local", "grids": "coupled", "walk": "none"}, "it needs grids: coupled and walk"),
    ],
)
def test_a_bad_field_or_combination_is_one_line_naming_it(overrides: dict, message: str) -> None:
    with pytest.raises(LakeshiftError) as err:
        CellSpec().replace(overrides, "--cells")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grids", "expected FIELD=VALUE,... (fields: grids, walk, maps, player, order, offsets, coord"),
        ("grids=all", "grids: expected one of first, every, next, coupled, got 'all'"),
        ("player=maybe", "player: expected true or false, got 'maybe'"),
        ("maps=grid+photo", "got 'photo'"),
    ],
)
def test_a_bad_command_line_form_is_refused(text: str, message: str) -> None:
    with pytest.raises(LakeshiftError) as err:
        parse_overrides(text)
    assert message in str(err.value)


def test_a_config_s_cells_value_is_checked_field_by_field() -> None:
    assert check_overrides({"grids": "next", "maps": ["grid", "desc"]}, "train.cells") is None
    assert check_overrides(["grids"], "train.cells") == (
        f"train.cells: expected a mapping of cells fields ({', '.join(FIELDS)}), got ['grids']"
    )
    assert check_overrides({"walk": "all"}, "train.cells") == (
        "train.cells.walk: expected one of none, answer, trace, got 'all'"
    )


LEGACY = {
    # the flat keys of each earlier generation -> the spec they meant
    "no walk": ({"cell_coords": {"5": [1, 1]}}, CellSpec(walk="none")),
    "walk": ({"cell_moves": {"7": [0, 1]}}, CellSpec()),
    "shift": (
        {"cell_moves": {"7": [0, 1]}, "cell_shift": True, "cell_grids": "every", "cell_coord_base": {}},
        CellSpec(grids="every", offsets="random"),
    ),
    "compose": (
        {"cell_moves": {"7": [0, 1]}, "cell_shift": True, "cell_grids": "every", "cell_coord_base": {"9": 8}},
        CellSpec(grids="every", offsets="random", coordinates="composed"),
    ),
    "player": (
        {"cell_moves": {"7": [0, 1]}, "cell_grids": "next", "cell_trace_moves": True, "cell_player": True},
        CellSpec(grids="next", walk="trace", maps=("grid", "desc"), player=True),
    ),
    # the player flag never fired without next and trace moves: only its desc reading stays
    "player without next": (
        {"cell_moves": {"7": [0, 1]}, "cell_grids": "every", "cell_player": True},
        CellSpec(grids="every", maps=("grid", "desc")),
    ),
    "tables and order": (
        {"cell_moves": {"7": [0, 1]}, "cell_tables": True, "cell_order": True, "cell_player": False},
        CellSpec(maps=("grid", "table"), order=True),
    ),
}


@pytest.mark.parametrize("case", LEGACY)
def test_a_legacy_flat_config_maps_to_the_spec_it_meant(case: str) -> None:
    fields, spec = LEGACY[case]
    assert CellSpec.from_legacy(fields) == spec


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_structured_tokenizer([])


def test_the_vocab_reads_back_what_it_writes_and_completes_a_legacy_one(tokenizer) -> None:
    vocab = CellVocab.from_tokenizer(tokenizer)
    assert vocab.complete and vocab.moves and vocab.coords and vocab.coord_base
    assert CellVocab.from_config(json.loads(json.dumps(vocab.to_config()))) == vocab
    legacy = {
        f"cell_{k}": v for k, v in vocab.to_config().items() if k in ("coords", "first", "rest", "moves")
    }
    partial = CellVocab.from_legacy({**legacy, "cell_newline": vocab.newline})
    assert not partial.complete
    assert partial.with_words_of(vocab).answer == vocab.answer


#: Shipped bases: the spec each checkpoint's legacy config means, and a digest of what it computed before
#: the spec existed (cells of every token and the greedy token at every position, over 126 conversations;
#: greedy answers to three prompts), made by the cells module this spec replaced.
SHIPPED = json.loads((Path(__file__).parent / "cells_shipped_bases.json").read_text())
SHIPPED_SPECS = {
    "mini-cells-base": CellSpec(),
    "mini-cells-trace-base": CellSpec(grids="every"),
    "mini-cells-trace-player-base": CellSpec(grids="next", walk="trace", maps=("grid", "desc"), player=True),
    "mini-cells-trace-wide-base": CellSpec(grids="next", walk="trace", maps=("grid", "desc"), player=True),
}


def _maps() -> list[Any]:
    from lakeshift.env import FrozenLakeMap

    rng = random.Random(7)
    out = []
    for size in (3, 4, 5, 6, 8, 10):
        while True:
            cells = [(r, c) for r in range(size) for c in range(size)]
            start, goal = rng.sample(cells, 2)
            holes = frozenset(c for c in cells if c not in (start, goal) and rng.random() < 0.2)
            m = FrozenLakeMap(size, holes, start, goal)
            if m.solvable:
                out.append(m)
                break
    return out


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(SHIPPED_SPECS))
def test_a_shipped_base_loads_through_the_spec_and_computes_what_it_did(name: str) -> None:
    import torch

    from lakeshift import formats, traces
    from lakeshift.models.cells import spec_of
    from lakeshift.models.registry import cell_spec, load_model, load_processing, resolve_model

    spec = resolve_model(name)
    assert cell_spec(spec) == SHIPPED_SPECS[name]
    model = load_model(spec).eval()
    assert spec_of(model) == SHIPPED_SPECS[name]
    tok = load_processing(spec)
    positions, argmax = [], []
    maps = _maps()
    for m in maps:
        for fmt in ("grid", "table", "desc"):
            for cot in ("none", "coords", "grid", "grid+desc", "table", "desc", "astar"):
                messages = [
                    {"role": "user", "content": formats.render(m, fmt)},
                    {"role": "assistant", "content": traces.completion(m, m.optimal_path(), cot)},
                ]
                ids = torch.tensor(
                    [tok.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]]
                )
                with torch.no_grad():
                    rows, cols, *flags = model.model.embed_tokens.indices(ids)
                    logits = model(ids).logits[0]
                cells = [rows[0].tolist(), cols[0].tolist(), flags[0].tolist() if flags else []]
                positions.append(_digest([json.dumps(cells)]))
                argmax.append(_digest([json.dumps(logits.argmax(-1).tolist())]))
    assert _digest(positions) == SHIPPED[name]["positions"]
    assert _digest(argmax) == SHIPPED[name]["argmax"]
    answers = []
    for m in maps[:1]:
        for fmt in ("grid", "desc", "table"):
            prompt = tok.apply_chat_template(
                [{"role": "user", "content": formats.render(m, fmt)}],
                tokenize=True,
                return_dict=True,
                add_generation_prompt=True,
            )["input_ids"]
            with torch.no_grad():
                out = model.generate(torch.tensor([prompt]), max_new_tokens=60, do_sample=False)
            answers.append(out[0, len(prompt) :].tolist())
    assert answers == SHIPPED[name]["generations"]


#: A change to a shipped base's config.json and what the one error line names: the field and its problem.
BAD_CELLS_CONFIGS = {
    "grids not a grids value": ("mini-cells-base", {"cell_grids": "bogus"}, "cell_grids: expected one of"),
    "grids a number": ("mini-cells-base", {"cell_grids": 5}, "cell_grids: expected one of first, every"),
    "a truthy string": (
        "mini-cells-trace-player-base",
        {"cell_player": "false"},
        "cell_player: expected true or false, got 'false'",
    ),
    "a removed table": ("mini-cells-base", {"cell_coords": ...}, "cell_coords: missing or empty"),
    "a null table": ("mini-cells-base", {"cell_first": None}, "cell_first: null"),
    "player without its weights": (
        "mini-cells-base",
        {"cell_player": True, "cell_grids": "next", "cell_trace_moves": True},
        "cell_player: true, but",
    ),
    "order without its weights": ("mini-cells-base", {"cell_order": True}, "cell_order: true, but"),
    "a cells checkpoint declared qwen2": (
        "mini-cells-base",
        {"model_type": "qwen2"},
        "model_type: 'qwen2', but the checkpoint is a cells model",
    ),
    "a token id beyond the vocabulary": (
        "mini-cells-base",
        {"cell_coords": {"99999": [1, 1]}},
        "cell_coords: token id 99999 is not below the vocab_size",
    ),
    "a spec field": ("mini-cells-base", {"cells": {"grids": "all"}}, "cells.grids: expected one of"),
}


@pytest.fixture(scope="module")
def cells_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.model_fixtures import generate_split

    root = tmp_path_factory.mktemp("cells-data")
    generate_split(root, "id-train", count=2, train=True)
    return root


def _broken_copy(tmp_path: Path, base: str, change: dict[str, Any]) -> Path:
    import shutil

    from lakeshift.models.registry import resolve_model

    folder = tmp_path / "model"
    shutil.copytree(str(resolve_model(base).source), folder)
    config = json.loads((folder / "config.json").read_text())
    for key, value in change.items():
        if value is ...:
            del config[key]
        else:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("case", BAD_CELLS_CONFIGS)
def test_a_broken_cells_config_is_one_line_naming_file_and_field_before_any_answer(
    case: str, cells_data: Path, tmp_path: Path
) -> None:
    from tests.cli_checks import one_error_line, quiet_main

    base, change, message = BAD_CELLS_CONFIGS[case]
    model = _broken_copy(tmp_path, base, change)
    out = tmp_path / "p.jsonl"
    argv = ["predict", "--model", model, "--data", cells_data, "--split", "id-train", "--input", "grid"]
    code, err = quiet_main([*argv, "--cot", "none", "--out", out, "--max-new-tokens", "4"])
    one_error_line(code, err, f"{model / 'config.json'}: {message}")
    assert not out.exists()


def test_coordinates_beyond_the_row_embeddings_are_refused_before_fine_tuning(
    cells_data: Path, tmp_path: Path
) -> None:
    from tests.cli_checks import one_error_line, quiet_main

    model = _broken_copy(tmp_path, "mini-cells-base", {})
    config = json.loads((model / "config.json").read_text())
    config["cell_coords"]["1000"] = [40, 40]
    (model / "config.json").write_text(json.dumps(config))
    out = tmp_path / "run"
    argv = ["train", "--model", model, "--data", cells_data, "--split", "id-train", "--input", "grid"]
    code, err = quiet_main([*argv, "--cot", "none", "--max-steps", "1", "--out", out])
    one_error_line(code, err, f"{model / 'config.json'}: cell_coords: a row must be 1 .. 30, got 40")
    assert not out.exists()


def test_a_cells_checkpoint_declared_qwen2_is_refused_by_its_weights_alone(tmp_path: Path) -> None:
    from lakeshift.models.registry import resolve_model

    model = _broken_copy(tmp_path, "mini-cells-base", {"model_type": "qwen2"})
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({k: v for k, v in config.items() if "cell" not in k}))
    with pytest.raises(LakeshiftError, match=r"model\.safetensors holds row and column embeddings"):
        resolve_model(str(model))
