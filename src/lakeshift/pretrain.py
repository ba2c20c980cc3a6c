r"""The pretraining corpus of a lakeshift base model: map reading and random-walk simulation, never a plan.

A pretrained 7B model arrives at fine-tuning knowing how to read a grid and what a move does; a model trained
from scratch must learn that from the few answer tokens of each fine-tuning example. A *base model* trained
on this corpus first (``lakeshift pretrain``) learns the map and the rules, so that fine-tuning on one input x
CoT format only has to learn the plan. The corpus never contains a plan: no optimal path, no path to the
goal chosen by a search, no test map (its maps come from their own split and seed). Each example is one map
(sizes 3-6 by default: the paper's training sizes) rendered in one of the text input formats, as in the
``map-only`` prompt, followed by one of two questions (:data:`TASKS`):

- ``walk``: a random move sequence. The answer reads the map back (start, goal, every hole, as the
  coordinate CoT writes cells) and then simulates the moves with :meth:`FrozenLakeMap.simulate` (the rules
  of the scorer): the cells visited and the outcome (``hole``, ``goal`` or ``safe``)::

      user:      <map>\nWalk: RIGHT, DOWN, DOWN
      assistant: start (1,1) goal (3,2) holes (1,3) (2,1)\nwalk (1,2) (2,2) (3,2) goal

- ``moves``: a random walk over safe cells, as coordinates; the answer is its moves in the ``\boxed{}``
  syntax of every CoT (the last step of the ``coords`` CoT)::

      user:      <map>\nPath: (1,1) (1,2) (2,2)
      assistant: \boxed{RIGHT, DOWN}

Each example draws its format, task and moves from its own RNG (``seed`` and its index), so any example can be
regenerated alone. The core imports no ML library.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeshift import formats
from lakeshift.env import DELTAS, FrozenLakeMap
from lakeshift.errors import LakeshiftError
from lakeshift.generate import Group, SplitSpec, generate_split
from lakeshift.io import write_jsonl
from lakeshift.prompts import SYSTEM_PROMPT
from lakeshift.records import map_of
from lakeshift.traces import boxed, cell_text

TASKS: tuple[str, ...] = ("walk", "moves")
#: The input formats the corpus renders maps in (the text formats of the study).
CORPUS_INPUTS: tuple[str, ...] = ("grid", "table", "desc")
#: The ``input_format`` / ``cot_format`` names of a corpus record (it mixes formats and has no CoT).
CORPUS_INPUT = "text"
CORPUS_COT = "maptasks"
#: The corpus split's folder name inside the corpus data folder.
CORPUS_SPLIT = "pretrain"
_REVERSE = {"UP": "DOWN", "DOWN": "UP", "LEFT": "RIGHT", "RIGHT": "LEFT"}


def _cells(cells: Sequence[tuple[int, int]]) -> str:
    return " ".join(cell_text(c) for c in cells)


def _walk_length(rng: random.Random, size: int) -> int:
    return rng.randint(1, 2 * size)


def walk_example(m: FrozenLakeMap, rng: random.Random) -> tuple[str, str]:
    """The ``walk`` question and answer for map ``m`` (see the module doc)."""
    moves = [rng.choice(tuple(DELTAS)) for _ in range(_walk_length(rng, m.size))]
    rollout = m.simulate(moves)
    outcome = "hole" if rollout.fell_at is not None else ("goal" if rollout.success else "safe")
    holes = _cells(sorted(m.holes)) or "none"
    read = f"start {cell_text(m.start)} goal {cell_text(m.goal)} holes {holes}"
    return "Walk: " + ", ".join(moves), f"{read}\nwalk {_cells(rollout.positions[1:])} {outcome}"


def moves_example(m: FrozenLakeMap, rng: random.Random) -> tuple[str, str]:
    """The ``moves`` question and answer for map ``m``: a random walk over safe cells from the start."""
    pos, cells, moves = m.start, [m.start], []
    for _ in range(_walk_length(rng, m.size)):
        options = [(move, nxt) for move in DELTAS if (nxt := m.step(pos, move)) != pos and nxt not in m.holes]
        if not options:
            break
        # Turning back only at a dead end: the walk then covers distance instead of pacing two cells.
        onward = [o for o in options if not moves or o[0] != _REVERSE[moves[-1]]]
        move, pos = rng.choice(onward or options)
        moves.append(move)
        cells.append(pos)
        if pos == m.goal:
            break
    if not moves:  # a start walled in by holes and edges cannot be on a solvable map, but stay total
        return "Path: " + cell_text(m.start), boxed([])
    return "Path: " + _cells(cells), boxed(moves)


def corpus_record(map_record: Mapping[str, Any], index: int, seed: int) -> dict[str, Any]:
    """Corpus example ``index``: the map of ``map_record`` in a random text format with a random task.

    Raises:
        LakeshiftError: the map record is invalid (names its id and field).
    """
    rng = random.Random(f"lakeshift-pretrain:{seed}:{index}")
    m = map_of(map_record)
    input_format = rng.choice(CORPUS_INPUTS)
    task = rng.choice(TASKS)
    question, answer = (walk_example if task == "walk" else moves_example)(m, rng)
    user = formats.render(m, input_format) + "\n" + question
    return {
        "id": str(map_record.get("id", index)),
        "input_format": CORPUS_INPUT,
        "cot_format": CORPUS_COT,
        "task": task,
        "map_format": input_format,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
            {"role": "assistant", "content": answer},
        ],
    }


def corpus_records(map_records: Sequence[Mapping[str, Any]], seed: int) -> Iterator[dict[str, Any]]:
    """The corpus of a list of maps, one example per map, in order."""
    for index, rec in enumerate(map_records):
        yield corpus_record(rec, index, seed)


def corpus_spec(counts: Mapping[int, int], hole_prob: float) -> SplitSpec:
    """The corpus maps: ``counts[size]`` random maps of each size (a training split of its own)."""
    groups = tuple(Group(size=n, count=c, hole_prob=hole_prob) for n, c in sorted(counts.items()))
    return SplitSpec(name=CORPUS_SPLIT, groups=groups, train=True)


def write_corpus(
    data: Path, spec: SplitSpec, seed: int, *, progress: Callable[[int], None] | None = None
) -> Path:
    """Generates the corpus maps and examples into ``data/pretrain/`` (``maps.jsonl`` and
    ``sft/text__maptasks.jsonl``, the layout ``lakeshift train`` reads); returns the SFT file."""
    maps, _ = generate_split(spec, seed, progress=progress)
    split_dir = data / spec.name
    write_jsonl(split_dir / "maps.jsonl", maps)
    sft = split_dir / "sft" / f"{CORPUS_INPUT}__{CORPUS_COT}.jsonl"
    write_jsonl(sft, corpus_records(maps, seed))
    return sft


# ----- the config of a base model (``lakeshift pretrain CONFIG``) -------------------------------------------
#: ``train:`` keys of a pretraining config and the number rule of each (``model`` is a named size).
TRAIN_KEYS: dict[str, str | None] = {
    "model": None,
    "batch_size": "positive_int",
    "lr": "positive_float",
    "epochs": "positive_float",
    "max_minutes": "positive_float",
    "max_steps": "positive_int",
    "warmup_steps": "nonnegative_int",
    "weight_decay": "nonnegative_float",
    "seed": "nonnegative_int",
    "bf16": "bool",
}


@dataclass(frozen=True)
class PretrainConfig:
    """A base model's recipe: the corpus (maps per size, hole probability, seed) and the training options."""

    name: str
    spec: SplitSpec
    seed: int
    train: dict[str, Any]

    def corpus_key(self) -> dict[str, Any]:
        """What the corpus depends on (a corpus on disk made from another key is stale)."""
        groups = [[g.size, g.count, g.hole_prob] for g in self.spec.groups]
        return {"groups": groups, "seed": self.seed, "tasks": list(TASKS), "inputs": list(CORPUS_INPUTS)}


def load_pretrain_config(path: str | Path) -> PretrainConfig:
    """Reads and validates a pretraining config (see ``configs/base-mini.yaml``).

    Raises:
        LakeshiftError: naming file, line and key: unknown keys, bad numbers, sizes outside 2-30.
    """
    from lakeshift.config import load_yaml
    from lakeshift.generate import validate_group

    cfg = load_yaml(path)
    data = cfg.data
    if not isinstance(data, dict):
        raise LakeshiftError(f"{path}: expected a mapping with corpus: and train:")
    for key in data:
        if key not in ("name", "corpus", "train"):
            raise cfg.error(key, "unknown key (expected name, corpus, train)")
    corpus, train = data.get("corpus"), data.get("train")
    if not isinstance(corpus, dict) or not isinstance(corpus.get("maps"), dict) or not corpus["maps"]:
        raise cfg.error("corpus", "expected corpus.maps: a mapping of map size to number of maps")
    for key in corpus:
        if key not in ("maps", "hole_prob", "seed"):
            raise cfg.error(f"corpus.{key}", "unknown key (expected maps, hole_prob, seed)")
    hole_prob = cfg.check_number("corpus.hole_prob", corpus.get("hole_prob", 0.2), "probability")
    seed = cfg.check_number("corpus.seed", corpus.get("seed", 0), "nonnegative_int")
    counts: dict[int, int] = {}
    for size, count in corpus["maps"].items():
        where = f"corpus.maps.{size}"
        if not str(size).isdigit():  # YAML keys arrive as strings
            raise cfg.error(where, f"a map size must be an integer, got {size!r}")
        counts[int(size)] = int(cfg.check_number(where, count, "positive_int"))
    spec = corpus_spec(counts, float(hole_prob))
    for size, group in zip(sorted(counts), spec.groups, strict=True):
        try:
            validate_group(group, f"size {size}")
        except (ValueError, LakeshiftError) as err:
            raise cfg.error(f"corpus.maps.{size}", str(err)) from None
    if not isinstance(train, dict) or not isinstance(train.get("model"), str):
        raise cfg.error("train", "expected train: with at least model: (a named size such as mini)")
    for key, value in train.items():
        if key not in TRAIN_KEYS:
            raise cfg.error(f"train.{key}", f"unknown key (expected {', '.join(TRAIN_KEYS)})")
        rule = TRAIN_KEYS[key]
        if rule == "bool":
            if not isinstance(value, bool):
                raise cfg.error(f"train.{key}", f"expected true or false, got {value!r}")
        elif rule:
            cfg.check_number(f"train.{key}", value, rule)
    name = str(data.get("name") or Path(path).stem)
    return PretrainConfig(name, spec, int(seed), dict(train))
