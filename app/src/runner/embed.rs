//! Embeddings (`serve --embeddings`): a second llama.cpp context on the
//! loaded weights that pools one input at a time, as llama-server's
//! `--embeddings` does.
//!
//! The context is the one the plan sized ([`headroom_planner::plan::Settings::embeddings`]):
//! `n_ctx` tokens, one sequence, its physical batch the whole context (a
//! pooled input must fit one batch), every token an output. The pooling is
//! the model's own (`<arch>.pooling_type` in the GGUF), mean when it
//! declares none, as for a chat model; vectors are L2-normalised, as
//! OpenAI's and llama-server's are.

use anyhow::{Context as _, Result, bail};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;

use super::{Engine, llama_said};

/// How an input's token vectors become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the token vectors (a chat model's: it declares none).
    Mean,
    /// The first token's vector.
    Cls,
    /// The last token's vector.
    Last,
}

impl Pooling {
    /// The model's declared pooling (`<arch>.pooling_type`): llama.cpp's
    /// numbers, 0 (none) or absent meaning mean. A reranker's (4) has no
    /// embedding to give.
    ///
    /// # Errors
    /// A reranking model or an unknown pooling number.
    pub fn of(engine: &Engine) -> Result<Pooling> {
        let model = engine.model();
        let arch = model
            .meta_val_str("general.architecture")
            .unwrap_or_default();
        let declared = model
            .meta_val_str(&format!("{arch}.pooling_type"))
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok());
        match declared {
            None | Some(0 | 1) => Ok(Pooling::Mean),
            Some(2) => Ok(Pooling::Cls),
            Some(3) => Ok(Pooling::Last),
            Some(4) => {
                bail!("this is a reranking model (pooling rank): it gives scores, not embeddings")
            }
            Some(n) => bail!("the model declares pooling type {n}, which headroom does not know"),
        }
    }

    fn raw(self) -> LlamaPoolingType {
        match self {
            Pooling::Mean => LlamaPoolingType::Mean,
            Pooling::Cls => LlamaPoolingType::Cls,
            Pooling::Last => LlamaPoolingType::Last,
        }
    }

    /// The name llama-server's `--pooling` takes.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
        }
    }
}

/// The embedding context and its batch.
pub struct Embedder<'m> {
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    n_ctx: usize,
    n_embd: usize,
    pooling: Pooling,
}

impl Engine {
    /// A context of `n_ctx` tokens that computes pooled embeddings.
    ///
    /// # Errors
    /// The model's pooling (see [`Pooling::of`]), or llama.cpp refusing the
    /// context.
    pub fn embedder(&self, n_ctx: u32) -> Result<Embedder<'_>> {
        let pooling = Pooling::of(self)?;
        let backend = crate::llama::backend::shared()
            .context("llama.cpp's backend was initialised outside headroom")?;
        let spec = self.spec();
        let mut params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_ctx)
            .with_n_ubatch(n_ctx)
            .with_n_seq_max(1)
            .with_type_k(spec.type_k)
            .with_type_v(spec.type_v)
            .with_embeddings(true)
            .with_pooling_type(pooling.raw());
        if spec.n_threads > 0 {
            params = params
                .with_n_threads(spec.n_threads)
                .with_n_threads_batch(spec.n_threads);
        }
        crate::llama::log::clear();
        let ctx = self.model().new_context(backend, params).map_err(|e| {
            anyhow::anyhow!(
                "llama.cpp could not create the embedding context ({n_ctx} tokens): {e}{}",
                llama_said()
            )
        })?;
        let n_embd = usize::try_from(self.model().n_embd()).unwrap_or(0);
        Ok(Embedder {
            ctx,
            batch: LlamaBatch::new(n_ctx as usize, 1),
            n_ctx: n_ctx as usize,
            n_embd,
            pooling,
        })
    }
}

impl Embedder<'_> {
    /// The longest input in tokens.
    #[must_use]
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// The vectors' length.
    #[must_use]
    pub fn n_embd(&self) -> usize {
        self.n_embd
    }

    /// The pooling in use.
    #[must_use]
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// The unit-length embedding of `tokens`.
    ///
    /// # Errors
    /// No tokens, more than the context holds, or llama.cpp failing.
    pub fn embed(&mut self, tokens: &[LlamaToken]) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            bail!("an input is empty");
        }
        if tokens.len() > self.n_ctx {
            bail!(
                "an input is {} tokens and the embedding context holds {} (serve --embeddings N)",
                tokens.len(),
                self.n_ctx
            );
        }
        self.ctx.clear_kv_cache();
        self.batch.clear();
        for (i, &t) in tokens.iter().enumerate() {
            self.batch.add(t, i32::try_from(i)?, &[0], true)?;
        }
        // Guarded like every llama_decode (the shim's try/catch).
        self.ctx.decode(&mut self.batch).map_err(|e| {
            anyhow::anyhow!(
                "llama.cpp failed to compute the embedding: {}",
                crate::llama::decode::describe(&e)
            )
        })?;
        let v = self
            .ctx
            .embeddings_seq_ith(0)
            .map_err(|e| anyhow::anyhow!("llama.cpp gave no embedding: {e}"))?;
        Ok(normalized(v))
    }
}

/// `v` scaled to unit length (a zero vector stays zero).
fn normalized(v: &[f32]) -> Vec<f32> {
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        v.iter().map(|x| (f64::from(*x) / norm) as f32).collect()
    } else {
        v.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::normalized;

    #[test]
    fn vectors_come_out_of_unit_length_and_zero_stays_zero() {
        let v = normalized(&[3.0, 4.0]);
        assert!(
            (v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6,
            "{v:?}"
        );
        assert_eq!(normalized(&[0.0, 0.0]), vec![0.0, 0.0]);
    }
}
