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

- ``trace`` (chosen in a config's ``corpus.tasks``): the map alone, as the ``map-only`` prompt gives it, and
  the answer a CoT format (``corpus.traces``, by default every one of :data:`TRACE_COTS`) would write, for a
  random walk instead of a plan (:func:`lakeshift.traces.walk_completions`: the CoT's exact syntax, the
  same renderer). The walk takes random safe moves (never off the map or into a hole, turning back only at
  a dead end) and ends after a random number of moves or where it reaches the goal; it is never chosen to
  reach the goal. Its narration states facts only: the sentences that compare shortest distances to the
  goal (``leads to a longer path``, ``is just as short``, ``is shorter``) are planning knowledge and are
  left out (a safe direct direction the walk does not take gets no sentence). With
  ``corpus.walks_end_at_goal`` every walk ends at the goal: the walk is drawn first, then the map's goal is
  moved to its last cell, and a walk as short as a shortest path to that cell is drawn again, so the trace is
  never an optimal plan; the base then learns that a trace goes on until the player stands on ``G``.
  ``astar`` has no walk: its example searches for a random target cell (neither start nor goal), named on a
  last prompt line
  ``Target: (r,c)``, so its trace is A* on the map with the goal moved there, never a plan to the goal::

      user:      <map>
      assistant: Grid:\n.  G  .\nP  X  .\n.  .  X\n...\n\boxed{UP, ...}

A config's ``corpus.inputs`` names the input formats the maps are shown in: by default the text formats
(:data:`CORPUS_INPUTS`, one drawn per example), or ``[image]`` alone for a base of a vision-language
model (``mini-vl``): each example's prompt is the PNG of the map it shows (written beside the corpus as
``generate`` writes a split's images) followed by its question as text, as the ``map-only`` prompt of an
image-input record gives the map.

A config's ``corpus.trace_max_size`` (e.g. ``{grid: 12}``) writes a CoT format only for maps up to that size;
larger maps draw among the other formats (a redrawn grid or table grows with the square of the size: a
walk's grid trace on a 30x30 map is 86,000 characters).

A config's ``corpus.exclude`` names maps no example may show (:func:`excluded_maps`, e.g. the test splits of
the models the base will serve): a drawn map that is one is drawn again, and an example whose moved goal
makes one is left out.

Each example draws its format, task and moves from its own RNG (``seed`` and its index), so any example can be
regenerated alone. The core imports no ML library.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeshift import formats
from lakeshift.data.generate import Group, SplitSpec, generate_split
from lakeshift.data.records import map_of
from lakeshift.env import DELTAS, FrozenLakeMap
from lakeshift.errors import LakeshiftError
from lakeshift.formats.prompts import SYSTEM_PROMPT
from lakeshift.io import write_jsonl
from lakeshift.models.train_options import TrainOptions
from lakeshift.options import check_config, config_keys
from lakeshift.traces import MAP_COTS, astar_search, astar_text, boxed, cell_text, walk_completions
from lakeshift.traces import TRACE_COTS as _ALL_TRACE_COTS

#: The CoT formats a corpus can write for a random walk: not ``wave``, whose frames are the map's own plan.
TRACE_COTS: tuple[str, ...] = tuple(c for c in _ALL_TRACE_COTS if c not in MAP_COTS)

TASKS: tuple[str, ...] = ("walk", "moves", "trace")
#: The tasks of a config that names none (the shipped ``mini-cells-base``).
DEFAULT_TASKS: tuple[str, ...] = ("walk", "moves")
#: The input formats the corpus renders maps in by default (the text formats of the study).
CORPUS_INPUTS: tuple[str, ...] = ("grid", "table", "desc")
#: ``corpus.inputs: [image]``: every example shows its map as an image (a vision-language base).
IMAGE_INPUT = "image"
#: The ``input_format`` / ``cot_format`` names of a text corpus's records (it mixes formats and has no CoT);
#: an image corpus's records have ``input_format`` :data:`IMAGE_INPUT`.
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


def safe_walk(m: FrozenLakeMap, rng: random.Random) -> tuple[list[tuple[int, int]], list[str]]:
    """A random walk over safe cells from the start: its cells (start first) and moves. It never leaves the
    map or enters a hole, turns back only at a dead end, and stops after a random number of moves
    (1 to twice the size) or where it reaches the goal."""
    pos, cells = m.start, [m.start]
    moves: list[str] = []
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
    return cells, moves


def moves_example(m: FrozenLakeMap, rng: random.Random) -> tuple[str, str]:
    """The ``moves`` question and answer for map ``m``: a :func:`safe_walk` as coordinates, then its moves."""
    cells, moves = safe_walk(m, rng)
    if not moves:  # a start walled in by holes and edges cannot be on a solvable map, but stay total
        return "Path: " + cell_text(m.start), boxed([])
    return "Path: " + _cells(cells), boxed(moves)


#: How many walks :func:`detour_walk` draws before it keeps the map's own goal.
_DETOUR_TRIES = 20


def detour_walk(m: FrozenLakeMap, rng: random.Random) -> tuple[FrozenLakeMap, list[str]]:
    """A :func:`safe_walk` that ends at the goal and is not a shortest path: the map with its goal moved to
    the walk's last cell (cut at the first visit of that cell), and the walk's moves. A walk as short as a
    shortest path to its end is drawn again; after :data:`_DETOUR_TRIES` draws (a map so small or so full of
    holes that no detour is drawn) the map keeps its goal and the last walk, less its last move where that
    move reaches the goal (a shortest path by chance)."""
    for _ in range(_DETOUR_TRIES):
        cells, moves = safe_walk(m, rng)
        end = cells.index(cells[-1])  # a walk that loops back to its last cell reaches it there first
        cells, moves = cells[: end + 1], moves[:end]
        if not moves:
            continue
        moved = FrozenLakeMap(m.size, m.holes, m.start, cells[-1])
        if len(moves) > (moved.optimal_length or 0):
            return moved, moves
    cells, moves = safe_walk(m, rng)
    return m, moves[:-1] if cells[-1] == m.goal and len(moves) > 1 else moves


def trace_example(
    m: FrozenLakeMap, rng: random.Random, cot: str, *, walks_end_at_goal: bool = False
) -> tuple[FrozenLakeMap, str, str, str]:
    """The ``trace`` example for map ``m`` in CoT format ``cot``: the map the prompt shows (``m``, or ``m``
    with its goal moved to the walk's end), the extra prompt text (empty, or the ``Target:`` line of
    ``astar``), the trace (see the module doc) and its format (``coords`` for an ``astar`` example on a map
    without a cell to search for)."""
    if cot == "astar":
        targets = sorted(c for c in _reachable(m) if c not in (m.start, m.goal))
        if targets:
            target = rng.choice(targets)
            moved = FrozenLakeMap(m.size, m.holes, m.start, target)
            run = astar_search(moved)
            return m, "\nTarget: " + cell_text(target), astar_text(moved, run.parent_chain(target)), cot
        cot = "coords"  # a map whose only safe cells are its start and goal has no target to search for
    if walks_end_at_goal:
        m, moves = detour_walk(m, rng)
    else:
        _, moves = safe_walk(m, rng)
    return m, "", walk_completions(m, moves, (cot,))[cot], cot


def _reachable(m: FrozenLakeMap) -> set[tuple[int, int]]:
    """The cells a walk from the start can reach without entering a hole."""
    seen, todo = {m.start}, [m.start]
    while todo:
        cell = todo.pop()
        for move in DELTAS:
            nxt = m.step(cell, move)
            if nxt not in seen and nxt not in m.holes:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def corpus_record(
    map_record: Mapping[str, Any],
    index: int,
    seed: int,
    tasks: Sequence[str] = DEFAULT_TASKS,
    traces: Sequence[str] = TRACE_COTS,
    walks_end_at_goal: bool = False,
    *,
    trace_max_size: Mapping[str, int] | None = None,
    inputs: Sequence[str] = CORPUS_INPUTS,
) -> dict[str, Any]:
    """Corpus example ``index``: the map of ``map_record`` in a random format of ``inputs`` with a random
    task of ``tasks`` (a ``trace`` in a random CoT format of ``traces``, less those whose ``trace_max_size``
    the map exceeds, its walk ended at a moved goal with ``walks_end_at_goal``). An image example names its
    PNG, ``images/<id>.png``, which :func:`write_corpus` renders.

    Raises:
        LakeshiftError: the map record is invalid (names its id and field).
    """
    limits = trace_max_size or {}
    return _example(map_record, index, seed, tasks, traces, walks_end_at_goal, limits, inputs)[1]


def _example(
    map_record: Mapping[str, Any],
    index: int,
    seed: int,
    tasks: Sequence[str],
    traces: Sequence[str],
    walks_end_at_goal: bool,
    trace_max_size: Mapping[str, int],
    inputs: Sequence[str],
) -> tuple[FrozenLakeMap, dict[str, Any]]:
    """:func:`corpus_record` and the map its prompt shows (the map of ``map_record`` or, for a walk ended
    at the goal, that map with its goal moved)."""
    rng = random.Random(f"lakeshift-pretrain:{seed}:{index}")
    m = map_of(map_record)
    input_format = rng.choice(tuple(inputs))
    task = rng.choice(tasks)
    trace: dict[str, str] = {}
    if task == "trace":
        fitting = [c for c in traces if m.size <= trace_max_size.get(c, m.size)]
        if not fitting:
            raise LakeshiftError(
                f"map {map_record.get('id', index)}: no trace format is written at size {m.size}"
            )
        m, question, answer, cot = trace_example(
            m, rng, rng.choice(fitting), walks_end_at_goal=walks_end_at_goal
        )
        trace = {"trace": cot}
    else:
        question, answer = (walk_example if task == "walk" else moves_example)(m, rng)
        question = "\n" + question
    example_id = str(map_record.get("id", index))
    if input_format == IMAGE_INPUT:
        # every content a list of blocks, as an image record of `generate` has (lakeshift.data.records)
        user: Any = [{"type": "image"}, *([{"type": "text", "text": question}] if question else [])]
        system: Any = [{"type": "text", "text": SYSTEM_PROMPT}]
        reply: Any = [{"type": "text", "text": answer}]
        images = {"images": [f"images/{example_id}.png"]}
    else:
        user, system, reply, images = formats.render(m, input_format) + question, SYSTEM_PROMPT, answer, {}
    return m, {
        "id": example_id,
        "input_format": corpus_input([input_format]),
        "cot_format": CORPUS_COT,
        "task": task,
        **trace,
        "map_format": input_format,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
            {"role": "assistant", "content": reply},
        ],
        **images,
    }


def corpus_records(
    map_records: Sequence[Mapping[str, Any]],
    seed: int,
    tasks: Sequence[str] = DEFAULT_TASKS,
    traces: Sequence[str] = TRACE_COTS,
    walks_end_at_goal: bool = False,
    excluded: Collection[tuple[str, ...]] = frozenset(),
    dropped: list[str] | None = None,
    *,
    trace_max_size: Mapping[str, int] | None = None,
    inputs: Sequence[str] = CORPUS_INPUTS,
    shown: Callable[[FrozenLakeMap, dict[str, Any]], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """The corpus of a list of maps, one example per map, in order, less the examples whose prompt shows a
    map of ``excluded`` (gymnasium rows; a walk ended at the goal moves it, so a drawn map that is not
    excluded can still show one that is): their ids are appended to ``dropped``. ``shown`` is called with
    the map each kept example shows and the example (:func:`write_corpus` renders its image there)."""
    limits = trace_max_size or {}
    for index, rec in enumerate(map_records):
        m, example = _example(rec, index, seed, tasks, traces, walks_end_at_goal, limits, inputs)
        if excluded and tuple(m.rows) in excluded:
            if dropped is not None:
                dropped.append(example["id"])
            continue
        if shown is not None:
            shown(m, example)
        yield example


def excluded_maps(paths: Sequence[str | Path]) -> tuple[frozenset[tuple[str, ...]], dict[str, str]]:
    """The maps a corpus must not show (``corpus.exclude``): the gymnasium rows of every map in ``paths``
    (each a ``maps.jsonl``, a split folder, or a ``lakeshift generate`` folder: all its splits), and the
    sha256 of each file read, by path.

    Raises:
        LakeshiftError: a path that is not there or holds no ``maps.jsonl``; an invalid map file.
    """
    from lakeshift.data.maps import load_maps
    from lakeshift.io import file_sha256

    files: list[Path] = []
    for path in map(Path, paths):
        splits = sorted(path.glob("*/maps.jsonl")) if path.is_dir() else []
        if path.is_file():
            files.append(path)
        elif (path / "maps.jsonl").is_file():
            files.append(path / "maps.jsonl")
        elif splits:
            files.extend(splits)
        else:
            raise LakeshiftError(
                f"{path}: no maps.jsonl there (expected a maps file, a split or a data folder)"
            )
    rows = frozenset(tuple(rec["rows"]) for f in files for rec in load_maps(f))
    return rows, {str(f): file_sha256(f) for f in files}


def corpus_spec(counts: Mapping[int, int], hole_prob: float) -> SplitSpec:
    """The corpus maps: ``counts[size]`` random maps of each size (a training split of its own)."""
    groups = tuple(Group(size=n, count=c, hole_prob=hole_prob) for n, c in sorted(counts.items()))
    return SplitSpec(name=CORPUS_SPLIT, groups=groups, train=True)


def write_corpus(
    data: Path,
    spec: SplitSpec,
    seed: int,
    *,
    tasks: Sequence[str] = DEFAULT_TASKS,
    traces: Sequence[str] = TRACE_COTS,
    walks_end_at_goal: bool = False,
    trace_max_size: Mapping[str, int] | None = None,
    inputs: Sequence[str] = CORPUS_INPUTS,
    excluded: Collection[tuple[str, ...]] = frozenset(),
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Generates the corpus maps and examples into ``data/pretrain/`` (``maps.jsonl``,
    ``sft/<input>__maptasks.jsonl`` with :func:`corpus_input`'s name, and for an image corpus each example's
    PNG in ``images/``: the layout ``lakeshift train`` reads). No example shows a map of ``excluded``: a
    drawn map that is one is drawn again, and an example whose moved goal makes one is left out. Returns
    the counts: ``maps``, ``examples``, ``redrawn`` and ``dropped``."""
    maps, stats = generate_split(spec, seed, forbidden=excluded, progress=progress)
    split_dir = data / spec.name
    write_jsonl(split_dir / "maps.jsonl", maps)
    sft = split_dir / "sft" / f"{corpus_input(inputs)}__{CORPUS_COT}.jsonl"
    dropped: list[str] = []

    def render(m: FrozenLakeMap, example: dict[str, Any]) -> None:
        from lakeshift.formats.image import render_png

        for image in example.get("images", ()):
            (split_dir / image).parent.mkdir(parents=True, exist_ok=True)
            render_png(m, split_dir / image)

    records = corpus_records(
        maps,
        seed,
        tasks,
        traces,
        walks_end_at_goal,
        excluded,
        dropped,
        trace_max_size=trace_max_size,
        inputs=inputs,
        shown=render,
    )
    examples = write_jsonl(sft, records)
    return {
        "maps": len(maps),
        "examples": examples,
        "redrawn": stats.duplicate_of_train,
        "dropped": len(dropped),
    }


def corpus_input(inputs: Sequence[str]) -> str:
    """The ``input_format`` of a corpus shown in ``inputs``: its records' and its SFT file's."""
    return IMAGE_INPUT if tuple(inputs) == (IMAGE_INPUT,) else CORPUS_INPUT


# ----- the config of a base model (``lakeshift pretrain CONFIG``) -------------------------------------------
#: ``corpus:`` keys of a pretraining config.
CORPUS_KEYS: tuple[str, ...] = (
    "maps",
    "inputs",
    "hole_prob",
    "seed",
    "tasks",
    "traces",
    "walks_end_at_goal",
    "trace_max_size",
    "exclude",
)
#: ``corpus:`` keys that only the ``trace`` task reads.
TRACE_KEYS: tuple[str, ...] = ("traces", "walks_end_at_goal", "trace_max_size")
#: ``train:`` keys of a pretraining config: the options of ``lakeshift train`` it may set (``model`` is a
#: named size); their types, ranges and choices are the options' own (:func:`lakeshift.options.check_config`).
TRAIN_KEYS: list[str] = config_keys(TrainOptions, "pretrain")


@dataclass(frozen=True)
class PretrainConfig:
    """A base model's recipe: the corpus (maps per size, hole probability, seed) and the training options."""

    name: str
    spec: SplitSpec
    seed: int
    train: dict[str, Any]
    tasks: tuple[str, ...] = DEFAULT_TASKS
    traces: tuple[str, ...] = TRACE_COTS
    walks_end_at_goal: bool = False
    #: The largest map size each CoT format is written for (formats not named: every size).
    trace_max_size: Mapping[str, int] = field(default_factory=dict)
    #: Maps the corpus must not show (:func:`excluded_maps`): the test splits of the models it serves.
    exclude: tuple[str, ...] = ()
    #: The formats its maps are shown in: text formats, or :data:`IMAGE_INPUT` alone.
    inputs: tuple[str, ...] = CORPUS_INPUTS

    def corpus_key(self) -> dict[str, Any]:
        """What the corpus depends on (a corpus on disk made from another key is stale); the excluded maps
        enter by their files' sha256."""
        groups = [[g.size, g.count, g.hole_prob] for g in self.spec.groups]
        key = {"groups": groups, "seed": self.seed, "tasks": list(self.tasks), "inputs": list(self.inputs)}
        if "trace" in self.tasks:
            key["traces"] = list(self.traces)
            # a corpus made before walks_end_at_goal existed keeps its key
            if self.walks_end_at_goal:
                key["walks_end_at_goal"] = True
            if self.trace_max_size:
                key["trace_max_size"] = dict(sorted(self.trace_max_size.items()))
        if self.exclude:
            key["exclude_sha256"] = sorted(excluded_maps(self.exclude)[1].values())
        return key


def load_pretrain_config(path: str | Path) -> PretrainConfig:
    """Reads and validates a pretraining config (see ``configs/pretrain/base-mini.yaml``).

    Numbers come back as numbers (YAML 1.1 reads ``lr: 1e-3`` as a string, which training could not use).

    Raises:
        LakeshiftError: naming file, line and key: unknown keys, bad numbers, sizes outside 2-30 (the
            cells the named sizes' tokenizer writes), a name that is not a string.
    """
    from lakeshift.config import load_yaml
    from lakeshift.data.generate import validate_group
    from lakeshift.models.tokenizer import MAX_MAP_SIZE

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
        if key not in CORPUS_KEYS:
            raise cfg.error(f"corpus.{key}", f"unknown key (expected {', '.join(CORPUS_KEYS)})")
    tasks = _names(cfg, "corpus.tasks", corpus.get("tasks", list(DEFAULT_TASKS)), TASKS)
    shown_as = corpus.get("inputs", list(CORPUS_INPUTS))
    inputs = _names(cfg, "corpus.inputs", shown_as, (*CORPUS_INPUTS, IMAGE_INPUT))
    if IMAGE_INPUT in inputs and len(inputs) > 1:
        raise cfg.error("corpus.inputs", "an image corpus shows images only: [image], or text formats")
    traces = _names(cfg, "corpus.traces", corpus.get("traces", list(TRACE_COTS)), TRACE_COTS)
    walks_end_at_goal = corpus.get("walks_end_at_goal", False)
    if not isinstance(walks_end_at_goal, bool):
        raise cfg.error("corpus.walks_end_at_goal", f"expected true or false, got {walks_end_at_goal!r}")
    exclude = corpus.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(p, str) and p for p in exclude):
        raise cfg.error("corpus.exclude", f"expected a list of map files or data folders, got {exclude!r}")
    try:
        excluded_maps(exclude)
    except LakeshiftError as err:
        raise cfg.error("corpus.exclude", str(err)) from None
    hole_prob = cfg.check_number("corpus.hole_prob", corpus.get("hole_prob", 0.2), "probability")
    seed = cfg.check_number("corpus.seed", corpus.get("seed", 0), "seed")
    counts: dict[int, int] = {}
    keys: dict[int, str] = {}
    for size, count in corpus["maps"].items():
        where = f"corpus.maps.{size}"
        if not str(size).isdigit():  # YAML keys arrive as strings
            raise cfg.error(where, f"a map size must be an integer, got {size!r}")
        if int(size) in keys:  # `3` and `03` are one size: the later would replace the earlier's count
            raise cfg.error(where, f"map size {int(size)} is given twice ({keys[int(size)]!r} and {size!r})")
        keys[int(size)] = size
        if int(size) > MAX_MAP_SIZE:
            raise cfg.error(where, f"map sizes go up to {MAX_MAP_SIZE} (the cells the tokenizer writes)")
        counts[int(size)] = int(cfg.check_number(where, count, "positive_int"))
    spec = corpus_spec(counts, float(hole_prob))
    trace_max_size = _trace_max_size(cfg, corpus.get("trace_max_size", {}), traces)
    if "trace" not in tasks:
        for key in TRACE_KEYS:
            if key in corpus:  # the corpus and its key would ignore it
                raise cfg.error(
                    f"corpus.{key}", "has no effect without the trace task (add trace to corpus.tasks)"
                )
    if "trace" in tasks:
        largest = max((trace_max_size.get(c, MAX_MAP_SIZE) for c in traces), default=0)
        if max(counts) > largest:
            raise cfg.error(
                "corpus.trace_max_size", f"maps of size {max(counts)} get no trace format (largest {largest})"
            )
    for size, group in zip(sorted(counts), spec.groups, strict=True):
        try:
            validate_group(group, f"size {size}")
        except (ValueError, LakeshiftError) as err:
            raise cfg.error(f"corpus.maps.{size}", str(err)) from None
    if not isinstance(train, dict) or not isinstance(train.get("model"), str):
        raise cfg.error("train", "expected train: with at least model: (a named size such as mini)")
    options = check_config(cfg, train, TrainOptions, TRAIN_KEYS, "train")
    name = data.get("name", Path(path).stem)
    if not isinstance(name, str) or not name:
        raise cfg.error("name", f"expected a name (a string), got {name!r}")
    return PretrainConfig(
        name,
        spec,
        int(seed),
        options,
        tasks,
        traces,
        walks_end_at_goal,
        trace_max_size,
        tuple(exclude),
        inputs,
    )


def _trace_max_size(cfg: Any, value: Any, traces: Sequence[str]) -> dict[str, int]:
    """A config's ``corpus.trace_max_size``: trace formats of the corpus mapped to map sizes."""
    if not isinstance(value, dict):
        raise cfg.error(
            "corpus.trace_max_size", f"expected a mapping of CoT format to map size, got {value!r}"
        )
    for cot in value:
        if cot not in traces:
            raise cfg.error(
                f"corpus.trace_max_size.{cot}", f"not a trace of this corpus ({', '.join(traces)})"
            )
    return {
        c: int(cfg.check_number(f"corpus.trace_max_size.{c}", n, "positive_int")) for c, n in value.items()
    }


def _names(cfg: Any, where: str, value: Any, allowed: Sequence[str]) -> tuple[str, ...]:
    """A config's non-empty list of distinct names from ``allowed``."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise cfg.error(where, f"expected a list of names from {', '.join(allowed)}, got {value!r}")
    for v in value:
        if v not in allowed:
            raise cfg.error(where, f"unknown name {v!r} (expected {', '.join(allowed)})")
    if len(set(value)) != len(value):
        raise cfg.error(where, f"a name is listed twice in {value!r}")
    return tuple(value)
