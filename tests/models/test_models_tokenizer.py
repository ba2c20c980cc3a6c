"""The character tokenizer: exact round trip after save/reload (the AutoTokenizer trap), ChatML masks."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift.models.tokenizer import build_char_tokenizer, is_generic_tokenizer, load_tokenizer

TEXTS = ["Solve the lake:\nFPF\nFHG\n", "Move RIGHT.\n\\boxed{RIGHT, DOWN}", "| Row 1 | _ | # |"]
CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Solve:\nPF\nFG"},
    {"role": "assistant", "content": "\\boxed{RIGHT, DOWN}"},
]


def _saved(tmp_path):
    from transformers import Qwen2Config

    tok = build_char_tokenizer(TEXTS)
    tok.save_pretrained(tmp_path)
    # A Qwen2 config next to the tokenizer is what makes AutoTokenizer misroute it.
    Qwen2Config(vocab_size=len(tok)).save_pretrained(tmp_path)
    return tok


def test_round_trip_after_reload_next_to_qwen2_config(tmp_path):
    tok = _saved(tmp_path)
    assert is_generic_tokenizer(tmp_path)
    again = load_tokenizer(tmp_path)
    text = "  two spaces\n\tand a newline\n<|im_start|>user\nhi<|im_end|>"
    assert again(text)["input_ids"] == tok(text)["input_ids"]
    assert again.decode(again(text)["input_ids"]) == text
    assert again.apply_chat_template(CONVERSATION, tokenize=False) == tok.apply_chat_template(
        CONVERSATION, tokenize=False
    )
    assert again.padding_side == "left"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=string.printable, max_size=80))
def test_decode_inverts_encode_on_printable_text(text):
    tok = TOKENIZER
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


TOKENIZER = build_char_tokenizer(TEXTS)


def test_unknown_characters_become_unk_not_errors():
    ids = TOKENIZER("é", add_special_tokens=False)["input_ids"]
    assert ids == [TOKENIZER.unk_token_id]


def test_chatml_template_masks_only_the_assistant_turn_and_its_end_token():
    from trl.chat_template_utils import has_generation_markers

    assert has_generation_markers(TOKENIZER.chat_template)
    out = TOKENIZER.apply_chat_template(
        CONVERSATION, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    trained = TOKENIZER.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert trained == "\\boxed{RIGHT, DOWN}<|im_end|>\n"
    prompt = TOKENIZER.apply_chat_template(CONVERSATION[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n") and prompt.startswith("<|im_start|>system\n")


def test_list_contents_render_vision_placeholders():
    tok = build_char_tokenizer(TEXTS, vision=True)
    messages = [{"role": "user", "content": [{"type": "text", "text": "map:"}, {"type": "image"}]}]
    text = tok.apply_chat_template(messages, tokenize=False)
    assert "map:<|vision_start|><|image_pad|><|vision_end|>" in text
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>")
