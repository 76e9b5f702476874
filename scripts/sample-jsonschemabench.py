#!/usr/bin/env python3
"""Copies a fixed sample of JSONSchemaBench schemas into the engine's test fixtures.

Usage: scripts/sample-jsonschemabench.py <jsonschemabench dir>

20 schemas per subset, drawn with a fixed seed from the files of at most 12 KB (larger
ones make the liveness test slow without adding keywords), plus the schemas named in
issue 37. Github_ultra has a single schema that small: 8 of its files of at most 36 KB. Writes crates/constrain/tests/fixtures/jsonschemabench/sample/<Subset>/<name>.json
(byte-identical copies) and prints the list.
"""
import os
import random
import shutil
import sys

PER_SUBSET = 20
MAX_BYTES = 12 * 1024
# Subsets of large schemas: (count, size limit).
LARGE = {"Github_ultra": (8, 36 * 1024)}
SEED = 37
NAMED = [("Github_easy", "o41764.json"), ("JsonSchemaStore", "catalogue-entry-schema.json")]


def main() -> None:
    src = sys.argv[1]
    dst = os.path.join(os.path.dirname(__file__), "..", "crates/constrain/tests/fixtures/jsonschemabench/sample")
    rng = random.Random(SEED)
    for subset in sorted(os.listdir(src)):
        d = os.path.join(src, subset)
        if not os.path.isdir(d):
            continue
        count, limit = LARGE.get(subset, (PER_SUBSET, MAX_BYTES))
        names = sorted(n for n in os.listdir(d) if n.endswith(".json") and os.path.getsize(os.path.join(d, n)) <= limit)
        rng.shuffle(names)
        chosen = names[:count] + [n for s, n in NAMED if s == subset]
        os.makedirs(os.path.join(dst, subset), exist_ok=True)
        for n in sorted(set(chosen)):
            shutil.copyfile(os.path.join(d, n), os.path.join(dst, subset, n))
            print(f"{subset}/{n}")


if __name__ == "__main__":
    main()
