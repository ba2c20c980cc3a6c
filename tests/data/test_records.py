"""SFT records: trl conversational layout for every input x CoT format, errors name the map and field."""

from __future__ import annotations

import json

import pytest

from lakeshift import formats, traces
from lakeshift.data import records
from lakeshift.errors import LakeshiftError
from lakeshift.formats import prompts

MAP = {
    "id": "fig3",
    "split": "id-test",
    "size": 3,
    "rows": ["FGF", "FHF", "FSH"],
    "start": [2, 1],
    "goal": [0, 1],
    "optimal_path": ["LEFT", "UP", "UP", "RIGHT"],
}


@pytest.mark.parametrize("input_format", formats.INPUT_FORMATS)
@pytest.mark.parametrize("cot", traces.COT_FORMATS)
def test_record_layout(input_format: str, cot: str) -> None:
    rec = records.sft_record(MAP, input_format, cot, "train")
    json.dumps(rec)  # plain JSON
    assert rec["id"] == "fig3" and rec["input_format"] == input_format and rec["cot_format"] == cot
    assert [msg["role"] for msg in rec["messages"]] == ["system", "user", "assistant"]
    system, user, assistant = rec["messages"]
    m = records.map_of(MAP)
    answer = traces.completion(m, MAP["optimal_path"], cot)
    if input_format == "image":
        assert rec["images"] == ["images/fig3.png"]
        before, after = prompts.split_at_image("train")
        assert user["content"] == [
            {"type": "text", "text": before},
            {"type": "image"},
            {"type": "text", "text": after},
        ]
        assert system["content"] == [{"type": "text", "text": prompts.SYSTEM_PROMPT}]
        assert assistant["content"] == [{"type": "text", "text": answer}]
    else:
        assert "images" not in rec
        assert system["content"] == prompts.SYSTEM_PROMPT
        assert user["content"] == prompts.user_prompt("train", formats.render(m, input_format))
        assert assistant["content"] == answer
    prompt = records.prompt_messages(MAP, input_format, cot, "train")
    assert prompt["messages"] == rec["messages"][:2]
    assert {k: v for k, v in prompt.items() if k != "messages"} == {
        k: v for k, v in rec.items() if k != "messages"
    }


def test_text_prompt_places_the_map_on_its_own_lines() -> None:
    rec = records.sft_record(MAP, "grid", "none", "test")
    user = rec["messages"][1]["content"]
    assert "Here is the map:\nGrid:\n.  G  .\n.  X  .\n.  P  X\n\nPlease provide your action plan." in user
    assert user.startswith(prompts.TEST_PROMPT.split("<image>")[0][:-1])
    assert rec["messages"][2]["content"] == "\\boxed{LEFT, UP, UP, RIGHT}"


def test_options() -> None:
    rec = records.sft_record(MAP, "image", "none", "test", image_path="../imgs/x.png")
    assert rec["images"] == ["../imgs/x.png"]
    rec = records.sft_record(MAP, "table", "table", "test", table_style="aligned")
    assert "| Row 1 |   _   |   *   |   _   |" in rec["messages"][1]["content"]
    assert "| Row 3 |   @   |   _   |   #   |" in rec["messages"][2]["content"]
    prompt = records.prompt_messages({**MAP, "id": 7}, "desc", None, "test")
    assert prompt["id"] == "7" and "cot_format" not in prompt and len(prompt["messages"]) == 2


@pytest.mark.parametrize(
    ("change", "args", "message"),
    [
        ({}, ("video", "none", "train"), "unknown input format 'video'"),
        ({}, ("grid", "tree", "train"), "unknown CoT format 'tree'"),
        ({}, ("grid", "none", "eval"), "unknown prompt variant 'eval'"),
        ({"rows": ["FGF", "FHF"]}, ("grid", "none", "train"), "map fig3: field 'rows'"),
        ({"rows": None}, ("grid", "none", "train"), "map fig3: field 'rows' must be a list"),
        ({"start": [0, 0]}, ("grid", "none", "train"), "map fig3: field 'start'"),
        (
            {"optimal_path": ["UP"]},
            ("grid", "desc", "train"),
            "map fig3: field 'optimal_path': the path falls",
        ),
        (
            {"optimal_path": ["NORTH"]},
            ("grid", "desc", "train"),
            "map fig3: field 'optimal_path': unknown move",
        ),
        ({"optimal_path": "LURR"}, ("grid", "desc", "train"), "must be a list of moves"),
    ],
)
def test_bad_input_names_the_map_and_field(change: dict, args: tuple, message: str) -> None:
    with pytest.raises(LakeshiftError, match=message.replace("(", r"\(")):
        records.sft_record({**MAP, **change}, *args)


def test_records_load_with_datasets() -> None:
    datasets = pytest.importorskip("datasets")
    image_rows = [records.sft_record(MAP, "image", cot, "train") for cot in traces.COT_FORMATS]
    text_rows = [records.sft_record(MAP, "desc", cot, "train") for cot in traces.COT_FORMATS]
    for rows in (image_rows, text_rows):
        ds = datasets.Dataset.from_list(rows)
        assert len(ds) == len(traces.COT_FORMATS)
        assert ds[0]["messages"][0]["role"] == "system"


def test_batch_records_equal_single_records() -> None:
    batch = records.sft_records(MAP, "test")
    assert list(batch) == [(i, c) for i in formats.INPUT_FORMATS for c in traces.COT_FORMATS]
    for (inp, cot), rec in batch.items():
        assert rec == records.sft_record(MAP, inp, cot, "test")
    # No shared mutable parts: editing one record leaves the others intact.
    batch["image", "none"]["messages"][1]["content"][0]["text"] = "changed"
    assert batch["image", "desc"]["messages"][1]["content"][0]["text"] != "changed"
