r"""Does a decoding step of the continuous engine cost more as the traces grow? Time per step against the
number of columns the slots have written, with a cells model under ``attention: local`` beside the same
weights under full attention.

    python benchmarks/bench_step_cost.py --model RUN --data DATA --split ood-20 [--n 16] [--new 4000]

Greedy, the continuous engine, the ``--n`` maps of the split with the longest reference traces in as many
slots (admitted at once, so every step decodes all of them), up to ``--new`` tokens or the end of the turn.
Each step's wall time is grouped by the step's column (the tokens written so far per slot); the same prompts
are decoded again with the model switched to ``attention: full`` (its slot vectors unused). Under ``local``
a step whose every token is local gathers 11 keys per layer and builds no mask over the cache, so its time
should not grow with the column; under ``full`` it attends to every column.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict


def timed_decode(model, prompts, new: int, stop: int, walker) -> dict[int, list[float]]:
    """Seconds of each decoding step, by the step's column (rounded down to 1,000)."""
    from lakeshift.models.backends import continuous

    times: dict[int, list[float]] = defaultdict(list)
    step = continuous._step

    def timed(model_, cache, state, walkers, drafts, fork):
        began = time.perf_counter()
        out = step(model_, cache, state, walkers, drafts, fork)
        column = int(state.ends()[state.live].max()) - state.longest
        times[column // 1000 * 1000].append(time.perf_counter() - began)
        return out

    continuous._step = timed
    try:
        continuous.decode(
            model,
            prompts,
            max_new_tokens=new,
            stop_ids=[stop],
            slots=len(prompts),
            sampling=continuous.Sampling(),
            on_finished=lambda _: None,
            new_walker=walker,
        )
    finally:
        continuous._step = step
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a run folder of a cells model with attention: local")
    parser.add_argument("--data", required=True)
    parser.add_argument("--split", default="ood-20")
    parser.add_argument("--n", type=int, default=16, help="prompts, one slot each (default 16)")
    parser.add_argument("--new", type=int, default=4000, help="tokens generated per prompt (default 4000)")
    args = parser.parse_args()

    import json
    import os
    from pathlib import Path

    import torch

    from lakeshift.models.cells import TokenReader, set_spec, spec_of
    from lakeshift.models.data import load_sft
    from lakeshift.models.registry import load_model, load_processing, resolve_model, tokenizer_of

    run = json.loads((Path(args.model) / "run.json").read_text())
    spec = resolve_model(str(Path(args.model) / "model"))
    model = load_model(spec).eval()
    tokenizer = tokenizer_of(load_processing(spec))
    sft = load_sft(args.data, args.split, "grid", "wave", prompt=run["prompt"])
    longest = sorted(sft.records, key=lambda r: -len(r["messages"][-1]["content"]))[: args.n]
    prompts = [
        tokenizer(
            tokenizer.apply_chat_template(r["messages"][:-1], add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )["input_ids"]
        for r in longest
    ]
    threads = torch.get_num_threads()
    print(f"{args.model}: {len(prompts)} prompts, up to {args.new} new tokens each, threads {threads}")
    rows: dict[str, dict[int, list[float]]] = {}
    stop = model.generation_config.eos_token_id
    for attention in ("local", "full"):
        if attention == "full":
            set_spec(model, spec_of(model).replace({"attention": "full"}))
        rule = model.model.embed_tokens.rule
        began, load = time.perf_counter(), os.getloadavg()[0]
        rows[attention] = timed_decode(model, prompts, args.new, stop, lambda rule=rule: TokenReader(rule))
        print(f"  {attention}: {time.perf_counter() - began:.0f} s (load {load:.2f} before)")
    print("| columns written | ms per step, local | ms per step, full |\n|---|---|---|")
    for column in sorted(rows["local"]):
        local, full = rows["local"][column], rows["full"].get(column, [])
        text = f"{1000 * statistics.median(full):.1f}" if full else "-"
        print(f"| {column}-{column + 999} | {1000 * statistics.median(local):.1f} | {text} |")


if __name__ == "__main__":
    main()
