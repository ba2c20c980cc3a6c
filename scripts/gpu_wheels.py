"""Prints ``name==version`` for every wheel benchmarks/gpu_check.sh may need on an offline GPU machine: the
dependency closure of :data:`ROOTS` in THIS environment (installed versions, markers evaluated here), minus
torch and what only torch needs. Used by scripts/gpu_wheels.sh."""

from __future__ import annotations

import importlib.metadata as md
import re

from packaging.markers import default_environment
from packaging.requirements import Requirement

# What lakeshift's `train` / `generate` need besides torch (transformers, accelerate, peft: in case the GPU
# machine's are older than lakeshift's floor; pip keeps the installed ones when they satisfy it).
ROOTS = ["trl", "datasets", "transformers", "accelerate", "peft", "tokenizers", "pillow", "pyyaml", "tqdm"]
# The map images: gymnasium's FrozenLake art drawn with pygame (pygame-ce here: the same `pygame` module).
ROOTS += ["gymnasium", "pygame-ce"]
NEVER = re.compile(r"^(torch|triton|nvidia-.*|setuptools|pip|wheel)$")
#: Requirement specifiers gpu_check.sh installs (pip resolves them against the wheel folder).
SPECS = [
    "trl>=1.16,<2",
    "datasets>=5.2,<6",
    "transformers>=5.24,<6",
    "accelerate>=1.15,<2",
    "peft>=0.21,<1",
    "tokenizers>=0.22,<1",
    "pillow>=10.0",
    "pyyaml>=6.0",
    "tqdm>=4.66",
    "gymnasium>=1.0,<1.4",  # not [toy-text]: that names `pygame`, and the wheel folder holds pygame-ce
    "pygame-ce>=2.5",
]


def closure(roots: list[str]) -> dict[str, str]:
    env = default_environment()
    seen: dict[str, str] = {}
    todo = [(r, frozenset({""})) for r in roots]
    while todo:
        name, extras = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if NEVER.match(key):
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an optional dependency not installed here: not needed either
        new = key not in seen
        seen[key] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in extras):
                continue
            if new or req.marker is not None:
                todo.append((req.name, frozenset({"", *req.extras})))
    return seen


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--specs"]:
        print("\n".join(SPECS))
        sys.exit(0)
    for name, version in sorted(closure(ROOTS).items()):
        print(f"{name}=={version}")
