#!/usr/bin/env bash
# What model-chosen whitespace costs: generates every schema of examples/ with the default
# `--whitespace compact` and with `--whitespace pretty`, interleaved (compact, pretty, per
# schema and seed) so that machine noise falls on both alike, and prints the tokens, the
# model steps and the generation time of each setting, summed. Needs a release build and
# the default model (scripts/fetch-model.sh).
# usage: scripts/whitespace-cost.sh [SEEDS (default 3)] [extra constrain flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-3}
shift || true
exe=target/release/constrain
[[ -x $exe ]] || { echo "build first: cargo build --release" >&2; exit 2; }
declare -A tokens steps secs runs
for ws in compact pretty; do tokens[$ws]=0; steps[$ws]=0; secs[$ws]=0; runs[$ws]=0; done
for schema in examples/*.json; do
    for seed in $(seq 1 "$seeds"); do
        for ws in compact pretty; do
            # The statistics line: "… N tokens (F forced, S model steps, B backtracks) in T s …".
            line=$("$exe" --schema "$schema" -p "Produce a realistic example." --seed "$seed" \
                --whitespace "$ws" -n 512 --verbose "$@" 2>&1 >/dev/null | grep '^constrain: finish_reason' || true)
            [[ -n $line ]] || { echo "$schema seed $seed $ws: no statistics (failed?)" >&2; continue; }
            read -r t s g < <(sed -E 's/.*; ([0-9]+) tokens \([0-9]+ forced, ([0-9]+) model steps.*\) in ([0-9.]+) s.*/\1 \2 \3/' <<<"$line")
            tokens[$ws]=$((tokens[$ws] + t))
            steps[$ws]=$((steps[$ws] + s))
            secs[$ws]=$(awk -v a="${secs[$ws]}" -v b="$g" 'BEGIN { print a + b }')
            runs[$ws]=$((runs[$ws] + 1))
        done
    done
done
for ws in compact pretty; do
    printf '%-8s %3d runs: %6d tokens, %6d model steps, %7.1f s generating\n' \
        "$ws" "${runs[$ws]}" "${tokens[$ws]}" "${steps[$ws]}" "${secs[$ws]}"
done
awk -v tc="${tokens[compact]}" -v tp="${tokens[pretty]}" -v sc="${secs[compact]}" -v sp="${secs[pretty]}" \
    'BEGIN { if (tp > 0 && sp > 0) printf "compact saves %.0f%% of the tokens and %.0f%% of the time\n", 100 * (1 - tc / tp), 100 * (1 - sc / sp) }'
