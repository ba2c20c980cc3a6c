"""Finding the answer in a model's output: the last ``\\boxed{...}`` and its moves, per extraction mode."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakeshift.errors import ArgumentError, shown
from lakeshift.traces.vocabulary import BOXED

COMPAT_MODES: tuple[str | None, ...] = (None, "frozen_ood", "vsp")

_WORDS = {"UP": "UP", "DOWN": "DOWN", "LEFT": "LEFT", "RIGHT": "RIGHT", "U": "UP", "D": "DOWN", "L": "LEFT"}
_WORDS["R"] = "RIGHT"
_LETTER_TO_MOVE = {"U": "UP", "D": "DOWN", "L": "LEFT", "R": "RIGHT"}
_ARROWS = re.compile(r"->|=>|→|⇒|⟶|\\(?:rightarrow|Rightarrow|to|longrightarrow)\b")
_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|texttt|mathrm|mathbf|mathtt|mbox)\s*\{([^{}]*)\}")
_SEPARATORS = re.compile(r"[\s,;]+")
_STRIP = "\"'`.()[]{}<>*$"
_COMPACT = re.compile(r"[UDLR]+", re.IGNORECASE)
#: gymnasium registers ``FrozenLake-v1`` with ``max_episode_steps=100``: VSP's episodes end there.
VSP_MAX_STEPS = 100


@dataclass(frozen=True)
class Extraction:
    """The plan read from one output.

    Attributes:
        moves: Moves as ``"UP"``... (empty when none could be read).
        status: ``"ok"``, ``"no_answer"`` or ``"unparseable"``.
        detail: Why the answer was not read (empty when ``ok``).
        span: ``(start, end)`` character offsets of the answer inside the output, or ``None``.
    """

    moves: tuple[str, ...]
    status: str
    detail: str = ""
    span: tuple[int, int] | None = None


def last_boxed(text: str) -> tuple[str, int, int] | None:
    """The content of the last ``\\boxed{...}`` with its offsets, or ``None`` (absent or unclosed).

    Returns:
        ``(content, start, end)`` with ``text[start:end] == content``.
    """
    start = text.rfind(BOXED)
    if start < 0:
        return None
    begin = pos = start + len(BOXED)
    depth = 0
    while True:
        close = text.find("}", pos)
        if close < 0:
            return None
        opened = text.count("{", pos, close)
        depth += opened
        if depth == 0:
            return text[begin:close], begin, close
        depth -= 1
        pos = close + 1


def parse_moves(content: str) -> tuple[tuple[str, ...], str]:
    """Reads a move list (our default rules: :mod:`lakeshift.scoring`).

    Returns:
        ``(moves, error)``: ``error`` is empty on success, else names the first token that is not a move.
    """
    text = content
    if "\\" in text:
        text = _WRAPPERS.sub(r"\1", text)
    text = _ARROWS.sub(",", text)
    moves: list[str] = []
    for raw in _SEPARATORS.split(text):
        token = raw.strip(_STRIP)
        if not token:
            continue
        move = _WORDS.get(token) or _WORDS.get(token.upper())
        if move is not None:
            moves.append(move)
        elif _COMPACT.fullmatch(token):
            moves.extend(_LETTER_TO_MOVE[ch] for ch in token.upper())
        else:
            return tuple(moves), f"not a move: {raw!r}"
    return tuple(moves), ""


def extract(text: str, compat: str | None = None) -> Extraction:
    r"""Reads the plan from a model output under one of the :data:`COMPAT_MODES`.

    Example:
        >>> from lakeshift import extract
        >>> extract(r"My plan: \boxed{L, up, UP, right}").moves
        ('LEFT', 'UP', 'UP', 'RIGHT')
        >>> extract(r"\boxed{PLAN}").status  # a word that is not a move
        'unparseable'
        >>> extract(r"\boxed{PLAN}", compat="frozen_ood").moves  # the paper's evaluator keeps its L
        ('LEFT',)

    Raises:
        LakeshiftError: ``text`` that is not a string, or ``compat`` that is not one of :data:`COMPAT_MODES`.
    """
    if not isinstance(text, str):
        raise ArgumentError(f"text must be a string (the model's output), got {shown(text)}")
    if compat is None:
        box = last_boxed(text)
        if box is None:
            reason = "unclosed \\boxed{" if BOXED in text else "no \\boxed{...} in the output"
            return Extraction((), "no_answer", reason)
        content, start, end = box
        if not content.strip():
            return Extraction((), "no_answer", "empty \\boxed{}", (start, end))
        moves, error = parse_moves(content)
        if error:
            return Extraction(moves, "unparseable", error, (start, end))
        if not moves:
            return Extraction((), "no_answer", "no moves in \\boxed{}", (start, end))
        return Extraction(moves, "ok", "", (start, end))
    if compat == "frozen_ood":
        box = last_boxed(text)
        content = "None" if box is None else box[0].strip()
        moves = tuple(_LETTER_TO_MOVE[ch] for ch in content.upper() if ch in "UDRL")
        span = None if box is None else (box[1], box[2])
        if box is None:
            return Extraction((), "no_answer", "no \\boxed{...} (the paper's evaluator reads 'None')")
        if not moves:
            return Extraction((), "no_answer", "no U/D/L/R character in \\boxed{}", span)
        return Extraction(moves, "ok", "", span)
    if compat == "vsp":
        return _extract_vsp(text)
    raise ArgumentError(f"compat: unknown compat mode {compat!r} (expected one of {COMPAT_MODES})")


def _extract_vsp(text: str) -> Extraction:
    """VSP's parsing; an invalid part ends the moves there and is reported in ``detail``."""
    idx = text.find("Action plan: ")
    if idx < 0:
        idx = text.find("Action Plan: ")
    found = idx >= 0
    begin = idx + 13  # VSP adds 13 even to -1: with no marker it reads from character 12
    moves: list[str] = []
    for part in text[begin:].split(","):
        token = part.replace('"', "").replace("'", "").replace("\n", "").replace(".", "").strip()
        if token not in _LETTER_TO_MOVE:
            status = "unparseable" if found else "no_answer"
            detail = f"not a move: {token[:40]!r}" if found else "no 'Action plan: ' in the output"
            return Extraction(tuple(moves), status, detail, (begin, len(text)) if found else None)
        moves.append(_LETTER_TO_MOVE[token])
    return Extraction(tuple(moves), "ok", "", (begin, len(text)))
