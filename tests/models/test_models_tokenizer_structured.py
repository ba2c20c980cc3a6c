"""The structured tokenizer: exact round trip on every format, one token per structure piece, no ``<unk>``
on out-of-distribution maps, the reload trap, and clear errors for what it cannot encode."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_fixtures import generate_split

from lakeshift.cli import main
from lakeshift.errors import LakeshiftError
from lakeshift.models.data import load_sft
from lakeshift.models.tokenizer import (
    MAX_MAP_SIZE,
    build_structured_tokenizer,
    encode_checked,
    is_generic_tokenizer,
    load_tokenizer,
    message_texts,
)
from lakeshift.traces import COT_FORMATS

TEXT_INPUTS = ("grid", "table", "desc")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """ID-sized training maps and 7x7-10x10 test maps, every text input x every CoT format."""
    root = tmp_path_factory.mktemp("suite")
    common = {"inputs": TEXT_INPUTS, "cots": COT_FORMATS}
    generate_split(root / "id", "id-train", sizes=(3, 4, 5, 6), count=3, train=True, seed=3, **common)
    generate_split(root / "ood", "ood", sizes=(7, 8, 9, 10), count=2, seed=4, **common)
    return root


def _texts(root, split, prompt="mirage"):
    root = root / ("ood" if split == "ood" else "id")
    out = {}
    for inp in TEXT_INPUTS:
        for cot in COT_FORMATS:
            sft = load_sft(root, split, inp, cot, prompt=prompt)
            out[inp, cot] = [list(message_texts(r["messages"])) for r in sft.records]
    return out


@pytest.fixture(scope="module")
def trained_on_id(suite):
    """A tokenizer built, as training builds it, from the ID training texts only."""
    texts = [t for convs in _texts(suite, "id-train").values() for conv in convs for t in conv]
    return build_structured_tokenizer(texts)


def test_exact_round_trip_on_every_prompt_and_completion_of_every_format_and_split(suite, trained_on_id):
    tok = trained_on_id
    for split in ("id-train", "ood"):
        for prompt in ("mirage", "map-only"):
            for (inp, cot), convs in _texts(suite, split, prompt).items():
                for conv in convs:
                    for text in conv:
                        ids = tok(text, add_special_tokens=False)["input_ids"]
                        assert tok.unk_token_id not in ids, (split, inp, cot, text)
                        assert tok.decode(ids) == text, (split, inp, cot)


def test_ood_numbers_and_coordinates_are_single_known_tokens(trained_on_id):
    tok = trained_on_id
    for text in (" 10", " 9", "(10,10)", f" ({MAX_MAP_SIZE},{MAX_MAP_SIZE})", "  G", " | #", ", RIGHT"):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and ids[0] != tok.unk_token_id, text


def test_a_6x6_grid_conversation_costs_at_most_half_its_characters(suite, trained_on_id):
    sft = load_sft(suite / "id", "id-train", "grid", "none", sizes=[6], prompt="map-only")
    for record in sft.records:
        text = trained_on_id.apply_chat_template(record["messages"], tokenize=False)
        assert len(trained_on_id(text, add_special_tokens=False)["input_ids"]) <= len(text) / 2


PIECES = ["\\boxed{", ", UP", ", LEFT", "(3,4)", " (10,2)", "  .", "  X", " | @", " Row", " 7", "\n", "  "]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(alphabet=string.printable, max_size=6), max_size=30))
def test_decode_inverts_encode_on_any_mix_of_pieces_and_printable_text(parts):
    text = "".join(parts)
    tok = TOKENIZER
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


TOKENIZER = build_structured_tokenizer(["Grid:\n.  P\nG  X\n", "\\boxed{UP, LEFT}"])


def test_reload_next_to_a_qwen2_config_keeps_every_token(tmp_path, trained_on_id):
    from transformers import Qwen2Config

    trained_on_id.save_pretrained(tmp_path)
    Qwen2Config(vocab_size=len(trained_on_id)).save_pretrained(tmp_path)
    assert is_generic_tokenizer(tmp_path)
    again = load_tokenizer(tmp_path)
    text = "Grid:\n.  P  X\nG  .  .\n\\boxed{DOWN, LEFT}\nThis is a 10x10 map. (10,9)"
    assert again(text)["input_ids"] == trained_on_id(text)["input_ids"]
    assert again.decode(again(text)["input_ids"]) == text


def test_text_it_cannot_encode_is_a_clear_error_not_a_silent_unk():
    with pytest.raises(LakeshiftError, match=r"maps.jsonl, line 3: .*'é'"):
        encode_checked(TOKENIZER, "Grid: é", "maps.jsonl, line 3")


def test_unknown_tokenizer_and_a_corrupt_run_tokenizer_are_one_line_errors(tmp_path, capsys):
    data = tmp_path / "data"
    generate_split(data, "id-train", sizes=(3,), count=2, train=True)
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "none", "--model", "micro"]
    assert main([*argv, "--out", str(tmp_path / "r"), "--tokenizer", "bpe"]) == 2
    assert "--tokenizer" in capsys.readouterr().err

    run = tmp_path / "run"
    assert main([*argv, "--out", str(run), "--prompt", "map-only", "--max-steps", "2"]) == 0
    capsys.readouterr()
    (run / "model" / "tokenizer.json").write_text("{not json", encoding="utf-8")
    predict = ["predict", "--model", str(run), "--data", str(data), "--split", "id-train"]
    assert main([*predict, "--out", str(tmp_path / "p.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert "tokenizer.json" in err and "\n" not in err and "Traceback" not in err
    (run / "model" / "tokenizer.json").unlink()
    assert main([*predict, "--out", str(tmp_path / "p.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert "tokenizer" in err and "\n" not in err
    rows = json.loads((run / "run.json").read_text())
    assert rows["hparams"]["tokenizer"] == "structured"
