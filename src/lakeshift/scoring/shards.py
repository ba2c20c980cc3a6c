"""Predictions split over workers (``lakeshift predict --shard i/n``) and read back as one set.

A split is predicted by ``n`` workers at once: worker ``i`` (1-based) answers the selected maps at positions
``i-1, i-1+n, i-1+2n, ...`` of the selection (file order after ``--sizes/--per-size/--limit``), so the
partition is deterministic, covers every selected map exactly once and gives each shard the same mix of map
sizes. Each shard writes its own file, ``P.shard-i-of-n.jsonl`` for ``--out P.jsonl``, and every row
records ``"shard": {"index": i, "count": n}``.

``lakeshift score --predictions`` and ``lakeshift report`` read the shard files together
(:func:`read_prediction_set`): an id answered in two files is an error (overlapping shards would be counted
twice or silently resolved), an absent shard is a warning naming it, and its maps are scored ``missing``
(every row carries the whole selection, so the scorer knows which maps the set was asked).

This module is part of the core: no ML import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lakeshift.errors import LakeshiftError
from lakeshift.io import jsonl_stem

T = TypeVar("T")
#: ``<stem>.shard-<i>-of-<n>.jsonl``
SHARD_NAME = re.compile(r"^(?P<stem>.*)\.shard-(?P<index>\d+)-of-(?P<count>\d+)$")


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` as ``(i, n)`` with ``1 <= i <= n``.

    Raises:
        LakeshiftError: malformed or out of range.
    """
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if m is None:
        raise LakeshiftError(f"--shard {text!r}: expected I/N with whole numbers, e.g. 1/4")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1:
        raise LakeshiftError(f"--shard {text}: the number of shards must be >= 1")
    if not 1 <= index <= count:
        raise LakeshiftError(f"--shard {text}: the shard index must be between 1 and {count}")
    return index, count


def shard_path(out: str | Path, index: int, count: int) -> Path:
    """The file of shard ``index`` of ``count`` for ``--out out``: ``P.jsonl`` gives
    ``P.shard-<index>-of-<count>.jsonl``; a name that already says this shard is kept.

    Raises:
        LakeshiftError: ``out`` names another shard (two workers would share a file).
    """
    out = Path(out)
    suffix = out.suffix if out.suffix else ".jsonl"
    stem = out.stem if out.suffix else out.name
    m = SHARD_NAME.match(stem)
    if m is not None:
        if (int(m.group("index")), int(m.group("count"))) != (index, count):
            raise LakeshiftError(
                f"--out {out}: names shard {m.group('index')}/{m.group('count')} but --shard is "
                f"{index}/{count}; give the unsharded name ({m.group('stem')}{suffix}) or the matching one"
            )
        return out
    return out.with_name(f"{stem}.shard-{index}-of-{count}{suffix}")


def shard_items(items: Sequence[T], index: int, count: int) -> list[T]:
    """Shard ``index`` (1-based) of ``count``: every ``count``-th item from position ``index - 1``."""
    return list(items[index - 1 :: count])


def unsharded_stem(path: Path) -> str:
    """The file stem without its ``.shard-i-of-n`` part (the name of the set the shard belongs to)."""
    stem = jsonl_stem(path)
    m = SHARD_NAME.match(stem)
    return m.group("stem") if m else stem


def shard_of(meta: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """The ``(index, count)`` a prediction row records, or None for an unsharded row."""
    shard = (meta or {}).get("shard")
    if not isinstance(shard, Mapping):
        return None
    index, count = shard.get("index"), shard.get("count")
    if isinstance(index, int) and isinstance(count, int) and 1 <= index <= count:
        return index, count
    return None


def read_prediction_set(
    paths: Sequence[str | Path],
    maps: Mapping[str, Any],
    strict: bool = False,
    maps_path: str | Path | None = None,
) -> Any:
    """Reads one predictions set from one file or several shard files (see the module docstring); with
    ``maps_path`` (the maps file of ``maps``) every file must answer that version of the data
    (:func:`lakeshift.scoring.check_data_version`).

    Returns:
        A :class:`lakeshift.scoring.PredictionsFile` (``path``: the first file) holding every file's
        predictions, warnings and counts, plus a warning per absent shard.

    Raises:
        LakeshiftError: an id in two files, files of different shard counts, stale data, no row with an
            ``output`` (a maps file given as predictions), no id among the maps, a row whose ``split`` is
            not the maps' split, rows of two decodings, or what :func:`~lakeshift.scoring.read_predictions`
            raises.
    """
    from lakeshift.scoring import PredictionsFile, check_data_version, read_predictions

    files = [Path(p) for p in paths]
    if not files:
        raise LakeshiftError("no predictions files given")
    if len({p.resolve() for p in files}) != len(files):
        raise LakeshiftError(f"{files[0]}: the same predictions file is given twice")
    merged = PredictionsFile(files[0], {}, [])
    seen: dict[str, Path] = {}
    shards: dict[int, set[int]] = {}
    for path in files:
        pf = read_predictions(path, maps, strict=strict)
        if maps_path is not None:
            check_data_version(pf, maps_path, maps)
        for pid, pred in pf.predictions.items():
            if pid in seen:
                raise LakeshiftError(
                    f"{path}, line {pred.lineno}: field 'id': {pid!r} is also in {seen[pid]}: the files "
                    "overlap (each map must be answered by exactly one shard)"
                )
            seen[pid] = path
            merged.predictions[pid] = pred
            shard = shard_of(pred.meta)
            if shard is not None:
                shards.setdefault(shard[1], set()).add(shard[0])
        merged.warnings += pf.warnings
        merged.unknown_ids += pf.unknown_ids
        merged.malformed += pf.malformed
        merged.duplicates += pf.duplicates
        merged.without_output += pf.without_output
    _check_pooling(merged, files, seen, maps, maps_path)
    if len(shards) > 1:
        raise LakeshiftError(
            f"{files[0]}: the files mix shards of different splittings "
            f"({', '.join(f'of {n}' for n in sorted(shards))}); score each set on its own"
        )
    for count, present in shards.items():
        for index in sorted(set(range(1, count + 1)) - present):
            name = f"{unsharded_stem(files[0])}.shard-{index}-of-{count}.jsonl"
            merged.warnings.append(
                f"shard {index}/{count} absent (no file like {name} given): its maps are scored missing"
            )
    return merged


def _check_pooling(
    merged: Any, files: Sequence[Path], source: Mapping[str, Path], maps: Mapping[str, Any], maps_path: Any
) -> None:
    """Refuses a set whose accuracy would be wrong, not merely low: predictions of another split or of a
    maps file (every map would be scored missing), or answers of two decodings pooled into one number."""
    from lakeshift.scoring import decoding_label

    against = f"the maps{f' ({maps_path})' if maps_path is not None else ''}"
    where = files[0] if len(files) == 1 else f"{files[0]} (and {len(files) - 1} more)"
    if merged.predictions and merged.without_output == len(merged.predictions):
        raise LakeshiftError(
            f"{where}: no row has an 'output' field: a maps file, not predictions (give the predictions "
            "of `lakeshift predict`)"
        )
    if not merged.predictions and merged.unknown_ids:
        raise LakeshiftError(
            f"{where}: none of its {merged.unknown_ids} ids is in {against}: predictions of another split?"
        )
    decodings: dict[str, tuple[Path, int]] = {}
    for pred in merged.predictions.values():
        meta = pred.meta or {}
        split = meta.get("split")
        sm = maps.get(pred.id)
        record = getattr(sm, "record", None) or {}
        if isinstance(split, str) and record.get("split") and split != record["split"]:
            raise LakeshiftError(
                f"{source[pred.id]}, line {pred.lineno}: field 'split': {split!r}, but "
                f"{against} are {record['split']!r}: score it against the {split} maps"
            )
        decoding = meta.get("decoding")
        if isinstance(decoding, Mapping):
            label = decoding_label(decoding)
            decodings.setdefault(label, (source[pred.id], pred.lineno))
    if len(decodings) > 1:
        seen = ", ".join(f"{label!r} ({path}, line {line})" for label, (path, line) in decodings.items())
        raise LakeshiftError(
            f"{where}: the predictions mix decodings ({seen}): one accuracy would pool them; score each "
            "decoding's files on their own"
        )
