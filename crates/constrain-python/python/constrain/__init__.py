"""constrain: constrained decoding for LLMs (JSON Schema, GBNF, regex), from Python.

The engine is Rust (the ``constrain`` crate); this package exposes it in the names XGrammar
and llguidance users know::

    import constrain
    tok = constrain.Tokenizer.from_file("tokenizer.json")   # or .from_gguf(path), .from_hf(hf_tok)
    c = constrain.Constraint.json_schema(schema, tok)         # dict or str; .gbnf(text, tok), .regex(p, tok)
    m = c.matcher()
    mask = constrain.allocate_token_bitmask(1, tok.vocab_size)
    m.fill_next_token_bitmask(mask, 0)
    constrain.apply_token_bitmask_inplace(logits, mask)        # then sample token t
    m.accept_token(t)

Adapters: :mod:`constrain.hf` (a transformers ``LogitsProcessor``) and :mod:`constrain.vllm`
(vLLM v1's structured-output backend and grammar interface). With a GGUF model and no
torch, :class:`Generator` runs the engine's own llama.cpp decode loop::

    g = constrain.Generator("model.gguf")                     # or Generator() for the default model
    c = constrain.Constraint.json_schema(schema, g.tokenizer)
    text = g.generate("Invent a person.", c, max_tokens=200)
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ._constrain import (
    ConstrainError,
    Constraint,
    Generator,
    GrammarError,
    LimitError,
    Matcher,
    SchemaError,
    Tokenizer,
    TokenizerError,
    allocate_token_bitmask,
    fill_next_token_bitmasks,
)

__all__ = [
    "ConstrainError",
    "Constraint",
    "Generator",
    "GrammarError",
    "LimitError",
    "Matcher",
    "SchemaError",
    "Tokenizer",
    "TokenizerError",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmasks",
    "unpack_token_bitmask",
]


def unpack_token_bitmask(bitmask: Any, vocab_size: Optional[int] = None) -> Any:
    """Turns an int32 bitmask ``[batch, words]`` (numpy) into a boolean array
    ``[batch, vocab_size]`` (default: ``words * 32``): True where the token is allowed."""
    import numpy as np

    arr = np.ascontiguousarray(bitmask, dtype=np.int32)
    bits = np.unpackbits(arr.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    if vocab_size is not None:
        bits = bits[..., :vocab_size]
    return bits


def apply_token_bitmask_inplace(logits: Any, bitmask: Any, indices: Optional[Sequence[int]] = None) -> None:
    """Sets ``logits[i, t] = -inf`` wherever bit ``t`` of ``bitmask[i]`` is 0, in place.

    ``logits`` is a numpy array or a torch tensor (any float dtype, any device) of shape
    ``[batch, vocab]`` or ``[vocab]``; ``bitmask`` the matching int32 array or tensor
    ``[batch, words]``. Tokens past ``words * 32`` are masked out. With ``indices`` (as in
    XGrammar), only those rows are masked: row ``i`` of ``logits`` by row ``i`` of
    ``bitmask``, for each ``i`` in ``indices``.
    """
    if _is_torch(logits):
        _apply_torch(logits, bitmask, indices)
        return
    import numpy as np

    if not isinstance(logits, np.ndarray):
        raise TypeError("logits must be a numpy array or a torch tensor")
    flat = logits if logits.ndim == 2 else logits[None, :]
    mask = np.asarray(_to_numpy(bitmask), dtype=np.int32)
    if mask.ndim == 1:
        mask = mask[None, :]
    vocab = flat.shape[-1]
    allowed = unpack_token_bitmask(mask)
    if allowed.shape[-1] < vocab:
        pad = np.zeros((allowed.shape[0], vocab - allowed.shape[-1]), dtype=bool)
        allowed = np.concatenate([allowed, pad], axis=-1)
    allowed = allowed[:, :vocab]
    rows = range(flat.shape[0]) if indices is None else indices
    for r in rows:
        flat[r][~allowed[r]] = -np.inf


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _to_numpy(x: Any) -> Any:
    if _is_torch(x):
        return x.detach().cpu().numpy()
    return x


def _apply_torch(logits: Any, bitmask: Any, indices: Optional[Sequence[int]]) -> None:
    import torch

    mask = bitmask if _is_torch(bitmask) else torch.from_numpy(bitmask)
    mask = mask.to(device=logits.device, dtype=torch.int32)
    flat = logits if logits.dim() == 2 else logits.unsqueeze(0)
    if mask.dim() == 1:
        mask = mask.unsqueeze(0)
    vocab = flat.shape[-1]
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((mask.unsqueeze(-1) >> shifts) & 1).bool().reshape(mask.shape[0], -1)
    if allowed.shape[-1] < vocab:
        pad = torch.zeros((allowed.shape[0], vocab - allowed.shape[-1]), dtype=torch.bool, device=logits.device)
        allowed = torch.cat([allowed, pad], dim=-1)
    allowed = allowed[:, :vocab]
    if indices is None:
        flat.masked_fill_(~allowed[: flat.shape[0]], float("-inf"))
    else:
        idx = torch.as_tensor(list(indices), device=logits.device, dtype=torch.long)
        flat[idx] = flat[idx].masked_fill(~allowed[idx], float("-inf"))
