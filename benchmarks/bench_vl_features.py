"""Do a vision model's visual tokens tell the kinds of map cells apart?

    python benchmarks/bench_vl_features.py --split DATA/SPLIT --model RUN_DIR [RUN_DIR ...] [--n 20]

For a model whose images are resized to one visual token per cell (``mini-vl`` and its runs:
``ModelSpec.cell_pixels``), each map's image goes through the vision tower (``get_image_features``), which
gives one feature vector per cell in row-major order. Reported per model, over the first ``--n`` maps of the
split: the mean cosine similarity of two cells of the same kind (``F`` ice, ``H`` hole, ``S`` start, ``G``
goal, as in ``maps.jsonl``'s rows) and of two cells of different kinds, the least similar pair of different
kinds, and the mean norm of the features beside that of the language model's input embeddings. Different
kinds as similar as same kinds (cosine 1) mean the tokens carry nothing of what the cell shows. ``init``
as a model is ``mini-vl`` with its random weights (seed 0).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", required=True, help="a split folder with maps.jsonl and images/")
    parser.add_argument("--model", nargs="+", required=True, help="run folders or checkpoints, or 'init'")
    parser.add_argument("--n", type=int, default=20, help="maps to read (the first of the split)")
    args = parser.parse_args()

    import torch

    from lakeshift.models.data import open_image
    from lakeshift.models.registry import build_named, load_model, load_processing, resolve_model

    split = Path(args.split)
    lines = (split / "maps.jsonl").read_text(encoding="utf-8").splitlines()
    maps = [json.loads(line) for line in lines[: args.n]]
    for name in args.model:
        if name == "init":
            torch.manual_seed(0)
            model, processor = build_named("mini-vl", ["a"])
            cell_pixels = 28
        else:
            spec = resolve_model(name)
            if spec.cell_pixels is None:
                raise SystemExit(f"{name}: not a model with one visual token per cell (no map_cell_pixels)")
            model, processor, cell_pixels = load_model(spec), load_processing(spec), spec.cell_pixels
        model.eval()
        same: list[float] = []
        different: list[float] = []
        norms: list[float] = []
        for record in maps:
            image = open_image(split / "images" / f"{record['id']}.png", cell_pixels, record["size"])
            encoded = processor.image_processor(images=[image], return_tensors="pt")
            with torch.no_grad():
                out = model.model.get_image_features(encoded["pixel_values"], encoded["image_grid_thw"])
            features = out.pooler_output if hasattr(out, "pooler_output") else out
            features = torch.cat(list(features)) if isinstance(features, (list, tuple)) else features
            kinds = [kind for row in record["rows"] for kind in row]
            if features.shape[0] != len(kinds):
                raise SystemExit(f"{name}: {features.shape[0]} visual tokens for {len(kinds)} cells")
            unit = torch.nn.functional.normalize(features, dim=-1)
            cosine = unit @ unit.T
            for i in range(len(kinds)):
                for j in range(i + 1, len(kinds)):
                    (same if kinds[i] == kinds[j] else different).append(cosine[i, j].item())
            norms.append(features.norm(dim=-1).mean().item())
        embedding = model.model.language_model.embed_tokens.weight.norm(dim=-1).mean().item()
        print(
            f"{name}: cosine same kind {sum(same) / len(same):.3f}, different kinds "
            f"{sum(different) / len(different):.3f} (least {min(different):.3f}); feature norm "
            f"{sum(norms) / len(norms):.2f}, text embedding norm {embedding:.2f}"
        )


if __name__ == "__main__":
    main()
