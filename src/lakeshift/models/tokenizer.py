"""A character-level tokenizer built locally from the training data, with a ChatML chat template.

Why character level: the FrozenLake prompts and traces use a small alphabet (letters, digits, ``_#@*|-``),
so a character vocabulary is tiny (~100 symbols), needs no training, and never meets an unseen *word* on
out-of-distribution maps (a 10x10 map only reuses characters a 3x3 map already has). The vocabulary is the
printable ASCII set plus every other character seen in the data, so even a character missing from the
training file maps to itself when it is ASCII; anything else becomes ``<unk>``.

The chat template is ChatML (the Qwen format) with ``{% generation %}`` markers around the assistant content
and its ``<|im_end|>``, so trl's ``assistant_only_loss`` masks the prompt and trains the end-of-turn token.

Trap (see ``notes/cpu-ml-stack.md``): ``AutoTokenizer.from_pretrained`` on a folder that also holds a Qwen2
``config.json`` returns a ``Qwen2Tokenizer`` that silently drops spaces and newlines. Always reload with
:func:`load_tokenizer`, which reads the saved tokenizer class and never lets AutoTokenizer reinterpret a
generic (``tokenizers``-backed) tokenizer.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
UNK_TOKEN = "<unk>"
# Qwen2.5-VL's placeholder tokens: only added to tokenizers of vision-language models.
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
# Generic tokenizer classes that AutoTokenizer would wrongly re-route to the model's own tokenizer class.
_GENERIC_CLASSES = {"TokenizersBackend", "PreTrainedTokenizerFast"}

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if loop.first and message['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- if message['content'] is string %}{%- set text = message['content'] %}"
    "{%- else %}{%- set ns = namespace(text='') %}"
    "{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "{%- set ns.text = ns.text + '<|vision_start|><|image_pad|><|vision_end|>' %}"
    "{%- elif 'text' in part %}{%- set ns.text = ns.text + part['text'] %}{%- endif %}"
    "{%- endfor %}{%- set text = ns.text %}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}{{- text + '<|im_end|>\\n' }}{%- endgeneration %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + text + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def message_texts(messages: list[dict[str, Any]]) -> Iterable[str]:
    """The text pieces of a conversation (string contents and the ``text`` parts of list contents)."""
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            yield content
        else:
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield part["text"]


def build_char_tokenizer(texts: Iterable[str], *, vision: bool = False) -> Any:
    """Builds a character-level ``PreTrainedTokenizerFast`` from the characters of ``texts``.

    Args:
        texts: the training texts (prompts and completions); their characters join the vocabulary.
        vision: also add Qwen2.5-VL's vision placeholder tokens (for a tiny vision-language model).

    Returns:
        A fast tokenizer with ChatML special tokens, ``<|im_end|>`` as end-of-sequence, ``<|endoftext|>`` as
        padding, left padding (for batched generation) and :data:`CHAT_TEMPLATE`.
    """
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    specials = [PAD_TOKEN, IM_START, IM_END, UNK_TOKEN, *(VISION_TOKENS if vision else ())]
    chars = set(string.printable)
    for text in texts:
        chars.update(text)
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(specials)}
    for ch in sorted(chars):
        vocab.setdefault(ch, len(vocab))
    # BPE without merges splits text into single characters; the Fuse decoder joins them back unchanged.
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK_TOKEN))
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=UNK_TOKEN,
        pad_token=PAD_TOKEN,
        eos_token=IM_END,
        additional_special_tokens=[IM_START, *(VISION_TOKENS if vision else ())],
        padding_side="left",
        model_max_length=1 << 20,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def is_generic_tokenizer(folder: str | Path) -> bool:
    """True when ``folder`` holds a generic tokenizers-backed tokenizer (e.g. one built by this module)."""
    config = Path(folder) / "tokenizer_config.json"
    if not config.is_file() or not (Path(folder) / "tokenizer.json").is_file():
        return False
    try:
        cls = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class")
    except json.JSONDecodeError:
        return False
    return cls in _GENERIC_CLASSES


def load_tokenizer(folder: str | Path) -> Any:
    """Loads the tokenizer saved in ``folder`` exactly as it was saved (see the trap in the module doc)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if is_generic_tokenizer(folder):
        return PreTrainedTokenizerFast.from_pretrained(str(folder))
    return AutoTokenizer.from_pretrained(str(folder))
