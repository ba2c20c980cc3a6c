"""Copies a finished ``lakeshift pretrain`` run into the package as a shipped base model (maintainers only).

    lakeshift pretrain configs/pretrain/base-mini.yaml --out runs/mini-base
    python scripts/ship_base.py runs/mini-base mini-base

Writes ``src/lakeshift/checkpoints/NAME/``: the weights, config and tokenizer of ``RUN/model`` (what
``--model NAME`` loads) and ``base.json``, the provenance: the config's corpus key, the corpus file's
sha256, the training record (steps, seconds, hyper-parameters, versions, commit) and the last logged loss.
tests/test_pretrain.py checks that the shipped base agrees with its config.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from lakeshift.models.registry import BASE_MODELS

KEEP = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)
PACKAGE = Path(__file__).resolve().parents[1] / "src" / "lakeshift" / "checkpoints"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a finished `lakeshift pretrain` run folder")
    parser.add_argument("name", choices=sorted(BASE_MODELS), help="the base model's name")
    args = parser.parse_args()
    record = json.loads((args.run / "run.json").read_text(encoding="utf-8"))
    if record.get("status") != "done":
        raise SystemExit(f"{args.run}: the run is not finished (status {record.get('status')!r})")
    corpus_key = json.loads((args.run / "corpus" / "corpus.json").read_text(encoding="utf-8"))
    metrics = [json.loads(x) for x in (args.run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    losses = [m["loss"] for m in metrics if "loss" in m]
    out = PACKAGE / args.name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in KEEP:
        if (args.run / "model" / name).is_file():
            shutil.copy2(args.run / "model" / name, out / name)
    provenance = {
        "name": args.name,
        "config": BASE_MODELS[args.name],
        "corpus": corpus_key,
        "corpus_sha256": record["data"].get("sha256"),
        "steps": record.get("global_step"),
        "train_seconds": record.get("train_seconds"),
        "last_losses": losses[-10:],
        "hparams": record.get("hparams"),
        "model": record.get("model"),
        "versions": record.get("versions"),
        "git": record.get("git"),
        "created": record.get("created"),
    }
    (out / "base.json").write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"shipped {args.run} as {out} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
