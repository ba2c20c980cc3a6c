"""Does a vision model read the map from its image? Teacher-forced reading of held-out maps.

    python benchmarks/bench_vl_reading.py --model RUN_DIR [RUN_DIR ...] [--per-size 25]

The pretraining corpus's ``walk`` question (:mod:`lakeshift.models.pretrain`) starts its answer by reading
the map back: ``start (r,c) goal (r,c) holes (r,c) ...``. This builds held-out ``walk`` examples with the map
shown as its image (the corpus's own code; sizes 3-6, a split and seed no corpus uses), runs each model once
per example on the whole conversation, and reports the share of examples whose start coordinate, goal
coordinate and every hole coordinate the model predicts right (argmax) given the true tokens before them;
``chance`` is one over the cells of the map, averaged. A model pretrained on image ``walk`` examples (an
image base) is the one this asks about; a model fine-tuned on plans only has no reason to answer it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

HELD_OUT_SPLIT = "held-out-reading"  # a split name no corpus draws from: its own maps
HELD_OUT_SEED = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", required=True, help="run folders or checkpoints")
    parser.add_argument("--per-size", type=int, default=25, help="held-out maps per size 3-6")
    args = parser.parse_args()

    import torch

    from lakeshift.data.generate import Group, SplitSpec
    from lakeshift.io import read_jsonl
    from lakeshift.models.data import open_image
    from lakeshift.models.pretrain import write_corpus
    from lakeshift.models.registry import load_model, load_processing, resolve_model, tokenizer_of

    folder = Path(tempfile.mkdtemp(prefix="vl-reading-"))
    spec = SplitSpec(
        name=HELD_OUT_SPLIT,
        groups=tuple(Group(size=n, count=args.per_size, hole_prob=0.2) for n in (3, 4, 5, 6)),
        train=True,
    )
    write_corpus(folder, spec, HELD_OUT_SEED, tasks=("walk",), inputs=("image",))
    split = folder / HELD_OUT_SPLIT
    records = [r for _, r in read_jsonl(next((split / "sft").glob("*.jsonl")))]
    sizes = {m["id"]: m["size"] for _, m in read_jsonl(split / "maps.jsonl")}
    chance = sum(1 / sizes[r["id"]] ** 2 for r in records) / len(records)
    print(f"{len(records)} held-out maps (sizes 3-6, seed {HELD_OUT_SEED}); chance of one cell {chance:.3f}")
    for name in args.model:
        model_spec = resolve_model(name)
        model, processor = load_model(model_spec), load_processing(model_spec)
        tokenizer = tokenizer_of(processor)
        model.eval()
        assistant = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        newline = tokenizer.convert_tokens_to_ids("\n")
        right = {"start": 0, "goal": 0, "holes": 0}
        for record in records:
            images = [
                open_image(split / rel, model_spec.cell_pixels, sizes[record["id"]])
                for rel in record["images"]
            ]
            text = processor.apply_chat_template(record["messages"], tokenize=False)
            encoded = processor(text=[text], images=images, return_tensors="pt")
            ids = encoded["input_ids"][0].tolist()
            begin = max(i for i in range(len(ids)) if ids[i : i + len(assistant)] == assistant)
            begin += len(assistant)
            with torch.no_grad():
                predicted = model(**encoded).logits[0].argmax(-1).tolist()
            # predicted[i] is the model's guess for ids[i + 1]
            line_end = ids.index(newline, begin)
            answer = list(range(begin, line_end))
            words = [w.strip() for w in tokenizer.convert_ids_to_tokens([ids[i] for i in answer])]
            holes = words.index("holes")  # (the words have their spaces: " goal")
            for word in ("start", "goal"):
                i = answer[words.index(word)]
                right[word] += predicted[i] == ids[i + 1]
            right["holes"] += all(predicted[i - 1] == ids[i] for i in answer[holes + 1 :])
        n = len(records)
        print(f"{name}: " + ", ".join(f"{key} {value}/{n} = {value / n:.2f}" for key, value in right.items()))


if __name__ == "__main__":
    main()
