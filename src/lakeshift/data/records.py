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

from collections.abc import Mapping, Sequence
from typing import Any

from lakeshift import formats, traces
from lakeshift.env import FrozenLakeMap, MapError
from lakeshift.errors import ArgumentError, LakeshiftError, shown
from lakeshift.formats import prompts


def map_of(map_record: Mapping[str, Any]) -> FrozenLakeMap:
    """The map of a ``maps.jsonl`` object (``rows``; ``start``/``goal`` are checked when present).

    Raises:
        LakeshiftError: not a mapping, missing or invalid ``rows``, or ``start``/``goal`` disagreeing with
            them.
    """
    require_record(map_record, "map_record")
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
        try:
            agrees = value is None or tuple(value) == cell
        except TypeError:  # not a sequence
            agrees = False
        if not agrees:
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
    records = sft_records(
        map_record, variant, (input_format,), (cot_format,), image_path, table_style=table_style
    )
    return records[input_format, cot_format]


def sft_records(
    map_record: Mapping[str, Any],
    variant: str,
    input_formats: Sequence[str] = formats.INPUT_FORMATS,
    cot_formats: Sequence[str] = traces.COT_FORMATS,
    image_path: str | None = None,
    *,
    table_style: str | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """:func:`sft_record` for every ``(input_format, cot_format)`` pair of one map, each prompt and each trace
    built once (the traces share their steps, see :func:`lakeshift.traces.completions`). This is what
    :mod:`lakeshift.data.suites` writes into the ``sft/`` files.

    Returns:
        ``{(input_format, cot_format): record}`` in the order of the arguments.

    Raises:
        LakeshiftError: as :func:`sft_record`.
    """
    _check_names(input_formats, cot_formats, variant, table_style)
    rid, m = _id_and_map(map_record)
    path = map_record.get("optimal_path")
    if not isinstance(path, list):
        raise LakeshiftError(f"map {rid}: field 'optimal_path' must be a list of moves")
    try:
        answers = traces.completions(m, path, cot_formats, table_style=table_style)
    except ValueError as err:
        raise LakeshiftError(f"map {rid}: field 'optimal_path': {err}") from None
    out = {}
    for inp in input_formats:
        user = _user_message(m, inp, variant, table_style)
        for cot in cot_formats:
            record = _prompt_record(rid, inp, cot, user, image_path)
            record["messages"].append(_message("assistant", answers[cot], inp == "image"))
            out[inp, cot] = record
    return out


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
    _check_names((input_format,), () if cot_format is None else (cot_format,), variant, table_style)
    rid, m = _id_and_map(map_record)
    user = _user_message(m, input_format, variant, table_style)
    return _prompt_record(rid, input_format, cot_format, user, image_path)


def _check_names(inputs: Sequence[str], cots: Sequence[str], variant: str, table_style: str | None) -> None:
    for name in inputs:
        if name not in formats.INPUT_FORMATS:
            raise LakeshiftError(
                f"unknown input format {name!r} (expected one of {', '.join(formats.INPUT_FORMATS)})"
            )
    for name in cots:
        if name not in traces.COT_FORMATS:
            raise LakeshiftError(
                f"unknown CoT format {name!r} (expected one of {', '.join(traces.COT_FORMATS)})"
            )
    if variant not in prompts.VARIANTS:
        raise LakeshiftError(f"unknown prompt variant {variant!r} (expected 'train' or 'test')")
    if table_style not in (None, *formats.TABLE_STYLES):
        raise LakeshiftError(f"unknown table style {table_style!r} (expected 'compact' or 'aligned')")


def require_record(value: Any, name: str) -> None:
    """Refuses anything but a mapping where a ``maps.jsonl`` record is expected (parameter ``name``).

    Raises:
        ArgumentError: naming the parameter and what it got.
    """
    if not isinstance(value, Mapping):
        hint = " (record_from_map gives a FrozenLakeMap's record)" if isinstance(value, FrozenLakeMap) else ""
        raise ArgumentError(
            f"{name} must be a maps.jsonl record (a mapping with 'rows'), got {shown(value)}{hint}"
        )


def _id_and_map(map_record: Mapping[str, Any]) -> tuple[str, FrozenLakeMap]:
    require_record(map_record, "map_record")
    if "id" not in map_record:
        raise LakeshiftError("map record without an 'id' field")
    return str(map_record["id"]), map_of(map_record)


def _user_message(
    m: FrozenLakeMap, input_format: str, variant: str, table_style: str | None
) -> dict[str, Any]:
    """The user turn: the prompt with the map text, or text / image / text blocks for image input."""
    if input_format == "image":
        before, after = prompts.split_at_image(variant)
        blocks = [{"type": "text", "text": before}, {"type": "image"}, {"type": "text", "text": after}]
        return {"role": "user", "content": blocks}
    style = table_style if input_format == "table" else None
    return {
        "role": "user",
        "content": prompts.user_prompt(variant, formats.render(m, input_format, style=style)),
    }


def _prompt_record(
    rid: str, input_format: str, cot_format: str | None, user: dict[str, Any], image_path: str | None
) -> dict[str, Any]:
    is_image = input_format == "image"
    record: dict[str, Any] = {"id": rid, "input_format": input_format}
    if cot_format is not None:
        record["cot_format"] = cot_format
    # Records never share mutable message objects, so editing one record cannot change another.
    content = [dict(block) for block in user["content"]] if is_image else user["content"]
    user = {"role": "user", "content": content}
    record["messages"] = [_message("system", prompts.SYSTEM_PROMPT, is_image), user]
    if is_image:
        record["images"] = [image_path if image_path is not None else f"images/{rid}.png"]
    return record


def _message(role: str, text: str, blocks: bool) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}] if blocks else text}
