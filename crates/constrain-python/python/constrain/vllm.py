"""vLLM v1's structured-output backend interface, implemented with constrain.

vLLM (v1 engine) talks to a grammar backend through two objects; these classes have its
method names and semantics, so the scheduler's call sequence works unchanged:

- :class:`ConstrainBackend` — ``compile_grammar(request_type, grammar_spec)``,
  ``allocate_token_bitmask(max_num_seqs)`` (int32 ``[n, ceil(V/32)]``, every bit set),
  ``destroy()``.
- :class:`ConstrainGrammar` — ``accept_tokens(request_id, tokens) -> bool``,
  ``validate_tokens(tokens) -> list[int]`` (the accepted prefix; the state does not move),
  ``rollback(num_tokens)``, ``fill_bitmask(bitmask, batch_index)``, ``is_terminated()``,
  ``reset()``. With speculative decoding vLLM validates the draft tokens, then for each draft
  position accepts the token, fills that position's row, and finally rolls them all back.

vLLM is not imported here: the classes are plain Python (vLLM's own backends subclass its
abstract base classes, which only declare these methods). vLLM chooses its backend from a
fixed list, so using this one inside vLLM needs a small patch there; what is tested here
(``tests/test_vllm_protocol.py``) is the protocol, driven as vLLM's scheduler drives it,
with no GPU and no vLLM.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Sequence

from . import Constraint, Matcher, Tokenizer, allocate_token_bitmask

__all__ = ["ConstrainBackend", "ConstrainGrammar"]

_REGEX_META = set("\\.+*?()|[]{}^$#&-~")


def choice_regex(choices: Sequence[str]) -> str:
    """A regex (Rust syntax) matching exactly one of ``choices``."""
    return "|".join("".join("\\" + ch if ch in _REGEX_META else ch for ch in c) for c in choices)


class ConstrainGrammar:
    """One request's grammar state, with vLLM v1's ``StructuredOutputGrammar`` methods."""

    def __init__(self, matcher: Matcher, vocab_size: int) -> None:
        self.matcher = matcher
        self.vocab_size = vocab_size
        self.num_processed_tokens = 0
        self._is_terminated = False

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        """Advances by ``tokens``; False at the first one refused (those before it stay
        accepted, as in vLLM's XGrammar backend). False once terminated."""
        if self._is_terminated:
            return False
        for t in tokens:
            if not self.matcher.accept_token(t):
                return False
            self.num_processed_tokens += 1
        self._is_terminated = self.matcher.is_terminated()
        return True

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        """The longest prefix of ``tokens`` the grammar accepts; the state does not move."""
        if self._is_terminated:
            return []
        n = self.matcher.validate_tokens(tokens)
        return list(tokens[:n])

    def rollback(self, num_tokens: int) -> None:
        """Undoes the last ``num_tokens`` accepted tokens."""
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens
        self._is_terminated = self.matcher.is_terminated()

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Writes the allowed next tokens into row ``idx`` of ``bitmask`` (int32, CPU)."""
        self.matcher.fill_next_token_bitmask(bitmask, idx)

    def is_terminated(self) -> bool:
        """Whether an end-of-generation token was accepted."""
        return self._is_terminated

    def reset(self) -> None:
        """Back to the start of the grammar."""
        self.num_processed_tokens = 0
        self._is_terminated = False
        self.matcher.reset()

    def fork(self) -> "ConstrainGrammar":
        """An independent copy in the same state (for beam search; see ``Matcher.fork``)."""
        g = ConstrainGrammar(self.matcher.fork(), self.vocab_size)
        g.num_processed_tokens = self.num_processed_tokens
        g._is_terminated = self._is_terminated
        return g


class ConstrainBackend:
    """vLLM v1's ``StructuredOutputBackend`` over constrain.

    Built from a :class:`constrain.Tokenizer`, or from vLLM's objects: ``tokenizer`` may be a
    transformers tokenizer (converted with ``Tokenizer.from_hf``); ``vocab_size`` is the
    model's logits width. ``options`` are passed to ``Constraint.json_schema`` (e.g.
    ``whitespace="compact"``). Compiled constraints are cached by the engine.
    """

    def __init__(
        self,
        vllm_config: Any = None,
        tokenizer: Any = None,
        vocab_size: Optional[int] = None,
        **options: Any,
    ) -> None:
        if tokenizer is None:
            raise ValueError("ConstrainBackend needs a tokenizer")
        if isinstance(tokenizer, Tokenizer):
            if vocab_size is not None and vocab_size != tokenizer.vocab_size:
                raise ValueError(
                    f"vocab_size {vocab_size} differs from the tokenizer's {tokenizer.vocab_size}: "
                    "build the Tokenizer with vocab_size="
                )
            self.tokenizer = tokenizer
        else:
            self.tokenizer = Tokenizer.from_hf(tokenizer, vocab_size=vocab_size)
        self.vllm_config = vllm_config
        self.vocab_size = self.tokenizer.vocab_size
        self.options = options

    def compile_grammar(self, request_type: Any, grammar_spec: str) -> ConstrainGrammar:
        """Compiles ``grammar_spec`` as vLLM's ``StructuredOutputOptions`` member
        ``request_type`` says (or its name as a string): ``JSON`` (a schema as JSON text),
        ``JSON_OBJECT`` (any object), ``REGEX``, ``GRAMMAR`` (GBNF), ``CHOICE`` (a JSON list
        of strings). ``STRUCTURAL_TAG`` is refused (ValueError)."""
        kind = getattr(request_type, "name", str(request_type)).upper().split(".")[-1]
        if kind == "JSON":
            c = Constraint.json_schema(grammar_spec, self.tokenizer, **self.options)
        elif kind == "JSON_OBJECT":
            c = Constraint.json_schema({"type": "object"}, self.tokenizer, **self.options)
        elif kind == "REGEX":
            c = Constraint.regex(grammar_spec, self.tokenizer)
        elif kind == "GRAMMAR":
            c = Constraint.gbnf(grammar_spec, self.tokenizer)
        elif kind == "CHOICE":
            choices = json.loads(grammar_spec) if isinstance(grammar_spec, str) else list(grammar_spec)
            c = Constraint.regex(choice_regex(choices), self.tokenizer)
        else:
            raise ValueError(f"constrain: unsupported structured-output request type {kind}")
        return ConstrainGrammar(c.matcher(), self.vocab_size)

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """An int32 bitmask ``[max_num_seqs, ceil(vocab_size / 32)]``, every bit set: a torch
        tensor when torch is installed (as vLLM expects), else a numpy array."""
        mask = allocate_token_bitmask(max_num_seqs, self.vocab_size)
        try:
            import torch
        except ImportError:
            return mask
        return torch.from_numpy(mask)

    def destroy(self) -> None:
        """Releases nothing: compiled constraints live in the engine's cache."""
