"""transformers end to end: the default model's GGUF (SmolLM2-135M-Instruct, fetched by
scripts/fetch-model.sh), loaded by transformers itself, generating through
``constrain.hf.LogitsProcessor``. Every output validates against its schema with
``jsonschema``, under greedy decoding, sampling with several return sequences, and beam
search (``num_beams=3``)."""

from __future__ import annotations

import json

import pytest

import constrain
import constrain.hf
from conftest import PERSON, model_or_skip

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

ITEMS = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "integer", "maximum": 99}, "minItems": 1, "maxItems": 4},
        "done": {"type": "boolean"},
    },
    "required": ["items", "done"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def lm():
    path = model_or_skip()
    kw = dict(gguf_file=path.name)
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), **kw)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), **kw)
    model.eval()
    tok = constrain.Tokenizer.from_hf(hf_tok, vocab_size=model.config.vocab_size)
    return hf_tok, model, tok


def generate(lm, constraint, prompt, **kwargs):
    hf_tok, model, tok = lm
    messages = [{"role": "user", "content": prompt}]
    text = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = hf_tok(text, return_tensors="pt")
    budget = kwargs.pop("max_new_tokens", 60)
    closing = kwargs.pop("closing", False)
    proc = constrain.hf.LogitsProcessor(constraint, max_new_tokens=budget if closing else None)
    with torch.no_grad():
        out = model.generate(
            **inputs,
            logits_processor=[proc],
            max_new_tokens=budget,
            eos_token_id=tok.eos_token_ids,
            pad_token_id=tok.eos_token_ids[0],
            **kwargs,
        )
    n = inputs["input_ids"].shape[1]
    return [hf_tok.decode(row[n:], skip_special_tokens=True) for row in out]


def check_all(texts, schema):
    assert texts
    for t in texts:
        jsonschema.validate(json.loads(t), schema)


@pytest.mark.parametrize("schema", [PERSON, ITEMS], ids=["person", "items"])
def test_greedy(lm, schema):
    c = constrain.Constraint.json_schema(schema, lm[2], whitespace="compact")
    check_all(generate(lm, c, "Write a JSON object. " + json.dumps(schema), do_sample=False), schema)


def test_sampling_with_several_sequences(lm):
    c = constrain.Constraint.json_schema(PERSON, lm[2], whitespace="compact")
    torch.manual_seed(7)
    texts = generate(lm, c, "Invent a person.", do_sample=True, temperature=1.0, top_k=0, num_return_sequences=3)
    assert len(texts) == 3
    check_all(texts, PERSON)


def test_beam_search(lm):
    c = constrain.Constraint.json_schema(PERSON, lm[2], whitespace="compact")
    texts = generate(lm, c, "Invent a person.", do_sample=False, num_beams=3, num_return_sequences=3)
    assert len(texts) == 3
    check_all(texts, PERSON)


def test_beam_search_with_sampling_pretty(lm):
    c = constrain.Constraint.json_schema(ITEMS, lm[2])
    torch.manual_seed(3)
    check_all(generate(lm, c, "List numbers.", do_sample=True, num_beams=3, max_new_tokens=80), ITEMS)


def test_regex(lm):
    c = constrain.Constraint.regex("[0-9]{3}-[0-9]{4}", lm[2])
    (text,) = generate(lm, c, "A phone number:", do_sample=False)
    assert len(text) == 8 and text[3] == "-" and text.replace("-", "").isdigit()


BIO = {
    "type": "object",
    "properties": {
        "bio": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "age": {"type": "integer"},
    },
    "required": ["bio", "tags", "age"],
    "additionalProperties": False,
}


def test_closing_mode_under_a_tight_budget(lm):
    """A free-form string first and 30 tokens in all, sampled at temperature 1: closing mode
    (the processor told the budget) ends the string and the object in time, every time."""
    c = constrain.Constraint.json_schema(BIO, lm[2], whitespace="compact")
    torch.manual_seed(5)
    texts = generate(
        lm, c, "Write a long biography.", do_sample=True, temperature=1.0, top_k=0,
        num_return_sequences=4, max_new_tokens=30, closing=True,
    )
    assert len(texts) == 4
    check_all(texts, BIO)
