"""SFT records in trl's conversational format, built from one ``maps.jsonl`` object.

A record (:func:`sft_record`)::

    {"id": "42", "input_format": "grid", "cot_format": "grid+desc",
     "messages": [{"role": "system", "content": "You are a helpful assistant."},
                  {"role": "user", "content": "<Mirage prompt with the map>"},
                  {"role": "assistant", "content": "<trace> \\boxed{UP, RIGHT}"}]}

Text inputs have string contents and no ``images`` key. Image inputs have ``"images": ["images/<id>.png"]``
(relative to the split folder) and every content is a list of blocks; the user's is
``[{"type": "text", "text": before}, {"type": "image"}, {"type": "text", "text": after}]`` with the image
where Mirage's ``<image>`` stands. System and assistant contents are then one text block each, because a
``datasets``/Arrow column cannot mix strings and lists: the file loads with ``datasets`` and trl's
``SFTTrainer`` takes it as is (after turning the image paths into images, which trl needs).

:func:`prompt_messages` gives the same record without the assistant turn, for prediction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakeshift import formats, prompts, traces
from lakeshift.env import FrozenLakeMap, MapError
from lakeshift.errors import LakeshiftError


def map_of(map_record: Mapping[str, Any]) -> FrozenLakeMap:
    """The map of a ``maps.jsonl`` object (``rows``; ``start``/``goal`` are checked when present).

    Raises:
        LakeshiftError: missing or invalid ``rows``, or ``start``/``goal`` disagreeing with them.
    """
    rid = map_record.get("id", "?")
    rows = map_record.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, str) for r in rows):
        raise LakeshiftError(f"map {rid}: field 'rows' must be a list of strings")
    try:
        m = FrozenLakeMap.from_rows(rows)
    except MapError as err:
        raise LakeshiftError(f"map {rid}: field 'rows': {err}") from None
    for field, cell in (("start", m.start), ("goal", m.goal)):
        value = map_record.get(field)
        if value is not None and tuple(value) != cell:
            raise LakeshiftError(f"map {rid}: field {field!r} is {value}, but 'rows' put it at {list(cell)}")
    return m


def sft_record(
    map_record: Mapping[str, Any],
    input_format: str,
    cot_format: str,
    variant: str,
    image_path: str | None = None,
    *,
    table_style: str | None = None,
) -> dict[str, Any]:
    """One training conversation for a map: system, user (prompt + map) and assistant (CoT + answer).

    Args:
        map_record: A ``maps.jsonl`` object (``id``, ``rows``, ``optimal_path``; see the module docstring).
        input_format: One of :data:`lakeshift.formats.INPUT_FORMATS`.
        cot_format: One of :data:`lakeshift.traces.COT_FORMATS`.
        variant: Prompt variant, ``"train"`` or ``"test"``.
        image_path: Image input only: the path stored in ``images`` (default ``images/<id>.png``).
        table_style: ``"compact"`` (default) or ``"aligned"`` for table inputs and table CoTs.

    Raises:
        LakeshiftError: an unknown format or variant, or a map record that is invalid or whose
            ``optimal_path`` is not a successful plan (the message names the map id and field).
    """
    record = prompt_messages(
        map_record, input_format, cot_format, variant, image_path, table_style=table_style
    )
    m = map_of(map_record)
    path = map_record.get("optimal_path")
    if not isinstance(path, list):
        raise LakeshiftError(f"map {record['id']}: field 'optimal_path' must be a list of moves")
    try:
        answer = traces.completion(m, path, cot_format, table_style=table_style)
    except ValueError as err:
        raise LakeshiftError(f"map {record['id']}: field 'optimal_path': {err}") from None
    record["messages"].append(_message("assistant", answer, input_format == "image"))
    return record


def prompt_messages(
    map_record: Mapping[str, Any],
    input_format: str,
    cot_format: str | None,
    variant: str,
    image_path: str | None = None,
    *,
    table_style: str | None = None,
) -> dict[str, Any]:
    """The record of :func:`sft_record` without the assistant turn (for prediction).

    ``cot_format`` is only recorded (the prompt does not depend on it); ``None`` leaves it out.

    Raises:
        LakeshiftError: as :func:`sft_record`.
    """
    if input_format not in formats.INPUT_FORMATS:
        raise LakeshiftError(
            f"unknown input format {input_format!r} (expected one of {', '.join(formats.INPUT_FORMATS)})"
        )
    if cot_format is not None and cot_format not in traces.COT_FORMATS:
        raise LakeshiftError(
            f"unknown CoT format {cot_format!r} (expected one of {', '.join(traces.COT_FORMATS)})"
        )
    if variant not in prompts.VARIANTS:
        raise LakeshiftError(f"unknown prompt variant {variant!r} (expected 'train' or 'test')")
    if table_style not in (None, *formats.TABLE_STYLES):
        raise LakeshiftError(f"unknown table style {table_style!r} (expected 'compact' or 'aligned')")
    if "id" not in map_record:
        raise LakeshiftError("map record without an 'id' field")
    rid = str(map_record["id"])
    m = map_of(map_record)
    is_image = input_format == "image"
    record: dict[str, Any] = {"id": rid, "input_format": input_format}
    if cot_format is not None:
        record["cot_format"] = cot_format
    system = _message("system", prompts.SYSTEM_PROMPT, is_image)
    if is_image:
        before, after = prompts.split_at_image(variant)
        user = {
            "role": "user",
            "content": [{"type": "text", "text": before}, {"type": "image"}, {"type": "text", "text": after}],
        }
    else:
        style = table_style if input_format == "table" else None
        text = formats.render(m, input_format, style=style)
        user = {"role": "user", "content": prompts.user_prompt(variant, text)}
    record["messages"] = [system, user]
    if is_image:
        record["images"] = [image_path if image_path is not None else f"images/{rid}.png"]
    return record


def _message(role: str, text: str, blocks: bool) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}] if blocks else text}
