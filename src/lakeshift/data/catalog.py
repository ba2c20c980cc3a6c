"""The named suites and suite files: which splits a suite has, and the checks a suite passes before anything
is generated.

The ``paper`` suite (the paper's section 4.1 and appendix A): ``id-train`` (100/200/300/400 maps of sizes 3-6,
holes with probability 0.2 as gymnasium's ``generate_random_map(p=0.8)``, start and goal uniform), ``id-test``
(100 per size, disjoint from id-train), ``ood-size`` (200 per size 7-10, hole probability 0.1), ``ood-dist``
(as ood-size with ``d_inf >= 6``), ``embed10-train`` (each id-train map embedded in a random 10x10 map),
``embed10-test`` (200 maps of 10x10 for each ``d_inf`` in 2..9). See :mod:`lakeshift.data.generate` for the
distributions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from lakeshift.config import load_yaml
from lakeshift.data import augment
from lakeshift.data.generate import Group, SplitSpec, validate_spec
from lakeshift.errors import ArgumentError, LakeshiftError, shown
from lakeshift.io import read_json


def paper_suite() -> list[SplitSpec]:
    """The paper's six splits."""
    id_groups = ((3, 100), (4, 200), (5, 300), (6, 400))
    return [
        SplitSpec("id-train", tuple(Group(n, c, 0.2) for n, c in id_groups), train=True),
        SplitSpec("id-test", tuple(Group(n, 100, 0.2) for n in (3, 4, 5, 6)), exclude=("id-train",)),
        SplitSpec("ood-size", tuple(Group(n, 200, 0.1) for n in (7, 8, 9, 10)), exclude=("id-train",)),
        SplitSpec(
            "ood-dist", tuple(Group(n, 200, 0.1, d_inf_min=6) for n in (7, 8, 9, 10)), exclude=("id-train",)
        ),
        SplitSpec("embed10-train", train=True, embed_source="id-train", embed_size=10, embed_hole_prob=0.1),
        SplitSpec(
            "embed10-test",
            tuple(Group(10, 200, 0.1, d_inf_min=d, d_inf_max=d) for d in range(2, 10)),
            exclude=("embed10-train",),
        ),
    ]


def tiny_suite() -> list[SplitSpec]:
    """A small suite with the paper's structure (8 maps per group), for demos and smoke tests."""
    return [
        SplitSpec("id-train", tuple(Group(n, 8, 0.2) for n in (3, 4, 5, 6)), train=True),
        SplitSpec("id-test", tuple(Group(n, 4, 0.2) for n in (3, 4, 5, 6)), exclude=("id-train",)),
        SplitSpec("ood-size", tuple(Group(n, 4, 0.1) for n in (7, 8, 9, 10)), exclude=("id-train",)),
        SplitSpec(
            "ood-dist", tuple(Group(n, 4, 0.1, d_inf_min=6) for n in (7, 8, 9, 10)), exclude=("id-train",)
        ),
        SplitSpec("embed10-train", train=True, embed_source="id-train"),
        SplitSpec(
            "embed10-test",
            tuple(Group(10, 2, 0.1, d_inf_min=d, d_inf_max=d) for d in range(2, 10)),
            exclude=("embed10-train",),
        ),
    ]


SUITES: dict[str, Callable[[], list[SplitSpec]]] = {"paper": paper_suite, "tiny": tiny_suite}


def load_suite(name_or_path: str) -> list[SplitSpec]:
    """A named suite (``paper``, ``tiny``) or a suite file (``.json``/``.yaml``: ``{"splits": [...]}``,
    each split a :class:`~lakeshift.data.generate.SplitSpec` as a dict with ``groups`` as dicts).

    Raises:
        LakeshiftError: an unknown name, or a file that is missing, malformed or fails :func:`check_suite`.
    """
    if name_or_path in SUITES:
        return SUITES[name_or_path]()
    path = Path(name_or_path)
    if path.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise LakeshiftError(
            f"unknown suite {name_or_path!r} (expected one of {', '.join(SUITES)} "
            "or a .json/.yaml suite file)"
        )
    if not path.is_file():
        raise LakeshiftError(f"{path}: no such suite file")
    data = read_json(path) if path.suffix.lower() == ".json" else load_yaml(path).data
    if not isinstance(data, Mapping) or not isinstance(data.get("splits"), list):
        raise LakeshiftError(f"{path}: expected an object with a list 'splits'")
    specs = [SplitSpec.from_dict(s, f"{path}: splits[{i}]") for i, s in enumerate(data["splits"])]
    try:  # before anything reads the specs (the resource estimate of `generate` does arithmetic on them)
        check_suite(specs)
    except LakeshiftError as err:
        raise LakeshiftError(f"{path}: {err}") from None
    return specs


def check_suite(specs: Sequence[SplitSpec]) -> None:
    """Validates a suite: a list of :class:`SplitSpec`, unique names, dependencies defined earlier, every
    group's constraints possible."""
    if not isinstance(specs, Sequence) or not all(isinstance(spec, SplitSpec) for spec in specs):
        raise ArgumentError(f"specs must be a list of SplitSpec, got {shown(specs)}")
    seen: list[str] = []
    for spec in specs:
        if spec.name in seen:
            raise LakeshiftError(f"split {spec.name!r} is defined twice")
        for dep in (*spec.exclude, *([spec.embed_source] if spec.embed_source else [])):
            if dep not in seen:
                raise LakeshiftError(
                    f"split {spec.name}: depends on {dep!r}, which must be defined before it"
                )
        validate_spec(spec, seen)
        if spec.augment:
            augment.parse_augment(spec.augment, f"split {spec.name}: augment")
            if not spec.train:
                raise LakeshiftError(
                    f"split {spec.name}: augment applies to training splits only (give train: true); "
                    "test splits are never augmented"
                )
        if spec.embed_source:
            src = next(s for s in specs if s.name == spec.embed_source)
            big = max((g.size for g in src.groups), default=0)
            if big > spec.embed_size:
                raise LakeshiftError(
                    f"split {spec.name}: cannot embed {big}x{big} maps of {src.name} "
                    f"in {spec.embed_size}x{spec.embed_size}"
                )
        seen.append(spec.name)
