"""Which maps of test splits also occur in a pretraining corpus (by id, and by layout: the same rows).

    python scripts/corpus_overlap.py RUN/corpus/pretrain/maps.jsonl DATA/id-test DATA/ood-dist ...

A base model's corpus must hold no map of a test split. Ids never collide across splits (they carry the
split's name); layouts can, for small maps: a 3x3 map has only a few thousand layouts. Prints, per split,
its maps, how many share an id or a layout with the corpus, and the overlap per size.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def layouts(path: Path) -> tuple[set[str], dict[tuple[str, ...], int]]:
    ids, rows = set(), {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            ids.add(rec["id"])
            rows[tuple(rec["rows"])] = len(rec["rows"])
    return ids, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="the corpus's maps.jsonl")
    parser.add_argument("splits", type=Path, nargs="+", help="split folders (with maps.jsonl)")
    args = parser.parse_args()
    corpus_ids, corpus_rows = layouts(args.corpus)
    print(f"corpus {args.corpus}: {len(corpus_rows)} distinct layouts")
    for split in args.splits:
        ids, rows = layouts(split / "maps.jsonl")
        shared = [r for r in rows if r in corpus_rows]
        per_size = Counter(len(r) for r in shared)
        sizes = Counter(len(r) for r in rows)
        detail = ", ".join(f"{n}x{n} {per_size[n]}/{sizes[n]}" for n in sorted(sizes))
        print(
            f"{split}: {len(rows)} layouts, ids shared {len(ids & corpus_ids)}, layouts shared "
            f"{len(shared)} ({detail})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
