"""Type stubs of the extension module ``constrain._constrain`` (re-exported by ``constrain``)."""

from os import PathLike
from typing import Any, Dict, List, Optional, Sequence, Union

class ConstrainError(Exception):
    """Base class of every error constrain raises."""

class SchemaError(ConstrainError):
    """A JSON Schema that cannot be compiled."""

    pointer: str
    """JSON pointer of the offending keyword (empty when the whole schema is at fault)."""
    keyword: str
    """The offending keyword's name."""
    message: str
    """The message, without the pointer."""

class GrammarError(ConstrainError):
    """A GBNF grammar or regular expression that cannot be compiled."""

class LimitError(ConstrainError):
    """A budget of the engine ran out; raise it with the matching keyword option."""

class TokenizerError(ConstrainError):
    """A tokenizer file that cannot be read."""

class Tokenizer:
    """A tokenizer's vocabulary as bytes, with its shared mask cache. Thread-safe."""

    @staticmethod
    def from_file(
        path: Union[str, PathLike[str]], *, eos_token_ids: Optional[Sequence[int]] = None, vocab_size: Optional[int] = None
    ) -> Tokenizer:
        """Loads a Hugging Face ``tokenizer.json`` file."""
    @staticmethod
    def from_json(json: str, *, eos_token_ids: Optional[Sequence[int]] = None, vocab_size: Optional[int] = None) -> Tokenizer:
        """A tokenizer from the text of a ``tokenizer.json`` file."""
    @staticmethod
    def from_gguf(
        path: Union[str, PathLike[str]], *, eos_token_ids: Optional[Sequence[int]] = None, vocab_size: Optional[int] = None
    ) -> Tokenizer:
        """Reads the tokenizer in a GGUF model file's metadata (gpt2 and llama tokenizers)."""
    @staticmethod
    def from_tokens(
        tokens: Sequence[bytes],
        *,
        eos_token_ids: Sequence[int],
        special_token_ids: Sequence[int] = ...,
        vocab_size: Optional[int] = None,
    ) -> Tokenizer:
        """A tokenizer from each token's bytes, the special ids and the end-of-generation ids."""
    @staticmethod
    def from_hf(tokenizer: Any, *, eos_token_ids: Optional[Sequence[int]] = None, vocab_size: Optional[int] = None) -> Tokenizer:
        """The tokenizer of a transformers fast tokenizer object."""
    @property
    def vocab_size(self) -> int:
        """Width of the masks in tokens."""
    @property
    def num_tokens(self) -> int:
        """Number of ids the tokenizer defines."""
    @property
    def mask_words(self) -> int:
        """int32 words in one mask row: ``ceil(vocab_size / 32)``."""
    @property
    def eos_token_ids(self) -> List[int]:
        """The end-of-generation ids, sorted."""
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token emits (empty for special and unknown ids)."""
    def is_special(self, token_id: int) -> bool:
        """Whether a token is special (control), which no constraint allows."""

class Constraint:
    """A grammar compiled against one tokenizer: immutable, shareable across threads."""

    @staticmethod
    def json_schema(
        schema: Union[Dict[str, Any], bool, str],
        tokenizer: Tokenizer,
        *,
        whitespace: str = "pretty",
        draft: Union[int, str, None] = None,
        runtime_checks: bool = True,
        strict: bool = False,
        lenient: bool = False,
        max_fuel: Optional[int] = None,
        max_states: Optional[int] = None,
        max_parse_stacks: Optional[int] = None,
        max_stack_depth: Optional[int] = None,
        max_mask_fuel: Optional[int] = None,
        max_grammar_size: Optional[int] = None,
    ) -> Constraint:
        """Compiles a JSON Schema; raises SchemaError (with ``.pointer``) or LimitError."""
    @staticmethod
    def gbnf(
        grammar: str,
        tokenizer: Tokenizer,
        *,
        max_fuel: Optional[int] = None,
        max_states: Optional[int] = None,
        max_parse_stacks: Optional[int] = None,
        max_stack_depth: Optional[int] = None,
        max_mask_fuel: Optional[int] = None,
        max_grammar_size: Optional[int] = None,
    ) -> Constraint:
        """Compiles a GBNF grammar (start rule ``root``)."""
    @staticmethod
    def regex(
        pattern: str,
        tokenizer: Tokenizer,
        *,
        max_fuel: Optional[int] = None,
        max_states: Optional[int] = None,
        max_parse_stacks: Optional[int] = None,
        max_stack_depth: Optional[int] = None,
        max_mask_fuel: Optional[int] = None,
        max_grammar_size: Optional[int] = None,
    ) -> Constraint:
        """Compiles a regular expression (Rust syntax) the whole output must match."""
    def matcher(self, *, max_tokens: Optional[int] = None) -> Matcher:
        """A fresh matcher at the start of the grammar. With ``max_tokens``, closing mode:
        the masks keep the output finishable within that many accepted tokens, and end it
        once complete and closing. Raises ``LimitError`` when the budget is too small."""
    @property
    def vocab_size(self) -> int:
        """Width of the masks in tokens."""
    @property
    def eos_token_ids(self) -> List[int]:
        """The end-of-generation ids of its tokenizer, sorted."""
    @property
    def notes(self) -> List[str]:
        """Where a schema compiled as a documented subset, and warnings."""
    @property
    def memory_usage(self) -> int:
        """Approximate heap bytes of the compiled automaton."""
    def min_tokens_from_start(self) -> Optional[int]:
        """Tokens of a shortest complete output (EOS not counted)."""

class Matcher:
    """Per-sequence state: which tokens may come next."""

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Writes the allowed tokens of the next position into row ``index`` of ``bitmask``."""
    def accept_token(self, token: int) -> bool:
        """Advances by one token; False (state unchanged) if it is not allowed."""
    def accept_tokens(self, tokens: Sequence[int]) -> bool:
        """Accepts tokens in order; False at the first refused one."""
    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """Length of the accepted prefix of ``tokens``; the state does not move."""
    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last ``num_tokens`` accepted tokens."""
    def fork(self) -> Matcher:
        """An independent matcher in the same state; costs the same at any length (shared history, copy on write, no replay)."""
    def reset(self) -> None:
        """Back to the start of the grammar."""
    def is_terminated(self) -> bool:
        """Whether an end-of-generation token was accepted."""
    def is_accepting(self) -> bool:
        """Whether the output so far is complete."""
    def is_finished(self) -> bool:
        """Whether nothing but EOS can follow, or EOS was accepted."""
    def find_jump_forward_string(self) -> str:
        """The text the grammar dictates next (empty when there is a choice)."""
    def find_jump_forward_bytes(self) -> bytes:
        """The bytes the grammar dictates next, not cut at a character boundary."""
    def min_tokens_to_finish(self) -> Optional[int]:
        """Tokens of a shortest completion of the output so far (EOS not counted)."""
    @property
    def num_tokens(self) -> int:
        """Number of tokens accepted so far."""
    @property
    def tokens(self) -> List[int]:
        """The tokens accepted so far."""

class Generator:
    """A GGUF model loaded with llama.cpp, generating under a constraint (the CLI's decode
    loop: mask before the warpers, closing mode, backtracking). Compile constraints against
    ``generator.tokenizer``. Calls are serialised; the GIL is released while generating."""
    def __init__(
        self,
        model_path: Optional[str] = None,
        *,
        n_ctx: int = 4096,
        threads: Optional[int] = None,
        chat_template: bool = True,
    ) -> None:
        """Loads ``model_path`` (default: the default model, fetched on first use)."""
    @property
    def tokenizer(self) -> Tokenizer:
        """The model's vocabulary."""
    def generate(
        self,
        prompt: str,
        constraint: Optional[Constraint] = None,
        *,
        system: Optional[str] = None,
        max_tokens: int = 256,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        seed: Optional[int] = None,
        beams: int = 0,
        close: bool = True,
    ) -> str:
        """A reply to ``prompt`` that ``constraint`` accepts (free text without one).
        Raises ``LimitError`` when it cannot be completed within ``max_tokens``."""

def fill_next_token_bitmasks(matchers: Sequence[Matcher], bitmask: Any, indices: Optional[Sequence[int]] = None) -> None:
    """Fills row ``indices[i]`` (default ``i``) for ``matchers[i]`` on a thread pool, GIL
    released; a batch whose last fills were cheap (under 4 µs together) is filled on the
    calling thread."""

def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Any:
    """An int32 numpy array ``[batch_size, ceil(vocab_size / 32)]``, every bit set."""
