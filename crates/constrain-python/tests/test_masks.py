"""The package's masks equal the Rust engine's, bit for bit.

The reference is the facade's example ``mask_rows`` (``cargo build --release -p constrain
--example mask_rows``; scripts/test-python.sh builds it): it compiles a schema with the
options ``constrain eval`` uses, tokenizes a text with the ``tokenizers`` crate, and prints
every mask along it. Here the same schema goes through ``Constraint.json_schema``, the same
token ids through ``Matcher``, and every row must be identical. Schemas and instances are
the JSONSchemaBench fixtures under crates/constrain/tests/fixtures (see their README for
source and license).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import constrain
from conftest import FIXTURES, ROOT, TOKENIZER_JSON

MASK_ROWS = Path(os.environ.get("CONSTRAIN_MASK_ROWS", ROOT / "target" / "release" / "examples" / "mask_rows"))


def cases():
    """(schema file, instance text) pairs: per subset, two schemas, a valid and an invalid
    instance of each."""
    out = []
    for subset in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "sample"):
        taken = 0
        for schema in sorted(subset.glob("*.json")):
            tests = subset / "tests" / schema.name
            if not tests.exists() or taken == 2:
                continue
            instances = json.loads(tests.read_text())["tests"]
            picked = {}
            for t in instances:
                picked.setdefault(bool(t["valid"]), t["data"])
            for data in picked.values():
                out.append((schema, json.dumps(data, ensure_ascii=False)))
            taken += 1
    return out


CASES = cases()


def reference(schema: Path, text: str, whitespace: str):
    if not MASK_ROWS.exists():
        pytest.skip(f"{MASK_ROWS} missing: cargo build --release -p constrain --example mask_rows")
    out = subprocess.run(
        [str(MASK_ROWS), str(TOKENIZER_JSON), str(schema), text, whitespace],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        return None  # the engine refused the schema: the package must too
    lines = out.stdout.splitlines()
    tokens = [int(t) for t in lines[0].split()[1:]]
    masks = [bytes.fromhex(l.split()[1]) for l in lines if l.startswith("mask ")]
    accepts = [l.split()[1] == "true" for l in lines if l.startswith("accept ")]
    accepting = lines[-1] == "accepting true"
    return tokens, masks, accepts, accepting


@pytest.mark.parametrize("schema,text", CASES, ids=[f"{s.parent.name}/{s.stem}-{i}" for i, (s, _) in enumerate(CASES)])
def test_masks_equal_the_engine(deepseek, schema, text):
    ref = reference(schema, text, "pretty")
    if ref is None:
        with pytest.raises(constrain.ConstrainError):
            constrain.Constraint.json_schema(schema.read_text(), deepseek)
        return
    tokens, masks, accepts, accepting = ref
    c = constrain.Constraint.json_schema(json.loads(schema.read_text()), deepseek)
    m = c.matcher()
    row = constrain.allocate_token_bitmask(1, deepseek.vocab_size)
    for step, want in enumerate(masks):
        m.fill_next_token_bitmask(row)
        assert row[0].tobytes() == want, f"mask {step} differs"
        if step < len(accepts):
            assert m.accept_token(tokens[step]) == accepts[step]
    assert m.is_accepting() == accepting


def test_compact_whitespace_equals_the_engine(deepseek):
    schema, text = CASES[0]
    value = json.loads(text)
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    tokens, masks, accepts, accepting = reference(schema, compact, "compact")
    m = constrain.Constraint.json_schema(schema.read_text(), deepseek, whitespace="compact").matcher()
    rows = constrain.allocate_token_bitmask(len(masks), deepseek.vocab_size)
    ms = []
    for step in range(len(masks)):
        ms.append(m.fork())
        if step < len(accepts):
            assert m.accept_token(tokens[step]) == accepts[step]
    # The batch fill, on threads, row by row equals the engine too.
    constrain.fill_next_token_bitmasks(ms, rows)
    for step, want in enumerate(masks):
        assert rows[step].tobytes() == want, f"mask {step} differs"


def test_cli_eval_verdicts(deepseek):
    """What `constrain eval` checks per instance: every token allowed by the mask before it
    and EOS allowed at the end exactly for the valid ones."""
    for schema, text in CASES[:6]:
        c = constrain.Constraint.json_schema(schema.read_text(), deepseek)
        ref = reference(schema, text, "pretty")
        tokens = ref[0]
        m = c.matcher()
        row = constrain.allocate_token_bitmask(1, deepseek.vocab_size)
        ok = True
        for t in tokens:
            m.fill_next_token_bitmask(row)
            bit = (int(row[0, t // 32]) >> (t % 32)) & 1
            if not bit:
                ok = False
                break
            assert m.accept_token(t)
        if ok:
            m.fill_next_token_bitmask(row)
            eos = deepseek.eos_token_ids[0]
            ok = bool((int(row[0, eos // 32]) >> (eos % 32)) & 1)
        assert ok == ref[3]
