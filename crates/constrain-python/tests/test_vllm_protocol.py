"""vLLM v1's structured-output call sequence, driven against constrain.vllm with no GPU.

The scheduler's order per step (vllm/v1/structured_output and the GPU model runner):
allocate the bitmask once, fill one row per structured request (``fill_bitmask``), sample,
then ``accept_tokens`` the sampled ones. With speculative decoding it first keeps the draft
prefix the grammar allows (``validate_tokens``), then for each draft position accepts that
token and fills the next row, and rolls all of them back before the verified tokens are
accepted. ``is_terminated`` ends a request; ``reset`` reuses its grammar. The state is
checked after each call.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import constrain
from constrain.vllm import ConstrainBackend, ConstrainGrammar
from conftest import TOY_EOS, TOY_SCHEMA, allowed

OK_TRUE = [0, 2, 3, 4, 1]


class Kind:
    """Stands in for vllm's StructuredOutputOptions enum members (only .name is read)."""

    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture()
def backend(toy):
    return ConstrainBackend(tokenizer=toy, whitespace="compact")


def test_batch_steps(backend, toy):
    mask = backend.allocate_token_bitmask(4)
    assert tuple(mask.shape) == (4, 1) and (np.asarray(mask) == -1).all()
    a = backend.compile_grammar(Kind("JSON"), json.dumps(TOY_SCHEMA))
    b = backend.compile_grammar(Kind("JSON"), json.dumps(TOY_SCHEMA))
    r = backend.compile_grammar(Kind("REGEX"), "(true|false)")
    # Step 1: rows 0, 1 and 3 are structured, row 2 is not.
    for g, row in [(a, 0), (b, 1), (r, 3)]:
        g.fill_bitmask(mask, row)
    assert allowed(mask, 0) == [0, 7] and allowed(mask, 1) == [0, 7] and allowed(mask, 3) == [4, 5]
    assert (np.asarray(mask[2]) == -1).all()
    assert a.accept_tokens("a", [0]) and b.accept_tokens("b", [7])
    assert r.accept_tokens("r", [5])
    assert a.num_processed_tokens == 1 and b.num_processed_tokens == 1
    # Step 2: different states in one batch.
    a.fill_bitmask(mask, 0)
    b.fill_bitmask(mask, 1)
    r.fill_bitmask(mask, 3)
    assert allowed(mask, 0) == [2] and allowed(mask, 1) == [8] and allowed(mask, 3) == [TOY_EOS]
    # A refused token: False, and the state stays.
    assert not a.accept_tokens("a", [1])
    assert a.num_processed_tokens == 1
    # The regex request ends.
    assert r.accept_tokens("r", [TOY_EOS]) and r.is_terminated()
    assert not r.accept_tokens("r", [4])
    r.reset()
    assert not r.is_terminated() and r.num_processed_tokens == 0


def test_speculative_tokens(backend):
    g = backend.compile_grammar(Kind("JSON"), json.dumps(TOY_SCHEMA))
    assert g.accept_tokens("req", [0])
    drafts = [2, 3, 4, 9, 1]  # `"ok"` `:` `true` then `,` which the schema refuses
    valid = g.validate_tokens(drafts)
    assert valid == [2, 3, 4] and g.num_processed_tokens == 1  # no state change
    # One row per draft position: row 0 before any draft, row k after k of them.
    mask = backend.allocate_token_bitmask(len(valid) + 1)
    expected = [[2], [3], [4, 5], [1]]
    for k in range(len(valid) + 1):
        g.fill_bitmask(mask, k)
        if k < len(valid):
            assert g.accept_tokens("req", [valid[k]])
    for k, want in enumerate(expected):
        assert allowed(mask, k) == want
    g.rollback(len(valid))
    assert g.num_processed_tokens == 1 and g.matcher.tokens == [0]
    # The target keeps two of them, then its own token.
    assert g.accept_tokens("req", [2, 3, 5])
    assert g.matcher.tokens == [0, 2, 3, 5]
    # Drafts past the end: EOS and whatever follows it.
    assert g.validate_tokens([1, TOY_EOS, 0]) == [1, TOY_EOS]
    assert g.accept_tokens("req", [1, TOY_EOS]) and g.is_terminated()
    assert g.validate_tokens([0]) == []
    g.rollback(1)  # a rejected EOS is rolled back too
    assert not g.is_terminated() and g.matcher.is_accepting()


def test_request_kinds(backend, toy):
    obj = backend.compile_grammar(Kind("JSON_OBJECT"), "")
    assert obj.validate_tokens([0, 1, TOY_EOS]) == [0, 1, TOY_EOS]
    gbnf = backend.compile_grammar(Kind("GRAMMAR"), 'root ::= "true" | "false"')
    assert gbnf.validate_tokens([4, TOY_EOS]) == [4, TOY_EOS]
    choice = backend.compile_grammar(Kind("CHOICE"), json.dumps(["true", "false,"]))
    assert choice.validate_tokens([5, 9, TOY_EOS]) == [5, 9, TOY_EOS]
    assert choice.validate_tokens([4, 9]) == [4]
    with pytest.raises(ValueError):
        backend.compile_grammar(Kind("STRUCTURAL_TAG"), "{}")
    with pytest.raises(constrain.SchemaError):
        backend.compile_grammar(Kind("JSON"), '{"type": "strin"}')
    backend.destroy()


def test_fork_for_beams(backend):
    g = backend.compile_grammar(Kind("JSON"), json.dumps(TOY_SCHEMA))
    g.accept_tokens("req", [0, 2, 3])
    h = g.fork()
    assert isinstance(h, ConstrainGrammar)
    assert g.accept_tokens("req", [4]) and h.accept_tokens("req", [5])
    assert g.matcher.tokens[-1] == 4 and h.matcher.tokens[-1] == 5


def test_torch_bitmask(backend):
    torch = pytest.importorskip("torch")
    mask = backend.allocate_token_bitmask(2)
    assert isinstance(mask, torch.Tensor) and mask.dtype == torch.int32 and tuple(mask.shape) == (2, 1)
    g = backend.compile_grammar(Kind("JSON"), json.dumps(TOY_SCHEMA))
    g.fill_bitmask(mask, 1)
    assert allowed(mask.numpy(), 1) == [0, 7] and (mask[0] == -1).all()
    logits = torch.zeros((2, 11))
    constrain.apply_token_bitmask_inplace(logits, mask, indices=[1])
    assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == [0, 7]
    assert torch.isfinite(logits[0]).all()
