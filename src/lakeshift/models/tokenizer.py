"""Tokenizers built locally from the training data (no download), with a ChatML chat template.

Two kinds (``--tokenizer``, :data:`TOKENIZERS`):

- ``structured`` (default for the named sizes): one token per piece of the formats' structure, so a model
  spends one position per thing it must reason about. The pieces (a regex ``Split`` pre-tokenizer, first
  match wins): ``\boxed{``; a move with its separator (``, UP``); a coordinate ``(3,4)``; a grid cell with
  the two spaces before it (``  X``, or a ``wave`` arrow ``  ^``); a table cell with the bar before it
  (`` | #``); a word or a number with its leading space (`` column``, `` 7``); a newline; a run of spaces; any
  other character. The vocabulary is every piece of the training texts, plus every number
  0-:data:`MAX_NUMBER` and every coordinate up to :data:`MAX_MAP_SIZE` x :data:`MAX_MAP_SIZE`, the cells of
  every format and the moves (the pieces of formats added after the shipped tokenizers were built,
  :data:`LATER_PIECES`, come last, so every id those tokenizers gave is kept), so a 7x7-30x30 map never
  meets an unknown token (its numbers exist, though a model trained on 3x3-6x6 maps has never *trained*
  their embeddings: that is the OOD vocabulary problem of small models). A piece outside the vocabulary
  falls back to its characters (BPE with ``ignore_merges`` and no merges), and every printable ASCII
  character is in the vocabulary, so only non-ASCII characters can become ``<unk>``: encode with
  :func:`encode_checked` where a silent ``<unk>`` would reach a model. Lengths against ``char`` for every
  format: benchmarks/log.md.
- ``char``: one token per character (the printable ASCII set plus every other character seen in the data);
  never meets an unseen *word*, but spends 3 positions per grid cell and 4-7 per move.

The chat template is ChatML (the Qwen format) with ``{% generation %}`` markers around the assistant content
and its ``<|im_end|>``, so trl's ``assistant_only_loss`` masks the prompt and trains the end-of-turn token.

Trap: ``AutoTokenizer.from_pretrained`` on a folder that also holds a Qwen2
``config.json`` returns a ``Qwen2Tokenizer`` that silently drops spaces and newlines. Always reload with
:func:`load_tokenizer`, which reads the saved tokenizer class and never lets AutoTokenizer reinterpret a
generic (``tokenizers``-backed) tokenizer.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.traces import BOXED

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
UNK_TOKEN = "<unk>"
# Qwen2.5-VL's placeholder tokens: only added to tokenizers of vision-language models.
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
# Generic tokenizer classes that AutoTokenizer would wrongly re-route to the model's own tokenizer class.
_GENERIC_CLASSES = {"TokenizersBackend", "PreTrainedTokenizerFast"}
TOKENIZERS = ("structured", "char")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
MOVES = ("UP", "DOWN", "LEFT", "RIGHT")
# The largest map whose every number and coordinate has its own token (OOD tests go to 10x10).
MAX_MAP_SIZE = 30
MAX_NUMBER = 100
# The structured pre-tokenizer (see the module doc); the Python and the Rust (onig) regex agree on it.
STRUCTURED_PIECES = (
    r"\\boxed\{"
    r"|, (?:UP|DOWN|LEFT|RIGHT)"
    r"| ?\(\d+,\d+\)"
    r"|  (?:[.PGX^<>]|v(?![A-Za-z]))"
    r"| \| [_@*#]"
    r"| ?[A-Za-z]+"
    r"| ?\d+"
    r"|\n"
    r"| +"
    r"|."
)
_PIECE = re.compile(STRUCTURED_PIECES, re.DOTALL)

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


def _specials(vision: bool) -> list[str]:
    return [PAD_TOKEN, IM_START, IM_END, UNK_TOKEN, *(VISION_TOKENS if vision else ())]


def _fast_tokenizer(backend: Any, vision: bool) -> Any:
    from transformers import PreTrainedTokenizerFast

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


#: The CoT formats whose pieces make the format lexicon, as shipped tokenizers were built.
LEXICON_COTS: tuple[str, ...] = (
    "none",
    "desc",
    "table",
    "grid",
    "table+desc",
    "grid+desc",
    "astar",
    "coords",
)
#: The pieces of CoT formats added since (``wave``: its arrow cells and the word of its ``Wave k:`` lines),
#: appended after every other piece so that each token a shipped tokenizer has keeps its id.
LATER_PIECES: tuple[str, ...] = ("  ^", "  v", "  <", "  >", "Wave")


def structure_pieces() -> list[str]:
    """The pieces every structured vocabulary has, whatever the training data (see the module doc)."""
    numbers = [str(i) for i in range(MAX_NUMBER + 1)]
    coords = [f"({r},{c})" for r in range(1, MAX_MAP_SIZE + 1) for c in range(1, MAX_MAP_SIZE + 1)]
    pieces = [BOXED, *(f", {m}" for m in MOVES), *(f" {m}" for m in MOVES), *MOVES]
    pieces += [f"  {s}" for s in ".PGX"] + [f" | {s}" for s in "_@*#"] + [" |"]
    pieces += numbers + [f" {n}" for n in numbers] + coords + [f" {c}" for c in coords]
    return pieces


# Maps whose renderings in every text format and CoT give the formats' fixed words (a hole beside the direct
# path, off-axis goals), so a tokenizer built from one format's data also has single tokens for the others'.
_LEXICON_MAPS = (("SFH", "FHF", "FFG"), ("FFFG", "FHFF", "SFHF", "FFFF"), ("GFF", "HHF", "FFS"))


def format_lexicon() -> list[str]:
    """The pieces of every text input x CoT rendering (both prompt variants) of a few fixed maps, for the CoT
    formats of :data:`LEXICON_COTS`."""
    from lakeshift.data.records import sft_records
    from lakeshift.env import FrozenLakeMap
    from lakeshift.formats import INPUT_FORMATS

    inputs = tuple(f for f in INPUT_FORMATS if f != "image")
    pieces: set[str] = set()
    for rows in _LEXICON_MAPS:
        m = FrozenLakeMap.from_rows(rows)
        record = {"id": "lexicon", "rows": list(rows), "optimal_path": m.optimal_path()}
        for variant in ("train", "test"):
            for rec in sft_records(record, variant, inputs, LEXICON_COTS).values():
                for text in message_texts(rec["messages"]):
                    pieces.update(_PIECE.findall(text))
    return sorted(pieces)


def build_structured_tokenizer(texts: Iterable[str], *, vision: bool = False) -> Any:
    """Builds the structured ``PreTrainedTokenizerFast`` (see the module doc) from the pieces of ``texts``.

    Args:
        texts: the training texts (prompts and completions); their pieces join the vocabulary.
        vision: also add Qwen2.5-VL's vision placeholder tokens (for a tiny vision-language model).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    seen: set[str] = set()
    for text in texts:
        seen.update(_PIECE.findall(text))
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(_specials(vision))}
    pieces = [*sorted(string.printable), *structure_pieces(), *format_lexicon(), *sorted(seen), *LATER_PIECES]
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    # No merges: a piece in the vocabulary is one token (ignore_merges), any other falls back to characters.
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK_TOKEN, ignore_merges=True))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(STRUCTURED_PIECES), behavior="isolated")
    backend.decoder = decoders.Fuse()
    return _fast_tokenizer(backend, vision)


def build_tokenizer(kind: str, texts: Iterable[str], *, vision: bool = False) -> Any:
    """The tokenizer of ``kind`` (one of :data:`TOKENIZERS`) built from ``texts``.

    Raises:
        LakeshiftError: unknown kind.
    """
    if kind == "structured":
        return build_structured_tokenizer(texts, vision=vision)
    if kind == "char":
        return build_char_tokenizer(texts, vision=vision)
    raise LakeshiftError(f"--tokenizer {kind}: unknown (choose from {', '.join(TOKENIZERS)})")


def encode_checked(tokenizer: Any, text: str, where: str) -> list[int]:
    """The token ids of ``text``, refusing text with characters the tokenizer cannot encode.

    Raises:
        LakeshiftError: names ``where`` (file and record) and the characters that would become ``<unk>``.
    """
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    unk = tokenizer.unk_token_id
    if unk is not None and unk in ids:
        bad = sorted({ch for ch in text if tokenizer.convert_tokens_to_ids(ch) == unk and ch.strip()})
        shown = ", ".join(repr(ch) for ch in bad[:5]) or "(unprintable)"
        raise LakeshiftError(
            f"{where}: text the tokenizer cannot encode (characters {shown} are not in its vocabulary)"
        )
    return ids


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

    specials = _specials(vision)
    chars = set(string.printable)
    for text in texts:
        chars.update(text)
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(specials)}
    for ch in sorted(chars):
        vocab.setdefault(ch, len(vocab))
    # BPE without merges splits text into single characters; the Fuse decoder joins them back unchanged.
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK_TOKEN))
    backend.decoder = decoders.Fuse()
    return _fast_tokenizer(backend, vision)


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

    folder = Path(folder)
    have = [name for name in _TOKENIZER_FILES if (folder / name).is_file()]
    if not have:
        raise LakeshiftError(f"{folder}: no tokenizer ({' or '.join(_TOKENIZER_FILES)}) in the model folder")
    parsed: dict[str, Any] = {}
    for name in ("tokenizer.json", "tokenizer_config.json"):
        try:
            if (folder / name).is_file():
                parsed[name] = json.loads((folder / name).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise LakeshiftError(f"{folder / name}: corrupt tokenizer file ({err})") from None
    config = parsed.get("tokenizer_config.json")
    generic = isinstance(config, dict) and config.get("tokenizer_class") in _GENERIC_CLASSES
    if generic and "tokenizer.json" not in parsed:
        # transformers would otherwise rebuild some other tokenizer from the config, silently.
        raise LakeshiftError(f"{folder / 'tokenizer.json'}: missing (the tokenizer's vocabulary)")
    try:
        if is_generic_tokenizer(folder):
            return PreTrainedTokenizerFast.from_pretrained(str(folder))
        return AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise LakeshiftError(f"{folder}: cannot load its tokenizer ({str(err).splitlines()[0]})") from None
