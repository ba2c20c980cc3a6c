"""How well a base model writes each CoT format: teacher-forced token accuracy on held-out random walks.

    python benchmarks/bench_base_traces.py --model mini-cells-trace-base mini-cells-base --per-size 25

For every trace format of the pretraining corpus (:data:`lakeshift.models.pretrain.TRACE_COTS`) it builds
held-out
``trace`` examples (the corpus's own code, maps of sizes 3-6 from a split and seed no corpus uses;
``--sizes 7 8 9 10`` asks whether a base writes traces on maps larger than the fine-tuning maps) and
reports, per model and format, the share of answer tokens the model predicts right (argmax) given the true
tokens before them, and the share of examples with every answer token right; then the same share for the
cells of the grids a trace draws (``cell_acc``, grid and grid+desc traces: copying the map, moving the
player; ``cell_acc_grid_input`` on the examples whose map is a grid, the input grid CoTs are fine-tuned
with; ``player_acc`` on the player's cells ``P`` alone), for its move words (``move_acc``: mostly a random
walk's choices, right by chance only) and for the move words of each ``The direct path to the goal is
moving X.`` sentence (``direct_acc``: the goal's direction from the walk's cell, a fact of the map).
``--walks-end-at-goal`` draws the held-out walks as ``corpus.walks_end_at_goal`` does (ended at a moved
goal). Prints a Markdown table and, with ``--out``,
writes one JSON line per model and format.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lakeshift.data.generate import Group, SplitSpec, generate_split
from lakeshift.env import MOVES
from lakeshift.formats.grid import SEP, SYMBOLS
from lakeshift.models.pretrain import TRACE_COTS, corpus_record

HELD_OUT_SPLIT = "held-out-walks"  # a split name no corpus draws from: its own maps
HELD_OUT_SEED = 7


def examples(
    per_size: int, cot: str, walks_end_at_goal: bool = False, sizes: tuple[int, ...] = (3, 4, 5, 6)
) -> list[dict]:
    spec = SplitSpec(
        name=HELD_OUT_SPLIT,
        groups=tuple(Group(size=n, count=per_size, hole_prob=0.2) for n in sizes),
        train=True,
    )
    maps, _ = generate_split(spec, HELD_OUT_SEED)
    return [
        corpus_record(
            m, i, HELD_OUT_SEED, tasks=("trace",), traces=(cot,), walks_end_at_goal=walks_end_at_goal
        )
        for i, m in enumerate(maps)
    ]


def _direct_words(tokens: list[int], moves: set[int], opening: list[int], or_id: int) -> list[bool]:
    """Marks the move words of each ``The direct path to the goal is moving X[ or Y].``"""
    n = len(opening)
    marked = [False] * len(tokens)
    for i, token in enumerate(tokens):
        if token not in moves:
            continue
        after_opening = tokens[max(0, i - n) : i] == opening
        second = i >= n + 2 and tokens[i - 1] == or_id and marked[i - 2]
        marked[i] = after_opening or second
    return marked


def accuracy(model_name: str, cot: str, records: list[dict], batch: int) -> dict:
    import torch

    from lakeshift.models.registry import load_model, load_processing, resolve_model, tokenizer_of

    spec = resolve_model(model_name)
    model = load_model(spec).eval()
    tokenizer = tokenizer_of(load_processing(spec))
    right = total = exact = 0
    vocab = tokenizer.get_vocab()
    # the cells of the grids a trace draws (only grid traces draw any; elsewhere a bare "." ends a sentence)
    draws_grids = cot in ("grid", "grid+desc")
    cells = {
        vocab[c] for symbol in SYMBOLS.values() for c in (symbol, SEP + symbol) if c in vocab and draws_grids
    }
    moves = {vocab[m] for move in MOVES for m in (move, f" {move}", f", {move}") if m in vocab}
    players = {vocab[c] for c in (SYMBOLS["player"], SEP + SYMBOLS["player"]) if c in vocab and draws_grids}
    opening = [vocab[t] for t in (" goal", " is", " moving")]
    by_kind = {"cell": [0, 0], "cell_grid_input": [0, 0], "player": [0, 0], "move": [0, 0], "direct": [0, 0]}
    for start in range(0, len(records), batch):
        chunk = records[start : start + batch]
        encoded = [
            tokenizer.apply_chat_template(
                r["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
            )
            for r in chunk
        ]
        for record, enc in zip(chunk, encoded, strict=True):  # one sequence at a time: no padding
            ids = torch.tensor([enc["input_ids"]])
            mask = torch.tensor(enc["assistant_masks"][1:], dtype=torch.bool)
            with torch.no_grad():
                predicted = model(ids).logits[0, :-1].argmax(-1)
            hits = (predicted == ids[0, 1:])[mask]
            grid_input = cells if record["map_format"] == "grid" else set()
            targets = ids[0, 1:]
            kinds = (("cell", cells), ("cell_grid_input", grid_input), ("player", players), ("move", moves))
            of_kinds = {
                kind: torch.tensor([int(t) in members for t in targets[mask]], dtype=torch.bool)
                for kind, members in kinds
            }
            direct = _direct_words(targets.tolist(), moves, opening, vocab[" or"])
            of_kinds["direct"] = torch.tensor(direct, dtype=torch.bool)[mask]
            for kind, of_kind in of_kinds.items():
                by_kind[kind][0] += int(hits[of_kind].sum())
                by_kind[kind][1] += int(of_kind.sum())
            right += int(hits.sum())
            total += int(hits.numel())
            exact += bool(hits.all())
    return {
        "model": model_name,
        "trace": cot,
        "tokens": total,
        "token_acc": right / total,
        "exact": exact / len(records),
        **{f"{kind}_acc": (k / n if n else None) for kind, (k, n) in by_kind.items()},
        "n": len(records),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", nargs="+", required=True, help="models (names or folders) to compare")
    parser.add_argument("--per-size", type=int, default=25, help="held-out maps per size and format")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[3, 4, 5, 6], help="map sizes of the held-out walks"
    )
    parser.add_argument("--traces", nargs="*", default=list(TRACE_COTS))
    parser.add_argument("--out", type=Path, help="JSONL file for the rows")
    parser.add_argument(
        "--walks-end-at-goal",
        action="store_true",
        help="held-out walks that end at a moved goal (the corpus option)",
    )
    args = parser.parse_args()
    rows = []
    for cot in args.traces:
        records = examples(args.per_size, cot, args.walks_end_at_goal, tuple(args.sizes))
        for name in args.model:
            began = time.time()
            row = accuracy(name, cot, records, batch=16)
            row["seconds"] = round(time.time() - began, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print("| trace | " + " | ".join(args.model) + " |")
    print("|---|" + "---|" * len(args.model))
    for cot in args.traces:
        cells = [
            f"{r['token_acc']:.3f} ({r['exact']:.2f} exact"
            + (
                f", cells {r['cell_acc']:.3f}, grid input {r['cell_grid_input_acc']:.3f}, "
                f"player {r['player_acc']:.3f}"
                if r["cell_acc"] is not None
                else ""
            )
            + ")"
            for name in args.model
            for r in rows
            if r["trace"] == cot and r["model"] == name
        ]
        print(f"| {cot} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
