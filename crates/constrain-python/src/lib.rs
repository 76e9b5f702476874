//! # constrain-python
//!
//! The Python extension module `constrain._constrain`, built by maturin: the engine's
//! [`constrain::Vocabulary`] / [`constrain::Constraint`] / [`constrain::Matcher`] as the
//! Python classes `Tokenizer`, `Constraint` and `Matcher`, in the names XGrammar and
//! llguidance users know (`fill_next_token_bitmask`, `accept_token`, `rollback`, …).
//!
//! Input: Python objects (a schema as a `dict` or JSON text, a GBNF text, a regex, token
//! ids, an `int32` bitmask as a numpy array or a CPU torch tensor). Output: bits written
//! straight into that buffer, booleans, and Python exceptions for every error
//! (`SchemaError` with the keyword's JSON pointer, `LimitError`, `GrammarError`,
//! `ConstrainError` their base); no panic crosses into Python (pyo3 turns one into
//! `PanicException`, and none is expected: the engine reports errors as values).
//!
//! Cost: the hot path — `Matcher.fill_next_token_bitmask` then
//! `Matcher.accept_token` — allocates nothing here: the mask row is the caller's buffer,
//! borrowed for the call. `fill_next_token_bitmasks` fills one row per matcher on a
//! thread pool with the GIL released. Compiling is cached per tokenizer, constraint kind,
//! options and text (up to 256 entries).
//!
//! The pure-Python package (`python/constrain`) wraps this module and adds the
//! transformers and vLLM adapters; the neighbouring crates are the facade `constrain` (all
//! this module calls) and nothing else.

// Writing into a caller's numpy array or torch tensor needs its raw data pointer, as the
// other grammar engines' Python packages do; each use is bounds-checked against the
// array's shape, and explained where it is.
#![allow(unsafe_code)]

mod gguf;

use constrain::closing::Closer;
use constrain::schema::{self, dialect::Draft, Whitespace};
use constrain::util::ForkVec;
use constrain::{Limits, TokenId, TokenIndex, Vocabulary};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

create_exception!(_constrain, ConstrainError, PyException, "Base class of every error constrain raises.");
create_exception!(
    _constrain,
    SchemaError,
    ConstrainError,
    "A JSON Schema that cannot be compiled. `.pointer` is the JSON pointer of the offending \
     keyword (empty when the whole schema is at fault), `.keyword` its name."
);
create_exception!(
    _constrain,
    GrammarError,
    ConstrainError,
    "A GBNF grammar or regular expression that cannot be compiled."
);
create_exception!(
    _constrain,
    LimitError,
    ConstrainError,
    "A budget of the engine ran out (compile fuel, automaton states, stack depth, parse stacks, \
     mask fuel). Raise it with the matching keyword option."
);
create_exception!(_constrain, TokenizerError, ConstrainError, "A tokenizer file that cannot be read.");

/// Compiled constraints kept by the cache (the least recently used go first; their bytes
/// are bounded by the default memory budget's constraint share too).
const CACHE_ENTRIES: usize = 256;

// ---------------------------------------------------------------------------------------
// Tokenizer

#[cfg(feature = "llama")]
mod generator;

static NEXT_TOKENIZER: AtomicU64 = AtomicU64::new(1);

/// A tokenizer's vocabulary as bytes, with its shared mask cache.
///
/// Build one per tokenizer and reuse it: every constraint compiled against it shares the
/// per-state mask cache. Thread-safe.
#[pyclass(frozen, module = "constrain")]
struct Tokenizer {
    index: Arc<TokenIndex>,
    /// Distinguishes tokenizers in the constraint cache.
    id: u64,
}

fn tokenizer_err(e: impl std::fmt::Display) -> PyErr {
    TokenizerError::new_err(e.to_string())
}

fn eos_ids(eos: Option<Vec<u32>>) -> Option<Vec<TokenId>> {
    eos.map(|v| v.into_iter().map(TokenId).collect())
}

impl Tokenizer {
    fn wrap(vocab: Vocabulary, vocab_size: Option<usize>) -> PyResult<Tokenizer> {
        let vocab = match vocab_size {
            Some(n) => vocab.with_mask_len(n).map_err(tokenizer_err)?,
            None => vocab,
        };
        Ok(Tokenizer { index: TokenIndex::new(vocab), id: NEXT_TOKENIZER.fetch_add(1, Ordering::Relaxed) })
    }
}

#[pymethods]
impl Tokenizer {
    /// Loads a Hugging Face `tokenizer.json` file.
    ///
    /// `eos_token_ids` overrides the end-of-generation ids (guessed from the usual names
    /// otherwise); `vocab_size` widens the masks to the model's logits width (ids past the
    /// tokenizer are never allowed).
    #[staticmethod]
    #[pyo3(signature = (path, *, eos_token_ids=None, vocab_size=None))]
    fn from_file(
        py: Python<'_>,
        path: std::path::PathBuf,
        eos_token_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Tokenizer> {
        let eos = eos_ids(eos_token_ids);
        let vocab = py.allow_threads(|| Vocabulary::from_tokenizer_json(&path, eos.as_deref()));
        Tokenizer::wrap(vocab.map_err(tokenizer_err)?, vocab_size)
    }

    /// A tokenizer from the text of a `tokenizer.json` file (see `from_file`).
    #[staticmethod]
    #[pyo3(signature = (json, *, eos_token_ids=None, vocab_size=None))]
    fn from_json(
        py: Python<'_>,
        json: &str,
        eos_token_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Tokenizer> {
        let eos = eos_ids(eos_token_ids);
        let vocab = py.allow_threads(|| Vocabulary::from_tokenizer_json_bytes(json.as_bytes(), eos.as_deref()));
        Tokenizer::wrap(vocab.map_err(tokenizer_err)?, vocab_size)
    }

    /// Reads the tokenizer stored in a GGUF model file's metadata (no llama.cpp needed):
    /// the same token bytes, special ids and end-of-generation ids the `constrain` command
    /// line gets from llama.cpp for that file. `gpt2` (byte-level BPE) and `llama`
    /// (SentencePiece) tokenizers are supported.
    #[staticmethod]
    #[pyo3(signature = (path, *, eos_token_ids=None, vocab_size=None))]
    fn from_gguf(
        py: Python<'_>,
        path: std::path::PathBuf,
        eos_token_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Tokenizer> {
        let eos = eos_ids(eos_token_ids);
        let vocab = py.allow_threads(|| gguf::load(&path, eos.as_deref()));
        Tokenizer::wrap(vocab.map_err(tokenizer_err)?, vocab_size)
    }

    /// A tokenizer from each token's bytes, the special (control) ids, which a grammar never
    /// produces, and the end-of-generation ids (at least one).
    #[staticmethod]
    #[pyo3(signature = (tokens, *, eos_token_ids, special_token_ids=Vec::new(), vocab_size=None))]
    fn from_tokens(
        tokens: Vec<Vec<u8>>,
        eos_token_ids: Vec<u32>,
        special_token_ids: Vec<u32>,
        vocab_size: Option<usize>,
    ) -> PyResult<Tokenizer> {
        let special: Vec<TokenId> = special_token_ids.into_iter().map(TokenId).collect();
        let eos: Vec<TokenId> = eos_token_ids.into_iter().map(TokenId).collect();
        Tokenizer::wrap(Vocabulary::new(tokens, &special, &eos).map_err(tokenizer_err)?, vocab_size)
    }

    /// Builds the tokenizer of a `transformers` tokenizer object (a fast tokenizer, which
    /// tokenizers loaded from a GGUF file also are): its `tokenizer.json`, with its
    /// `eos_token_id` added to the end-of-generation ids guessed from the usual names.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, *, eos_token_ids=None, vocab_size=None))]
    fn from_hf(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        eos_token_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Tokenizer> {
        let backend = tokenizer.getattr("backend_tokenizer").map_err(|_| {
            PyTypeError::new_err(
                "from_hf needs a fast tokenizer (PreTrainedTokenizerFast): it has no backend_tokenizer",
            )
        })?;
        let json: String = backend.call_method0("to_str")?.extract()?;
        let eos = match eos_token_ids {
            Some(ids) => Some(ids),
            None => {
                let guessed = py
                    .allow_threads(|| Vocabulary::from_tokenizer_json_bytes(json.as_bytes(), None))
                    .map_err(tokenizer_err)?;
                let mut ids: Vec<u32> = guessed.eos_tokens().iter().map(|t| t.0).collect();
                if let Ok(Some(id)) = tokenizer.getattr("eos_token_id").and_then(|v| v.extract::<Option<u32>>()) {
                    if !ids.contains(&id) {
                        ids.push(id);
                        Some(ids)
                    } else {
                        return Tokenizer::wrap(guessed, vocab_size);
                    }
                } else {
                    return Tokenizer::wrap(guessed, vocab_size);
                }
            }
        };
        Tokenizer::from_json(py, &json, eos, vocab_size)
    }

    /// Width of the masks in tokens: the model's logits width when `vocab_size` was given,
    /// else the number of tokenizer ids. Pass it to `allocate_token_bitmask`.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.index.vocab().mask_len()
    }

    /// Number of ids the tokenizer defines (≤ `vocab_size`).
    #[getter]
    fn num_tokens(&self) -> usize {
        self.index.vocab().len()
    }

    /// `int32` words in one mask row: `ceil(vocab_size / 32)`.
    #[getter]
    fn mask_words(&self) -> usize {
        self.index.vocab().mask_words()
    }

    /// The end-of-generation ids, sorted: allowed only where the output may end.
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.index.vocab().eos_tokens().iter().map(|t| t.0).collect()
    }

    /// The bytes token `token_id` emits (empty for special and unknown ids).
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: u32) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.index.vocab().token_bytes(TokenId(token_id)))
    }

    /// Whether `token_id` is a special (control) token, which no constraint allows.
    fn is_special(&self, token_id: u32) -> bool {
        self.index.vocab().is_special(TokenId(token_id))
    }

    fn __repr__(&self) -> String {
        let v = self.index.vocab();
        format!(
            "Tokenizer(num_tokens={}, vocab_size={}, eos_token_ids={:?})",
            v.len(),
            v.mask_len(),
            self.eos_token_ids()
        )
    }
}

// ---------------------------------------------------------------------------------------
// Constraint

/// A grammar compiled against one tokenizer: immutable and shareable across threads.
/// Create one `Matcher` per sequence with `matcher()`.
#[pyclass(frozen, module = "constrain")]
struct Constraint {
    inner: constrain::Constraint,
    /// Notes on where a schema compiled as a documented subset (empty for grammars).
    notes: Vec<String>,
}

/// The budgets a caller may set by keyword; each left `None` keeps the default.
#[derive(Clone, Copy, Debug, Default)]
struct LimitArgs {
    max_fuel: Option<u64>,
    max_states: Option<usize>,
    max_parse_stacks: Option<usize>,
    max_stack_depth: Option<usize>,
    max_mask_fuel: Option<u64>,
    max_grammar_size: Option<usize>,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        let mut l = Limits::default();
        if let Some(n) = self.max_fuel {
            l = l.with_compile_fuel(n);
        }
        if let Some(n) = self.max_states {
            l = l.with_max_automaton_states(n);
        }
        if let Some(n) = self.max_parse_stacks {
            l = l.with_max_parse_stacks(n);
        }
        if let Some(n) = self.max_stack_depth {
            l = l.with_max_stack_depth(n);
        }
        if let Some(n) = self.max_mask_fuel {
            l = l.with_mask_fuel(n);
        }
        if let Some(n) = self.max_grammar_size {
            l = l.with_max_grammar_size(n);
        }
        l
    }
}

/// Which front end a constraint's text goes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Schema,
    Gbnf,
    Regex,
}

type CacheKey = (u64, String);

/// Compiled constraints with their notes, by tokenizer and (kind, options, limits, text).
type Cache = constrain::matcher::ConstraintCache<CacheKey, (constrain::Constraint, Vec<String>)>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Cache::new(CACHE_ENTRIES, constrain::mask::IndexConfig::default().constraint_cache_bytes))
}

/// Maps a failed build of the automaton or its first use to the exception it is.
fn match_err(e: constrain::matcher::Error, kind: Kind) -> PyErr {
    use constrain::automaton::Error as A;
    use constrain::matcher::Error as M;
    match &e {
        M::Limit(_) | M::Automaton(A::TooManyStates { .. } | A::TooLarge(_) | A::Budget { .. }) => {
            LimitError::new_err(e.to_string())
        }
        M::Automaton(_) if kind == Kind::Schema => schema_err("", "", &e.to_string()),
        M::Automaton(_) => GrammarError::new_err(e.to_string()),
        _ => ConstrainError::new_err(e.to_string()),
    }
}

/// A `SchemaError` with `.pointer` and `.keyword` set.
fn schema_err(pointer: &str, keyword: &str, message: &str) -> PyErr {
    let text = if pointer.is_empty() { message.to_string() } else { format!("{pointer}: {message}") };
    Python::with_gil(|py| {
        let err = SchemaError::new_err(text);
        let value = err.value(py);
        let _ = value.setattr("pointer", pointer);
        let _ = value.setattr("keyword", keyword);
        let _ = value.setattr("message", message);
        err
    })
}

fn parse_whitespace(w: &str) -> PyResult<Whitespace> {
    match w {
        "compact" => Ok(Whitespace::Compact),
        "pretty" => Ok(Whitespace::Pretty),
        "unbounded" => Ok(Whitespace::Unbounded),
        _ => Err(PyValueError::new_err(format!("whitespace must be 'compact', 'pretty' or 'unbounded', not {w:?}"))),
    }
}

fn parse_draft(d: &Bound<'_, PyAny>) -> PyResult<Draft> {
    let text: String = match d.extract::<i64>() {
        Ok(n) => n.to_string(),
        Err(_) => d.extract()?,
    };
    text.parse::<Draft>().map_err(|e| PyValueError::new_err(format!("draft: {e}")))
}

/// Compiles `text` as `kind` against `tok`, through the cache.
fn build(
    py: Python<'_>,
    tok: &Tokenizer,
    kind: Kind,
    text: String,
    options: Option<schema::Options>,
    limits: LimitArgs,
) -> PyResult<Constraint> {
    let key = (tok.id, format!("{}\0{:?}\0{:?}\0{}", kind as u8, options, limits, text));
    if let Some((c, notes)) = cache().get(&key) {
        return Ok(Constraint { inner: c, notes });
    }
    let index = Arc::clone(&tok.index);
    let lim = limits.limits();
    enum Failure {
        Schema(schema::Error),
        Json(String),
        Grammar(constrain::grammar::Error),
        Match(constrain::matcher::Error),
    }
    let built = py.allow_threads(|| -> Result<(constrain::Constraint, Vec<String>), Failure> {
        match kind {
            Kind::Schema => {
                let value: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| Failure::Json(format!("the schema is not JSON: {e}")))?;
                let options = options.unwrap_or_default();
                let compiled = schema::compile(&value, &options).map_err(Failure::Schema)?;
                let notes = compiled.notes().iter().map(|n| n.to_string()).collect();
                let c = compiled.constraint(index, &lim).map_err(Failure::Match)?;
                Ok((c, notes))
            }
            Kind::Gbnf | Kind::Regex => {
                let g = if kind == Kind::Gbnf {
                    constrain::grammar::gbnf::parse(&text)
                } else {
                    constrain::grammar::regex::compile_anchored(&text)
                }
                .map_err(Failure::Grammar)?;
                let c = constrain::Constraint::new(&g, index, &lim).map_err(Failure::Match)?;
                Ok((c, Vec::new()))
            }
        }
    });
    let (c, notes) = built.map_err(|f| match f {
        Failure::Schema(e) => schema_err(e.pointer(), e.keyword(), e.message()),
        Failure::Json(m) => schema_err("", "", &m),
        Failure::Grammar(e) => GrammarError::new_err(e.to_string()),
        Failure::Match(e) => match_err(e, kind),
    })?;
    let bytes = c.memory_usage();
    cache().insert(key, (c.clone(), notes.clone()), bytes);
    Ok(Constraint { inner: c, notes })
}

#[pymethods]
impl Constraint {
    /// Compiles a JSON Schema (a `dict`, or its JSON text) against `tokenizer`.
    ///
    /// Keyword options: `whitespace` (`"pretty"`, the library default: bounded
    /// pretty-printing whitespace; `"compact"`: none, as the command line generates;
    /// `"unbounded"`), `draft` (4, 6, 7, `"2019-09"`, `"2020-12"`; default: the schema's
    /// `$schema`), `runtime_checks` (default true: keywords no grammar can say are checked
    /// as each value completes; false refuses them), `strict` (forbid unnamed properties),
    /// `lenient` (ignore unsupported keywords: may accept invalid output), and the budgets
    /// `max_fuel`, `max_states`, `max_parse_stacks`, `max_stack_depth`, `max_mask_fuel`,
    /// `max_grammar_size`. Results are cached by schema text, options and tokenizer.
    ///
    /// Raises `SchemaError` (with `.pointer`) or `LimitError`.
    #[staticmethod]
    #[pyo3(signature = (schema, tokenizer, *, whitespace="pretty", draft=None, runtime_checks=true, strict=false,
        lenient=false, max_fuel=None, max_states=None, max_parse_stacks=None, max_stack_depth=None,
        max_mask_fuel=None, max_grammar_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn json_schema(
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        tokenizer: &Tokenizer,
        whitespace: &str,
        draft: Option<&Bound<'_, PyAny>>,
        runtime_checks: bool,
        strict: bool,
        lenient: bool,
        max_fuel: Option<u64>,
        max_states: Option<usize>,
        max_parse_stacks: Option<usize>,
        max_stack_depth: Option<usize>,
        max_mask_fuel: Option<u64>,
        max_grammar_size: Option<usize>,
    ) -> PyResult<Constraint> {
        let text: String = match schema.extract::<String>() {
            Ok(s) => s,
            Err(_)
                if schema.is_instance_of::<PyDict>()
                    || schema.is_instance_of::<PyList>()
                    || schema.extract::<bool>().is_ok() =>
            {
                py.import("json")?.call_method1("dumps", (schema,))?.extract()?
            }
            Err(_) => return Err(PyTypeError::new_err("schema must be a dict, a bool or JSON text (str)")),
        };
        let draft = draft.filter(|d| !d.is_none()).map(parse_draft).transpose()?;
        let options = schema::Options::default()
            .with_whitespace(parse_whitespace(whitespace)?)
            .with_draft(draft)
            .with_runtime_checks(runtime_checks)
            .with_strict(strict)
            .with_lenient(lenient);
        let limits =
            LimitArgs { max_fuel, max_states, max_parse_stacks, max_stack_depth, max_mask_fuel, max_grammar_size };
        build(py, tokenizer, Kind::Schema, text, Some(options), limits)
    }

    /// Compiles a GBNF grammar (llama.cpp's dialect, start rule `root`) against `tokenizer`.
    /// Budgets as in `json_schema`. Raises `GrammarError` or `LimitError`.
    #[staticmethod]
    #[pyo3(signature = (grammar, tokenizer, *, max_fuel=None, max_states=None, max_parse_stacks=None,
        max_stack_depth=None, max_mask_fuel=None, max_grammar_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn gbnf(
        py: Python<'_>,
        grammar: String,
        tokenizer: &Tokenizer,
        max_fuel: Option<u64>,
        max_states: Option<usize>,
        max_parse_stacks: Option<usize>,
        max_stack_depth: Option<usize>,
        max_mask_fuel: Option<u64>,
        max_grammar_size: Option<usize>,
    ) -> PyResult<Constraint> {
        let limits =
            LimitArgs { max_fuel, max_states, max_parse_stacks, max_stack_depth, max_mask_fuel, max_grammar_size };
        build(py, tokenizer, Kind::Gbnf, grammar, None, limits)
    }

    /// Compiles a regular expression (Rust `regex` syntax) that the whole output must match.
    /// Budgets as in `json_schema`. Raises `GrammarError` or `LimitError`.
    #[staticmethod]
    #[pyo3(signature = (pattern, tokenizer, *, max_fuel=None, max_states=None, max_parse_stacks=None,
        max_stack_depth=None, max_mask_fuel=None, max_grammar_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn regex(
        py: Python<'_>,
        pattern: String,
        tokenizer: &Tokenizer,
        max_fuel: Option<u64>,
        max_states: Option<usize>,
        max_parse_stacks: Option<usize>,
        max_stack_depth: Option<usize>,
        max_mask_fuel: Option<u64>,
        max_grammar_size: Option<usize>,
    ) -> PyResult<Constraint> {
        let limits =
            LimitArgs { max_fuel, max_states, max_parse_stacks, max_stack_depth, max_mask_fuel, max_grammar_size };
        build(py, tokenizer, Kind::Regex, pattern, None, limits)
    }

    /// A fresh matcher at the start of the grammar, for one sequence.
    ///
    /// With `max_tokens`, closing mode applies: the output must be complete within that
    /// many accepted tokens (EOS not needed), so as the budget runs low the masks keep only
    /// tokens after which the output can still be finished in the tokens left, and once the
    /// output is complete and closing, only end-of-generation ids. Raises `LimitError` when
    /// the budget is below what the shortest output takes.
    #[pyo3(signature = (*, max_tokens=None))]
    fn matcher(&self, max_tokens: Option<usize>) -> PyResult<Matcher> {
        let budget = match max_tokens {
            None => None,
            Some(max_tokens) => {
                let closer = Closer::new(&self.inner, true, max_tokens, usize::MAX)
                    .map_err(|e| LimitError::new_err(e.to_string()))?;
                Some(Budget { closer, max_tokens })
            }
        };
        Ok(Matcher::new(self.inner.matcher(), budget))
    }

    /// Width of the masks in tokens (the tokenizer's `vocab_size`).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.index().vocab().mask_len()
    }

    /// The end-of-generation ids of its tokenizer, sorted.
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.index().vocab().eos_tokens().iter().map(|t| t.0).collect()
    }

    /// Where a schema compiled as a documented subset, and warnings, one line each.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// Approximate heap bytes of the compiled automaton (the shared mask cache excluded).
    #[getter]
    fn memory_usage(&self) -> usize {
        self.inner.memory_usage()
    }

    /// The tokens of a shortest complete output (an upper bound on the fewest any output
    /// takes, EOS not counted); `None` if none can be spelled with single-byte tokens.
    fn min_tokens_from_start(&self) -> PyResult<Option<u64>> {
        self.inner.min_tokens_from_start().map_err(|e| match_err(e, Kind::Gbnf))
    }
}

// ---------------------------------------------------------------------------------------
// Matcher

/// Per-sequence state: which tokens may come next, given those accepted so far.
///
/// Create one per sequence. Calls from several threads on one matcher are serialised by a
/// lock; a batch fill that finds one in use raises ValueError.
#[pyclass(frozen, module = "constrain")]
struct Matcher {
    state: Mutex<State>,
}

/// A matcher's state behind its lock.
struct State {
    m: constrain::Matcher,
    /// Every token accepted, EOS included, in order (shared with forks, copy on write).
    history: ForkVec<u32>,
    /// Closing mode, when the matcher was made with a token budget.
    budget: Option<Budget>,
    /// How long this matcher's last batch fill took (`None`: not yet known):
    /// `fill_next_token_bitmasks` fills a batch whose fills are cheap on the calling thread.
    fill_cost: Option<std::time::Duration>,
}

/// A token budget and its closing mode: the masks keep the output finishable within
/// `max_tokens` tokens in all ([`Closer::narrow_before_sampling`]).
#[derive(Clone)]
struct Budget {
    closer: Closer,
    max_tokens: usize,
}

/// How close to the distance the budget may come before every allowed token is tried for
/// what it leaves ([`Closer::narrow_before_sampling`]): a token step per allowed token on
/// each of these last steps, for tokens that lengthen the distance by up to this much.
const CLOSING_MARGIN: usize = 32;

impl Matcher {
    fn new(m: constrain::Matcher, budget: Option<Budget>) -> Matcher {
        Matcher { state: Mutex::new(State { m, history: ForkVec::new(), budget, fill_cost: None }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock means a panic inside the engine, which reports errors as values;
        // the state is still the last consistent one (each step is all or nothing).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn accept(&mut self, token: u32) -> PyResult<bool> {
        match self.m.accept_token(TokenId(token)) {
            Ok(()) => {
                self.history.push(token);
                if let Some(b) = &mut self.budget {
                    b.closer.forced(&self.m, &[TokenId(token)]);
                }
                Ok(true)
            }
            Err(constrain::matcher::Error::Rejected(_) | constrain::matcher::Error::Finished) => Ok(false),
            Err(e) => Err(match_err(e, Kind::Gbnf)),
        }
    }

    fn fill_row(&mut self, row: &mut [u32]) -> Result<(), constrain::matcher::Error> {
        let words = self.m.constraint().index().vocab().mask_words();
        let (ours, rest) = row.split_at_mut(words.min(row.len()));
        rest.fill(0);
        self.m.fill_mask(ours)?;
        if self.terminated() {
            return Ok(()); // after EOS the row stays all zero, budget or not
        }
        let Some(b) = &mut self.budget else { return Ok(()) };
        let remaining = b.max_tokens.saturating_sub(self.history.len());
        b.closer.narrow_before_sampling(&mut self.m, ours, remaining, CLOSING_MARGIN)
    }

    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.m.rollback(num_tokens).map_err(|e| PyValueError::new_err(e.to_string()))?;
        self.history.truncate(self.history.len() - num_tokens);
        Ok(())
    }

    fn terminated(&self) -> bool {
        let vocab = self.m.constraint().index().vocab();
        self.history.last().is_some_and(|&t| vocab.is_eos(TokenId(t)))
    }
}

#[pymethods]
impl Matcher {
    /// Writes the allowed tokens of the next position into row `index` of `bitmask` (an
    /// `int32` numpy array or CPU torch tensor of shape `[batch, words]` or `[words]`,
    /// C-contiguous; `words` at least `ceil(vocab_size / 32)`, the extra words cleared):
    /// bit `i % 32` of word `i // 32` set means token `i` is allowed. End-of-generation ids
    /// are allowed only where the output may end; after EOS the row is all zero.
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(&self, bitmask: &Bound<'_, PyAny>, index: usize) -> PyResult<()> {
        let buf = MaskBuffer::of_cached(bitmask)?;
        // SAFETY: `bitmask` is borrowed for this call, and the row is used only within it.
        let row = unsafe { buf.row(index)? };
        self.lock().fill_row(row).map_err(|e| match_err(e, Kind::Gbnf))
    }

    /// Advances by one token; returns False (state unchanged) if the grammar does not allow
    /// it here or EOS was already accepted. Raises `LimitError` if a parse budget ran out.
    fn accept_token(&self, token: u32) -> PyResult<bool> {
        self.lock().accept(token)
    }

    /// Accepts `tokens` in order; stops at the first refused one and returns False (the
    /// tokens before it stay accepted, as in XGrammar).
    fn accept_tokens(&self, tokens: Vec<u32>) -> PyResult<bool> {
        let mut s = self.lock();
        for t in tokens {
            if !s.accept(t)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// How many of `tokens`, from the first, the grammar accepts in a row. The state does
    /// not move (they are accepted and rolled back).
    fn validate_tokens(&self, tokens: Vec<u32>) -> PyResult<usize> {
        let mut s = self.lock();
        let mut n = 0;
        for &t in &tokens {
            if !s.accept(t)? {
                break;
            }
            n += 1;
        }
        s.rollback(n)?;
        Ok(n)
    }

    /// Undoes the last `num_tokens` accepted tokens (EOS included). Raises ValueError if
    /// fewer were accepted.
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&self, num_tokens: usize) -> PyResult<()> {
        self.lock().rollback(num_tokens)
    }

    /// An independent matcher in the same state, with the same rollback history.
    ///
    /// Cost: the same at any length (no replay, no mask computation): the parse state and
    /// the run-time checks' history are shared copy on write, and so are the compiled
    /// constraint and the mask cache.
    fn fork(&self) -> Matcher {
        let mut s = self.lock();
        let history = s.history.fork(usize::MAX);
        let budget = s.budget.clone();
        Matcher { state: Mutex::new(State { m: s.m.fork(), history, budget, fill_cost: s.fill_cost }) }
    }

    /// Back to the start of the grammar.
    fn reset(&self) {
        let mut s = self.lock();
        s.m.reset();
        s.history.clear();
        let State { m, budget, .. } = &mut *s;
        if let Some(b) = budget {
            // The budget fitted this constraint when the matcher was made, so it still does.
            if let Ok(closer) = Closer::new(m.constraint(), true, b.max_tokens, usize::MAX) {
                b.closer = closer;
            }
        }
    }

    /// Whether an end-of-generation token was accepted.
    fn is_terminated(&self) -> bool {
        self.lock().terminated()
    }

    /// Whether the output so far is complete (EOS allowed next).
    fn is_accepting(&self) -> bool {
        self.lock().m.is_accepting()
    }

    /// Whether nothing but EOS can follow, or EOS was accepted: stop generating.
    fn is_finished(&self) -> bool {
        self.lock().m.is_finished()
    }

    /// The text the grammar dictates next (the longest run where exactly one byte is
    /// possible and the output cannot end), cut to whole UTF-8 characters; empty when there
    /// is a choice. For jump-forward decoding: tokenize it and accept the tokens.
    fn find_jump_forward_string(&self) -> String {
        let bytes = self.lock().m.forced_bytes();
        match std::str::from_utf8(&bytes) {
            Ok(s) => s.to_string(),
            Err(e) => String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned(),
        }
    }

    /// `find_jump_forward_string` as raw bytes, not cut at a character boundary.
    fn find_jump_forward_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.lock().m.forced_bytes())
    }

    /// The tokens of a shortest completion of the output so far (0 when it is complete; EOS
    /// not counted): a number of tokens some completion takes, so an upper bound on the
    /// fewest. `None` when no completion can be spelled with single-byte tokens.
    fn min_tokens_to_finish(&self) -> PyResult<Option<u64>> {
        let mut s = self.lock();
        if s.m.is_accepting() || s.terminated() {
            return Ok(Some(0));
        }
        let mut shortest = Vec::new();
        if !s.m.shortest_completion(&mut shortest).map_err(|e| match_err(e, Kind::Gbnf))? {
            return Ok(None);
        }
        let mut cost = Vec::new();
        s.m.constraint().index().fewest_tokens(&shortest, &mut cost);
        Ok(cost.first().copied().filter(|&t| t != constrain::mask::NO_SPELLING).map(u64::from))
    }

    /// Number of tokens accepted so far (EOS included): what `rollback` can undo.
    #[getter]
    fn num_tokens(&self) -> usize {
        self.lock().history.len()
    }

    /// The tokens accepted so far, in order.
    #[getter]
    fn tokens(&self) -> Vec<u32> {
        self.lock().history.as_contiguous().into_owned()
    }

    fn __repr__(&self) -> String {
        let s = self.lock();
        format!(
            "Matcher(num_tokens={}, accepting={}, terminated={})",
            s.history.len(),
            s.m.is_accepting(),
            s.terminated()
        )
    }
}

// ---------------------------------------------------------------------------------------
// Bitmask buffers

/// A caller's `int32` bitmask: numpy array or CPU torch tensor, C-contiguous, 1-D or 2-D.
#[derive(Clone, Copy)]
struct MaskBuffer {
    ptr: *mut u32,
    rows: usize,
    words: usize,
}

/// A numpy array `MaskBuffer::of` read on this thread, held (so it stays alive and its
/// identity cannot be reused) with its address: reading `__array_interface__` costs about
/// 5 µs, half a cached mask fill, and a decode loop passes the same array (or two, double
/// buffered) every step. numpy does not move a live array's data while another reference
/// to it exists (`resize` refuses), so the held reference also keeps the address valid.
/// Torch tensors are not remembered: `resize_` may move their storage.
struct LastArray {
    obj: Py<PyAny>,
    buf: MaskBuffer,
}

/// How many numpy arrays each thread remembers ([`LastArray`]): a loop that fills two
/// bitmasks by turns (one per model, or double buffering) hits every time.
const LAST_ARRAYS: usize = 4;

thread_local! {
    /// The arrays read last on this thread, the most recent first.
    static LAST_ARRAYS_READ: std::cell::RefCell<Vec<LastArray>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// numpy's `ndarray` type, for the exact-type check of [`LastArray`].
fn ndarray_type(py: Python<'_>) -> Option<&Bound<'_, pyo3::types::PyType>> {
    static NDARRAY: pyo3::sync::GILOnceCell<Option<Py<pyo3::types::PyType>>> = pyo3::sync::GILOnceCell::new();
    NDARRAY
        .get_or_init(py, || {
            let np = py.import("numpy").ok()?;
            np.getattr("ndarray").ok()?.downcast_into::<pyo3::types::PyType>().ok().map(Bound::unbind)
        })
        .as_ref()
        .map(|t| t.bind(py))
}

impl MaskBuffer {
    /// [`MaskBuffer::of`], remembering the last few numpy arrays (see [`LastArray`]).
    fn of_cached(obj: &Bound<'_, PyAny>) -> PyResult<MaskBuffer> {
        let hit = LAST_ARRAYS_READ.with(|l| l.borrow().iter().find(|c| c.obj.is(obj)).map(|c| c.buf));
        if let Some(buf) = hit {
            return Ok(buf);
        }
        let buf = MaskBuffer::of(obj)?;
        if ndarray_type(obj.py()).is_some_and(|t| obj.get_type().is(t)) {
            // The one pushed out is dropped outside the borrow: dropping an array may run
            // Python code that reads this cache again.
            let out = LAST_ARRAYS_READ.with(|l| {
                let mut l = l.borrow_mut();
                l.insert(0, LastArray { obj: obj.clone().unbind(), buf });
                (l.len() > LAST_ARRAYS).then(|| l.pop())
            });
            drop(out);
        }
        Ok(buf)
    }

    fn of(obj: &Bound<'_, PyAny>) -> PyResult<MaskBuffer> {
        let (ptr, shape) = if let Ok(iface) = obj.getattr(pyo3::intern!(obj.py(), "__array_interface__")) {
            let typestr: String = iface.get_item("typestr")?.extract()?;
            if typestr != "<i4" && typestr != "<u4" {
                return Err(PyTypeError::new_err(format!("bitmask must be int32, not {typestr}")));
            }
            let (ptr, readonly): (usize, bool) = iface.get_item("data")?.extract()?;
            if readonly {
                return Err(PyValueError::new_err("bitmask is read-only"));
            }
            if !iface.get_item("strides")?.is_none() {
                // numpy gives strides only for arrays that are not C-contiguous.
                let c: bool = obj.getattr("flags")?.get_item("C_CONTIGUOUS")?.extract()?;
                if !c {
                    return Err(PyValueError::new_err("bitmask must be C-contiguous"));
                }
            }
            let shape: Vec<usize> = iface.get_item("shape")?.extract()?;
            (ptr, shape)
        } else if obj.hasattr(pyo3::intern!(obj.py(), "data_ptr"))? {
            let dtype = obj.getattr("dtype")?.str()?.to_string();
            if dtype != "torch.int32" {
                return Err(PyTypeError::new_err(format!("bitmask must be torch.int32, not {dtype}")));
            }
            let device = obj.getattr("device")?.getattr("type")?.str()?.to_string();
            if device != "cpu" {
                return Err(PyValueError::new_err(format!(
                    "bitmask must be on the CPU (fill it there, then copy it to {device})"
                )));
            }
            if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
                return Err(PyValueError::new_err("bitmask must be contiguous"));
            }
            let ptr: usize = obj.call_method0("data_ptr")?.extract()?;
            let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
            (ptr, shape)
        } else {
            return Err(PyTypeError::new_err("bitmask must be a numpy array or a torch tensor of int32"));
        };
        let (rows, words) = match shape[..] {
            [w] => (1, w),
            [r, w] => (r, w),
            _ => return Err(PyValueError::new_err("bitmask must have shape [batch, words] or [words]")),
        };
        if ptr == 0 && rows * words > 0 {
            return Err(PyValueError::new_err("bitmask has no data"));
        }
        Ok(MaskBuffer { ptr: ptr as *mut u32, rows, words })
    }

    /// Row `index`, for the length of this call.
    ///
    /// # Safety
    ///
    /// The caller must keep the array alive, unresized and not written by anyone else
    /// while the row is in use, and must not take the same row twice at once.
    unsafe fn row(&self, index: usize) -> PyResult<&'static mut [u32]> {
        if index >= self.rows {
            return Err(PyValueError::new_err(format!("row {index} is past the bitmask's {} rows", self.rows)));
        }
        // SAFETY: the buffer is a live, writable, C-contiguous int32 array of `rows * words`
        // elements (checked in `of`); `index < rows`, so the row lies inside it. Its life and
        // exclusivity are the caller's contract above (as with XGrammar and llguidance, the
        // Python caller must not resize or write the array from another thread meanwhile).
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(index * self.words), self.words) })
    }
}

/// A mask row handed to a worker thread.
struct Row(&'static mut [u32]);
// SAFETY: a row is a distinct slice of the caller's buffer (row indices are checked to be
// distinct); it is written by one thread only.
unsafe impl Send for Row {}

/// Fills row `indices[i]` (default `i`) of `bitmask` for `matchers[i]`, on a thread pool
/// with the GIL released: one call for a whole batch. Each matcher may appear once. A
/// batch whose fills were cheap last time (under 4 µs together) is filled on the calling
/// thread, where a hand-off would cost more than it saves.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices=None))]
fn fill_next_token_bitmasks(
    py: Python<'_>,
    matchers: Vec<Bound<'_, Matcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    let buf = MaskBuffer::of_cached(bitmask)?;
    if indices.as_ref().is_some_and(|ix| ix.len() != matchers.len()) {
        return Err(PyValueError::new_err("indices and matchers differ in length"));
    }
    let row_of = |k: usize| indices.as_ref().map_or(k, |ix| ix[k]);
    // Rows must be distinct: two threads must never write one row.
    let mut seen = vec![false; buf.rows];
    let mut guards = Vec::with_capacity(matchers.len());
    for (k, m) in matchers.iter().enumerate() {
        let i = row_of(k);
        if i >= buf.rows || std::mem::replace(&mut seen[i], true) {
            return Err(PyValueError::new_err(format!("row {i} is out of range or given twice")));
        }
        let guard = match m.get().state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(PyValueError::new_err("a matcher appears twice or is in use"))
            }
        };
        guards.push(guard);
    }
    let mut work = Vec::with_capacity(guards.len());
    for (k, g) in guards.iter_mut().enumerate() {
        // SAFETY: rows are distinct (checked above); every item is done before this
        // function returns, while `bitmask` is still borrowed.
        work.push(Fill { state: g, row: Row(unsafe { buf.row(row_of(k))? }), error: None });
    }
    let fill = |w: &mut Fill<'_>| {
        let start = std::time::Instant::now();
        w.error = w.state.fill_row(w.row.0).err();
        w.state.fill_cost = Some(start.elapsed());
    };
    // A batch whose fills took little last time is done here, holding the GIL: releasing
    // it and handing half of the batch to a worker thread would cost more than it saves.
    // A fill not yet timed counts as dear. (One dear fill runs on the calling thread too,
    // with the GIL released: `pool::run` starts no worker for it.)
    let expected: Option<std::time::Duration> = work.iter().map(|w| w.state.fill_cost).sum();
    if expected.is_some_and(|t| t < INLINE_BATCH) {
        work.iter_mut().for_each(fill);
    } else {
        let cost = |w: &Fill<'_>| w.state.fill_cost.map(|t| t.as_nanos() as u64);
        py.allow_threads(|| pool::run(&mut work, cost, fill));
    }
    match work.into_iter().find_map(|w| w.error) {
        Some(e) => Err(match_err(e, Kind::Gbnf)),
        None => Ok(()),
    }
}

/// Below this much fill time (the matchers' last fills, summed), `fill_next_token_bitmasks`
/// fills on the calling thread: a worker's share must outweigh the hand-off (about 1 µs to
/// wake a polling worker and gather it back, more when it sleeps).
const INLINE_BATCH: std::time::Duration = std::time::Duration::from_micros(4);

/// One matcher's part of a batch fill: its state, its row, and the error it met.
struct Fill<'a> {
    state: &'a mut State,
    row: Row,
    error: Option<constrain::matcher::Error>,
}

mod pool {
    //! A small fixed pool of worker threads for batch mask fills: spawning threads per call
    //! would cost more than the fills themselves (a cached mask takes 1–5 µs).
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
    use std::time::{Duration, Instant};

    type Job = Box<dyn FnOnce() + Send>;

    /// How long a worker polls for the next job before it blocks. Waking a blocked thread
    /// takes 10–30 µs here, longer than a batch of cached fills, so a worker that slept
    /// between two calls came too late to help (1.15× for 8 fills on 2 threads). Polling
    /// this long covers the gap between the fills of one decode step and the next call's
    /// Python work; a decode loop whose model step is milliseconds pays at most this much
    /// of one core per call.
    const SPIN: Duration = Duration::from_micros(300);

    /// One worker's inbox: the jobs sent to it, a flag it polls while it spins, and a
    /// condition variable it sleeps on after that.
    struct Inbox {
        queue: Mutex<Queue>,
        /// Whether `queue` holds a job: read without the lock by the polling worker (a
        /// channel's `try_recv` took about twice as long to see a job).
        pending: AtomicBool,
        wake: Condvar,
    }

    /// The locked part of an [`Inbox`].
    struct Queue {
        jobs: VecDeque<Job>,
        /// The worker is waiting on `wake` (so a sender must notify it; a polling worker
        /// needs no system call).
        asleep: bool,
    }

    impl Inbox {
        fn lock(&self) -> MutexGuard<'_, Queue> {
            // A job never panics while holding this lock (it runs after the lock is
            // released), so a poisoned queue is still consistent.
            self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        fn send(&self, job: Job) {
            let mut q = self.lock();
            q.jobs.push_back(job);
            self.pending.store(true, Ordering::Release);
            if q.asleep {
                self.wake.notify_one();
            }
        }

        /// The next job, if one is queued.
        fn take(q: &mut Queue, pending: &AtomicBool) -> Option<Job> {
            let job = q.jobs.pop_front();
            pending.store(!q.jobs.is_empty(), Ordering::Release);
            job
        }

        /// The worker's loop: poll for `SPIN`, then sleep until a job comes; run it.
        fn serve(&self) {
            loop {
                let idle = Instant::now();
                let mut job = None;
                let mut polls = 0u32;
                while job.is_none() {
                    if self.pending.load(Ordering::Acquire) {
                        job = Self::take(&mut self.lock(), &self.pending);
                    } else {
                        std::hint::spin_loop();
                        polls = polls.wrapping_add(1);
                        // Reading the clock costs more than a poll: every 64th only.
                        if polls % 64 == 0 && idle.elapsed() >= SPIN {
                            break;
                        }
                    }
                }
                let job = match job {
                    Some(job) => job,
                    None => {
                        let mut q = self.lock();
                        loop {
                            if let Some(job) = Self::take(&mut q, &self.pending) {
                                q.asleep = false;
                                break job;
                            }
                            q.asleep = true;
                            q = self.wake.wait(q).unwrap_or_else(|poisoned| poisoned.into_inner());
                        }
                    }
                };
                job();
            }
        }
    }

    /// The pool's workers (one fewer than the cores: the caller works too), started on
    /// first use and kept for the life of the process.
    fn workers() -> &'static [Arc<Inbox>] {
        static POOL: OnceLock<Vec<Arc<Inbox>>> = OnceLock::new();
        POOL.get_or_init(|| {
            let n = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, MAX_THREADS);
            (0..n.saturating_sub(1))
                .filter_map(|i| {
                    let inbox = Arc::new(Inbox {
                        queue: Mutex::new(Queue { jobs: VecDeque::with_capacity(4), asleep: false }),
                        pending: AtomicBool::new(false),
                        wake: Condvar::new(),
                    });
                    let mine = Arc::clone(&inbox);
                    // A worker that cannot be started is left out: the caller does its share.
                    std::thread::Builder::new()
                        .name(format!("constrain-fill-{i}"))
                        .spawn(move || mine.serve())
                        .ok()
                        .map(|_| inbox)
                })
                .collect()
        })
    }

    /// The most threads a call uses (the caller and its helpers).
    const MAX_THREADS: usize = 16;

    /// What a call shares with the workers it wakes; on the heap, so a worker that wakes
    /// after the call returned touches only this.
    struct Ctl {
        /// The items, split into one contiguous block per thread (the caller's first): block
        /// `b` spans `starts[b] .. starts[b + 1]`, and `cursors[b]` is its next item.
        cursors: [AtomicUsize; MAX_THREADS],
        starts: [usize; MAX_THREADS + 1],
        /// How many threads (blocks).
        k: usize,
        /// Workers inside the items now.
        active: AtomicUsize,
        /// Set by the caller once every item is taken: a worker arriving later leaves at once.
        closed: AtomicBool,
    }

    impl Ctl {
        /// The end of block `b`.
        fn end(&self, b: usize) -> usize {
            self.starts[b + 1]
        }

        /// The next item for thread `j`: from its own block while one is left, then from the
        /// others' (a late or slow thread's items are taken by the rest). Each index comes
        /// out once (`fetch_add` on the block's cursor), so no two threads touch one item.
        fn take(&self, j: usize) -> Option<usize> {
            let k = self.k;
            (0..k).map(|d| (j + d) % k).find_map(|b| {
                let c = &self.cursors[b];
                // A cheap look first, so a finished block costs a read, not a write.
                if c.load(Ordering::Relaxed) >= self.end(b) {
                    return None;
                }
                let i = c.fetch_add(1, Ordering::SeqCst);
                (i < self.end(b)).then_some(i)
            })
        }
    }

    /// Where each of `k` contiguous blocks of `items` starts (and, at `k`, where the last
    /// ends), so that the blocks' summed `cost` is about even; items of no known cost count
    /// as the mean of the others (or 1).
    fn split<T>(items: &[T], k: usize, cost: impl Fn(&T) -> Option<u64>) -> [usize; MAX_THREADS + 1] {
        let n = items.len();
        let (sum, count) = items.iter().filter_map(&cost).fold((0u64, 0u64), |(s, c), x| (s.saturating_add(x), c + 1));
        let mean = sum.checked_div(count).unwrap_or(1).max(1);
        let total: u64 = items.iter().map(|t| cost(t).unwrap_or(mean).max(1)).sum();
        let mut starts = [n; MAX_THREADS + 1];
        starts[0] = 0;
        let (mut b, mut before) = (1, 0u64);
        for (i, t) in items.iter().enumerate() {
            let c = cost(t).unwrap_or(mean).max(1);
            // Block `b` starts at the item whose middle passes `b / k` of the total.
            while b < k && (before + c / 2) * k as u64 >= total * b as u64 {
                starts[b] = i;
                b += 1;
            }
            before += c;
        }
        starts
    }

    /// Runs `f` on every item, on the calling thread and whichever pool workers come to
    /// help. `cost` is what each item took last time, if known.
    ///
    /// Each thread owns a contiguous block of the items, of about even cost, and takes from
    /// it first, so from one call to the next the same thread fills the same rows, and a
    /// row's cache lines stay where they were written (taking items in one shared order
    /// moved rows between the cores on every call). A thread done with its block takes
    /// what is left of the others', so a worker that wakes late (a busy machine) costs
    /// nothing: the caller does the work, closes the call, and waits only for workers
    /// already inside it.
    pub fn run<T: Send>(items: &mut [T], cost: impl Fn(&T) -> Option<u64>, f: impl Fn(&mut T) + Sync) {
        let n = items.len();
        let helpers = workers().len().min(n.saturating_sub(1)).min(MAX_THREADS - 1);
        let k = helpers + 1;
        let starts = split(items, k, cost);
        let ctl = Arc::new(Ctl {
            cursors: std::array::from_fn(|b| AtomicUsize::new(starts[b.min(k)])),
            starts,
            k,
            active: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        });
        let items_ptr = items.as_mut_ptr() as usize;
        let f = &f;
        let work = move |ctl: &Ctl, j: usize| {
            while let Some(i) = ctl.take(j) {
                // SAFETY: `i < n` is this thread's own index (`take`); the items outlive
                // every thread inside the call (the caller waits for `active` to reach 0
                // before returning).
                f(unsafe { &mut *(items_ptr as *mut T).add(i) });
            }
        };
        for (w, j) in workers().iter().take(helpers).zip(1..) {
            let ctl = Arc::clone(&ctl);
            let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
                ctl.active.fetch_add(1, Ordering::SeqCst);
                if !ctl.closed.load(Ordering::SeqCst) {
                    work(&ctl, j);
                }
                ctl.active.fetch_sub(1, Ordering::SeqCst);
            });
            // SAFETY: the job touches `items` and `f` only while `active` counts
            // it and `closed` was not yet set; the caller sets `closed`, then waits for
            // `active` to be 0, before any of them goes away. After that a late job sees
            // `closed` and touches only `ctl`, which it owns a share of.
            let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
            w.send(job);
        }
        work(&ctl, 0);
        ctl.closed.store(true, Ordering::SeqCst);
        let mut spins = 0u32;
        while ctl.active.load(Ordering::SeqCst) != 0 {
            spins += 1;
            if spins < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // Every index below `n` was taken and finished by now.
    }
}

/// A new bitmask: an `int32` numpy array of shape `[batch_size, ceil(vocab_size / 32)]`
/// with every bit set (all tokens allowed, as XGrammar's), ready for
/// `fill_next_token_bitmask`.
#[pyfunction]
#[pyo3(signature = (batch_size, vocab_size))]
fn allocate_token_bitmask<'py>(py: Python<'py>, batch_size: usize, vocab_size: usize) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let shape = (batch_size, vocab_size.div_ceil(32));
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", np.getattr("int32")?)?;
    np.call_method("full", (shape, -1i32), Some(&kwargs))
}

/// The extension module; the package `constrain` re-exports it.
#[pymodule]
fn _constrain(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Tokenizer>()?;
    m.add_class::<Constraint>()?;
    m.add_class::<Matcher>()?;
    #[cfg(feature = "llama")]
    m.add_class::<generator::Generator>()?;
    m.add_function(wrap_pyfunction!(fill_next_token_bitmasks, m)?)?;
    m.add_function(wrap_pyfunction!(allocate_token_bitmask, m)?)?;
    m.add("ConstrainError", py.get_type::<ConstrainError>())?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    m.add("GrammarError", py.get_type::<GrammarError>())?;
    m.add("LimitError", py.get_type::<LimitError>())?;
    m.add("TokenizerError", py.get_type::<TokenizerError>())?;
    Ok(())
}
