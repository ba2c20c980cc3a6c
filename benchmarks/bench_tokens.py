"""Sequence lengths per conversation, character vs structured tokenizer, for every text input x CoT pair.

    python benchmarks/bench_tokens.py [--count 50] [--cots wave]

Generates ``--count`` maps of 6x6 (id-train's hole probability 0.2) and of 10x10 (ood's 0.1) with every
text input and CoT format, builds each tokenizer from the 6x6 texts (as training builds it from the
training split), and prints mean and max tokens per whole conversation (ChatML, map-only prompt, the
system turn included) as a Markdown table. Exact round trip is asserted on every conversation.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from lakeshift.cli import main as cli
from lakeshift.models.data import load_sft
from lakeshift.models.tokenizer import build_tokenizer, message_texts
from lakeshift.traces import COT_FORMATS

INPUTS = ("grid", "table", "desc")


def generate(root: Path, size: int, hole_prob: float, count: int, cots: list[str]) -> None:
    argv = [
        "generate",
        "--out",
        str(root),
        "--split",
        f"s{size}",
        "--sizes",
        str(size),
        "--count",
        str(count),
    ]
    argv += ["--hole-prob", str(hole_prob), "--no-images", "--no-progress", "--workers", "1"]
    argv += ["--inputs", ",".join(INPUTS), "--cots", ",".join(cots)]
    if cli(argv) != 0:
        raise SystemExit("lakeshift generate failed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument(
        "--cots", default=",".join(COT_FORMATS), help="comma-separated CoT formats (default: all)"
    )
    args = parser.parse_args()
    cots = args.cots.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        roots = {6: Path(tmp) / "s6", 10: Path(tmp) / "s10"}
        generate(roots[6], 6, 0.2, args.count, cots)
        generate(roots[10], 10, 0.1, args.count, cots)
        print(
            "| input | cot | 6x6 char mean/max | 6x6 structured mean/max | 10x10 char mean/max "
            "| 10x10 structured mean/max | ratio 6x6 | ratio 10x10 |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for inp in INPUTS:
            for cot in cots:
                sets = {n: load_sft(roots[n], f"s{n}", inp, cot, prompt="map-only") for n in roots}
                train_texts = [t for r in sets[6].records for t in message_texts(r["messages"])]
                cells, means = [], {}
                for n in (6, 10):
                    for kind in ("char", "structured"):
                        tok = build_tokenizer(kind, train_texts)
                        lengths = []
                        for r in sets[n].records:
                            text = tok.apply_chat_template(r["messages"], tokenize=False)
                            ids = tok(text, add_special_tokens=False)["input_ids"]
                            assert tok.unk_token_id not in ids and tok.decode(ids) == text
                            lengths.append(len(ids))
                        means[n, kind] = statistics.mean(lengths)
                        cells.append(f"{means[n, kind]:.0f} / {max(lengths)}")
                ratios = [f"{means[n, 'char'] / means[n, 'structured']:.1f}x" for n in (6, 10)]
                print(f"| {inp} | {cot} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
