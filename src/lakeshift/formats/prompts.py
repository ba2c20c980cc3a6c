"""Mirage's prompt, used by the paper, and where the map goes in it.

:data:`TEST_PROMPT` is byte for byte the ``text_input`` of every line of Mirage's ``test_direct.jsonl``;
:data:`TRAIN_PROMPT` that of ``train_direct.jsonl`` (the same text plus one example bullet after "Your goal
is to guide the player to the goal while avoiding holes."). Both contain the placeholder ``<image>`` after
``Here is the map:``.

Map placement (the paper does not say; our choice): for image input the placeholder stays and the image goes
there (:func:`split_at_image` gives the text on either side). For text input the map text replaces it; a
multi-line map (every text format is one) starts on its own line, so ``"Here is the map: <image>"`` becomes
``"Here is the map:\\n" + map_text`` followed, as in Mirage, by a blank line and ``Please provide ...``.
A one-line map text replaces only ``<image>`` (``"Here is the map: " + map_text``).
"""

from __future__ import annotations

from typing import Literal

from lakeshift.errors import ArgumentError, shown

SYSTEM_PROMPT = "You are a helpful assistant."
IMAGE_PLACEHOLDER = "<image>"
VARIANTS: tuple[str, ...] = ("train", "test")
Variant = Literal["train", "test"]

_EXAMPLE_BULLET = (
    '- For example, your final answer should be like "L,L,R,U,D", which means an action plan of left, '
    "left, right, up, and down.\n"
)

TEST_PROMPT = (
    "\nAs a professional maze solver, your task is to analyze a grid-based map and devise an action plan "
    "that enables a player to reach the goal from the starting point without falling into any holes, using "
    "the fewest possible moves.\n"
    "\n"
    "## Game Setup\n"
    "- The game presents a fully observable grid-based map.\n"
    "- The player starts at a specified grid square, with the goal located elsewhere on the map.\n"
    "- Each grid square is either safe or contains a hole.\n"
    "- Your goal is to guide the player to the goal while avoiding holes.\n"
    "\n"
    "\n"
    "## Moving Rules\n"
    "- The action plan involves a series of moves: 'L' (left), 'R' (right), 'U' (up), or 'D' (down).\n"
    "- Each move transfers the player to the adjacent square in that direction, provided it is a safe "
    "square. The player cannot move more than one square at a time.\n"
    "- Moving off the edge of the map has no effect. The player will remain at the same square.\n"
    "- DO NOT MOVE INTO A HOLE! Falling into a hole results in defeat.\n"
    "- Locating at the grid containing the goal results in victory.\n"
    "\n"
    "Here is the map: <image>\n"
    "\n"
    "Please provide your action plan.\n"
    " The final answer MUST BE put in \\boxed{}."
)

# Mirage's train prompt: the example bullet takes the place of the first of the two blank lines.
_ANCHOR = "- Your goal is to guide the player to the goal while avoiding holes.\n\n"
TRAIN_PROMPT = TEST_PROMPT.replace(_ANCHOR, _ANCHOR[:-1] + _EXAMPLE_BULLET, 1)


def rule_text(variant: str) -> str:
    """The prompt of a variant with the ``<image>`` placeholder.

    Raises:
        ArgumentError: unknown variant (a ``ValueError`` too).
    """
    if variant == "train":
        return TRAIN_PROMPT
    if variant == "test":
        return TEST_PROMPT
    raise ArgumentError(f"variant: unknown prompt variant {variant!r} (expected 'train' or 'test')")


def user_prompt(variant: str, map_text: str | None) -> str:
    """The user message: Mirage's rules with the map inserted (see the module docstring for the spacing).

    Args:
        variant: ``"train"`` (with the example bullet) or ``"test"``.
        map_text: The rendered map, or ``None`` to keep the ``<image>`` placeholder (image input).

    Raises:
        ArgumentError: unknown variant, or ``map_text`` neither a string nor ``None`` (a ``ValueError`` too).
    """
    text = rule_text(variant)
    if map_text is None:
        return text
    if not isinstance(map_text, str):
        raise ArgumentError(f"map_text must be a string (a rendered map) or None, got {shown(map_text)}")
    if "\n" in map_text:
        return text.replace(" " + IMAGE_PLACEHOLDER, "\n" + map_text, 1)
    return text.replace(IMAGE_PLACEHOLDER, map_text, 1)


def split_at_image(variant: str) -> tuple[str, str]:
    """The prompt text before and after ``<image>`` (for multimodal messages: text, image, text).

    Raises:
        ArgumentError: unknown variant (a ``ValueError`` too).
    """
    before, after = rule_text(variant).split(IMAGE_PLACEHOLDER)
    return before, after
