r"""Teacher-forced accuracy of a ``wave`` model's frame cells, by map size and by row and column: has the
model learned a rule that does not depend on the map's size?

    python benchmarks/bench_wave_cells.py --model RUN_DIR --splits DATA:SPLIT [DATA:SPLIT ...] [--n 40]

For each map, one forward pass over the true conversation (the prompt and the true ``wave`` trace). Every
token that predicts a cell of a frame is labelled with that cell and frame by the position rule of
``grids: coupled`` (:mod:`lakeshift.models.cells.positions`, built from the model's tokenizer whatever the
model's own spec), and the model's most likely next token is compared with the true cell, given the true
frames before it. Reported per map size and per row / column (both <= 6, or either >= 7):

- ``cells``: accuracy over all cells of all frames;
- ``changed``: over the cells that change in their frame (a ``.`` or the start becoming an arrow: the
  rule's work; every other cell is a copy of the cell in the frame before);
- ``frames``: the frames whose cells are all right; ``traces``: the maps whose frames are all right;
- ``row ends``: the newline after each row's last cell; ``stop``: after each frame's last row, ``Wave``
  (another frame) or ``\boxed{`` (the last) right: a trace that draws its frames right but ends a row or
  a frame wrong goes off the rails when it generates;
- ``answer``: ``\boxed{`` and each move of the answer followed by the right next move (or ``}``), given
  the true frames.

A rule learned independently of size gives the same accuracy at 10x10 as at 6x6.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path


class Tally:
    """Right and total counts of one group."""

    def __init__(self) -> None:
        self.right: dict[str, int] = defaultdict(int)
        self.total: dict[str, int] = defaultdict(int)

    def add(self, name: str, right: bool) -> None:
        self.right[name] += int(right)
        self.total[name] += 1

    def text(self, name: str) -> str:
        total = self.total[name]
        return f"{self.right[name] / total:.3f} ({total})" if total else "-"


def conversation_ids(record: dict, tokenizer) -> tuple[list[int], int]:
    """The record's token ids and where the assistant's turn starts."""
    messages = record["messages"]
    prompt = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    assert full.startswith(prompt)
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return encode(full), len(encode(prompt))


def measure_map(model, tokenizer, rule, record: dict, tallies: dict[str, Tally]) -> None:
    import torch

    from lakeshift.models.cells import CellWalker
    from lakeshift.models.cells.positions import MAP_END, ROW_END

    ids, answer_start = conversation_ids(record, tokenizer)
    rows, cols, _, frames, edges = CellWalker(rule).feed(ids)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    guess = logits.argmax(-1).tolist()
    size = max(r for r, f in zip(rows, frames, strict=True) if f == 1)
    # cell (frame, row, col) -> the true token showing it and whether the model got it right
    shows: dict[tuple[int, int, int], int] = {}
    right: dict[tuple[int, int, int], bool] = {}
    for i in range(len(ids) - 1):
        if frames[i] and 0 < rows[i] <= size and cols[i] <= size:
            key = (frames[i], rows[i], cols[i])
            shows[key] = ids[i + 1]
            right[key] = guess[i] == ids[i + 1]
    frame_ok: dict[int, bool] = defaultdict(lambda: True)
    for (frame, r, c), ok in right.items():
        if frame < 2:
            continue  # the prompt's map
        changed = shows[(frame, r, c)] != shows.get((frame - 1, r, c))
        region = "rows/cols <= 6" if max(r, c) <= 6 else "row or col >= 7"
        for group in (f"{size}x{size}", region):
            tallies[group].add("cells", ok)
            if changed:
                tallies[group].add("changed", ok)
        frame_ok[frame] &= ok
    group = tallies[f"{size}x{size}"]
    for ok in frame_ok.values():
        group.add("frames", ok)
    group.add("traces", all(frame_ok.values()))
    box = ids.index(tokenizer.convert_tokens_to_ids("\\boxed{"), answer_start)
    for i in range(box, len(ids) - 3):  # ``\boxed{`` and each move: the next move (or ``}``) right
        group.add("answer", guess[i] == ids[i + 1])
    for i in range(answer_start, len(ids) - 1):
        if edges[i] == MAP_END:  # the newline after a frame's last row
            group.add("stop", guess[i] == ids[i + 1])
        elif edges[i] == ROW_END and frames[i] >= 2:  # a row's last cell, before its newline
            group.add("row ends", guess[i] == ids[i + 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a run folder of a model trained on the wave CoT")
    parser.add_argument("--splits", nargs="+", required=True, help="DATA:SPLIT with grid__wave records")
    parser.add_argument("--n", type=int, default=40, help="maps per size of each split (default 40)")
    parser.add_argument("--json", help="also write the table as JSON here")
    args = parser.parse_args()

    import os

    import torch

    from lakeshift.models.cells import CellSpec, CellVocab, PositionRule
    from lakeshift.models.data import load_sft
    from lakeshift.models.registry import load_model, load_processing, resolve_model, tokenizer_of

    run = json.loads((Path(args.model) / "run.json").read_text())
    spec = resolve_model(str(Path(args.model) / "model"))
    model = load_model(spec)
    model.eval()
    tokenizer = tokenizer_of(load_processing(spec))
    rule = PositionRule.of(CellSpec(grids="coupled"), CellVocab.from_tokenizer(tokenizer))
    tallies: dict[str, Tally] = defaultdict(Tally)
    print(
        f"{args.model}: cells {run['hparams'].get('cells')}, step {run.get('global_step')}, "
        f"threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}"
    )
    for part in args.splits:
        data, _, split = part.rpartition(":")
        sft = load_sft(data, split, "grid", "wave", per_size=args.n, prompt=run["prompt"])
        began = time.perf_counter()
        for record in sft.records:
            measure_map(model, tokenizer, rule, record, tallies)
        print(f"  {part}: {len(sft.records)} maps in {time.perf_counter() - began:.0f} s")
    names = ("cells", "changed", "frames", "traces", "row ends", "stop", "answer")
    sizes = sorted((g for g in tallies if "x" in g), key=lambda g: int(g.split("x")[0]))
    print(f"| group | {' | '.join(names)} |\n|---|{'---|' * len(names)}")
    for group in (*sizes, "rows/cols <= 6", "row or col >= 7"):
        print(f"| {group} | {' | '.join(tallies[group].text(n) for n in names)} |")
    if args.json:
        table = {g: {n: [t.right[n], t.total[n]] for n in names} for g, t in tallies.items()}
        Path(args.json).write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
