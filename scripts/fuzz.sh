#!/usr/bin/env bash
# Runs each cargo-fuzz target for N minutes (default 10), one after the other.
#   scripts/fuzz.sh [MINUTES] [TARGET...]       targets: schema gbnf regex matcher
#   scripts/fuzz.sh --seed DIR                  add DIR's *.json (schemas) and *.gbnf to the corpora
# Needs the nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly --profile minimal && cargo install cargo-fuzz
# Crashes land in fuzz/artifacts/TARGET/; turn each into a regression test
# (crates/constrain/tests/hostile.rs).
# Not a CI step: CI stays on stable.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
if [[ "${1:-}" == "--seed" ]]; then
    dir=${2:?usage: scripts/fuzz.sh --seed DIR}
    mkdir -p corpus/schema corpus/gbnf
    find "$dir" -name '*.json' -not -path '*/tests/*' -size -64k -exec cp -t corpus/schema/ {} +
    find "$dir" -name '*.gbnf' -exec cp -t corpus/gbnf/ {} +
    exit 0
fi
minutes=${1:-10}
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/fuzz.sh [MINUTES] [TARGET...]" >&2; exit 2; }
shift || true
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(schema gbnf regex matcher)
for t in "${targets[@]}"; do
    echo "== $t: $minutes min"
    mkdir -p "corpus/$t"
    # No sanitizer: the engine forbids unsafe code, and AddressSanitizer made single
    # inputs that take 0.4 s in a release build run past 10 s here.
    cargo +nightly fuzz run -s none "$t" "corpus/$t" -- \
        -max_total_time=$((minutes * 60)) -timeout=30 -rss_limit_mb=2048 -max_len=65536
done
