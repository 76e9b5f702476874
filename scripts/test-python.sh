#!/usr/bin/env bash
# The Python package's tests (crates/constrain-python): a venv, the package installed with
# the README's command, the test dependencies (torch, transformers, gguf, accelerate: about
# 70 s and 5.6 GB from PyPI), the default model and the benchmark tokenizer, the two Rust
# reference programs the tests compare with, then pytest. Arguments go to pytest.
#
# The venv is $CONSTRAIN_PY_VENV, default target/venv-python (reused when present).
# Kept out of scripts/test.sh so the Rust-only path installs no torch.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f "$HOME/.cargo/env" ]] && source "$HOME/.cargo/env"
venv="${CONSTRAIN_PY_VENV:-target/venv-python}"
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
py="$(cd "$venv" && pwd)/bin/python"
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet pytest jsonschema numpy torch transformers gguf accelerate
# The README's install command.
"$py" -m pip install --quiet --force-reinstall --no-deps ./crates/constrain-python
"$py" -m pip install --quiet ./crates/constrain-python
scripts/fetch-model.sh
scripts/fetch-tokenizer.sh
# References: the engine's masks along a text, and llama.cpp's view of the GGUF vocabulary.
cargo build --release -p constrain --example mask_rows
cargo build --release -p constrain-llama --example vocab_dump
cd crates/constrain-python
"$py" -m pytest -q tests "$@"
