//! The KV cache rule of each kind of layer, in words: what `plan --json`
//! shows in `kv_rules` so a reader can see why the cache is what it is
//! (issue #13). The sizes are the memory model's own ([`super::kv_bytes_layer`]).

use super::{Context, recurrent_bytes_layer, sum};
use crate::arch;
use crate::plan::KvRule;
use crate::profile::{LayerKind, ModelProfile};

/// The cache rule of each kind of layer at this context, in layer order:
/// what `plan --json` shows so a reader can see why the KV cache is what it is.
#[must_use]
pub fn kv_rules(p: &ModelProfile, ctx: &Context) -> Vec<KvRule> {
    let mut out: Vec<KvRule> = Vec::new();
    for (il, &kind) in p.layer_kinds.iter().enumerate() {
        let bytes = super::kv_bytes_layer(p, ctx, il);
        if let Some(r) = out.iter_mut().find(|r| r.kind == kind) {
            r.n_layers += 1;
            r.bytes = sum([r.bytes, bytes]);
            continue;
        }
        let (cells, rule) = rule_of(p, ctx, il, kind);
        out.push(KvRule {
            kind,
            n_layers: 1,
            cells_per_sequence: cells,
            bytes,
            rule,
        });
    }
    out
}

/// Cells per sequence and the words for layer `il`'s rule.
fn rule_of(p: &ModelProfile, ctx: &Context, il: usize, kind: LayerKind) -> (Option<u64>, String) {
    let full = u64::from(ctx.n_ctx_seq);
    let seqs = ctx.n_seq;
    let window = p.swa.as_ref().map_or(0, |w| w.window);
    let windowed = |what: &str| {
        let cells = ctx.swa_cells(window);
        let how = if ctx.swa_full {
            "the whole context (--swa-full)".to_string()
        } else {
            format!(
                "min({full} cells of a sequence, {window} + ubatch {}), padded to 256",
                ctx.n_ubatch
            )
        };
        (
            Some(cells),
            format!(
                "{what} of {window} tokens: {how} = {cells} cells × {seqs} sequences (llama_kv_cache_iswa)"
            ),
        )
    };
    match kind {
        LayerKind::Full | LayerKind::Parallel => {
            let (k, v) = p.head_dims(il);
            let heads = p.n_head_kv.get(il).copied().unwrap_or(0);
            let mut rule = format!(
                "full attention: K {k} and V {v} per KV head × {heads} heads, a cell per context token: {full} cells × {seqs} sequences (llama_kv_cache)"
            );
            if arch::READS_MLA_KEYS.contains(&p.arch.as_str()) {
                rule.push_str(
                    "; no attention.key_length_mla/value_length_mla keys (a file from before llama.cpp split attn_kv_b), so llama.cpp caches full K and V",
                );
            }
            if kind == LayerKind::Parallel {
                rule.push_str(", and a recurrent state per sequence beside it (falcon-h1)");
            }
            (Some(full), rule)
        }
        LayerKind::Sliding => windowed("sliding window"),
        LayerKind::Chunked => windowed("chunked attention, chunks"),
        LayerKind::Mla => {
            let (k, _) = p.head_dims(il);
            (
                Some(full),
                format!(
                    "latent attention (attention.key_length_mla present): one K row of {k} per token, no V, {full} cells × {seqs} sequences (llama_kv_cache, is_mla)"
                ),
            )
        }
        LayerKind::Recurrent => {
            let per_seq = recurrent_bytes_layer(p, &Context { n_seq: 1, ..*ctx });
            (
                None,
                format!(
                    "recurrent state: {per_seq} bytes of f32 conv and ssm rows per layer and sequence, whatever the context, × {seqs} sequences (llama_memory_recurrent)"
                ),
            )
        }
        LayerKind::Mtp => (
            None,
            "multi-token-prediction block: llama.cpp's default context gives it no cache, and skips its weights unless asked to load them".into(),
        ),
        LayerKind::Shared => (
            None,
            "reuses an earlier layer's cache (n_layer_kv_from_start)".into(),
        ),
        LayerKind::NoAttention => (None, "no attention, no cache".into()),
    }
}
