#!/usr/bin/env bash
# The main job end to end on a fresh machine: install build dependencies, fetch the default
# model, build constrain (release) and generate a JSON document for examples/person.json.
# Extra arguments are passed to constrain (e.g. --stream, --temp 0.7 --seed 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[[ -f "$HOME/.cargo/env" ]] && source "$HOME/.cargo/env"
scripts/fetch-model.sh
cargo run --release -- --schema examples/person.json \
    --prompt "Invent a person who lives in Lyon and likes the outdoors." "$@"
