//! `constrain.Generator`: the llama.cpp decode loop of `constrain-llama` (the CLI's), for
//! Python users with a GGUF model and no torch. The mask is applied before the warpers,
//! closing mode keeps the output within the token budget, and a dead end is backed out of,
//! exactly as in `constrain --schema`.

use super::{Constraint, LimitError, SchemaError, Tokenizer, NEXT_TOKENIZER};
use constrain::sampling::SamplerSettings;
use constrain_llama::{Error, GeneratorSettings, Prompt};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A GGUF model loaded with llama.cpp, generating under a constraint.
///
/// `model_path`: a GGUF file (default: the default model, fetched on first use as the CLI
/// does). `n_ctx`: context size in tokens. `threads`: CPU threads (default: all).
/// `chat_template`: wrap prompts in the model's chat template (default True).
///
/// Build constraints against ``generator.tokenizer`` (the model's own vocabulary). Calls
/// on one generator are serialised; the GIL is released while it generates.
#[pyclass(frozen, module = "constrain")]
pub(crate) struct Generator {
    inner: Mutex<constrain_llama::Generator>,
    tokenizer: Py<Tokenizer>,
}

fn gen_err(e: Error) -> PyErr {
    match e {
        Error::Schema(e) => SchemaError::new_err(e.to_string()),
        Error::Incomplete { .. } | Error::PromptTooLong { .. } | Error::BudgetTooSmall { .. } => {
            LimitError::new_err(e.to_string())
        }
        Error::Settings(_) => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

#[pymethods]
impl Generator {
    #[new]
    #[pyo3(signature = (model_path=None, *, n_ctx=4096, threads=None, chat_template=true))]
    fn new(
        py: Python<'_>,
        model_path: Option<std::path::PathBuf>,
        n_ctx: u32,
        threads: Option<usize>,
        chat_template: bool,
    ) -> PyResult<Generator> {
        let settings = GeneratorSettings { ctx_size: n_ctx, threads, chat_template, ..GeneratorSettings::default() };
        let inner = py
            .allow_threads(|| match model_path {
                Some(p) => constrain_llama::Generator::load(p, settings),
                None => constrain_llama::Generator::load_default(settings),
            })
            .map_err(gen_err)?;
        let tokenizer =
            Tokenizer { index: Arc::clone(inner.index()), id: NEXT_TOKENIZER.fetch_add(1, Ordering::Relaxed) };
        Ok(Generator { inner: Mutex::new(inner), tokenizer: Py::new(py, tokenizer)? })
    }

    /// The model's vocabulary: compile constraints for `generate` against it.
    #[getter]
    fn tokenizer(&self, py: Python<'_>) -> Py<Tokenizer> {
        self.tokenizer.clone_ref(py)
    }

    /// Generates a reply to `prompt` (a user turn; `system` adds a system turn) that
    /// `constraint` accepts, and returns its text. Without a constraint the text is free
    /// and may stop at `max_tokens`.
    ///
    /// Sampling as llama.cpp's: `temperature` (0: greedy), `top_k`, `top_p`, `min_p`,
    /// `seed`; `beams` > 0 runs beam search and returns the best finished beam. Closing
    /// mode (`close`, default True) keeps a constrained output within `max_tokens`.
    /// Raises `LimitError` when the output cannot be completed within the budget or the
    /// prompt does not fit the context.
    #[pyo3(signature = (prompt, constraint=None, *, system=None, max_tokens=256, temperature=0.8, top_k=40,
        top_p=0.95, min_p=0.05, seed=None, beams=0, close=true))]
    #[allow(clippy::too_many_arguments)]
    fn generate(
        &self,
        py: Python<'_>,
        prompt: &str,
        constraint: Option<&Constraint>,
        system: Option<String>,
        max_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        min_p: f32,
        seed: Option<u64>,
        beams: usize,
        close: bool,
    ) -> PyResult<String> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = constraint {
            if !Arc::ptr_eq(c.inner.index(), g.index()) {
                return Err(PyValueError::new_err(
                    "the constraint was compiled for another tokenizer: compile it against generator.tokenizer",
                ));
            }
        }
        let sampler = SamplerSettings { temperature, top_k, top_p, min_p, seed, ..g.settings().sampler.clone() };
        let settings = GeneratorSettings { sampler, max_tokens, beams, close, ..g.settings().clone() };
        g.set_settings(settings).map_err(gen_err)?;
        let mut p = Prompt::user(prompt);
        if let Some(s) = system {
            p = p.with_system(s);
        }
        let c = constraint.map(|c| &c.inner);
        let g = &*g;
        let out = py.allow_threads(move || {
            if beams > 0 {
                return g.generate_beams(p, c).map(|beams| beams.into_iter().next().map(|b| b.output));
            }
            match c {
                Some(c) => g.generate(p, c).map(Some),
                None => g.generate_unconstrained(p, |_| {}).map(Some),
            }
        });
        match out.map_err(gen_err)? {
            Some(o) => Ok(o.text),
            None => Err(LimitError::new_err("beam search finished no beam within the budget")),
        }
    }

    fn __repr__(&self) -> String {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        format!("Generator(n_ctx={}, vocab_size={})", g.context_size(), g.index().vocab().mask_len())
    }
}
