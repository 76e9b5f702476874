"""Builds a differential corpus of new JSON instances for JSONSchemaBench schemas, labelled by Python's jsonschema.

For each sampled schema, valid candidates come from hypothesis-jsonschema (`from_schema`)
and invalid candidates from small mutations of valid ones (drop a key, change a type, add
an unknown key, perturb a number/string/array). Every instance is labelled by the
`jsonschema` package (validator class from the schema's `$schema`, default Draft 2020-12,
with that class's FORMAT_CHECKER), never by how it was made. The output has the
JSONSchemaBench layout: `OUT/<Set>/<name>.json` (the schema, copied byte for byte) and
`OUT/<Set>/tests/<name>.json` (`{"description", "meta", "tests": [{"description",
"valid", "data", optional "python_error"}]}`, compact JSON with a trailing newline).

Usage:
  python3 scripts/differential/gen.py BENCH_DIR OUT_DIR --seed 1 --count 6 [--sample 1500]
      [--time-limit 8] [--sets Github_easy,Kubernetes] [--max-bytes 4096]

Deterministic given the seed (and the same package versions), except that a schema whose
generation runs into the time limit is skipped, which depends on the machine's speed.
A summary of what was generated and skipped goes to OUT_DIR/_gen_summary.json.
"""

import argparse
import copy
import hashlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import sys
import time
import warnings

MUTATION_KEYS = ["extraKey", "unknown", "_x", "$comment2", "zz", "a b", "ID"]
OTHER_TYPE_VALUES = [None, True, False, 0, -1, 7, 2.5, "", "x", "12", "true", [], {}, [1], {"k": 1}]
NON_ASCII_DIGITS = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")


def serialise(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def sub_seed(seed, text):
    h = hashlib.sha256(f"{seed}:{text}".encode()).digest()
    return int.from_bytes(h[:8], "big")


# ---------------------------------------------------------------------------
# validation (the label)


class _NoRemote(Exception):
    pass


def _block_network():
    import urllib.request

    def refuse(*_a, **_k):
        raise _NoRemote("remote references are not retrieved")

    urllib.request.urlopen = refuse
    try:
        import requests  # noqa: F401

        requests.get = refuse  # type: ignore[assignment]
    except Exception:
        pass


def make_validator(schema):
    import jsonschema
    import referencing
    import referencing.exceptions

    def retrieve(uri):
        raise referencing.exceptions.NoSuchResource(ref=uri)

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    registry = referencing.Registry(retrieve=retrieve)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER), cls.__name__


def label(validator, instance):
    """(valid, error message or None); raises when the validator itself fails."""
    errors = list(validator.iter_errors(instance))
    if not errors:
        return True, None
    import jsonschema.exceptions

    best = jsonschema.exceptions.best_match(errors)
    return False, str(best.message)[:500]


# ---------------------------------------------------------------------------
# mutations


def _nodes(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, path + (i,))


def _get(value, path):
    for p in path:
        value = value[p]
    return value


def _set(root, path, new):
    if not path:
        return new
    parent = _get(root, path[:-1])
    parent[path[-1]] = new
    return root


def _type_name(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _perturb_number(rng, v):
    choices = [v + 1, v - 1, -v, v * 10, v + 0.5, 0, 10**20, -(10**20), 2**64]
    if isinstance(v, int):
        choices += [float(v), v * 3 + 1, v // 2 if v else 1]
    else:
        choices += [v / 3, round(v), v * 1.0000001]
    return rng.choice(choices)


def _perturb_string(rng, s):
    ops = [
        lambda s: s + "x",
        lambda s: s[:-1],
        lambda s: "",
        lambda s: s + s,
        lambda s: " " + s,
        lambda s: s + "\n",
        lambda s: s.upper() if s != s.upper() else s.lower(),
        lambda s: s + "\u00e9",
        lambda s: s * 20,
    ]
    if any(c in "0123456789" for c in s):
        ops.append(lambda s: s.translate(NON_ASCII_DIGITS))

        def digit_tweak(s):
            idx = [i for i, c in enumerate(s) if c in "0123456789"]
            i = rng.choice(idx)
            return s[:i] + rng.choice("0123456789".replace(s[i], "")) + s[i + 1 :]

        ops += [digit_tweak, digit_tweak]
    if len(s) > 1:
        i = rng.randrange(len(s))
        ops.append(lambda s, i=i: s[:i] + s[i + 1 :])
    return rng.choice(ops)(s)


def mutate(rng, instance, others):
    """One small mutation of `instance`: (description, new instance) or None."""
    inst = copy.deepcopy(instance)
    nodes = list(_nodes(inst))
    objects = [(p, v) for p, v in nodes if isinstance(v, dict)]
    nonempty_objects = [(p, v) for p, v in objects if v]
    arrays = [(p, v) for p, v in nodes if isinstance(v, list)]
    numbers = [(p, v) for p, v in nodes if isinstance(v, (int, float)) and not isinstance(v, bool)]
    strings = [(p, v) for p, v in nodes if isinstance(v, str)]
    ops = ["change_type"]
    if nonempty_objects:
        ops += ["drop_key", "drop_key"]
    if objects:
        ops += ["add_key", "add_key"]
    if numbers:
        ops += ["number", "number"]
    if strings:
        ops += ["string", "string", "swap_string"]
    if arrays:
        ops += ["array"]
    op = rng.choice(ops)
    ptr = lambda p: "/" + "/".join(str(x) for x in p)  # noqa: E731
    if op == "drop_key":
        p, obj = rng.choice(nonempty_objects)
        k = rng.choice(list(obj))
        del obj[k]
        return f"mutation: drop key {k!r} at {ptr(p)}", inst
    if op == "add_key":
        p, obj = rng.choice(objects)
        keys = list(obj)
        cands = list(MUTATION_KEYS)
        if keys:
            k0 = rng.choice(keys)
            cands += [k0 + "_", k0.upper() if k0 != k0.upper() else k0.lower(), k0 + "2"]
        k = rng.choice([c for c in cands if c not in obj] or ["extraKey_"])
        value = rng.choice(OTHER_TYPE_VALUES)
        if keys and rng.random() < 0.5:
            value = copy.deepcopy(obj[rng.choice(keys)])
        obj[k] = value
        return f"mutation: add key {k!r} at {ptr(p)}", inst
    if op == "number":
        p, v = rng.choice(numbers)
        new = _perturb_number(rng, v)
        return f"mutation: number {v!r} -> {new!r} at {ptr(p)}", _set(inst, p, new)
    if op == "string":
        p, v = rng.choice(strings)
        new = _perturb_string(rng, v)
        return f"mutation: string at {ptr(p)}", _set(inst, p, new)
    if op == "swap_string":
        p, v = rng.choice(strings)
        pool = [o for o in others if isinstance(o, str) and o != v] or ["other", "A", "null"]
        new = rng.choice(pool)
        return f"mutation: string replaced at {ptr(p)}", _set(inst, p, new)
    if op == "array":
        p, arr = rng.choice(arrays)
        kind = rng.choice(["drop", "dup", "empty", "append"] if arr else ["append", "append_null"])
        if kind == "drop":
            del arr[rng.randrange(len(arr))]
        elif kind == "dup":
            arr.append(copy.deepcopy(rng.choice(arr)))
        elif kind == "empty":
            arr.clear()
        elif kind == "append":
            arr.append(copy.deepcopy(arr[-1]) if arr else rng.choice(OTHER_TYPE_VALUES))
        else:
            arr.append(None)
        return f"mutation: array {kind} at {ptr(p)}", inst
    # change_type
    p, v = rng.choice(nodes)
    t = _type_name(v)
    cands = [c for c in OTHER_TYPE_VALUES if _type_name(c) != t]
    if isinstance(v, bool):
        cands += ["true" if v else "false", int(v)]
    elif isinstance(v, (int, float)):
        cands += [str(v)]
    elif isinstance(v, str):
        try:
            cands.append(int(v))
        except ValueError:
            pass
    new = copy.deepcopy(rng.choice(cands))
    return f"mutation: type {t} -> {_type_name(new)} at {ptr(p)}", _set(inst, p, new)


# ---------------------------------------------------------------------------
# per-schema work (runs in a worker process)


class _SoftTimeout(BaseException):
    pass


def _time_limited(phase, time_limit, fn):
    """Runs `fn` under a SIGALRM time limit: (its result, None), or (None, why it stopped)."""
    signal.alarm(time_limit)
    try:
        return fn(), None
    except _SoftTimeout:
        return None, f"{phase}: time limit"
    except Exception as e:  # noqa: BLE001
        return None, f"{phase}: {type(e).__name__}: {str(e)[:200]}"
    finally:
        signal.alarm(0)


def _alarm(_sig, _frm):
    raise _SoftTimeout()


def _custom_formats():
    from hypothesis import strategies as st

    return {"uuid": st.uuids().map(str)}


def hypothesis_examples(schema, seed, n_examples):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis_jsonschema import from_schema

    strategy = from_schema(schema, custom_formats=_custom_formats(), codec="utf-8")
    out = []

    @hseed(seed)
    @settings(
        max_examples=n_examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(strategy)
    def collect(x):
        out.append(x)

    collect()
    return out


def process_schema(task):
    """Generate and label instances for one schema; returns a dict (never raises)."""
    set_name, name, schema_path, tests_path, seed, count, max_bytes, time_limit = task
    sid = f"{set_name}/{name}"
    result = {"id": sid, "tests": None, "skip": None}
    rng = random.Random(sub_seed(seed, sid))
    try:
        with open(schema_path, encoding="utf-8") as f:
            schema = json.load(f)
        validator, vname = make_validator(schema)
        result["validator"] = vname
    except Exception as e:  # noqa: BLE001
        result["skip"] = f"schema: {type(e).__name__}: {e}"[:300]
        return result

    signal.signal(signal.SIGALRM, _alarm)

    def generate():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # hypothesis-jsonschema rewrites the schema it is given in place: give it a copy.
            return hypothesis_examples(copy.deepcopy(schema), sub_seed(seed, "hyp:" + sid), max(10, 2 * count))

    generated, skip = _time_limited("hypothesis", time_limit, generate)
    if skip:
        result["skip"] = skip
        return result

    seen = set()
    labelled = []  # (description, valid, data, error)

    def make():
        def add(desc, data):
            try:
                text = serialise(data)
            except ValueError:  # a mutation overflowed to inf: not JSON
                return None
            if text in seen or len(text.encode("utf-8")) > max_bytes:
                return None
            seen.add(text)
            ok, err = label(validator, data)
            labelled.append((desc, ok, data, err))
            return ok

        valid_seeds = []
        for x in generated:
            if add("hypothesis-jsonschema", x):
                valid_seeds.append(x)
        if not valid_seeds:
            return "no valid instance generated"
        # Valid instances of the original tests are extra mutation seeds (never emitted as is).
        if tests_path and os.path.exists(tests_path):
            with open(tests_path, encoding="utf-8") as f:
                for t in json.load(f).get("tests", []):
                    if t.get("valid"):
                        seen.add(serialise(t["data"]))
                        valid_seeds.append(t["data"])
        strings = [v for s in valid_seeds for _, v in _nodes(s) if isinstance(v, str)]
        for _ in range(8 * count):
            m = mutate(rng, rng.choice(valid_seeds), strings)
            if m:
                add(m[0], m[1])
        return None

    skip_reason, skip = _time_limited("labelling", time_limit, make)
    if skip or skip_reason:
        result["skip"] = skip or skip_reason
        return result

    valid = [t for t in labelled if t[1]]
    invalid = [t for t in labelled if not t[1]]
    # Prefer the valid instances that are not the very first (often minimal) example,
    # and the valid mutations, which are the unusual ones.
    n_valid = min(len(valid), max(count - len(invalid), (count + 1) // 2))
    n_invalid = min(len(invalid), count - n_valid)
    chosen = rng.sample(valid, n_valid) + rng.sample(invalid, n_invalid)
    tests = []
    for desc, ok, data, err in chosen:
        t = {"description": desc, "valid": ok, "data": data}
        if err is not None:
            t["python_error"] = err
        tests.append(t)
    result["tests"] = tests
    return result


def _worker(conn):
    _block_network()
    warnings.simplefilter("ignore")
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(process_schema(task))


class Worker:
    def __init__(self):
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, task, hard_timeout):
        self.conn.send(task)
        if self.conn.poll(hard_timeout):
            try:
                return self.conn.recv()
            except EOFError:
                return None
        return None

    def kill(self):
        self.proc.kill()
        self.proc.join()

    def stop(self):
        try:
            self.conn.send(None)
        except Exception:  # noqa: BLE001
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.kill()


# ---------------------------------------------------------------------------
# sampling and output


def list_schemas(bench, sets):
    out = {}
    for s in sorted(os.listdir(bench)):
        d = os.path.join(bench, s)
        if not os.path.isdir(d) or (sets and s not in sets):
            continue
        names = sorted(n for n in os.listdir(d) if n.endswith(".json") and os.path.isfile(os.path.join(d, n)))
        if names:
            out[s] = names
    return out


def stratified_sample(schemas, sample, rng, min_per_set=30):
    total = sum(len(v) for v in schemas.values())
    if not sample or sample >= total:
        return [(s, n) for s, names in schemas.items() for n in names]
    picked = []
    for s, names in schemas.items():
        k = max(min(min_per_set, len(names)), round(sample * len(names) / total))
        k = min(k, len(names))
        picked += [(s, n) for n in sorted(rng.sample(names, k))]
    return picked


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", help="JSONSchemaBench directory (set folders)")
    ap.add_argument("out", help="output directory (JSONSchemaBench layout)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=6, help="instances per schema")
    ap.add_argument("--sample", type=int, default=0, help="schemas to sample, stratified by set (0: all)")
    ap.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    ap.add_argument("--time-limit", type=int, default=6, help="seconds per schema")
    ap.add_argument("--max-bytes", type=int, default=4096, help="drop instances larger than this (serialised)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    sets = set(filter(None, args.sets.split(",")))
    schemas = list_schemas(args.bench, sets)
    picked = stratified_sample(schemas, args.sample, random.Random(args.seed))
    os.makedirs(args.out, exist_ok=True)
    summary = {"seed": args.seed, "count": args.count, "sampled": len(picked), "written": 0,
               "instances": 0, "valid": 0, "invalid": 0, "skipped": {}, "per_set": {}}
    worker = Worker()
    start = time.time()
    for i, (s, n) in enumerate(picked):
        schema_path = os.path.join(args.bench, s, n)
        tests_path = os.path.join(args.bench, s, "tests", n)
        task = (s, n, schema_path, tests_path, args.seed, args.count, args.max_bytes, args.time_limit)
        res = worker.run(task, 2 * args.time_limit + 10)
        if res is None:
            worker.kill()
            worker = Worker()
            res = {"id": f"{s}/{n}", "tests": None, "skip": "hard time limit"}
        ps = summary["per_set"].setdefault(s, {"sampled": 0, "written": 0, "instances": 0})
        ps["sampled"] += 1
        if not res["tests"]:
            summary["skipped"][res["id"]] = res["skip"] or "no instances"
        else:
            os.makedirs(os.path.join(args.out, s, "tests"), exist_ok=True)
            shutil.copyfile(schema_path, os.path.join(args.out, s, n))
            meta = {}
            if os.path.exists(tests_path):
                with open(tests_path, encoding="utf-8") as f:
                    meta = json.load(f).get("meta", {})
            doc = {"description": f"differential {s}/{n} (seed {args.seed}, {res.get('validator')})",
                   "meta": meta, "tests": res["tests"]}
            with open(os.path.join(args.out, s, "tests", n), "w", encoding="utf-8") as f:
                f.write(serialise(doc) + "\n")
            nv = sum(t["valid"] for t in res["tests"])
            summary["written"] += 1
            summary["instances"] += len(res["tests"])
            summary["valid"] += nv
            summary["invalid"] += len(res["tests"]) - nv
            ps["written"] += 1
            ps["instances"] += len(res["tests"])
        if not args.quiet and (i + 1) % 50 == 0:
            print(f"[{time.time() - start:6.0f}s] {i + 1}/{len(picked)} schemas, {summary['written']} written, "
                  f"{summary['instances']} instances", file=sys.stderr, flush=True)
    worker.stop()
    reasons = {}
    for r in summary["skipped"].values():
        key = r.split(":")[0] + (": time limit" if "time limit" in r else "")
        reasons[key] = reasons.get(key, 0) + 1
    summary["skip_reasons"] = reasons
    summary["seconds"] = round(time.time() - start, 1)
    with open(os.path.join(args.out, "_gen_summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, ensure_ascii=False)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("skipped",)}, indent=1), file=sys.stderr)


if __name__ == "__main__":
    main()
