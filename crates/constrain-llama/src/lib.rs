//! Stage 7: the decode loop — a GGUF model through llama.cpp, driven by a [`Matcher`].
//!
//! Input: a prompt, a [`Constraint`] compiled against the model's own vocabulary
//! ([`Generator::constraint`]), and [`GeneratorSettings`].
//! Output: an [`Output`] with the text, the parsed JSON value, token counts and timings — or
//! a typed [`Error`]. A constrained output never ends cut: when the token budget runs low,
//! *closing mode* narrows the mask to tokens that bring the output closer to a complete
//! string (see [`constrain::automaton::distance`]), and the output ends with
//! [`StopReason::Closed`]; a budget below the shortest complete output is refused up front
//! ([`Error::BudgetTooSmall`]). With closing off, running out is [`Error::Incomplete`].
//!
//! How: the prompt (wrapped in the model's chat template unless `raw`) is
//! evaluated in one batch; then each step reads the last position's logits, sets every token
//! the matcher's mask forbids to `-inf`, runs the [`constrain::sampling`] chain and feeds the
//! token back to both the matcher and the model. Generation stops the moment the matcher is
//! finished, or on an end-of-generation token (allowed only where the grammar accepts).
//! When the grammar dictates the next bytes (a property name, `": "`), those bytes are
//! tokenized by the model's tokenizer and fed in one batch without sampling (*jump-forward*);
//! the last of those tokens is left to the model, because it could merge with what follows.
//!
//! This crate is the only one that links llama.cpp: the engine (`constrain`) knows no model
//! runtime, and the command line (`constrain-cli`) uses this crate only in its `llama`
//! feature. Closing mode's policy is [`constrain::closing`], shared with its tests.
//!
//! [`Matcher`]: constrain::matcher::Matcher
//! [`Constraint`]: constrain::matcher::Constraint

#![forbid(unsafe_code)]

mod batch;
pub mod beam;
mod llama;
pub mod logprobs;
pub mod lookup;
mod model_path;
mod rawdecode;
mod sequence;
pub mod speculative;
pub mod trace;

pub use batch::{BatchChoice, BatchEvent, BatchPrompt, BatchRequest, EventSink, StepStats};
pub use beam::Beam;
pub use llama::Generator;
pub use logprobs::TokenLogprob;
pub use model_path::{
    cached_model_path, default_model_path, fetch_default_model, DEFAULT_MODEL_FILE, DEFAULT_MODEL_WHEEL,
};
pub use rawdecode::RawDecode;

use constrain::sampling::SamplerSettings;
use std::time::Duration;

/// Everything about a generation except the prompt and the constraint.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorSettings {
    /// Sampling chain settings (llama.cpp defaults).
    pub sampler: SamplerSettings,
    /// Maximum tokens to produce (sampled plus forced). Default 512.
    pub max_tokens: usize,
    /// Context size in tokens (prompt plus output); `0` uses the model's training context.
    /// Default 4096.
    pub ctx_size: u32,
    /// CPU threads; `None` uses every available core (llama.cpp's own default of 4 is much
    /// slower on a 2-core machine).
    pub threads: Option<usize>,
    /// Layers to offload to the GPU (needs the `cuda` feature). Default 0.
    pub n_gpu_layers: u32,
    /// Wrap the prompt in the model's chat template (`false` = raw prompt). Default true.
    pub chat_template: bool,
    /// Feed grammar-forced bytes without sampling. Default true.
    pub jump_forward: bool,
    /// Let llama.cpp print its logs to stderr (decided when the first model loads).
    pub verbose: bool,
    /// Closing mode: when the token budget (`max_tokens`, or the context left) comes down
    /// to the output's distance to the end, only tokens that shorten that distance are
    /// allowed, so a constrained output always ends complete ([`StopReason::Closed`]) instead
    /// of failing with [`Error::Incomplete`]. Default true; `false` is the old behaviour.
    pub close: bool,
    /// Soft closing: this many tokens before the hard limit, tokens that shorten the
    /// distance to the end get a logit bonus, so the document winds down instead of being
    /// cut. Default 0 (off). Costs one trial step per allowed token while it applies.
    pub close_margin: usize,
    /// Speculative decoding by n-gram lookup ([`lookup`]): up to this many draft tokens
    /// are evaluated with each sampled token and kept as far as the sampler agrees: the
    /// same draws as without it (batched logits equal one-token ones). Default 0 (off).
    /// Single-sequence generation only.
    pub lookup: usize,
    /// Record, per output token, what the mask did ([`Output::trace`], [`trace`]). Default
    /// false: no trace is kept and nothing is computed.
    pub trace: bool,
    /// Speculative decoding with a draft model ([`Generator::load_draft`], [`speculative`]):
    /// up to this many tokens proposed by the draft per step, verified in one batch by the
    /// rule that keeps the model's distribution. Default 0 (off). Not with mirostat,
    /// lookup or beams.
    pub draft: usize,
    /// Beam search with this many beams ([`beam`]): `generate*` return the best beam,
    /// [`Generator::generate_beams`] all of them. `1` is greedy decoding by the beam code.
    /// Default 0 (off: sample). At most [`beam::MAX_BEAMS`].
    pub beams: usize,
    /// Beam search ranks finished beams by log-probability / length ^ this. Default 1.0
    /// (the mean log-probability per token); 0 ranks by log-probability alone, which
    /// favours short outputs.
    pub beam_length_penalty: f32,
    /// The bounds of the token index's caches, shared by every constraint compiled against
    /// the model's vocabulary. Default: the 256 MiB
    /// [`constrain::mask::DEFAULT_MEMORY_BUDGET`]. Read when the model loads.
    pub index: constrain::mask::IndexConfig,
}

impl Default for GeneratorSettings {
    fn default() -> Self {
        GeneratorSettings {
            sampler: SamplerSettings::default(),
            max_tokens: 512,
            ctx_size: 4096,
            threads: None,
            n_gpu_layers: 0,
            chat_template: true,
            jump_forward: true,
            verbose: false,
            close: true,
            close_margin: 0,
            lookup: 0,
            trace: false,
            draft: 0,
            beams: 0,
            beam_length_penalty: 1.0,
            index: constrain::mask::IndexConfig::default(),
        }
    }
}

/// A prompt: the user turn and an optional system turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prompt {
    /// The system turn (ignored in raw mode).
    pub system: Option<String>,
    /// The user turn (the whole prompt in raw mode).
    pub user: String,
}

impl Prompt {
    /// A prompt with only a user turn.
    pub fn user(text: impl Into<String>) -> Prompt {
        Prompt { system: None, user: text.into() }
    }
    /// Sets the system turn.
    pub fn with_system(mut self, text: impl Into<String>) -> Prompt {
        self.system = Some(text.into());
        self
    }
    /// Sets a system turn telling the model to answer with JSON matching `schema`.
    pub fn with_schema(self, schema: &serde_json::Value) -> Prompt {
        self.with_system(schema_system_prompt(schema))
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Prompt {
        Prompt::user(text)
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Prompt {
        Prompt::user(text)
    }
}

/// The default system turn for schema-constrained generation: the grammar already enforces
/// the schema, but a model that knows it writes better values.
pub fn schema_system_prompt(schema: &serde_json::Value) -> String {
    format!("{JSON_SYSTEM_PROMPT} matching this JSON Schema:\n{}", serde_json::to_string(schema).unwrap_or_default())
}

/// The system turn when the schema is too big to show ([`Generator::schema_prompt`]).
pub const JSON_SYSTEM_PROMPT: &str = "You are a helpful assistant that answers only with a JSON document";

/// How much of the schema [`Generator::schema_prompt`] put in the system turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaInPrompt {
    /// All of it.
    Whole,
    /// All but its annotations ([`schema_without_annotations`]).
    WithoutAnnotations,
    /// None: even without annotations it left too little of the context for the output.
    LeftOut,
}

/// `schema` without the annotations that do not constrain a value (`description`, `title`,
/// `examples`, `default`, `$comment`): a shorter schema to show a model. Property names are
/// kept, whatever they are called; values under `const` and `enum` are data and kept as is.
pub fn schema_without_annotations(schema: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    const ANNOTATIONS: [&str; 5] = ["description", "title", "examples", "default", "$comment"];
    // Keywords whose value maps names to subschemas: their keys are names, not keywords.
    const NAMED: [&str; 6] =
        ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
    let mut out = schema.clone();
    // (value, whether it is a map of names to subschemas); an explicit stack, no recursion.
    let mut stack: Vec<(&mut Value, bool)> = vec![(&mut out, false)];
    while let Some((v, named)) = stack.pop() {
        match v {
            Value::Object(map) => {
                if named {
                    stack.extend(map.values_mut().map(|c| (c, false)));
                    continue;
                }
                map.retain(|k, _| !ANNOTATIONS.contains(&k.as_str()));
                for (k, child) in map.iter_mut() {
                    if !matches!(k.as_str(), "const" | "enum") {
                        stack.push((child, NAMED.contains(&k.as_str())));
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut().map(|c| (c, false))),
            _ => {}
        }
    }
    out
}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The grammar was complete and nothing else could follow.
    Finished,
    /// The model chose an end-of-generation token (where the grammar accepts, if any).
    Eos,
    /// The token budget ran out (only returned as success for unconstrained generation).
    MaxTokens,
    /// Closing mode ended the output: the budget ran low, so the output was steered to the
    /// nearest complete string of the grammar (valid, but shorter than the model wanted).
    Closed,
}

impl StopReason {
    /// The OpenAI-style finish reason: `stop` when the grammar or the model ended the
    /// output, `closed` when the token budget did, `length` for a cut unconstrained output.
    pub fn finish_reason(self) -> &'static str {
        match self {
            StopReason::Finished | StopReason::Eos => "stop",
            StopReason::Closed => "closed",
            StopReason::MaxTokens => "length",
        }
    }
}

/// Where the time of one generation went.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Evaluating the prompt.
    pub prompt: Duration,
    /// Producing the output (model steps, masks, sampling), excluding the prompt.
    pub generation: Duration,
    /// Of `generation`, the time spent filling grammar masks (closing's narrowing included).
    pub mask: Duration,
    /// Of `generation`, the time closing mode took: the distance checks on every step, and
    /// once closing, the narrowed masks. What closing costs when it never triggers.
    pub closing: Duration,
}

/// The result of a generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// The generated text (valid UTF-8; the grammar's whole output).
    pub text: String,
    /// `text` parsed as JSON, when it is JSON.
    pub value: Option<serde_json::Value>,
    /// Tokens in the prompt after templating.
    pub prompt_tokens: usize,
    /// Tokens produced, sampled and forced (not counting a final EOS).
    pub generated_tokens: usize,
    /// Of `generated_tokens`, those fed by jump-forward without sampling.
    pub forced_tokens: usize,
    /// Model evaluations after the prompt (one per sampled token, one per forced batch, one
    /// per backtrack).
    pub model_steps: usize,
    /// Times the decode loop backed out of a dead end (a prefix no token could extend):
    /// the last sampled token was taken back, banned there, and drawn again. Target 0; each
    /// is a place where the mask could not see far enough ahead.
    pub backtracks: usize,
    /// Sampled tokens refused because a search proved no valid completion after them
    /// ([`constrain::Matcher::prove_live`]; schemas with run-time checks only), each drawn
    /// again: dead ends avoided before the model built on them.
    pub dead_tokens: usize,
    /// Sampled tokens refused because the search ran out of fuel before proving a valid
    /// completion after them (`constrain::closing::ProofStats::unproved`), each drawn
    /// again: a token is kept only when proved live.
    pub unproved_tokens: usize,
    /// Why generation stopped.
    pub stop: StopReason,
    /// Timings.
    pub timings: Timings,
    /// Speculative decoding ([`GeneratorSettings::lookup`]): draft tokens evaluated.
    pub drafted_tokens: usize,
    /// Of `drafted_tokens`, those the sampled token matched (each saved a model step).
    pub accepted_drafts: usize,
    /// Per produced token, its log-probability and the step's likeliest alternatives
    /// ([`logprobs`]): filled only when the request asked for them
    /// ([`BatchRequest::logprobs`]), else empty.
    pub logprobs: Vec<TokenLogprob>,
    /// Per output token what the mask did, and where closing began and backtracks happened
    /// ([`trace`]): filled only when [`GeneratorSettings::trace`] asks, else empty.
    pub trace: Vec<trace::TraceEvent>,
}

impl Output {
    /// Produced tokens per second of generation time.
    pub fn tokens_per_second(&self) -> f64 {
        let s = self.timings.generation.as_secs_f64();
        if s > 0.0 {
            self.generated_tokens as f64 / s
        } else {
            0.0
        }
    }
}

/// Why a model could not be loaded or a generation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model file is missing, unreadable or not a usable GGUF model.
    #[error("cannot load model {path}: {message}")]
    Model {
        /// The model path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The default model could not be found or downloaded.
    #[error("default model unavailable: {0}")]
    Fetch(String),
    /// The JSON Schema could not be compiled.
    #[error("invalid schema: {0}")]
    Schema(#[from] constrain::schema::Error),
    /// The grammar could not be compiled against the model's vocabulary.
    #[error("invalid constraint: {}", matcher_text(.0))]
    Constraint(constrain::matcher::Error),
    /// The sampling settings are out of range.
    #[error(transparent)]
    Settings(constrain::sampling::Error),
    /// The prompt does not fit in the context.
    #[error("the prompt has {tokens} tokens but the context holds {ctx}; use a larger --ctx-size or a shorter prompt")]
    PromptTooLong {
        /// Prompt tokens.
        tokens: usize,
        /// Context size.
        ctx: usize,
    },
    /// The output was cut off before the grammar was complete; the partial text is not a
    /// valid result.
    #[error("incomplete output after {tokens} tokens: {reason}")]
    Incomplete {
        /// What ran out, and which flag to raise.
        reason: &'static str,
        /// Tokens produced.
        tokens: usize,
        /// The partial text, for diagnostics only.
        partial: String,
    },
    /// The token budget cannot hold the shortest complete output: refused before generating.
    #[error("the token budget is too small: the shortest valid output takes {needed} tokens (the fewest tokens of this model's vocabulary that spell it; an upper bound, another output may tokenize shorter) but only {available} are available (--max-tokens {max_tokens}, {context_left} tokens left in the context after the prompt); raise --max-tokens (and --ctx-size) to at least {needed}")]
    BudgetTooSmall {
        /// The fewest tokens that spell a shortest complete output.
        needed: u64,
        /// The smaller of the two below.
        available: usize,
        /// The `max_tokens` setting.
        max_tokens: usize,
        /// Context tokens left after the prompt.
        context_left: usize,
    },
    /// No token was allowed, and backing out of it failed: the search ran out of
    /// backtracks, or would have taken back text already streamed.
    #[error("no allowed token at step {step} (after {backtracks} backtracks): the constraint could not be continued with this model's vocabulary")]
    DeadEnd {
        /// The step at which the mask was empty.
        step: usize,
        /// Backtracks made before giving up.
        backtracks: usize,
    },
    /// The matcher failed during generation.
    #[error("matcher error: {}", matcher_text(.0))]
    Matcher(constrain::matcher::Error),
    /// The finished output does not deserialize into the requested type.
    #[error("output does not deserialize into the requested type: {0}")]
    Deserialize(String),
    /// llama.cpp failed to create a context or evaluate tokens.
    #[error("llama.cpp error: {0}")]
    Llama(String),
}

impl From<constrain::closing::BudgetTooSmall> for Error {
    fn from(e: constrain::closing::BudgetTooSmall) -> Error {
        Error::BudgetTooSmall {
            needed: e.needed,
            available: e.available,
            max_tokens: e.max_tokens,
            context_left: e.context_left,
        }
    }
}

/// The JSON Schema of `T` as schemars derives it, with schemars' Rust-specific numeric
/// `format`s (`uint8`, `int32`, `double`, …) replaced by the bounds they imply: they are not
/// JSON Schema formats, and a strict schema compiler rightly refuses unknown formats.
pub fn json_schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
    let mut schema = schemars::schema_for!(T).to_value();
    normalize_schemars_formats(&mut schema);
    schema
}

/// Removes schemars' numeric `format` annotations, adding the range each implies (for widths
/// up to 32 bits; `minimum: 0` for wider unsigned types) unless the schema already bounds it.
/// Walks with an explicit stack; values under `const`, `enum`, `default` and `examples` are
/// data and left alone.
pub fn normalize_schemars_formats(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                let range: Option<(Option<i64>, Option<i64>)> = match map.get("format").and_then(Value::as_str) {
                    Some("int8") => Some((Some(i8::MIN.into()), Some(i8::MAX.into()))),
                    Some("int16") => Some((Some(i16::MIN.into()), Some(i16::MAX.into()))),
                    Some("int32") => Some((Some(i32::MIN.into()), Some(i32::MAX.into()))),
                    Some("uint8") => Some((Some(0), Some(u8::MAX.into()))),
                    Some("uint16") => Some((Some(0), Some(u16::MAX.into()))),
                    Some("uint32") => Some((Some(0), Some(u32::MAX.into()))),
                    Some("uint64" | "uint128" | "uint") => Some((Some(0), None)),
                    Some("int64" | "int128" | "int" | "float" | "double") => Some((None, None)),
                    _ => None,
                };
                if let Some((min, max)) = range {
                    map.remove("format");
                    if let Some(min) = min {
                        map.entry("minimum").or_insert(min.into());
                    }
                    if let Some(max) = max {
                        map.entry("maximum").or_insert(max.into());
                    }
                }
                for (key, child) in map.iter_mut() {
                    if !matches!(key.as_str(), "const" | "enum" | "default" | "examples") {
                        stack.push(child);
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

/// A matcher error as the command line shows it: a limit hit names the flag that raises each
/// limit.
fn matcher_text(e: &constrain::matcher::Error) -> String {
    use constrain::automaton::ParseLimit;
    match e {
        constrain::matcher::Error::Limit(hit) => format!(
            "matching limit exceeded: {}",
            hit.message(|limit| match limit {
                ParseLimit::Stacks => Some("--max-parse-stacks"),
                ParseLimit::Depth => Some("--max-stack-depth"),
                ParseLimit::Fuel => Some("--max-mask-fuel"),
                _ => None,
            })
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemars_formats_become_bounds() {
        let mut s = json!({
            "type": "object",
            "properties": {
                "age": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255},
                "n": {"type": "integer", "format": "int32"},
                "big": {"type": "integer", "format": "uint64", "minimum": 0},
                "x": {"type": "number", "format": "double"},
                "email": {"type": "string", "format": "email"},
                "format": {"const": {"format": "int32"}}
            }
        });
        normalize_schemars_formats(&mut s);
        assert_eq!(s["properties"]["age"], json!({"type": "integer", "minimum": 0, "maximum": 255}));
        assert_eq!(s["properties"]["n"], json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX}));
        assert_eq!(s["properties"]["big"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(s["properties"]["x"], json!({"type": "number"}));
        assert_eq!(s["properties"]["email"]["format"], "email");
        assert_eq!(s["properties"]["format"]["const"], json!({"format": "int32"}));
    }

    #[test]
    fn annotations_are_cut_but_names_and_data_stay() {
        let s = json!({
            "title": "T", "description": "d", "type": "object",
            "properties": {
                "description": {"type": "string", "description": "the text", "examples": ["x"]},
                "kind": {"enum": [{"description": "data"}], "default": {"a": 1}}
            },
            "items": [{"$comment": "c", "type": "integer"}]
        });
        let cut = schema_without_annotations(&s);
        assert_eq!(
            cut,
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "kind": {"enum": [{"description": "data"}]}
                },
                "items": [{"type": "integer"}]
            })
        );
    }

    #[test]
    fn derived_schema_has_no_rust_formats() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Person {
            name: String,
            age: u8,
            tags: Vec<String>,
        }
        let s = json_schema_for::<Person>();
        assert!(!s.to_string().contains("uint8"), "{s}");
        assert_eq!(s["properties"]["age"]["maximum"], 255);
    }
}
