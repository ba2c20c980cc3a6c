"""A suite as a Hugging Face Hub dataset folder: ``datasets.load_dataset(FOLDER)`` gives a ``DatasetDict``.

Layout (the Hub's, as ``push_to_hub`` writes it)::

    FOLDER/README.md                                    the dataset card: YAML front matter, then text
    FOLDER/data/<split>-00000-of-00001.parquet          one or more shards per split

Split names are the suite's with ``-`` turned into ``_`` (``id-test`` -> ``id_test``): ``datasets`` takes only
``^\\w+(\\.\\w+)*$``. Every split has the same columns (:func:`features`), one row per map:

* the map record: ``id``, ``split`` (the suite's name), ``size``, ``d_inf``, ``optimal_length``,
  ``n_optimal_paths``, ``holes`` (their number), ``rows`` (gymnasium's ``S F H G`` rows), ``start``,
  ``goal``, ``optimal_path``; and, null where a map has none, ``source_id`` and ``offset`` (embedded maps),
  ``official_id`` (maps imported with ``--id-source``), ``augmentation`` and ``augmented_from``;
* ``image``: gymnasium's frame of the map (a PNG, pixel-identical to ``lakeshift generate``'s);
* ``question_image``, ``question_desc``, ``question_table``, ``question_grid``: the user prompt in each input
  format (Mirage's rule text, the split's prompt variant; ``question_image`` keeps the ``<image>`` placeholder
  where the image goes);
* ``answer``: the reference answer, ``\\boxed{...}`` of ``optimal_path``.

The card's front matter has what the Hub reads: ``configs`` (which files make which split), ``dataset_info``
(features, and each split's ``num_examples`` and ``num_bytes``), ``license``, ``tags``, ``task_categories``,
``size_categories`` and ``pretty_name``; its text the splits' statistics (:mod:`lakeshift.data.stats`), the
paper's citation and the licence of each part (an official part imported from Mirage/VSP is not under
lakeshift's licence: the card says whose it is).

This module makes the rows, the shards' cut and the card (pure Python, like the rest of the core); the
command (:mod:`lakeshift.commands.data`) writes them with ``datasets`` (the ``train`` extra), whose
``Features`` it builds from :func:`columns`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift import formats, traces
from lakeshift.config import dump_yaml
from lakeshift.data.maps import load_maps, map_from_record
from lakeshift.data.stats import split_stats
from lakeshift.env import FrozenLakeMap
from lakeshift.errors import LakeshiftError
from lakeshift.formats import prompts

#: The names ``datasets`` accepts for a split.
SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
#: A shard is closed once its rows hold about this many bytes (the Hub's ``push_to_hub`` cuts at 500 MB).
SHARD_BYTES = 256 * 1024 * 1024
#: The tag that marks a folder this module wrote (``lakeshift export`` replaces only such a folder).
TAG = "lakeshift"
TEXT_INPUTS: tuple[str, ...] = ("desc", "table", "grid")
#: Map-record fields that only some maps have: a column of every split when any map of the suite has one.
OPTIONAL_FIELDS: tuple[str, ...] = ("source_id", "offset", "official_id", "augmentation", "augmented_from")
PAPER_TITLE = (
    "On the Out-of-Distribution Generalization of Reasoning in Multimodal LLMs for Simple Visual "
    "Planning Tasks"
)
PAPER_CODE = "http://github.com/YanNeu/frozen_ood"


def hub_split_name(name: str) -> str:
    """The split's name as ``datasets`` accepts it: ``id-test`` -> ``id_test``.

    Raises:
        LakeshiftError: a name that is still not ``^\\w+(\\.\\w+)*$`` (spaces, other punctuation).
    """
    hub = name.replace("-", "_")
    if not SPLIT_NAME.match(hub):
        raise LakeshiftError(
            f"split {name!r}: not a name datasets accepts, even as {hub!r} (letters, digits, _ and . only)"
        )
    return hub


@dataclass
class SplitInfo:
    """What the card says of one exported split."""

    name: str
    hub_name: str
    num_examples: int
    num_bytes: int
    shards: list[Path]
    variant: str
    official: bool
    stats: list[dict[str, Any]]


def _split_meta(split_dir: Path) -> dict[str, Any]:
    try:
        meta = json.loads((split_dir / "split.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


#: Every column's kind: ``string``, ``int64``, ``image``, ``list:<kind>`` or ``augmentation`` (its struct).
COLUMNS: dict[str, str] = {
    "id": "string",
    "split": "string",
    "size": "int64",
    "d_inf": "int64",
    "optimal_length": "int64",
    "n_optimal_paths": "int64",
    "holes": "int64",
    "rows": "list:string",
    "start": "list:int64",
    "goal": "list:int64",
    "optimal_path": "list:string",
    "answer": "string",
    "image": "image",
    "question_image": "string",
    **{f"question_{fmt}": "string" for fmt in TEXT_INPUTS},
}
_OPTIONAL_KINDS = {
    "source_id": "string",
    "offset": "list:int64",
    "official_id": "string",
    "augmentation": "augmentation",
    "augmented_from": "string",
}


def columns(optional: Sequence[str]) -> dict[str, str]:
    """The columns of every split and their kinds (:data:`COLUMNS`, then the ``optional`` fields present)."""
    return COLUMNS | {name: _OPTIONAL_KINDS[name] for name in OPTIONAL_FIELDS if name in optional}


def _png(m: FrozenLakeMap) -> bytes:
    """The frame as ``lakeshift generate`` writes it: RGB, so a reader that skips ``convert("RGB")`` still
    gets pixels, not palette indices."""
    from lakeshift.formats.image import PNG_COMPRESS_LEVEL, render_image

    buffer = io.BytesIO()
    render_image(m).save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def hub_row(rec: Mapping[str, Any], variant: str, optional: Sequence[str]) -> dict[str, Any]:
    """One dataset row of a ``maps.jsonl`` record (see the module docstring for its columns)."""
    m = map_from_record(rec)
    row: dict[str, Any] = {
        "id": str(rec["id"]),
        "split": str(rec["split"]),
        **{key: int(rec[key]) for key in ("size", "d_inf", "optimal_length", "n_optimal_paths", "holes")},
        "rows": list(rec["rows"]),
        "start": list(rec["start"]),
        "goal": list(rec["goal"]),
        "optimal_path": list(rec["optimal_path"]),
        "answer": traces.boxed(rec["optimal_path"]),
        "image": {"bytes": _png(m), "path": f"{rec['id']}.png"},
        "question_image": prompts.user_prompt(variant, None),
        **{f"question_{fmt}": prompts.user_prompt(variant, formats.render(m, fmt)) for fmt in TEXT_INPUTS},
    }
    for name in optional:
        value = rec.get(name)
        if value is not None and name in ("source_id", "official_id", "augmented_from"):
            value = str(value)
        row[name] = value
    return row


def _row_bytes(row: Mapping[str, Any]) -> int:
    return len(row["image"]["bytes"]) + sum(len(v) for k, v in row.items() if k.startswith("question_"))


def shards(rows: Iterable[dict[str, Any]], limit: int | None = None) -> Iterator[list[dict[str, Any]]]:
    """The rows cut into shards of about ``limit`` bytes each (default :data:`SHARD_BYTES`; at least one
    shard, maybe empty), so a split is never held in memory whole."""
    limit = SHARD_BYTES if limit is None else limit
    shard: list[dict[str, Any]] = []
    held = 0
    sent = False
    for row in rows:
        shard.append(row)
        held += _row_bytes(row)
        if held >= limit:
            yield shard
            shard, held, sent = [], 0, True
    if shard or not sent:
        yield shard


@dataclass
class SplitPlan:
    """One split to export: its folder, maps (validated), Hub name, prompt variant, and whether it is the
    official part."""

    split_dir: Path
    records: list[dict[str, Any]]
    hub_name: str
    variant: str
    official: bool

    def rows(self, optional: Sequence[str]) -> Iterator[dict[str, Any]]:
        return (hub_row(rec, self.variant, optional) for rec in self.records)

    def info(self, num_bytes: int, shard_files: list[Path]) -> SplitInfo:
        name = self.split_dir.name
        return SplitInfo(
            name,
            self.hub_name,
            len(self.records),
            num_bytes,
            shard_files,
            self.variant,
            self.official,
            split_stats(name, self.records),
        )


def plan(split_dirs: Sequence[Path]) -> tuple[list[SplitPlan], list[str]]:
    """What an export of these splits writes, and which :data:`OPTIONAL_FIELDS` are columns. Every split's
    maps are validated (:func:`~lakeshift.data.maps.load_maps`) before anything is written.

    Raises:
        LakeshiftError: invalid maps, a split name ``datasets`` refuses, or two splits with one Hub name.
    """
    plans: list[SplitPlan] = []
    names: dict[str, str] = {}
    for d in split_dirs:
        hub = hub_split_name(d.name)
        if hub in names:
            raise LakeshiftError(f"splits {names[hub]!r} and {d.name!r} would both be {hub!r} on the Hub")
        names[hub] = d.name
        records = load_maps(d)
        meta = _split_meta(d)
        config = meta.get("config")
        imported = isinstance(config, dict) and "imported_from" in config
        official = imported or any("official_id" in rec for rec in records)
        plans.append(SplitPlan(d, records, hub, str(meta.get("prompt_variant", "test")), official))
    optional = [f for f in OPTIONAL_FIELDS if any(f in rec for p in plans for rec in p.records)]
    return plans, optional


def shard_name(hub_name: str, index: int, count: int) -> str:
    """The Hub's name of a shard: ``id_test-00000-of-00001.parquet``."""
    return f"{hub_name}-{index:05d}-of-{count:05d}.parquet"


def _size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < bound:
            return label
    return "100K<n<1M" if n < 1_000_000 else "n>1M"


def front_matter(
    infos: Sequence[SplitInfo], features: list[dict[str, Any]], *, suite: str | None = None
) -> dict[str, Any]:
    """The card's YAML metadata, as the Hub reads it (``configs``, ``dataset_info``, licence, tags);
    ``features`` is the ``dataset_info`` spelling of the columns (``datasets.Features._to_yaml_list()``)."""
    total = sum(i.num_examples for i in infos)
    official = any(i.official for i in infos)
    meta: dict[str, Any] = {
        "pretty_name": f"FrozenLake OOD planning ({suite or 'lakeshift'} suite)",
        "license": "other" if official else "mit",
    }
    if official:
        # The Hub's way to name a licence of its own: a slug, and the file that says it.
        meta["license_name"] = "mit-and-official-vsp-mirage-maps"
        meta["license_link"] = "LICENSE.md"
    meta |= {
        "language": ["en"],
        "task_categories": ["visual-question-answering", "text-generation"],
        "tags": [TAG, "frozenlake", "planning", "chain-of-thought", "out-of-distribution"],
        "size_categories": [_size_category(total)],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": i.hub_name, "path": f"data/{i.hub_name}-*"} for i in infos],
            }
        ],
        "dataset_info": {
            # The loader casts the parquet files to these features.
            "features": features,
            "splits": [
                {"name": i.hub_name, "num_bytes": i.num_bytes, "num_examples": i.num_examples} for i in infos
            ],
            "download_size": sum(p.stat().st_size for i in infos for p in i.shards),
            "dataset_size": sum(i.num_bytes for i in infos),
        },
    }
    return meta


def _stats_table(infos: Sequence[SplitInfo]) -> str:
    head = "| split | size | maps | mean d_inf | mean optimal length | max optimal length | hole fraction |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for info in infos:
        for row in info.stats:
            lines.append(
                f"| `{info.hub_name}` | {row['size']} | {row['count']} | {row['mean_d_inf']:.2f} | "
                f"{row['mean_optimal_length']:.2f} | {row['max_optimal_length']} | "
                f"{row['hole_fraction']:.3f} |"
            )
    return "\n".join(lines)


def licence_paragraphs(infos: Sequence[SplitInfo]) -> list[str]:
    """Whose each part is: the generated splits lakeshift's (MIT), an official part Mirage's and VSP's (the
    card's licence section, and ``LICENSE.md`` when there is an official part)."""
    official = [i for i in infos if i.official]
    generated = [i for i in infos if not i.official]
    out = []
    if generated:
        names = ", ".join(f"`{i.hub_name}`" for i in generated)
        out.append(
            f"The maps that lakeshift generated ({names}) are released under the MIT licence, as "
            "lakeshift is."
        )
    if official:
        names = ", ".join(f"`{i.hub_name}`" for i in official)
        out.append(
            f"The official part ({names}) is not lakeshift's: it was imported from Mirage's "
            "`vsp_spatial_planning` files (Yang et al., 2025; github.com/UMass-Embodied-AGI/Mirage, whose "
            "repository states no licence), whose maps come from the Visual Spatial Planning benchmark "
            "(Wu et al., 2024; github.com/UCSB-NLP-Chang/Visual-Spatial-Planning, MIT License, Copyright (c) "
            "2025 UCSB ML&NLP Group). Check their terms before redistributing these splits."
        )
    return out


def dataset_card(
    infos: Sequence[SplitInfo], features: list[dict[str, Any]], *, suite: str | None = None
) -> str:
    """The README.md of the dataset folder: front matter, then what the splits are, their statistics, how to
    load and score them, the citation and the licences."""
    yaml_text = dump_yaml(front_matter(infos, features, suite=suite))
    first = infos[0].hub_name
    licence = licence_paragraphs(infos)
    split_list = "\n".join(
        f"- `{i.hub_name}` (lakeshift split `{i.name}`): {i.num_examples} maps, "
        f"{'train' if i.variant == 'train' else 'test'} prompt variant"
        + (", imported from the official Mirage/VSP files" if i.official else "")
        for i in infos
    )
    source = f" from the `{suite}` suite" if suite else ""
    return f"""---
{yaml_text}---

# FrozenLake OOD planning

FrozenLake grid-navigation maps for measuring how chain-of-thought reasoning generalizes out of
distribution, as in "{PAPER_TITLE}". Written by `lakeshift export`{source}:
one row per map, with its image, the question in every input format (image, desc, table, grid) and the
reference answer (a shortest plan).

## Splits

{split_list}

{_stats_table(infos)}

`d_inf` is the L-infinity distance from start to goal; the hole fraction is holes / n^2.

## Columns

- `id`, `split`, `size`, `d_inf`, `optimal_length`, `n_optimal_paths`, `holes` (how many), `rows`
  (gymnasium's `S F H G` rows), `start`, `goal` (`[row, column]`, 0-based), `optimal_path`;
- `image`: gymnasium's `FrozenLake-v1` frame of the map;
- `question_image`, `question_desc`, `question_table`, `question_grid`: the user prompt for each input format
  (Mirage's rule text; `question_image` keeps the `<image>` placeholder where the image goes);
- `answer`: the reference answer, `\\boxed{{...}}` of `optimal_path`.

## Use

```python
from datasets import load_dataset

suite = load_dataset("PATH_OR_REPO")  # a DatasetDict, one split per lakeshift split
row = suite["{first}"][0]
print(row["question_grid"], row["answer"])
```

A plan is scored by simulating it on `rows` (`lakeshift.score_output(row, output)`, with `pip install
lakeshift`): it succeeds iff it ends on the goal without entering a hole.

## Citation

```bibtex
@misc{{frozenlake_ood,
  title        = {{{PAPER_TITLE}}},
  howpublished = {{\\url{{{PAPER_CODE}}}}},
  note         = {{Code and data: {PAPER_CODE}}}
}}
```

It builds on the FrozenLake task of the Visual Spatial Planning benchmark (Wu et al., 2024) and the data of
Mirage (Yang et al., 2025).

## Licence

{(chr(10) * 2).join(licence)}
"""


def iter_split_dirs(path: Path, splits: Sequence[str] | None = None) -> Iterator[Path]:
    """The split folders of a suite folder (or the one split folder), in suite order; ``splits`` keeps
    only those named.

    Raises:
        LakeshiftError: no split there, or a named split that is not there.
    """
    from lakeshift.data.stats import find_splits

    found = find_splits(path)
    if splits is None:
        yield from found
        return
    by_name = {d.name: d for d in found}
    missing = [s for s in splits if s not in by_name]
    if missing:
        raise LakeshiftError(
            f"--splits: {', '.join(missing)} not in {path} (have: {', '.join(by_name) or 'none'})"
        )
    yield from (by_name[s] for s in splits)
