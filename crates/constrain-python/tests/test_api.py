"""The Python API on a toy vocabulary: masks by hand, state moves, errors, threads."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import constrain
from conftest import TOY_EOS, TOY_SCHEMA, allowed

# Toy ids: 0 `{`, 1 `}`, 2 `"ok"`, 3 `:`, 4 `true`, 5 `false`, 6 ` `, 7 `{"`, 8 `ok"`, 9 `,`, 10 EOS.
OK_TRUE = [0, 2, 3, 4, 1]  # {"ok":true}


def compact(tok):
    return constrain.Constraint.json_schema(TOY_SCHEMA, tok, whitespace="compact")


def test_masks_by_hand(toy):
    m = compact(toy).matcher()
    mask = constrain.allocate_token_bitmask(2, toy.vocab_size)
    assert mask.shape == (2, 1) and mask.dtype == np.int32 and (mask == -1).all()
    m.fill_next_token_bitmask(mask, 1)
    assert allowed(mask, 1) == [0, 7]  # `{` or `{"`
    assert (mask[0] == -1).all()  # other rows untouched
    for t in OK_TRUE[:3]:
        assert m.accept_token(t)
    m.fill_next_token_bitmask(mask, 0)
    assert allowed(mask, 0) == [4, 5]
    assert m.accept_token(4) and m.accept_token(1)
    m.fill_next_token_bitmask(mask, 0)
    assert allowed(mask, 0) == [TOY_EOS]
    assert m.is_accepting() and m.is_finished() and not m.is_terminated()
    assert m.accept_token(TOY_EOS) and m.is_terminated()
    m.fill_next_token_bitmask(mask, 0)
    assert allowed(mask, 0) == []
    assert not m.accept_token(TOY_EOS)


def test_refused_token_leaves_state(toy):
    m = compact(toy).matcher()
    assert not m.accept_token(1)  # `}` first
    assert not m.accept_token(TOY_EOS)  # EOS before the end
    assert m.num_tokens == 0
    assert m.accept_tokens([0, 2, 3]) and m.tokens == [0, 2, 3]
    assert not m.accept_tokens([4, 4])  # the first is taken, the second refused
    assert m.tokens == [0, 2, 3, 4]


def test_validate_rollback_reset(toy):
    m = compact(toy).matcher()
    assert m.validate_tokens(OK_TRUE + [TOY_EOS, 0]) == 6
    assert m.num_tokens == 0  # no state change
    assert m.validate_tokens([1]) == 0
    m.accept_tokens(OK_TRUE)
    m.rollback(2)
    assert m.tokens == [0, 2, 3]
    assert m.accept_token(5) and m.accept_token(1)
    with pytest.raises(ValueError):
        m.rollback(10)
    m.reset()
    assert m.num_tokens == 0 and not m.is_accepting()


def test_fork_is_independent(toy):
    m = compact(toy).matcher()
    m.accept_tokens([0, 2, 3])
    f = m.fork()
    assert f.tokens == m.tokens
    assert f.accept_token(4) and m.accept_token(5)
    assert f.tokens[-1] == 4 and m.tokens[-1] == 5


def test_jump_forward_and_distance(toy):
    m = compact(toy).matcher()
    assert m.find_jump_forward_string() == '{"ok":'
    assert m.find_jump_forward_bytes() == b'{"ok":'
    # The toy vocabulary has no single-byte `o`, `k`, `t`…: no completion is spelled.
    assert m.min_tokens_to_finish() is None
    m.accept_tokens(OK_TRUE)
    assert m.min_tokens_to_finish() == 0
    assert m.find_jump_forward_string() == ""


def test_pretty_whitespace_allows_spaces(toy):
    m = constrain.Constraint.json_schema(TOY_SCHEMA, toy).matcher()
    mask = constrain.allocate_token_bitmask(1, toy.vocab_size)
    m.accept_tokens([0])
    m.fill_next_token_bitmask(mask)
    assert 6 in allowed(mask)


def test_schema_error_has_pointer(toy):
    with pytest.raises(constrain.SchemaError) as e:
        constrain.Constraint.json_schema({"properties": {"a": {"type": "string", "pattern": "(?<x>a"}}}, toy)
    assert e.value.pointer == "/properties/a/pattern"
    assert e.value.keyword == "pattern"
    with pytest.raises(constrain.SchemaError) as e:
        constrain.Constraint.json_schema("{not json", toy)
    assert e.value.pointer == ""
    with pytest.raises(constrain.SchemaError):
        constrain.Constraint.json_schema({"uniqueItems": True, "type": "array"}, toy, runtime_checks=False)
    assert issubclass(constrain.SchemaError, constrain.ConstrainError)


def test_grammar_and_limit_errors(toy):
    with pytest.raises(constrain.GrammarError):
        constrain.Constraint.gbnf("root ::= (", toy)
    with pytest.raises(constrain.GrammarError):
        constrain.Constraint.regex("(", toy)
    with pytest.raises(constrain.LimitError):
        constrain.Constraint.regex("[a-z]{40}[0-9]{40}", toy, max_states=5)
    with pytest.raises(ValueError):
        constrain.Constraint.json_schema(TOY_SCHEMA, toy, whitespace="wide")


def test_gbnf_and_regex(toy):
    g = constrain.Constraint.gbnf('root ::= "{" "}"', toy).matcher()
    assert g.accept_tokens([0, 1]) and g.is_accepting()
    r = constrain.Constraint.regex("(true|false),", toy).matcher()
    assert r.validate_tokens([4, 9]) == 2 and r.validate_tokens([9]) == 0


def test_draft_option(toy):
    # Drafts by number or name; an unknown one is a ValueError.
    constrain.Constraint.json_schema({"type": "integer"}, toy, draft=4)
    constrain.Constraint.json_schema({"type": "integer"}, toy, draft="2019-09")
    with pytest.raises(ValueError):
        constrain.Constraint.json_schema({"type": "integer"}, toy, draft=5)


def test_bitmask_checks(toy):
    m = compact(toy).matcher()
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask(np.zeros((1, 1), dtype=np.int64))
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(np.zeros((1, 1), dtype=np.int32), 1)
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(np.zeros((2, 4), dtype=np.int32)[:, ::2])
    wide = np.full((1, 3), -1, dtype=np.int32)  # wider than the vocabulary: the rest cleared
    m.fill_next_token_bitmask(wide)
    assert allowed(wide) == [0, 7]


def test_batch_fill_equals_single(toy):
    c = compact(toy)
    prefixes = [[], [0], [0, 2], [0, 2, 3], [7, 8, 3, 5], OK_TRUE]
    ms = [c.matcher() for _ in prefixes]
    for m, p in zip(ms, prefixes):
        assert m.accept_tokens(p)
    singles = []
    for m in ms:
        one = constrain.allocate_token_bitmask(1, toy.vocab_size)
        m.fill_next_token_bitmask(one)
        singles.append(one[0])
    # The first batch fill goes to the thread pool (no fill is timed yet); the second, of
    # these cheap masks, stays on the calling thread. Both write the same rows.
    for _ in range(2):
        batch = np.zeros((len(ms) + 1, 1), dtype=np.int32)
        constrain.fill_next_token_bitmasks(ms, batch, list(range(1, len(ms) + 1)))
        assert (batch[0] == 0).all()  # the row no matcher was given stays as it was
        for i, one in enumerate(singles):
            assert (one == batch[i + 1]).all()


def test_batch_fill_refuses_bad_rows(toy):
    c = compact(toy)
    ms = [c.matcher() for _ in range(3)]
    batch = constrain.allocate_token_bitmask(3, toy.vocab_size)
    with pytest.raises(ValueError):
        constrain.fill_next_token_bitmasks([ms[0], ms[0]], batch)  # one matcher twice
    with pytest.raises(ValueError):
        constrain.fill_next_token_bitmasks(ms, batch, [0, 1, 1])  # one row twice
    with pytest.raises(ValueError):
        constrain.fill_next_token_bitmasks(ms, batch, [0, 1, 3])  # past the last row
    with pytest.raises(ValueError):
        constrain.fill_next_token_bitmasks(ms, batch, [0, 1])  # lengths differ
    # A repeat far from its first use is found too.
    many = [c.matcher() for _ in range(20)]
    wide = constrain.allocate_token_bitmask(20, toy.vocab_size)
    with pytest.raises(ValueError):
        constrain.fill_next_token_bitmasks(many, wide, list(range(19)) + [5])
    constrain.fill_next_token_bitmasks(many, wide, list(range(19, -1, -1)))


def test_apply_bitmask_numpy(toy):
    m = compact(toy).matcher()
    mask = constrain.allocate_token_bitmask(1, toy.vocab_size)
    m.fill_next_token_bitmask(mask)
    logits = np.zeros((1, 13), dtype=np.float32)  # wider than the mask's 11 tokens
    constrain.apply_token_bitmask_inplace(logits, mask)
    assert list(np.isfinite(logits[0]).nonzero()[0]) == [0, 7]


def test_apply_bitmask_torch(toy):
    torch = pytest.importorskip("torch")
    m = compact(toy).matcher()
    mask = torch.full((1, 1), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(mask)  # a CPU tensor is written in place
    logits = torch.zeros((1, 11))
    constrain.apply_token_bitmask_inplace(logits, mask)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [0, 7]


def test_constraint_shared_across_threads(toy):
    c = compact(toy)
    errors = []

    def walk():
        try:
            for _ in range(200):
                m = c.matcher()
                mask = constrain.allocate_token_bitmask(1, toy.vocab_size)
                for t in OK_TRUE:
                    m.fill_next_token_bitmask(mask)
                    assert t in allowed(mask)
                    assert m.accept_token(t)
                assert m.is_accepting()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=walk) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_tokenizer_properties(toy):
    assert toy.vocab_size == 11 and toy.num_tokens == 11 and toy.mask_words == 1
    assert toy.eos_token_ids == [TOY_EOS]
    assert toy.token_bytes(2) == b'"ok"'
    wide = constrain.Tokenizer.from_tokens([b"a", b"<e>"], eos_token_ids=[1], vocab_size=40)
    assert wide.vocab_size == 40 and wide.mask_words == 2
    with pytest.raises(constrain.TokenizerError):
        constrain.Tokenizer.from_file("/nonexistent/tokenizer.json")


# Printable ASCII, a few longer pieces, EOS last: enough to write any compact JSON here.
WALK_PIECES = [bytes([b]) for b in range(0x20, 0x7F)] + [b"hello", b" world", b'":"', b'","', b'"]', b"<eos>"]
WALK_SCHEMA = {
    "type": "object",
    "properties": {
        "bio": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
    },
    "required": ["bio", "tags"],
    "additionalProperties": False,
}


def random_walk(c, eos, rng, budget, max_tokens):
    """Uniformly random allowed tokens until EOS or `budget` tokens; the text and whether
    it ended complete."""
    m = c.matcher(max_tokens=max_tokens)
    mask = constrain.allocate_token_bitmask(1, c.vocab_size)
    text = b""
    for _ in range(budget):
        m.fill_next_token_bitmask(mask, 0)
        ids = allowed(mask, 0)
        assert ids, f"no allowed token after {text!r}"
        t = int(rng.choice(ids))
        if t == eos:
            break
        assert m.accept_token(t)
        text += WALK_PIECES[t]
    return text, m.is_accepting()


def test_closing_mode_finishes_within_the_budget():
    """Random walks cut at 40 tokens: without a budget most are incomplete (strings go on);
    with `max_tokens=40` every one is a complete, valid document."""
    eos = len(WALK_PIECES) - 1
    tok = constrain.Tokenizer.from_tokens(WALK_PIECES, eos_token_ids=[eos])
    c = constrain.Constraint.json_schema(WALK_SCHEMA, tok, whitespace="compact")
    rng = np.random.default_rng(11)
    cut = sum(not random_walk(c, eos, rng, 40, None)[1] for _ in range(20))
    assert cut >= 10, f"only {cut} of 20 unbudgeted walks were incomplete: the test would not tell"
    for _ in range(20):
        text, complete = random_walk(c, eos, rng, 40, 40)
        assert complete, text
        doc = json.loads(text)
        assert set(doc) == {"bio", "tags"} and isinstance(doc["bio"], str), text
        assert len(doc["tags"]) >= 2 and all(isinstance(t, str) for t in doc["tags"]), text
    with pytest.raises(constrain.LimitError):
        c.matcher(max_tokens=3)
    # After EOS a budgeted row is all zero too.
    m = c.matcher(max_tokens=40)
    mask = constrain.allocate_token_bitmask(1, c.vocab_size)
    for ch in b'{"bio":"a","tags":["","b"]}':
        assert m.accept_token(WALK_PIECES.index(bytes([ch]))), chr(ch)
    m.fill_next_token_bitmask(mask, 0)
    assert allowed(mask, 0) == [eos]
    assert m.accept_token(eos) and m.is_terminated()
    m.fill_next_token_bitmask(mask, 0)
    assert allowed(mask, 0) == []
