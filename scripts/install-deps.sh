#!/usr/bin/env bash
# Installs what building constrain needs on a Debian/Ubuntu machine: a Rust toolchain (via
# rustup, if cargo is missing), cmake, clang and libclang-dev for the llama.cpp build, and the
# `openai` Python package for the server tests.
set -euo pipefail

sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v clang >/dev/null || missing+=(clang)
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
if ((${#missing[@]})); then
    $sudo apt-get update
    $sudo apt-get install -y "${missing[@]}"
fi
if ! command -v cargo >/dev/null; then
    if [[ -x "$HOME/.cargo/bin/cargo" ]]; then
        echo "cargo is in ~/.cargo/bin: add it to PATH (source ~/.cargo/env)" >&2
    else
        command -v curl >/dev/null || $sudo apt-get install -y curl
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    fi
fi

# The `constrain serve` tests drive the server with the official OpenAI Python client.
if ! python3 -c "import openai" >/dev/null 2>&1; then
    if ! python3 -m pip --version >/dev/null 2>&1; then
        $sudo apt-get update
        $sudo apt-get install -y python3-pip
    fi
    # User-level; Debian's Python refuses that without --break-system-packages (PEP 668).
    python3 -m pip install --quiet --user openai \
        || python3 -m pip install --quiet --user --break-system-packages openai
fi
if ! python3 -c "import openai" >/dev/null 2>&1; then
    echo "install-deps.sh: the openai Python package could not be installed (the serve tests need it)" >&2
    exit 1
fi
# The liveness sweep (scripts/sweep.py) validates with Python's jsonschema, formats asserted.
if ! python3 -c "import jsonschema, rfc3339_validator, fqdn, isoduration" >/dev/null 2>&1; then
    python3 -m pip install --quiet --user "jsonschema[format]" \
        || python3 -m pip install --quiet --user --break-system-packages "jsonschema[format]"
fi
