"""A transformers ``LogitsProcessor`` that constrains ``model.generate`` to a constraint.

Usage::

    from transformers import AutoModelForCausalLM, AutoTokenizer
    import constrain, constrain.hf

    hf_tok = AutoTokenizer.from_pretrained(path)
    tok = constrain.Tokenizer.from_hf(hf_tok, vocab_size=model.config.vocab_size)
    c = constrain.Constraint.json_schema(schema, tok)
    proc = constrain.hf.LogitsProcessor(c, max_new_tokens=200)
    out = model.generate(**inputs, logits_processor=[proc], max_new_tokens=200)

Each row follows its own prefix: at every step the processor reads each row's generated
tokens from ``input_ids`` and finds the matcher that has accepted exactly them (the previous
step's matcher for the row's prefix, advanced by its last token). Beam search reorders and
duplicates rows, and ``num_return_sequences`` expands them; when several rows continue one
prefix, the matcher is forked (see ``Matcher.fork`` for its cost), otherwise it is moved.
Create one processor per ``generate`` call (it also resets itself when ``input_ids`` does
not grow by one token).

Pass ``generate``'s ``max_new_tokens`` as ``max_new_tokens`` too: closing mode then keeps
every row finishable within it (as the budget runs low, only tokens after which the output
can still be completed in the tokens left are allowed, and a complete output is ended).
Without it, a row that runs out of tokens is cut off, incomplete.
"""

from __future__ import annotations

import warnings

from typing import Any, Dict, List, Optional, Tuple

from . import Constraint, Matcher, allocate_token_bitmask, apply_token_bitmask_inplace, fill_next_token_bitmasks

__all__ = ["LogitsProcessor"]

try:  # Subclass transformers' base class when it is installed (it only checks the type).
    from transformers import LogitsProcessor as _Base  # type: ignore
except Exception:  # pragma: no cover - transformers missing
    _Base = object  # type: ignore


class LogitsProcessor(_Base):  # type: ignore[misc,valid-type]
    """Masks every token the constraint does not allow, row by row.

    ``constraint``: a compiled :class:`constrain.Constraint`. ``prompt_length``: the number of
    prompt tokens in ``input_ids`` (default: the length at the first call, which is right
    for ``generate``). ``max_new_tokens``: the token budget of each row, for closing mode
    (``generate``'s own ``max_new_tokens``); raises ``constrain.LimitError`` when it is below
    what the shortest output takes. Rows that already ended (EOS accepted) are left
    unmasked: transformers pads them.
    """

    def __init__(
        self, constraint: Constraint, prompt_length: Optional[int] = None, max_new_tokens: Optional[int] = None
    ) -> None:
        self.constraint = constraint
        self.max_new_tokens = max_new_tokens
        self._fixed_prompt = prompt_length
        # Every row starts as a fork of this matcher: made once, so a budget too small fails
        # now, not in the middle of generate, and closing's proof from the start runs once.
        self._start = constraint.matcher(max_tokens=max_new_tokens)
        self.reset()

    def reset(self) -> None:
        """Forgets every row: the next call starts a new generation."""
        self.prompt_length: Optional[int] = self._fixed_prompt
        self._last_len: Optional[int] = None
        self._matchers: Dict[Tuple[int, ...], Optional[Matcher]] = {}
        self._mask: Any = None
        self._eos: int = self.constraint.eos_token_ids[0]
        self._warned = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        seq_len = int(input_ids.shape[1])
        if self._last_len is not None and seq_len != self._last_len + 1:
            self.reset()
        if self.prompt_length is None:
            self.prompt_length = seq_len
        self._last_len = seq_len
        rows = input_ids[:, self.prompt_length :].tolist()
        prefixes = [tuple(r) for r in rows]
        # How many rows continue each parent prefix: the last one takes the matcher, the
        # others fork it.
        wanted: Dict[Tuple[int, ...], int] = {}
        for p in prefixes:
            if p not in self._matchers and p:
                wanted[p[:-1]] = wanted.get(p[:-1], 0) + 1
        current: Dict[Tuple[int, ...], Optional[Matcher]] = {}
        live: List[Matcher] = []
        live_rows: List[int] = []
        ended: List[Tuple[int, int]] = []
        for i, p in enumerate(prefixes):
            if p in current:
                m = current[p]
            elif p in self._matchers:
                m = self._matchers[p]
            else:
                m = self._advance(p, wanted)
            current[p] = m
            if m is None:
                ended.append((i, self._eos))
            elif m.is_terminated():
                ended.append((i, m.tokens[-1]))
            else:
                live.append(m)
                live_rows.append(i)
        self._matchers = current
        batch = scores.shape[0]
        if self._mask is None or self._mask.shape[0] < batch:
            self._mask = allocate_token_bitmask(batch, self.constraint.vocab_size)
        mask = self._mask[:batch]
        mask[:] = -1
        # A row that accepted an end-of-generation id transformers does not stop on keeps
        # repeating that id (decoding with skip_special_tokens drops it).
        for r, eos in ended:
            mask[r] = 0
            mask[r, eos // 32] = (1 << (eos % 32)) - (1 << 32 if eos % 32 == 31 else 0)
        ended_rows = [r for r, _ in ended]
        if not live and not ended:
            return scores
        # One matcher may serve several identical rows: fill it once, copy the row.
        unique: Dict[int, int] = {}
        fill_m: List[Matcher] = []
        fill_rows: List[int] = []
        for m, r in zip(live, live_rows):
            if id(m) not in unique:
                unique[id(m)] = r
                fill_m.append(m)
                fill_rows.append(r)
        if fill_m:
            fill_next_token_bitmasks(fill_m, mask, fill_rows)
        for m, r in zip(live, live_rows):
            src = unique[id(m)]
            if src != r:
                mask[r] = mask[src]
        apply_token_bitmask_inplace(scores, _as_like(mask, scores), sorted(live_rows + ended_rows))
        return scores

    def _advance(self, prefix: Tuple[int, ...], wanted: Dict[Tuple[int, ...], int]) -> Optional[Matcher]:
        """The matcher for ``prefix``: its parent's, advanced by the last token; None for a
        dead row (a token the mask had refused)."""
        if not prefix:
            return self._start.fork()
        parent_key = prefix[:-1]
        if parent_key in self._matchers and self._matchers[parent_key] is None:
            return None  # the row was dead already
        parent = self._matchers.get(parent_key)
        if parent is None:
            # Not seen (a processor reused across calls, or rows it never masked): replay.
            m = self._start.fork()
            for t in prefix:
                if m.is_terminated():
                    return m  # a finished row being padded
                if not m.accept_token(t):
                    return self._refused(prefix, t)
            return m
        left = wanted.get(parent_key, 1)
        if left > 1:
            wanted[parent_key] = left - 1
            m = parent.fork()
        else:
            m = parent
            self._matchers.pop(parent_key, None)
        if m.is_terminated():
            return m  # a finished row being padded
        if not m.accept_token(prefix[-1]):
            return self._refused(prefix, prefix[-1])
        return m

    def _refused(self, prefix: Tuple[int, ...], token: int) -> None:
        """A row holds a token the mask refused. Beam sampling does this: it draws more
        candidates than there are allowed tokens, and the extra ones (probability 0, beam
        score -inf) can fill a beam, which is then never returned. The row is dead: it is
        allowed only an end-of-generation id from now on. Anywhere else it means the mask
        was not applied before sampling, hence the warning."""
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"constrain.hf: token {token} after {len(prefix) - 1} generated tokens is not allowed by "
                "the constraint (expected only for beams with score -inf under beam sampling; otherwise, "
                "is this processor applied before sampling?)",
                RuntimeWarning,
                stacklevel=3,
            )
        return None


def _as_like(mask: Any, scores: Any) -> Any:
    """The numpy mask as a tensor on the scores' device, when scores is a tensor."""
    if type(scores).__module__.startswith("torch"):
        import torch

        return torch.from_numpy(mask).to(scores.device)
    return mask
