"""reasoning-gym entry point: the procedural dataset ``lakeshift_frozenlake``, its reward and curriculum.

Importing this module registers the dataset with ``reasoning_gym.register_dataset``, so that::

    import lakeshift.integrations.reasoning_gym  # noqa: F401 (registers the dataset)
    import reasoning_gym
    data = reasoning_gym.create_dataset("lakeshift_frozenlake", min_grid_size=7, max_grid_size=10,
                                        hole_prob=0.1, min_d_inf=6, input_format="grid", seed=42, size=100)
    reward = data.score_answer(completion, data[0])

Entries
-------
Entry ``i`` is map ``i`` of lakeshift's generator (:func:`lakeshift.data.generate.generate_map`) for the split
``lakeshift_frozenlake`` with the given seed: grid sizes ``min_grid_size..max_grid_size`` take turns
(``size = min_grid_size + i % (number of sizes)``), holes with probability ``hole_prob``, start and goal
uniform on a solvable map with ``min(min_d_inf, n - 1) <= d_inf <= max_d_inf`` (``None``: up to
``n - 1``). An entry depends only on (seed, index, config), so any entry can be regenerated alone. Each
entry is::

    {"question": the test prompt with the map in ``input_format`` (desc, table or grid),
     "answer":   the optimal plan, e.g. "\\boxed{RIGHT, DOWN}",
     "metadata": {"source_dataset", "source_index", "map": the maps.jsonl record, "input_format", "legend",
                  "partial_credit",
                  "difficulty": {"grid_size": [min, max], "d_inf": [min, max], "hole_prob": p}}}

The question is self-contained (``legend=True``, the default): Mirage's test prompt with the moves named
as the answers write them (``LEFT, RIGHT, UP or DOWN``, where Mirage says ``'L' (left)``...) and a legend
under the map (what ``P G X .`` or ``@ * # _`` mean, how rows and columns are numbered), as reasoning-gym's
own maze datasets give one. ``legend=False`` asks the paper's exact prompt.

Image input is refused: reasoning-gym questions are text (the lmms-eval and inspect entry points take images).

Scoring
-------
:meth:`FrozenLakeDataset.score_answer` is :func:`lakeshift.scoring.score_output` on the entry's map (default
extraction, no trace check), read as a reward:

* a text holding ``\\boxed{...}`` (a whole completion, or the entry's ``answer``) is scored as
  ``lakeshift score`` scores an output; a text without one is taken as the box's content, because
  reasoning-gym's evaluators pass what they extracted from ``<answer>`` tags;
* 1.0 when the verdict is ``success``, else 0.0; with ``partial_credit=True`` a failing plan earns
  :data:`FAILURE_CREDIT` times the scorer's ``progress`` (clipped at 0), so no failure scores as much as a
  solution (``progress`` alone is 1.0 for a plan that reaches the goal and then steps into a hole).

The reward reads the entry's own ``metadata`` only, so ``reasoning_gym.get_score_answer_fn`` (which builds
the dataset with the default config) scores entries of any config alike.

Curriculum
----------
:class:`FrozenLakeCurriculum` has three attributes, each reaching the paper's OOD settings: ``grid_size``
(levels 3 to 10: the ID sizes 3-6, then the OOD sizes 7-10; ``min_grid_size`` / ``max_grid_size``),
``d_inf`` (levels 1 to 9, ``min_d_inf``: 6 is OOD-dist) and ``hole_prob`` (levels 0.1, 0.2, 0.3, starting
at the ID setting 0.2; 0.1 is the OOD one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakeshift import formats, traces
from lakeshift.data.generate import Group, SplitSpec, generate_map, validate_group
from lakeshift.data.maps import map_from_record
from lakeshift.errors import LakeshiftError
from lakeshift.formats import grid as grid_format
from lakeshift.formats import prompts
from lakeshift.formats import table as table_format
from lakeshift.scoring import score_output, scoring_map
from lakeshift.traces import BOXED

try:
    from reasoning_gym.coaching import BaseCurriculum, RangeAttributeDefinition, ScalarAttributeDefinition
    from reasoning_gym.dataset import ProceduralDataset
    from reasoning_gym.factory import DATASETS, register_dataset
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"lakeshift.integrations.reasoning_gym needs reasoning-gym ({err}): "
        "pip install 'lakeshift[reasoning-gym]'"
    ) from err

DATASET_NAME = "lakeshift_frozenlake"
#: Share of the scorer's ``progress`` that a failing plan earns under ``partial_credit``.
FAILURE_CREDIT = 0.5
#: Curriculum levels of ``grid_size``: the paper's ID sizes 3-6, then its OOD sizes 7-10.
GRID_SIZE_LEVELS: tuple[int, ...] = (3, 4, 5, 6, 7, 8, 9, 10)
#: Curriculum levels of ``d_inf`` (``min_d_inf``): 6 is the paper's OOD-dist, 2-9 its embed10 distances.
D_INF_LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9)
#: Curriculum levels of ``hole_prob``: 0.1 is the paper's OOD setting, 0.2 its ID one (the default level).
HOLE_PROB_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3)

#: Mirage's rule naming the moves as letters, which answers never use.
_LETTER_RULE = (
    "- The action plan involves a series of moves: 'L' (left), 'R' (right), 'U' (up), or 'D' (down).\n"
)
#: The same rule naming the moves as the answer writes them (:func:`lakeshift.traces.boxed`).
_WORD_RULE = (
    "- The action plan is a series of moves, each LEFT, RIGHT, UP or DOWN, separated by commas "
    "(e.g. \\boxed{RIGHT, DOWN}).\n"
)
_COORDINATES = "Rows are numbered from 1 at the top and columns from 1 at the left."


def legend(input_format: str) -> str:
    """What the map's symbols (``grid``, ``table``) or coordinates (``desc``) mean."""
    if input_format == "desc":
        return _COORDINATES
    symbols = (grid_format if input_format == "grid" else table_format).SYMBOLS
    return (
        f"Legend: {symbols['player']} is the player, {symbols['goal']} the goal, {symbols['hole']} a hole "
        f"and {symbols['empty']} a safe square." + (f" {_COORDINATES}" if input_format == "table" else "")
    )


def question(map_text: str, input_format: str, with_legend: bool) -> str:
    """Mirage's test prompt with the map; with ``with_legend``, the moves named as answers write them and a
    legend under the map (reasoning-gym's questions are read without lakeshift's documentation)."""
    if not with_legend:
        return prompts.user_prompt("test", map_text)
    text = prompts.user_prompt("test", f"{map_text}\n{legend(input_format)}")
    if _LETTER_RULE not in text:  # pragma: no cover - guards an edit of Mirage's prompt
        raise LakeshiftError("Mirage's prompt no longer names the moves as letters: update question()")
    return text.replace(_LETTER_RULE, _WORD_RULE, 1)


def _describe(entry: Any) -> str:
    if isinstance(entry, Mapping):
        return f"a mapping with keys {sorted(map(str, entry))}"
    return repr(entry) if entry is None else type(entry).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class FrozenLakeConfig:
    """The dataset's parameters (see the module docstring); :meth:`validate` raises ``LakeshiftError``.

    Attributes:
        min_grid_size: Smallest map side.
        max_grid_size: Largest map side.
        hole_prob: Probability that a cell is a hole.
        min_d_inf: Smallest L-infinity start-goal distance, capped at ``n - 1`` on an ``n x n`` map (the
            farthest apart start and goal can be), so one config spans sizes that cannot all hold it.
        max_d_inf: Largest one (``None``: ``n - 1`` on an ``n x n`` map).
        input_format: How the question shows the map: ``desc``, ``table`` or ``grid``.
        legend: Say what the map's symbols mean and name the moves as the answers write them (``False``:
            the paper's exact prompt, Mirage's test prompt).
        partial_credit: Failing plans earn part of the scorer's ``progress`` instead of 0.
        seed: Generator seed (``None``: a random one, as reasoning-gym does).
        size: Number of entries.
    """

    min_grid_size: int = 3
    max_grid_size: int = 6
    hole_prob: float = 0.2
    min_d_inf: int = 1
    max_d_inf: int | None = None
    input_format: str = "grid"
    legend: bool = True
    partial_credit: bool = False
    seed: int | None = None
    size: int = 500

    def validate(self) -> None:
        """Rejects a config that cannot give maps, naming the field."""
        where = DATASET_NAME
        if self.input_format not in formats.TEXT_FORMATS:
            raise LakeshiftError(
                f"{where}: input_format {self.input_format!r} is not a text format "
                f"(choose from {', '.join(formats.TEXT_FORMATS)}; reasoning-gym questions are text)"
            )
        for name in ("min_grid_size", "max_grid_size"):
            value = getattr(self, name)
            if not _is_int(value) or value < 2:
                raise LakeshiftError(f"{where}: {name} must be an integer >= 2, got {value!r}")
        if self.max_grid_size < self.min_grid_size:
            raise LakeshiftError(
                f"{where}: max_grid_size {self.max_grid_size} is below min_grid_size {self.min_grid_size}"
            )
        if not _is_int(self.size) or self.size < 1:
            raise LakeshiftError(f"{where}: size must be an integer >= 1, got {self.size!r}")
        if self.seed is not None and not (_is_int(self.seed) and self.seed >= 0):
            raise LakeshiftError(f"{where}: seed must be an integer >= 0 or None, got {self.seed!r}")
        for name in ("partial_credit", "legend"):
            if not isinstance(getattr(self, name), bool):
                raise LakeshiftError(f"{where}: {name} must be true or false, got {getattr(self, name)!r}")
        if not _is_int(self.min_d_inf) or self.min_d_inf < 1:
            raise LakeshiftError(f"{where}: min_d_inf must be an integer >= 1, got {self.min_d_inf!r}")
        for grid in range(self.min_grid_size, self.max_grid_size + 1):
            validate_group(self._group(grid), f"{where}, grid size {grid}")

    def _group(self, grid: int) -> Group:
        return Group(grid, self.size, self.hole_prob, min(self.min_d_inf, grid - 1), self.max_d_inf)


class FrozenLakeDataset(ProceduralDataset):
    """FrozenLake planning maps from lakeshift's generator, scored by lakeshift's scorer."""

    def __init__(self, config: FrozenLakeConfig) -> None:
        super().__init__(config=config, seed=config.seed, size=config.size)
        grids = range(config.min_grid_size, config.max_grid_size + 1)
        self._specs = [SplitSpec(DATASET_NAME, (config._group(grid),)) for grid in grids]

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if not _is_int(idx) or not 0 <= idx < self.size:
            raise IndexError(f"{DATASET_NAME} has entries 0..{self.size - 1}, not {idx!r}")
        config: FrozenLakeConfig = self.config
        record = generate_map(self._specs[idx % len(self._specs)], self.seed, idx)
        m = map_from_record(record)
        return {
            "question": question(formats.render(m, config.input_format), config.input_format, config.legend),
            "answer": traces.boxed(record["optimal_path"]),
            "metadata": {
                "source_dataset": DATASET_NAME,
                "source_index": idx,
                "map": record,
                "input_format": config.input_format,
                "legend": config.legend,
                "partial_credit": config.partial_credit,
                "difficulty": {
                    "grid_size": [config.min_grid_size, config.max_grid_size],
                    "d_inf": [config.min_d_inf, config.max_d_inf],
                    "hole_prob": config.hole_prob,
                },
            },
        }

    def score_answer(self, answer: str | None, entry: Mapping[str, Any]) -> float:
        """The reward of ``answer`` on ``entry``'s map (module docstring, "Scoring").

        Raises:
            LakeshiftError: ``entry`` is not an entry of this dataset (``None``, or without ``metadata.map``):
                a reward of 0.0 would train on nothing without saying so.
        """
        metadata = entry.get("metadata") if isinstance(entry, Mapping) else None
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("map"), Mapping):
            raise LakeshiftError(
                f"{DATASET_NAME}: score_answer needs an entry of this dataset (a mapping whose metadata "
                f"holds the map), got {_describe(entry)}"
            )
        if not isinstance(answer, str) or not answer.strip():
            return 0.0
        sm = scoring_map(metadata["map"], f"{DATASET_NAME} entry {metadata.get('source_index')}")
        text = answer if BOXED in answer else BOXED + answer + "}"
        scored = score_output(sm, text, check_trace=False)
        if scored.success:
            return 1.0
        if metadata.get("partial_credit"):
            return FAILURE_CREDIT * max(0.0, scored.progress)
        return 0.0


class FrozenLakeCurriculum(BaseCurriculum):
    """Three attributes, each reaching the paper's OOD settings: ``grid_size`` (:data:`GRID_SIZE_LEVELS`, a
    range of sizes), ``d_inf`` (:data:`D_INF_LEVELS`, the smallest start-goal distance) and ``hole_prob``
    (:data:`HOLE_PROB_LEVELS`, starting at the ID setting 0.2)."""

    def __init__(self) -> None:
        super().__init__(FrozenLakeCurriculum.__name__, FrozenLakeConfig)
        self._define_attributes(
            RangeAttributeDefinition(
                name="grid_size",
                levels=list(GRID_SIZE_LEVELS),
                description="Side length of the square map",
                lower_field_name="min_grid_size",
                upper_field_name="max_grid_size",
            ),
            ScalarAttributeDefinition(
                name="d_inf",
                levels=list(D_INF_LEVELS),
                description="Smallest L-infinity distance from start to goal (at most the map's side - 1)",
                field_name="min_d_inf",
            ),
            ScalarAttributeDefinition(
                name="hole_prob",
                levels=list(HOLE_PROB_LEVELS),
                default_level=HOLE_PROB_LEVELS.index(0.2),
                description="Probability that a cell is a hole",
                field_name="hole_prob",
            ),
        )


if DATASET_NAME not in DATASETS:  # a reload must not register it twice (reasoning-gym refuses that)
    register_dataset(DATASET_NAME, FrozenLakeDataset, FrozenLakeConfig, FrozenLakeCurriculum)
