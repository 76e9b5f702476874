#!/usr/bin/env bash
# Times grammars/json.gbnf (GBNF → automaton) against the built-in generic JSON path (the
# schema `{}`, "any JSON value") with `constrain eval`, on the same instances.
#
# Builds a temporary JSONSchemaBench-style set folder `any-json/` in which every schema is `{}`
# and `tests/<name>.json` holds only the VALID instances of the first $N schemas (by file
# name, those with at least one valid instance) of the set $SET. Then runs, one at a time:
#   gbnf     : eval --grammar-file grammars/json.gbnf
#   pretty   : eval (built-in, default `--whitespace pretty`)
#   unbounded: eval --whitespace unbounded
# and prints passing counts, mask mean/p50/p99/max and ttfm p50/p99 of each (µs).
#
# Usage: scripts/json-gbnf-vs-builtin.sh [JSONSCHEMABENCH_DIR] [TOKENIZER_JSON]
#   defaults: ../shared/jsonschemabench and models/deepseek-tokenizer.json (from the repo
#   root; scripts/fetch-tokenizer.sh fetches the latter).
# Environment: CONSTRAIN (binary; default `cargo run --release --`), SET (Github_medium),
#   N (300), RUNS (repetitions of each configuration, 1), OUT (where the temporary set and
#   the JSON reports go; default a fresh mktemp dir, kept).
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# Paths given as arguments are relative to the caller's directory, the defaults to the repo root.
abs() { [[ "$1" = /* ]] && echo "$1" || echo "$PWD/$1"; }
bench="$(abs "${1:-$repo_root/../shared/jsonschemabench}")"
tokenizer="$(abs "${2:-$repo_root/models/deepseek-tokenizer.json}")"
cd "$repo_root"
set_name="${SET:-Github_medium}"
n="${N:-300}"
runs="${RUNS:-1}"
out="${OUT:-$(mktemp -d /tmp/json-gbnf-vs-builtin.XXXXXX)}"
# shellcheck disable=SC2206
constrain=(${CONSTRAIN:-cargo run --release --})

[[ -d "$bench/$set_name/tests" ]] || { echo "no set folder $bench/$set_name/tests" >&2; exit 2; }
[[ -s "$tokenizer" ]] || { echo "no tokenizer $tokenizer (run scripts/fetch-tokenizer.sh)" >&2; exit 2; }

python3 - "$bench/$set_name" "$out/any-json" "$n" <<'PY'
import json, os, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(os.path.join(dst, "tests"), exist_ok=True)
names = sorted(f for f in os.listdir(src) if f.endswith(".json") and os.path.isfile(os.path.join(src, f)))
kept = instances = 0
for name in names:
    if kept >= n:
        break
    tests_path = os.path.join(src, "tests", name)
    if not os.path.isfile(tests_path):
        continue
    with open(tests_path, encoding="utf-8") as f:
        doc = json.load(f)
    valid = [t for t in doc.get("tests", []) if t.get("valid") is True]
    if not valid:
        continue
    with open(os.path.join(dst, name), "w", encoding="utf-8") as f:
        f.write("{}\n")
    with open(os.path.join(dst, "tests", name), "w", encoding="utf-8") as f:
        json.dump({"description": "valid instances of " + os.path.basename(src) + "/" + name,
                   "tests": valid}, f, ensure_ascii=False)
    kept += 1
    instances += len(valid)
print(f"{dst}: {kept} schemas `{{}}`, {instances} valid instances from {src}", file=sys.stderr)
PY

configs=(gbnf pretty unbounded)
for run in $(seq 1 "$runs"); do
    for c in "${configs[@]}"; do
        case "$c" in
            gbnf) extra=(--grammar-file grammars/json.gbnf) ;;
            pretty) extra=() ;;
            unbounded) extra=(--whitespace unbounded) ;;
        esac
        echo "== run $run: $c" >&2
        "${constrain[@]}" eval "$out/any-json" --tokenizer "$tokenizer" \
            --json-report "$out/$c-$run.json" "${extra[@]}" > "$out/$c-$run.txt" || true
    done
done

python3 - "$out" "$runs" "${configs[@]}" <<'PY'
import json, os, sys
out, runs, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
cols = ["passing", "tokens", "mask_mean_us", "mask_p50_us", "mask_p99_us", "mask_max_us", "ttfm_p50_us", "ttfm_p99_us"]
print(f"{'config':<12} {'run':>3} {'schemas':>7} " + " ".join(f"{c:>13}" for c in cols))
for run in range(1, runs + 1):
    for c in configs:
        path = os.path.join(out, f"{c}-{run}.json")
        if not os.path.exists(path):
            print(f"{c:<12} {run:>3} (no report)")
            continue
        t = json.load(open(path))["totals"]
        print(f"{c:<12} {run:>3} {t['schemas']:>7} " + " ".join(f"{t[k] if t[k] is not None else '-':>13}" for k in cols))
print(f"(reports and the temporary set in {out})")
PY
