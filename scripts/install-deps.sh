#!/usr/bin/env bash
# Installs what building constrain needs on a Debian/Ubuntu machine: a Rust toolchain (via
# rustup, if cargo is missing) and cmake, clang and libclang-dev for the llama.cpp build.
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
