#!/usr/bin/env python3
"""The import graph between each crate's top-level modules, drawn from `crate::` paths in
non-test code (each file up to its first `#[cfg(test)]`, comments left out), and any
circle in it. Exits 1 when there is a circle.

Usage: scripts/import-graph.py [CRATE_DIR ...]   (default: crates/constrain-core crates/constrain-jsonschema)
"""
import re
import sys
from pathlib import Path


def top_module(src: Path, f: Path) -> str:
    rel = f.relative_to(src)
    return "(root)" if rel.parts[0] in ("lib.rs", "main.rs") else rel.parts[0].removesuffix(".rs")


def graph(crate: Path) -> dict:
    src = crate / "src"
    edges: dict = {}
    for f in sorted(src.rglob("*.rs")):
        if f.name == "tests.rs" or f.name.endswith("_tests.rs"):
            continue
        text = f.read_text()
        text = text.split("#[cfg(test)]", 1)[0]
        text = re.sub(r"//[^\n]*", "", text)
        me = top_module(src, f)
        for m in re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text):
            if (src / m).is_dir() or (src / f"{m}.rs").is_file():
                if m != me:
                    edges.setdefault(me, set()).add(m)
        edges.setdefault(me, set())
    return edges


def cycles(edges: dict) -> list:
    found, state = [], {}

    def visit(n, path):
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                found.append(path[path.index(m):] + [m])
            elif m not in state:
                visit(m, path + [m])
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n, [n])
    return found


def main() -> int:
    crates = [Path(a) for a in sys.argv[1:]] or [Path("crates/constrain-core"), Path("crates/constrain-jsonschema")]
    bad = 0
    for crate in crates:
        edges = graph(crate)
        print(f"{crate.name}:")
        for n in sorted(edges):
            print(f"  {n} -> {', '.join(sorted(edges[n])) or '-'}")
        for c in cycles(edges):
            bad += 1
            print("  circle: " + " -> ".join(c))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
