"""``Tokenizer.from_gguf`` reads the same vocabulary llama.cpp gives the engine.

The reference is ``constrain-llama``'s example ``vocab_dump`` (``cargo build --release -p
constrain-llama --example vocab_dump``; scripts/test-python.sh builds it): llama.cpp loads
the default model and the engine's vocabulary is printed. The package's own GGUF reader
must agree on every token's bytes, the special ids and the end-of-generation ids.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import constrain
from conftest import ROOT, model_path

VOCAB_DUMP = Path(os.environ.get("CONSTRAIN_VOCAB_DUMP", ROOT / "target" / "release" / "examples" / "vocab_dump"))


def test_gguf_vocabulary_equals_llama_cpp():
    path = model_path()
    if not path.exists():
        pytest.skip(f"{path} missing: run scripts/fetch-model.sh")
    if not VOCAB_DUMP.exists():
        pytest.skip(f"{VOCAB_DUMP} missing: cargo build --release -p constrain-llama --example vocab_dump")
    out = subprocess.run([str(VOCAB_DUMP), str(path)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    eos = [int(t) for t in lines[0].split()[1:]]
    special = {int(t) for t in lines[1].split()[1:]}
    tok = constrain.Tokenizer.from_gguf(path)
    assert tok.eos_token_ids == eos
    assert tok.num_tokens == len(lines) - 2
    for line in lines[2:]:
        parts = line.split()
        i = int(parts[0])
        want = bytes.fromhex(parts[1]) if len(parts) > 1 else b""
        assert tok.is_special(i) == (i in special), i
        assert tok.token_bytes(i) == want, i


def test_gguf_errors(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(constrain.TokenizerError):
        constrain.Tokenizer.from_gguf(bad)
    with pytest.raises(constrain.TokenizerError):
        constrain.Tokenizer.from_gguf(tmp_path / "missing.gguf")
