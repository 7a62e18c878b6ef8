//! Small, valid model headers shared by the fuzz targets and the seed-corpus
//! writer: real enough that `profile` and `solve::plan` accept them, small
//! enough (a few KB) that libFuzzer mutates them quickly; and the machine
//! the targets plan on.

use std::path::Path;
use std::sync::LazyLock;

use headroom_planner::gguf::writer::HeaderBuilder;
use headroom_planner::gguf::{Array, ArrayItems, GgmlType, GgufError, Header};
use headroom_planner::hw::{self, HardwareSnapshot};

/// One GPU of 8 GiB and 16 GiB of RAM (the planner's fixture profile): GPU
/// offload, CPU fallback and the context search all run.
pub static MACHINE: LazyLock<HardwareSnapshot> = LazyLock::new(|| {
    hw::parse_profile(
        include_str!("../../planner/tests/fixtures/hw/gpu-8g-ram-16g.toml"),
        Path::new("gpu-8g-ram-16g.toml"),
    )
    .expect("the fixture profile parses")
});

/// The knobs that select the planner's different code paths.
#[derive(Debug, Clone)]
pub struct Tiny {
    /// `general.architecture`.
    pub arch: &'static str,
    /// Transformer blocks.
    pub n_layer: u32,
    /// Hidden size (a multiple of 256, so every quantized type fits).
    pub n_embd: u64,
    /// Query heads (0 for a recurrent model).
    pub n_head: u32,
    /// Key/value heads.
    pub n_head_kv: u32,
    /// Vocabulary size.
    pub n_vocab: u64,
    /// Experts and experts used per token (0: dense).
    pub experts: (u32, u32),
    /// `attention.sliding_window`.
    pub sliding_window: Option<u32>,
    /// `attention.kv_lora_rank` (multi-head latent attention).
    pub kv_lora_rank: Option<u32>,
    /// `ssm.inner_size` (a Mamba-style recurrent state).
    pub ssm_inner: Option<u32>,
    /// Type of the 2-D weights.
    pub ty: GgmlType,
}

impl Tiny {
    /// A two-layer llama with grouped-query attention.
    pub fn llama() -> Tiny {
        Tiny {
            arch: "llama",
            n_layer: 2,
            n_embd: 256,
            n_head: 4,
            n_head_kv: 2,
            n_vocab: 64,
            experts: (0, 0),
            sliding_window: None,
            kv_lora_rank: None,
            ssm_inner: None,
            ty: GgmlType::Q4_K,
        }
    }

    /// The header: metadata, a token list, and every tensor the profile
    /// expects (`token_embd`, per-layer attention and FFN, output norm).
    pub fn build(&self) -> Result<Header, GgufError> {
        let a = self.arch;
        let k = |s: &str| format!("{a}.{s}");
        let e = self.n_embd;
        let hd = if self.n_head > 0 {
            e / u64::from(self.n_head)
        } else {
            e
        };
        let kv = hd * u64::from(self.n_head_kv);
        let tokens = (0..self.n_vocab).map(|i| format!("t{i}")).collect();
        let mut b = HeaderBuilder::new()
            .kv("general.architecture", a)
            .kv("general.name", format!("fuzz seed {a}"))
            .kv(k("block_count"), self.n_layer)
            .kv(k("context_length"), 4096u32)
            .kv(k("embedding_length"), e as u32)
            .kv(k("feed_forward_length"), (2 * e) as u32)
            .kv(k("attention.head_count"), self.n_head)
            .kv(k("attention.head_count_kv"), self.n_head_kv)
            .kv(
                "tokenizer.ggml.tokens",
                Array::new(ArrayItems::String(tokens)),
            );
        if self.experts.0 > 0 {
            b = b
                .kv(k("expert_count"), self.experts.0)
                .kv(k("expert_used_count"), self.experts.1);
        }
        if let Some(w) = self.sliding_window {
            b = b.kv(k("attention.sliding_window"), w);
        }
        if let Some(r) = self.kv_lora_rank {
            // The current converter's layout: a latent K row of lora + rope
            // (`key_length`), and the per-head sizes under the `_mla` keys,
            // which make llama.cpp (and the planner) cache it K-only.
            b = b
                .kv(k("attention.kv_lora_rank"), r)
                .kv(k("rope.dimension_count"), 64u32)
                .kv(k("attention.key_length"), r + 64)
                .kv(k("attention.value_length"), r)
                .kv(k("attention.key_length_mla"), 128u32)
                .kv(k("attention.value_length_mla"), 64u32);
        }
        if let Some(d) = self.ssm_inner {
            b = b
                .kv(k("ssm.inner_size"), d)
                .kv(k("ssm.state_size"), 16u32)
                .kv(k("ssm.conv_kernel"), 4u32);
        }
        let mut tensors = vec![(
            "token_embd.weight".to_string(),
            vec![e, self.n_vocab],
            self.ty,
        )];
        for il in 0..self.n_layer {
            let mut t = |name: &str, dims: &[u64], ty| {
                tensors.push((format!("blk.{il}.{name}"), dims.to_vec(), ty));
            };
            t("attn_norm.weight", &[e], GgmlType::F32);
            if let Some(d) = self.ssm_inner.map(u64::from) {
                t("ssm_in.weight", &[e, 2 * d], self.ty);
                t("ssm_out.weight", &[d, e], self.ty);
                continue;
            }
            t("attn_q.weight", &[e, e], self.ty);
            t("attn_k.weight", &[e, kv], self.ty);
            t("attn_v.weight", &[e, kv], self.ty);
            t("attn_output.weight", &[e, e], self.ty);
            t("ffn_norm.weight", &[e], GgmlType::F32);
            match u64::from(self.experts.0) {
                0 => {
                    t("ffn_gate.weight", &[e, 2 * e], self.ty);
                    t("ffn_up.weight", &[e, 2 * e], self.ty);
                    t("ffn_down.weight", &[2 * e, e], self.ty);
                }
                x => {
                    t("ffn_gate_inp.weight", &[e, x], GgmlType::F32);
                    t("ffn_gate_exps.weight", &[e, e, x], self.ty);
                    t("ffn_up_exps.weight", &[e, e, x], self.ty);
                    t("ffn_down_exps.weight", &[e, e, x], self.ty);
                }
            }
        }
        tensors.push(("output_norm.weight".to_string(), vec![e], GgmlType::F32));
        for (name, dims, ty) in tensors {
            b = b.tensor(name, &dims, ty);
        }
        b.build()
    }
}
