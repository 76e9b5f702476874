"""``constrain.Generator``: the engine's llama.cpp decode loop from Python, on the default
model (scripts/fetch-model.sh). Every constrained output validates; greedy output is the
same on a second call; a constraint compiled for another tokenizer and a budget below the
shortest output are refused with clear errors."""

from __future__ import annotations

import json

import pytest

import constrain
from conftest import PERSON, model_or_skip, model_path

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def gen():
    return constrain.Generator(str(model_or_skip()), n_ctx=2048)


def test_greedy_sampled_and_beams_validate(gen):
    c = constrain.Constraint.json_schema(PERSON, gen.tokenizer, whitespace="compact")
    greedy = gen.generate("Invent a person.", c, temperature=0)
    assert gen.generate("Invent a person.", c, temperature=0) == greedy
    texts = [greedy, gen.generate("Invent a person.", c, beams=2, max_tokens=80)]
    texts += [gen.generate("Invent a person.", c, temperature=1.0, seed=s, max_tokens=60) for s in range(3)]
    for t in texts:
        jsonschema.validate(json.loads(t), PERSON)


def test_closing_mode_keeps_a_tight_budget(gen):
    """A free-form string first and 24 tokens in all, at temperature 1."""
    schema = {"type": "object", "properties": {"bio": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["bio", "n"], "additionalProperties": False}
    c = constrain.Constraint.json_schema(schema, gen.tokenizer, whitespace="compact")
    for seed in range(3):
        text = gen.generate("Write a long biography.", c, temperature=1.0, seed=seed, max_tokens=24)
        jsonschema.validate(json.loads(text), schema)


def test_errors(gen):
    other = constrain.Tokenizer.from_gguf(str(model_path()))
    with pytest.raises(ValueError, match="another tokenizer"):
        gen.generate("x", constrain.Constraint.json_schema(PERSON, other))
    c = constrain.Constraint.json_schema(PERSON, gen.tokenizer, whitespace="compact")
    with pytest.raises(constrain.LimitError, match="budget is too small"):
        gen.generate("x", c, max_tokens=3)
    assert isinstance(gen.generate("Say hi.", max_tokens=8), str)  # unconstrained
