//! The ceiling a server is measured against: batched `llama_decode` alone.
//!
//! [`Generator::raw_decode`] decodes `clients` sequences together in a context shaped like
//! the server's (`parallel` KV streams of the model's context size), one token per
//! sequence per `llama_decode`, with logits for every token and nothing else: no sampling,
//! no masks, no HTTP. `constrain bench-serve` divides a server's aggregate tokens/s by this
//! rate (serving efficiency).
use super::{Error, Generator};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::time::{Duration, Instant};

/// What [`Generator::raw_decode`] measured.
#[derive(Clone, Copy, Debug)]
pub struct RawDecode {
    /// Sequences decoded together.
    pub sequences: usize,
    /// Tokens decoded after the prompts (sequences × steps).
    pub tokens: usize,
    /// Time of those decodes, prompts excluded.
    pub elapsed: Duration,
}

impl RawDecode {
    /// Aggregate tokens per second over the decode steps.
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl Generator {
    /// Decodes `clients` sequences of `prompt_tokens` prompt tokens each, then `steps` more
    /// tokens per sequence one batch at a time, in a context of `parallel` sequences (as
    /// `serve --parallel` makes), and times the decode steps. The tokens fed are a fixed id:
    /// a decode's cost depends on the batch and the context length, not on the ids.
    pub fn raw_decode(
        &self,
        parallel: usize,
        clients: usize,
        prompt_tokens: usize,
        steps: usize,
    ) -> Result<RawDecode, Error> {
        let parallel = parallel.clamp(1, 256);
        let clients = clients.clamp(1, parallel);
        let mut ctx = self.new_context(parallel as u32)?;
        let per_seq = (ctx.n_ctx() as usize / parallel).max(2);
        let prompt_tokens = prompt_tokens.clamp(1, per_seq - 1);
        let steps = steps.min(per_seq - prompt_tokens);
        let n_batch = (ctx.n_batch() as usize).max(clients);
        let mut batch = LlamaBatch::new(n_batch.max(prompt_tokens), 1);
        let token = self.raw_tokens(" the", false).last().copied().unwrap_or(LlamaToken(0));
        let failed = |e: &dyn std::fmt::Display| Error::Llama(format!("raw decode failed: {e}"));
        // The prompts, a sequence per decode (as a server's prefill would be, in pieces).
        for seq in 0..clients {
            batch.clear();
            for pos in 0..prompt_tokens {
                batch.add(token, pos as i32, &[seq as i32], pos + 1 == prompt_tokens).map_err(|e| failed(&e))?;
            }
            ctx.decode(&mut batch).map_err(|e| failed(&e))?;
        }
        let start = Instant::now();
        for step in 0..steps {
            batch.clear();
            for seq in 0..clients {
                batch.add(token, (prompt_tokens + step) as i32, &[seq as i32], true).map_err(|e| failed(&e))?;
            }
            ctx.decode(&mut batch).map_err(|e| failed(&e))?;
        }
        Ok(RawDecode { sequences: clients, tokens: clients * steps, elapsed: start.elapsed() })
    }
}
