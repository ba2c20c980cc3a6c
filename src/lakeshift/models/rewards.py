"""Rewards for reinforcement learning: thin wrappers over :mod:`lakeshift.scoring` (never a second simulator).

Every reward reads one field of :func:`lakeshift.scoring.score_output`, the same verdict ``lakeshift score``
gives, so a completion the scorer calls a success is rewarded as one, and nothing else is:

============  ====================================================================================
``success``   1.0 when the plan solves the map (verdict ``success``), else 0.0
``format``    1.0 when the last ``\\boxed{...}`` holds a list of moves the scorer can read (extraction
              status ``ok``: not ``no_answer`` nor ``unparseable``), whatever the moves do, else 0.0
``progress``  the scorer's partial credit ``progress``: ``1 - d(end) / d(start)`` with ``d`` the
              shortest-path distance to the goal at the last safe cell (1.0 on success, 0.0 without a
              readable answer or without getting closer, negative when the plan moved away)
``optimal``   1.0 when the plan succeeds with an optimal-length plan (``optimal``), else 0.0
``faithful``  1.0 when the CoT trace is faithful (``trace_faithful``: steps found, every written map
              agrees with the true state after the announced moves, no step into a hole, and the
              boxed answer does not disagree with the trace's moves), else 0.0, including traces with no
              steps at all. Defined only for CoT formats that write a trace (``traces.TRACE_COTS``):
              :func:`parse_rewards` refuses it for ``--cot none``.
============  ====================================================================================

``--reward success,format,progress`` gives each named reward weight 1; ``--reward success=1,progress=0.5``
sets the weights (:func:`parse_rewards`). trl's ``GRPOTrainer`` sums the weighted rewards per completion.

:func:`trl_reward_funcs` turns the chosen names into the callables ``GRPOTrainer`` expects
(``f(prompts, completions, completion_ids, **columns) -> list[float]``). The map of every prompt reaches
them as dataset columns: ``map`` (the ``maps.jsonl`` record as a JSON string) and ``map_id``. Each completion
is scored once, whatever the number of rewards (a small cache keyed by map id and text).

This module imports no ML library.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.scoring import ScoringMap, Verdict, score_output, scoring_map
from lakeshift.traces import TRACE_COTS


def success(scored: Verdict) -> float:
    """1.0 when the scorer's verdict is ``success`` (the plan solves the map), else 0.0."""
    return 1.0 if scored.success else 0.0


def format_ok(scored: Verdict) -> float:
    """1.0 when the last ``\\boxed{}`` holds a readable move list (not ``no_answer`` nor ``unparseable``)."""
    return 0.0 if scored.verdict in ("no_answer", "unparseable") else 1.0


def progress(scored: Verdict) -> float:
    """The scorer's partial credit ``progress`` (1.0 on success; may be negative, see the module doc)."""
    return float(scored.progress)


def optimal(scored: Verdict) -> float:
    """1.0 when the plan succeeds with the optimal number of moves, else 0.0."""
    return 1.0 if scored.success and scored.optimal else 0.0


def faithful(scored: Verdict) -> float:
    """1.0 when the scorer's faithfulness check says the trace is faithful, else 0.0 (also no trace)."""
    return 1.0 if scored.trace is not None and scored.trace.faithful is True else 0.0


#: Reward name -> function of a verdict (:func:`lakeshift.scoring.score_output`).
REWARDS: dict[str, Callable[[Verdict], float]] = {
    "success": success,
    "format": format_ok,
    "progress": progress,
    "optimal": optimal,
    "faithful": faithful,
}


def parse_rewards(text: str, cot: str | None = None, option: str = "--reward") -> dict[str, float]:
    """Reads ``success,format,progress`` (weight 1 each) or ``success=1,progress=0.5``.

    Args:
        text: the option's value.
        cot: the CoT format trained on; ``faithful`` needs one of :data:`lakeshift.traces.TRACE_COTS`.
        option: the option's name, for messages.

    Returns:
        ``{name: weight}`` in the order given.

    Raises:
        LakeshiftError: an empty list, an unknown name, a name given twice, a weight that is not a finite
            number >= 0, all weights zero, or ``faithful`` for a CoT format without a trace.
    """
    weights: dict[str, float] = {}
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if name not in REWARDS:
            known = ", ".join(REWARDS)
            raise LakeshiftError(f"{option} {text}: unknown reward {name!r} (choose from {known})")
        if name in weights:
            raise LakeshiftError(f"{option} {text}: reward {name!r} is given twice")
        weight = 1.0
        if sep:
            try:
                weight = float(value)
            except ValueError:
                raise LakeshiftError(
                    f"{option} {text}: weight of {name!r} is not a number: {value.strip()!r}"
                ) from None
            if not math.isfinite(weight):
                raise LakeshiftError(f"{option} {text}: weight of {name!r} is not finite: {value.strip()}")
            if weight < 0:
                # GRPO would push the model away from what the reward names (a failing plan, a broken box).
                raise LakeshiftError(
                    f"{option} {text}: weight of {name!r} is negative ({value.strip()}); weights are >= 0 "
                    "(leave a reward out rather than reward its opposite)"
                )
        weights[name] = weight
    if not weights:
        raise LakeshiftError(f"{option} {text!r}: no reward named (choose from {', '.join(REWARDS)})")
    if all(w == 0 for w in weights.values()):
        raise LakeshiftError(f"{option} {text}: every weight is 0, so there is nothing to optimise")
    if "faithful" in weights and cot is not None and cot not in TRACE_COTS:
        raise LakeshiftError(
            f"{option} {text}: reward 'faithful' needs a CoT format that writes a trace "
            f"({', '.join(TRACE_COTS)}), not --cot {cot}"
        )
    return weights


def completion_text(completion: Any) -> str:
    """The text of a trl completion: a string, or a conversational ``[{"role": "assistant", ...}]`` list."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion:
        content = message.get("content", "") if isinstance(message, Mapping) else message
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(p.get("text", "") for p in content if isinstance(p, Mapping))
    return "".join(parts)


def score_completion(sm: ScoringMap, text: str, cot: str | None, check_trace: bool = True) -> Verdict:
    """The scorer's verdict on one completion (:func:`lakeshift.scoring.score_output`, default extraction)."""
    return score_output(sm, text, cot=cot, check_trace=check_trace and cot in TRACE_COTS)


def reward_values(scored: Verdict, names: Sequence[str]) -> dict[str, float]:
    """``{name: reward}`` of one scored completion."""
    return {name: REWARDS[name](scored) for name in names}


class RewardScorer:
    """Scores completions against the maps carried by the dataset columns, once per (map, text).

    Attributes:
        cot: the CoT format of the completions (faithfulness needs it).
        check_trace: run the faithfulness check (only needed for ``faithful``; it costs time on long traces).
    """

    def __init__(self, cot: str | None, check_trace: bool, cache_size: int = 4096) -> None:
        self.cot = cot
        self.check_trace = check_trace
        self._maps: dict[str, ScoringMap] = {}
        self._cache: OrderedDict[tuple[str, str], Verdict] = OrderedDict()
        self._cache_size = cache_size

    def scoring_map(self, record: str | Mapping[str, Any]) -> ScoringMap:
        """A :class:`ScoringMap` from a ``map`` column value (JSON string or dict), cached by id."""
        rec = json.loads(record) if isinstance(record, str) else dict(record)
        mid = str(rec.get("id"))
        sm = self._maps.get(mid)
        if sm is None:
            sm = self._maps[mid] = scoring_map(rec, f"map column of {mid!r}")
        return sm

    def score(self, record: str | Mapping[str, Any], completion: Any) -> Verdict:
        sm = self.scoring_map(record)
        text = completion_text(completion)
        key = (sm.id, text)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        scored = score_completion(sm, text, self.cot, self.check_trace)
        self._cache[key] = scored
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return scored


def trl_reward_funcs(
    weights: Mapping[str, float], cot: str | None, log_path: str | Path | None = None
) -> list[Callable[..., list[float]]]:
    """One trl reward function per name in ``weights`` (order kept; pass the weights as ``reward_weights``).

    Each function is named after its reward, so trl logs ``rewards/<name>/mean``. The first one also logs
    ``success_rate`` (share of completions the scorer calls a success) through trl's ``log_metric`` hook,
    whether or not ``success`` is among the rewards, and, with ``log_path``, appends one JSON line per
    completion to it: ``step`` (trl's ``trainer_state.global_step``), ``map_id``, ``verdict``, ``n_moves``,
    ``n_chars``, ``rewards`` (each component) and ``reward`` (their weighted sum).

    Raises:
        LakeshiftError: (when called) a batch without the ``map`` column.
    """
    scorer = RewardScorer(cot, check_trace="faithful" in weights)
    names = list(weights)

    def log_rows(scored: list[Verdict], completions: Sequence[Any], columns: Mapping[str, Any]) -> None:
        state = columns.get("trainer_state")
        step = getattr(state, "global_step", None)
        ids = columns.get("map_id") or [None] * len(scored)
        assert log_path is not None
        with Path(log_path).open("a", encoding="utf-8") as f:
            for sc, completion, mid in zip(scored, completions, ids, strict=True):
                values = reward_values(sc, names)
                row = {
                    "step": step,
                    "map_id": mid,
                    "verdict": sc.verdict,
                    "n_moves": sc.n_moves,
                    "n_chars": len(completion_text(completion)),
                    "rewards": values,
                    "reward": round(sum(weights[k] * v for k, v in values.items()), 6),
                }
                f.write(json.dumps(row) + "\n")

    funcs = []
    for index, name in enumerate(weights):

        def func(
            prompts: Any = None,
            completions: Sequence[Any] = (),
            completion_ids: Any = None,
            *,
            _name: str = name,
            _first: bool = index == 0,
            **columns: Any,
        ) -> list[float]:
            maps = columns.get("map")
            if maps is None:
                raise LakeshiftError("reward: the dataset has no 'map' column (the map of each prompt)")
            scored = [scorer.score(m, c) for m, c in zip(maps, completions, strict=True)]
            log_metric = columns.get("log_metric")
            if _first and callable(log_metric) and scored:
                log_metric("success_rate", sum(s.success for s in scored) / len(scored))
            if _first and log_path is not None:
                log_rows(scored, completions, columns)
            return [REWARDS[_name](s) for s in scored]

        func.__name__ = func.__qualname__ = name
        func.__doc__ = REWARDS[name].__doc__
        funcs.append(func)
    return funcs
