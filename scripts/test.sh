#!/usr/bin/env bash
# Every test on a fresh machine: install build dependencies, fetch the default model (the
# end-to-end tests run it), then the whole test suite in release mode. Snapshot tests run
# with CI=true: a missing or changed snapshot fails instead of being written.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[[ -f "$HOME/.cargo/env" ]] && source "$HOME/.cargo/env"
scripts/fetch-model.sh
CI=true cargo test --release "$@"
