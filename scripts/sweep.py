#!/usr/bin/env python3
"""End-to-end liveness sweep: drives `constrain serve` as users do and validates every output.

Usage:
    scripts/sweep.py [--server BIN | --base URL] [--sample DIR --per-subset N --sample-seed S]
                     [--conc 8] [--temp 1.0] [--max-tokens 400] [--seed 1] [--stream] [--out FILE.jsonl]
                     [SCHEMA.json ...]

Starts `BIN serve --port 0` on 127.0.0.1 (default `target/release/constrain`) unless `--base`
names a running server, sends one chat request per schema (`response_format: json_schema`,
strict, the given temperature, seed and token budget, `--conc` at a time), and validates each
output with Python's `jsonschema` in the schema's own dialect with formats asserted. Schemas
come from the arguments and, with `--sample DIR`, from `N` files per subfolder of DIR drawn
with `--sample-seed` (JSONSchemaBench's layout: `DIR/<subset>/<name>.json`).

Prints one line per failure and a summary: valid / invalid / refused (4xx) / dead ends (5xx or
a stream error) / other failures, backtracks (from `usage.backtracks`), tokens refused as dead ends or unproved (`usage.dead_tokens`, `usage.unproved_tokens`), finish reasons, tokens.
Exit code 1 if any output is invalid or any request failed with a 5xx or a transport error
(with `--allow-dead-ends`, a 5xx is reported but does not fail the run).
A 4xx refusal (a schema we cannot compile, a budget no document fits) is counted, not failed.
Needs the Python packages `openai` and `jsonschema` (with its format extras for the formats).
"""
import argparse
import concurrent.futures as cf
import json
import os
import random
import re
import subprocess
import sys
import time

try:
    import jsonschema
    import openai
except ImportError as e:
    sys.exit(f"sweep.py needs the `openai` and `jsonschema` packages ({e}); run scripts/install-deps.sh")

PROMPT = "Produce a realistic example instance of this JSON schema."


def sample(root, per_subset, seed):
    """`per_subset` schema files from each subfolder of `root`, drawn with `seed`, sorted first."""
    rng = random.Random(seed)
    out = []
    for subset in sorted(os.listdir(root)):
        d = os.path.join(root, subset)
        if not os.path.isdir(d):
            continue
        files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
        out += [os.path.join(d, f) for f in rng.sample(files, min(per_subset, len(files)))]
    return out


def start_server(binary, extra):
    """Starts `binary serve --port 0` on 127.0.0.1; returns the process and its base URL."""
    proc = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", "0", *extra],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    for line in proc.stderr:
        sys.stderr.write("[server] " + line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            # Keep draining stderr so the server never blocks on a full pipe; echo failures.
            def drain():
                for rest in proc.stderr:
                    sys.stderr.write("[server] " + rest)
            import threading
            threading.Thread(target=drain, daemon=True).start()
            return proc, m.group(1) + "/v1"
        if time.time() > deadline:
            break
    proc.kill()
    sys.exit("sweep.py: the server did not start")


def validate(schema, doc):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    errs = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(doc))
    return errs[0].message[:200] if errs else None


def one(client, model, args, i, path):
    rec = {"schema": path, "seed": args.seed + i}
    try:
        schema = json.load(open(path))
    except Exception as e:  # noqa: BLE001
        rec.update(kind="skipped", msg=f"unreadable schema: {e}"[:200])
        return rec
    t0 = time.time()
    try:
        request = dict(
            model=model, temperature=args.temp, max_tokens=args.max_tokens, seed=args.seed + i,
            messages=[{"role": "user", "content": PROMPT}],
            response_format={"type": "json_schema", "json_schema": {"name": "doc", "schema": schema, "strict": True}})
        text, finish, usage = "", None, None
        if args.stream:
            for chunk in client.chat.completions.create(**request, stream=True,
                                                        stream_options={"include_usage": True}):
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                    finish = chunk.choices[0].finish_reason or finish
                if chunk.usage:
                    usage = chunk.usage
        else:
            r = client.chat.completions.create(**request)
            text, finish, usage = r.choices[0].message.content, r.choices[0].finish_reason, r.usage
    except openai.APIStatusError as e:
        kind = "refused" if 400 <= e.status_code < 500 else "dead_end"
        rec.update(kind=kind, status=e.status_code, msg=str(e)[:300], secs=time.time() - t0)
        return rec
    except openai.APIError as e:  # an error event inside the stream
        rec.update(kind="dead_end", msg=f"stream error: {e}"[:300], secs=time.time() - t0)
        return rec
    except Exception as e:  # noqa: BLE001
        rec.update(kind="failed", msg=f"{type(e).__name__}: {e}"[:300], secs=time.time() - t0)
        return rec
    extra = getattr(usage, "model_extra", None) or {}
    rec.update(secs=time.time() - t0, finish=finish, text=text,
               tokens=usage.completion_tokens if usage else None, backtracks=extra.get("backtracks", 0),
               dead_tokens=extra.get("dead_tokens", 0), unproved_tokens=extra.get("unproved_tokens", 0))
    try:
        doc = json.loads(text)
    except Exception as e:  # noqa: BLE001
        rec.update(kind="invalid", msg=f"unparsable: {e}"[:200])
        return rec
    try:
        err = validate(schema, doc)
    except Exception as e:  # noqa: BLE001
        rec.update(kind="unlabelled", msg=f"validator: {type(e).__name__}: {e}"[:200])
        return rec
    rec.update(kind="invalid" if err else "valid", msg=err or "")
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("schemas", nargs="*")
    ap.add_argument("--server", default="target/release/constrain")
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for `serve`")
    ap.add_argument("--base")
    ap.add_argument("--sample")
    ap.add_argument("--per-subset", type=int, default=20)
    ap.add_argument("--sample-seed", type=int, default=2026)
    ap.add_argument("--conc", type=int, default=8)
    ap.add_argument("--temp", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stream", action="store_true", help="stream every response (SSE)")
    ap.add_argument("--allow-dead-ends", action="store_true",
                    help="report dead ends (5xx) without failing: only invalid outputs and transport errors fail")
    ap.add_argument("--out")
    args = ap.parse_args()
    paths = list(args.schemas)
    if args.sample:
        paths += sample(args.sample, args.per_subset, args.sample_seed)
    if not paths:
        sys.exit("sweep.py: no schemas (give files or --sample DIR)")
    proc = None
    base = args.base
    if not base:
        proc, base = start_server(args.server, ["--parallel", str(args.conc), *args.server_arg])
    try:
        client = openai.OpenAI(base_url=base, api_key="none", timeout=900, max_retries=0)
        model = client.models.list().data[0].id
        t0 = time.time()
        with cf.ThreadPoolExecutor(args.conc) as ex:
            recs = list(ex.map(lambda ip: one(client, model, args, *ip), enumerate(paths)))
        wall = time.time() - t0
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
    if args.out:
        with open(args.out, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
    count = lambda k: sum(r["kind"] == k for r in recs)  # noqa: E731
    for r in recs:
        if r["kind"] not in ("valid", "skipped"):
            print(f"{r['kind']}: {r['schema']} (seed {r['seed']}): {r.get('msg', '')}")
    finishes = {}
    for r in recs:
        if r.get("finish"):
            finishes[r["finish"]] = finishes.get(r["finish"], 0) + 1
    toks = sum(r.get("tokens") or 0 for r in recs)
    backtracks = sum(r.get("backtracks") or 0 for r in recs)
    dead_tokens = sum(r.get("dead_tokens") or 0 for r in recs)
    unproved_tokens = sum(r.get("unproved_tokens") or 0 for r in recs)
    print(f"{len(recs)} requests: valid {count('valid')}, invalid {count('invalid')}, "
          f"refused {count('refused')}, dead ends {count('dead_end')}, failed {count('failed')}, "
          f"unlabelled {count('unlabelled')}, skipped {count('skipped')}; backtracks {backtracks}; "
          f"tokens refused: {dead_tokens} dead ends, {unproved_tokens} unproved; "
          f"finish {finishes}; {toks} tokens in {wall:.0f} s")
    dead = 0 if args.allow_dead_ends else count("dead_end")
    sys.exit(1 if count("invalid") or dead or count("failed") else 0)


if __name__ == "__main__":
    main()
