//! The compute buffer of a GPU that runs the big-batch products of the
//! layers left on the CPU (the scheduler's op offload), and its own layers
//! after them, replayed through ggml-alloc's own allocator rather than
//! estimated stage by stage.
//!
//! Each product with a weight on the CPU starts a split of its own whose
//! copy of the weight lives in the device's compute buffer beside the
//! activations, and ggml-alloc packs the copies and activations of every
//! split into one buffer with a best-fit free list (`ggml-alloc.c`
//! `ggml_dyn_tallocr_alloc`, `_free_bytes`). The buffer's size is where the
//! packing peaks, fragmentation included: on lavapipe, Gemma 3 4B's copies
//! of Q4_K and Q6_K FFN weights leave holes a later copy does not fit, and
//! the buffer is 103.6 MiB where the live tensors never exceed 71.0 MiB. No
//! per-stage rule gets that right (the previous one was 16-34% off on the
//! Gemma 3 cases), so this module replays the allocator over the sequence
//! of allocations, frees and in-place reuses that llama.cpp's graph makes
//! for each layer, in graph order. The device's own layers follow in the
//! same buffer: their activations land in the holes the copies left (or
//! above them), so neither part alone gives the size.
//!
//! The sequences were read from the graphs llama.cpp's scheduler builds
//! (every node of the copied graph, with its sources, views and flags,
//! replayed through a port of ggml-alloc that reproduces llama.cpp's buffer
//! sizes to the byte), for `llama` (with and without Llama 3's
//! `rope_freqs`), `gemma3` and `qwen3moe`, with flash attention on and off,
//! attention products and stacked experts the device refuses, at `-ngl` 0,
//! partial and full, and beside two RPC workers; `qwen3` is `qwen3moe`'s
//! attention with a dense FFN. A split's inputs (positions, the cache's row
//! indices, masks, output rows) are copied at the start of the first split
//! that reads them and freed after their last reader. An RPC worker whose
//! layers follow another worker's is replayed in llama.cpp's own graph
//! order (the CPU backend reorders nothing), for `qwen3moe`, where the
//! stage rule was 15-20% over. Held to llama.cpp's
//! accounting on lavapipe by `app/tests/run/vulkan.rs` and on an H200 by
//! `memory/tests_cuda.rs` (CUDA pads a quantized copy by at most one row,
//! which no case shows); any other architecture, or a layer with tensors
//! the sequence does not know, falls back to the stage rule ([`None`]).

use super::{Context, cache_cells, kv_rows, widest_v_row};
use crate::profile::ModelProfile;

/// ggml-alloc's dynamic allocator: chunks of at most `max_chunk` bytes, each
/// a free list sorted by offset whose last block is the chunk's open end.
struct Dyn {
    align: u64,
    max_chunk: u64,
    chunks: Vec<Chunk>,
}

struct Chunk {
    /// Free blocks `(offset, size)`, sorted by offset; the last one is the
    /// open end of the chunk.
    free: Vec<(u64, u64)>,
    /// The chunk's high-water mark.
    max: u64,
}

impl Dyn {
    fn new(align: u64, max_chunk: u64) -> Self {
        Self {
            align: align.max(1),
            max_chunk,
            chunks: Vec::new(),
        }
    }

    fn aligned(&self, size: u64) -> u64 {
        size.div_ceil(self.align).saturating_mul(self.align)
    }

    /// `ggml_dyn_tallocr_alloc`: the best-fitting free block other than a
    /// chunk's open end (the last of equals), else the open end that wastes
    /// least or grows least, else a new chunk.
    fn alloc(&mut self, size: u64) -> (usize, u64) {
        let size = self.aligned(size);
        let mut best: Option<(usize, usize)> = None;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let mut best_size = u64::MAX;
            let blocks = chunk.free.len().saturating_sub(1);
            for (i, &(_, s)) in chunk.free[..blocks].iter().enumerate() {
                if s >= size && s <= best_size {
                    best = Some((c, i));
                    best_size = s;
                }
            }
        }
        if best.is_none() {
            let mut best_reuse = i128::MIN;
            for (c, chunk) in self.chunks.iter().enumerate() {
                let Some(&(offset, s)) = chunk.free.last() else {
                    continue;
                };
                let reuse = i128::from(chunk.max) - i128::from(offset) - i128::from(size);
                let better_reuse = best_reuse < 0 && reuse > best_reuse;
                let better_fit = reuse >= 0 && reuse < best_reuse;
                if s >= size && (better_reuse || better_fit) {
                    best = Some((c, chunk.free.len() - 1));
                    best_reuse = reuse;
                }
            }
        }
        let (c, i) = best.unwrap_or_else(|| {
            self.chunks.push(Chunk {
                free: vec![(0, size.max(self.max_chunk))],
                max: 0,
            });
            (self.chunks.len() - 1, 0)
        });
        let chunk = &mut self.chunks[c];
        let (offset, s) = chunk.free[i];
        if s == size {
            chunk.free.remove(i);
        } else {
            chunk.free[i] = (offset.saturating_add(size), s - size);
        }
        chunk.max = chunk.max.max(offset.saturating_add(size));
        (c, offset)
    }

    /// `ggml_dyn_tallocr_free_bytes`: merged with the block it ends or
    /// starts (and that block's neighbour), else a new block in order.
    fn free(&mut self, (c, offset): (usize, u64), size: u64) {
        let size = self.aligned(size);
        let free = &mut self.chunks[c].free;
        for i in 0..free.len() {
            let (o, s) = free[i];
            if o.saturating_add(s) == offset {
                free[i].1 = s.saturating_add(size);
                if let Some(&(next_o, next_s)) = free.get(i + 1)
                    && free[i].0.saturating_add(free[i].1) == next_o
                {
                    free[i].1 = free[i].1.saturating_add(next_s);
                    free.remove(i + 1);
                }
                return;
            }
            if offset.saturating_add(size) == o {
                free[i] = (offset, s.saturating_add(size));
                if i > 0 && free[i - 1].0.saturating_add(free[i - 1].1) == offset {
                    free[i - 1].1 = free[i - 1].1.saturating_add(free[i].1);
                    free.remove(i);
                }
                return;
            }
        }
        let at = free.partition_point(|&(o, _)| o < offset);
        free.insert(at, (offset, size));
    }

    /// The buffer: every chunk's high-water mark.
    fn size(&self) -> u64 {
        self.chunks.iter().fold(0, |n, c| n.saturating_add(c.max))
    }
}

/// The tensors of the replay by role; a role holds one tensor at a time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum R {
    /// A weight's copy (one at a time: each starts its own split).
    W,
    MixedEmbd,
    MixedRows,
    Slots,
    Embd,
    ScaleRows,
    Dup,
    Pos,
    Freqs,
    Mask,
    MaskSwa,
    /// The rows of the cache a batch writes (`k_idxs`, `v_idxs`), per
    /// cache (the sliding-window one apart).
    KIdx,
    VIdx,
    KIdxSwa,
    VIdxSwa,
    /// A copy of a split's input kept for pipeline parallelism (never
    /// freed).
    InputCopy,
    Norm,
    X,
    Q,
    Q0,
    K,
    K0,
    V,
    CacheK,
    CacheV,
    Kq,
    Kqv,
    KqvCopy,
    Att,
    O,
    Ids,
    AttnRows,
    ResidualRows,
    Sa,
    Residual,
    FfnIn,
    Gate,
    Up,
    Act,
    ActCopy,
    Down,
    Logits,
    Probs,
    Argsort,
    RouterW,
    WeightSum,
    RouterWNorm,
    ExpertSum,
}

struct Sim {
    d: Dyn,
    live: Vec<(R, (usize, u64), u64)>,
    pinned: Vec<R>,
    /// Whether the layer being replayed brings copies of its weights (a
    /// CPU layer's products) or has them on the device (its own layer).
    copies: bool,
    /// Graph inputs the device copies at the start of the next split that
    /// [`Sim::split`] marks, kept until their last use ([`Sim::unpin`]).
    pending: Vec<(R, u64)>,
}

impl Sim {
    fn a(&mut self, r: R, size: u64) {
        let at = self.d.alloc(size);
        self.live.push((r, at, size));
    }

    fn take(&mut self, r: R) -> Option<((usize, u64), u64)> {
        let i = self.live.iter().rposition(|&(x, _, _)| x == r)?;
        let (_, at, size) = self.live.swap_remove(i);
        Some((at, size))
    }

    fn f(&mut self, r: R) {
        if self.pinned.contains(&r) {
            return;
        }
        if let Some((at, size)) = self.take(r) {
            self.d.free(at, size);
        }
    }

    /// An in-place op: `new` takes `old`'s block.
    fn i(&mut self, new: R, old: R) {
        if let Some((at, size)) = self.take(old) {
            self.live.push((new, at, size));
        }
    }

    fn pin(&mut self, r: R, size: u64) {
        self.a(r, size);
        self.pinned.push(r);
    }

    fn unpin(&mut self, r: R) {
        if let Some(i) = self.pinned.iter().position(|&x| x == r) {
            self.pinned.swap_remove(i);
            self.f(r);
        }
    }

    fn is_live(&self, r: R) -> bool {
        self.live.iter().any(|&(x, _, _)| x == r)
    }

    /// A split starts: the scheduler copies the inputs its nodes are the
    /// first on the device to read, in the order they are read, after the
    /// tensor that starts it (a weight's copy or a result the CPU sends
    /// back).
    fn split(&mut self) {
        for (r, size) in std::mem::take(&mut self.pending) {
            if !self.is_live(r) {
                self.pin(r, size);
            }
        }
    }

    /// A weight's copy for a CPU layer's product (a split of its own);
    /// nothing for the device's own layer, whose weights it holds.
    fn w(&mut self, bytes: u64) {
        if self.copies {
            self.a(R::W, bytes);
        }
    }

    /// A product: the weight's copy (for a CPU layer), its result.
    fn proj(&mut self, r: R, weight: u64, size: u64) {
        self.w(weight);
        self.a(r, size);
        self.f(R::W);
    }

    /// The attention's output product and the residual's add (`Sa`). The
    /// last layer keeps its output rows only (`inp_out_ids`, `last_rows`
    /// bytes of them), its residual's rows taken here when
    /// `residual_rows_here` (else before its attention).
    fn attention_out(&mut self, o: u64, last_rows: Option<u64>, residual_rows_here: bool) {
        self.a(R::O, o);
        self.f(R::Att);
        if let Some(rows) = last_rows {
            self.a(R::AttnRows, rows);
            self.f(R::O);
            if residual_rows_here {
                self.a(R::ResidualRows, rows);
                self.f(R::Residual);
            }
            self.unpin(R::Ids);
            self.i(R::Sa, R::AttnRows);
            self.f(R::ResidualRows);
        } else {
            self.i(R::Sa, R::O);
            self.f(R::Residual);
        }
    }

    /// The gate and up products of the normed FFN input (`FfnIn`, freed
    /// after them) and their activation, `rows` bytes each: a dense FFN's or
    /// the chosen experts'.
    fn gate_up(&mut self, gate: u64, up: u64, rows: u64) {
        self.proj(R::Gate, gate, rows);
        self.proj(R::Up, up, rows);
        self.f(R::FfnIn);
        self.a(R::Act, rows);
        self.f(R::Gate);
        self.f(R::Up);
    }

    /// The chosen experts' outputs (`Down`), weighted in place and summed
    /// into one residual-wide row per token (`e4` bytes), which takes the
    /// name `Down`.
    fn expert_sum(&mut self, e4: u64) {
        self.f(R::RouterWNorm);
        self.a(R::ExpertSum, e4);
        self.f(R::Down);
        self.i(R::Down, R::ExpertSum);
    }

    /// The router of routed experts: logits (a product with `weight`),
    /// softmax (in place on the CPU backend), top-k and the weights of the
    /// chosen experts, normalised.
    fn router(&mut self, weight: u64, logits: u64, chosen: u64, rows: u64, probs_in_place: bool) {
        self.proj(R::Logits, weight, logits);
        if probs_in_place {
            self.i(R::Probs, R::Logits);
        } else {
            self.a(R::Probs, logits);
        }
        self.a(R::Argsort, logits);
        self.a(R::RouterW, chosen);
        self.f(R::Probs);
        self.a(R::WeightSum, rows);
        self.a(R::RouterWNorm, chosen);
        self.f(R::RouterW);
        self.f(R::WeightSum);
        self.f(R::Logits);
    }
}

/// The graph families whose sequences were read from llama.cpp.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// `llm_build_llama`: Q, V, K; RoPE out of place (with Llama 3's
    /// frequency factors, a split of its own).
    Llama,
    /// `llm_build_gemma3`: Q, K, V with Q/K norms; post-norms; query scale.
    Gemma3,
    /// `llm_build_qwen3moe`: Q, V, K with Q/K norms; routed experts.
    Qwen3Moe,
    /// `llm_build_qwen3`: Qwen3-MoE's attention, a dense FFN.
    Qwen3,
}

/// The weights of a layer the sequences know, by role (`blk.N.ROLE.weight`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    AttnNorm,
    AttnQ,
    AttnK,
    AttnV,
    AttnOutput,
    AttnQNorm,
    AttnKNorm,
    PostAttentionNorm,
    FfnNorm,
    FfnGate,
    FfnUp,
    FfnDown,
    PostFfwNorm,
    FfnGateInp,
    FfnGateExps,
    FfnUpExps,
    FfnDownExps,
}

impl Role {
    /// Every role, in the order of their indices.
    const ALL: [Role; 17] = [
        Role::AttnNorm,
        Role::AttnQ,
        Role::AttnK,
        Role::AttnV,
        Role::AttnOutput,
        Role::AttnQNorm,
        Role::AttnKNorm,
        Role::PostAttentionNorm,
        Role::FfnNorm,
        Role::FfnGate,
        Role::FfnUp,
        Role::FfnDown,
        Role::PostFfwNorm,
        Role::FfnGateInp,
        Role::FfnGateExps,
        Role::FfnUpExps,
        Role::FfnDownExps,
    ];

    /// The role of a layer weight named `blk.N.{name}.weight`.
    fn from_name(name: &str) -> Option<Role> {
        Some(match name {
            "attn_norm" => Role::AttnNorm,
            "attn_q" => Role::AttnQ,
            "attn_k" => Role::AttnK,
            "attn_v" => Role::AttnV,
            "attn_output" => Role::AttnOutput,
            "attn_q_norm" => Role::AttnQNorm,
            "attn_k_norm" => Role::AttnKNorm,
            "post_attention_norm" => Role::PostAttentionNorm,
            "ffn_norm" => Role::FfnNorm,
            "ffn_gate" => Role::FfnGate,
            "ffn_up" => Role::FfnUp,
            "ffn_down" => Role::FfnDown,
            "post_ffw_norm" => Role::PostFfwNorm,
            "ffn_gate_inp" => Role::FfnGateInp,
            "ffn_gate_exps" => Role::FfnGateExps,
            "ffn_up_exps" => Role::FfnUpExps,
            "ffn_down_exps" => Role::FfnDownExps,
            _ => return None,
        })
    }
}

/// The roles each family's layer holds, in parts (anything else changes the
/// graph).
fn layer_roles(family: Family) -> &'static [&'static [Role]] {
    use Role::*;
    const ATTENTION: &[Role] = &[AttnNorm, AttnQ, AttnK, AttnV, AttnOutput];
    const QK_NORMS: &[Role] = &[AttnQNorm, AttnKNorm];
    const DENSE: &[Role] = &[FfnNorm, FfnGate, FfnUp, FfnDown];
    const ROUTED: &[Role] = &[FfnNorm, FfnGateInp, FfnGateExps, FfnUpExps, FfnDownExps];
    const POST_NORMS: &[Role] = &[PostAttentionNorm, PostFfwNorm];
    match family {
        Family::Llama => &[ATTENTION, DENSE],
        Family::Gemma3 => &[ATTENTION, QK_NORMS, DENSE, POST_NORMS],
        Family::Qwen3 => &[ATTENTION, QK_NORMS, DENSE],
        Family::Qwen3Moe => &[ATTENTION, QK_NORMS, ROUTED],
    }
}

/// The op-offload device's compute buffer when the first `cpu_layers` layers
/// stay on the CPU (all of them: `whole`, with the output layer too), for a
/// device whose buffers align to `align` and are cut into chunks of
/// `max_chunk` and which refuses tensors above `max_tensor`; the layers after
/// them are other devices' (`layerless`: none of them this one's, whose
/// copies of the positions and masks are then freed after the last CPU
/// layer, as on lavapipe beside two RPC workers). `None` when the model's
/// graph is not one this module replays.
pub(super) fn op_offload_buffer(
    p: &ModelProfile,
    ctx: &Context,
    cpu_layers: u32,
    layerless: bool,
    max_tensor: u64,
    align: u64,
    max_chunk: u64,
) -> Option<u64> {
    if cpu_layers == 0 {
        return None;
    }
    let own = if layerless { Own::None } else { Own::Later };
    replay(p, ctx, cpu_layers, own, max_tensor, align, max_chunk)
}

/// The compute buffer of the one device that runs every layer after the
/// first `cpu_layers` (and the big-batch products of those, op offload), the
/// output layer too when `output`: its own layers replayed after the CPU
/// layers' products, in one buffer, since ggml-alloc packs them together (on
/// lavapipe, Qwen3-30B-A3B Q8_0 with half its layers there and no flash
/// attention: its own layers' KQ matrices land above the holes the CPU
/// layers' copies left, 66.0 MiB where the CPU layers' part alone replays to
/// 56.0). Read from llama.cpp's graphs on lavapipe (Vulkan reorders a
/// layer's nodes, `graph_optimize`: Q, K and V products together); `None`
/// as for [`op_offload_buffer`], and for an own layer whose stacked gate
/// and up experts the device refuses but whose down projection it takes
/// (not read).
pub(super) fn device_buffer(
    p: &ModelProfile,
    ctx: &Context,
    cpu_layers: u32,
    output: bool,
    max_tensor: u64,
    align: u64,
    max_chunk: u64,
) -> Option<u64> {
    if cpu_layers >= p.n_layer {
        return None;
    }
    let own = Own::Rest { output };
    replay(p, ctx, cpu_layers, own, max_tensor, align, max_chunk)
}

/// The layers after the CPU's, as the replayed device sees them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Own {
    /// Other devices run them all.
    None,
    /// This device runs some of them, not replayed: its inputs stay.
    Later,
    /// This device runs them all (and the output layer, when `output`).
    Rest { output: bool },
}

/// Each layer's weights by role over `layers` (every tensor one the family
/// has, every role the family has present, attention on every layer) and
/// its experts' width (the stacked gate's rows); `None` otherwise.
fn scan(
    p: &ModelProfile,
    family: Family,
    layers: std::ops::Range<usize>,
) -> Option<(Vec<[u64; Role::ALL.len()]>, Vec<u64>)> {
    let roles = layer_roles(family);
    let has = |r: Role| roles.iter().any(|part| part.contains(&r));
    let mut weights = Vec::with_capacity(layers.len());
    let mut widths = Vec::with_capacity(layers.len());
    for il in layers.clone() {
        let layer = p.layers.get(il)?;
        let mut w = [None; Role::ALL.len()];
        let mut width = 0;
        for t in &layer.tensors {
            // `blk.{il}.{role}.weight`, read without allocating: the solver
            // replays a placement many times per model.
            let (index, name) = t
                .name
                .strip_prefix("blk.")
                .and_then(|n| n.split_once('.'))
                .and_then(|(index, rest)| Some((index, rest.strip_suffix(".weight")?)))?;
            if index.parse::<usize>().ok()? != il {
                return None;
            }
            let role = Role::from_name(name).filter(|&r| has(r))?;
            if role == Role::FfnGateExps {
                width = t.dims.get(1).copied().unwrap_or(0);
            }
            w[role as usize] = Some(t.bytes);
        }
        if roles
            .iter()
            .flat_map(|part| part.iter())
            .any(|&r| w[r as usize].is_none())
            || !p.is_attention_layer(il)
            || p.n_head_kv.get(il).copied().unwrap_or(0) == 0
        {
            return None;
        }
        weights.push(w.map(|b| b.unwrap_or(0)));
        widths.push(width);
    }
    Some((weights, widths))
}

/// The compute buffer of an RPC worker whose layers `layers` follow
/// another worker's, the output layer on a third device, for `qwen3moe`
/// with flash attention and one sequence, the experts all taken (read
/// from llama.cpp's graph of lavapipe beside two workers, to the byte).
/// The worker before it computes its first layer's norm (a weightless op
/// stays with the previous backend) and sends it with the residual; the
/// graph's inputs come first; a layer runs in llama.cpp's graph order (no
/// reordering on the CPU backend), the router's softmax in place, and the
/// last layer's output rows are taken after its attention. With pipeline
/// parallelism every copy of each input is allocated first and kept
/// (`ggml_backend_sched_split_graph`: flagged input and output, which
/// ggml-alloc neither frees nor overwrites in place). `None` for anything
/// else.
pub(super) fn rpc_follower_buffer(
    p: &ModelProfile,
    ctx: &Context,
    layers: std::ops::Range<usize>,
    copies: u64,
    max_tensor: u64,
    align: u64,
) -> Option<u64> {
    let n_layer = p.n_layer as usize;
    let experts = p.experts?;
    if p.arch != "qwen3moe"
        || !ctx.flash_attn
        || ctx.n_seq != 1
        || p.mla.is_some()
        || p.recurrent.is_some()
        || p.nextn > 0
        || p.swa.is_some()
        || layers.is_empty()
        || layers.start == 0
        || layers.end > n_layer
    {
        return None;
    }
    let (weights, widths) = scan(p, Family::Qwen3Moe, layers.clone())?;
    if weights.iter().flatten().any(|&b| b > max_tensor) {
        return None;
    }
    let f4 = |n: u64| n.saturating_mul(4);
    let n_tok = u64::from(ctx.n_tokens);
    let e = u64::from(p.n_embd);
    let e4 = |t: u64| f4(e.saturating_mul(t));
    let (dk, dv) = (u64::from(p.head_dim_k), u64::from(p.head_dim_v));
    let n_out = u64::from(ctx.n_outputs.max(1)).min(n_tok);
    let (n_exp, used) = (u64::from(experts.count), u64::from(experts.used));
    let holds_last = layers.end == n_layer;
    let mut s = Sim {
        d: Dyn::new(align, u64::MAX),
        live: Vec::new(),
        pinned: Vec::new(),
        copies: false,
        pending: Vec::new(),
    };
    let mut t = n_tok;
    // The split's inputs, in the order it reads them.
    let mut inputs = vec![
        (R::Norm, e4(t)),
        (R::Pos, f4(t)),
        (R::KIdx, n_tok.saturating_mul(8)),
        (R::VIdx, n_tok.saturating_mul(8)),
        (
            R::Mask,
            u64::from(ctx.n_ctx_seq)
                .saturating_mul(n_tok)
                .saturating_mul(2),
        ),
        (R::Residual, e4(t)),
    ];
    if holds_last {
        inputs.push((R::Ids, f4(n_out)));
    }
    let pipeline = copies > 1;
    for (r, size) in inputs {
        if pipeline {
            for _ in 0..copies {
                s.pin(R::InputCopy, size);
            }
        } else if matches!(r, R::Norm | R::Residual) {
            s.a(r, size);
        } else {
            s.pin(r, size);
        }
    }
    for (il, &ff_exp) in layers.clone().zip(&widths) {
        let last = il + 1 == n_layer;
        let h = u64::from(p.n_head.get(il).copied().unwrap_or(0));
        let hkv = u64::from(p.n_head_kv.get(il).copied().unwrap_or(0));
        let q4 = f4(h.saturating_mul(dk).saturating_mul(t));
        let k4 = f4(hkv.saturating_mul(dk).saturating_mul(t));
        let v4 = f4(hkv.saturating_mul(dv).saturating_mul(t));
        let att4 = f4(h.saturating_mul(dv).saturating_mul(t));
        if il > layers.start {
            s.a(R::Norm, e4(t));
        }
        if pipeline && il == layers.start {
            // The kept copy is not overwritten in place.
            s.a(R::X, e4(t));
        } else {
            s.i(R::X, R::Norm);
        }
        s.a(R::Q0, q4);
        s.a(R::Q, q4);
        s.f(R::Q0);
        s.a(R::V, v4);
        s.a(R::K0, k4);
        s.f(R::X);
        s.a(R::K, k4);
        s.f(R::K0);
        if last {
            s.unpin(R::Pos);
        }
        s.f(R::K);
        if last {
            s.unpin(R::KIdx);
        }
        s.f(R::V);
        if last {
            s.unpin(R::VIdx);
        }
        s.a(R::Att, att4);
        s.f(R::Q);
        if last {
            s.unpin(R::Mask);
        }
        s.attention_out(e4(t), last.then(|| e4(n_out)), true);
        if last {
            t = n_out;
        }
        s.a(R::Norm, e4(t));
        s.i(R::FfnIn, R::Norm);
        let act = f4(ff_exp.saturating_mul(used).saturating_mul(t));
        let chosen = f4(used.saturating_mul(t));
        // The worker holds its weights: no copies, whatever the sizes.
        s.router(0, f4(n_exp.saturating_mul(t)), chosen, f4(t), true);
        s.gate_up(0, 0, act);
        s.a(R::Down, f4(e.saturating_mul(used).saturating_mul(t)));
        s.f(R::Act);
        s.f(R::Argsort);
        s.expert_sum(e4(t));
        s.i(R::Residual, R::Down);
        s.f(R::Sa);
    }
    if !holds_last {
        // The next worker's first norm is computed here.
        s.a(R::Norm, e4(t));
    }
    Some(s.d.size())
}

/// The replay of both.
fn replay(
    p: &ModelProfile,
    ctx: &Context,
    cpu_layers: u32,
    own: Own,
    max_tensor: u64,
    align: u64,
    max_chunk: u64,
) -> Option<u64> {
    let family = match p.arch.as_str() {
        "llama" => Family::Llama,
        "gemma3" => Family::Gemma3,
        "qwen3moe" => Family::Qwen3Moe,
        "qwen3" => Family::Qwen3,
        _ => return None,
    };
    if ctx.n_seq != 1
        || p.mla.is_some()
        || p.recurrent.is_some()
        || p.nextn > 0
        || (family == Family::Qwen3Moe) != p.experts.is_some()
        || cpu_layers > p.n_layer
    {
        return None;
    }
    let n_layer = p.n_layer as usize;
    let cpu = cpu_layers as usize;
    let whole = cpu == n_layer;
    let runs_rest = matches!(own, Own::Rest { .. });
    // The device runs the last layer's attention or products.
    let to_the_end = whole || runs_rest;
    // The last layer whose products or attention the device runs, where
    // the positions and the masks see their last use (none when the device
    // runs later layers this replay leaves out).
    let last_seen = match own {
        _ if to_the_end => Some(n_layer - 1),
        Own::None => cpu.checked_sub(1),
        _ => None,
    };
    let scanned = if runs_rest { n_layer } else { cpu };
    let (weights, widths) = scan(p, family, 0..scanned)?;
    let wt = |il: usize, role: Role| -> u64 { weights[il][role as usize] };

    let f4 = |n: u64| n.saturating_mul(4);
    let n_tok = u64::from(ctx.n_tokens);
    let e = u64::from(p.n_embd);
    let (dk, dv) = (u64::from(p.head_dim_k), u64::from(p.head_dim_v));
    let n_out = u64::from(ctx.n_outputs.max(1)).min(n_tok);
    let e4 = |t: u64| f4(e.saturating_mul(t));
    let swa = |il: usize| family == Family::Gemma3 && p.is_swa_layer(il);
    let cells = |il: usize| cache_cells(p, ctx, il);
    let heads = |il: usize| u64::from(p.n_head.get(il).copied().unwrap_or(0));
    let kq_of = |il: usize| f4(cells(il).saturating_mul(n_tok).saturating_mul(heads(il)));
    // The CPU computes a layer's attention whose KQ matrix the device
    // refuses; the result comes back.
    let refused = |il: usize| !ctx.flash_attn && kq_of(il) > max_tensor;
    let mask_of = |il: usize| if swa(il) { R::MaskSwa } else { R::Mask };
    let idx_of = |il: usize| {
        if swa(il) {
            (R::KIdxSwa, R::VIdxSwa)
        } else {
            (R::KIdx, R::VIdx)
        }
    };
    // One row per token (this llama.cpp pads neither, `llama-graph.cpp`).
    let mask_bytes = |il: usize| {
        cells(il)
            .saturating_mul(n_tok)
            .saturating_mul(if ctx.flash_attn { 2 } else { 4 })
    };
    // Without flash attention V is stored transposed: one index per
    // element of the cache's widest V row.
    let v_idx_bytes = |il: usize| {
        let per_token = if ctx.flash_attn {
            1
        } else {
            widest_v_row(p, swa(il))
        };
        n_tok.saturating_mul(per_token).saturating_mul(8)
    };
    // Per cache (full, sliding): its first layer, its last, and the last
    // whose attention the device runs (the CPU layers' products or its
    // own), where its mask sees its last use.
    let first_of = [false, true].map(|w| (0..n_layer).find(|&il| swa(il) == w));
    let last_of = [false, true].map(|w| (0..n_layer).rev().find(|&il| swa(il) == w));
    let mask_last_of = [false, true].map(|w| {
        last_seen.and_then(|end| (0..=end).rev().find(|&il| swa(il) == w && !refused(il)))
    });
    // The experts' output comes back from the CPU (a split starts there).
    let experts_return = |il: usize| {
        p.experts.is_some()
            && (wt(il, Role::FfnGateExps) > max_tensor
                || wt(il, Role::FfnUpExps) > max_tensor
                || wt(il, Role::FfnDownExps) > max_tensor)
    };
    // The inputs the device's own layers read first in the split that
    // starts at layer `from` (after its attention: `after_attention`), up
    // to the next tensor that comes back from the CPU.
    let needs = |from: usize, after_attention: bool| {
        let mut list: Vec<(R, u64)> = Vec::new();
        let mut add = |r: R, size: u64| {
            if !list.iter().any(|&(x, _)| x == r) {
                list.push((r, size));
            }
        };
        for il in from..n_layer {
            let last = il + 1 == n_layer;
            if !(il == from && after_attention) {
                let (k, v) = idx_of(il);
                add(R::Pos, f4(n_tok));
                add(k, n_tok.saturating_mul(8));
                add(v, v_idx_bytes(il));
                if refused(il) {
                    break;
                }
                add(mask_of(il), mask_bytes(il));
            }
            if last {
                add(R::Ids, f4(n_out));
            }
            if experts_return(il) {
                break;
            }
        }
        list
    };
    let mut s = Sim {
        d: Dyn::new(align, max_chunk),
        live: Vec::new(),
        pinned: Vec::new(),
        copies: true,
        pending: Vec::new(),
    };
    let mut t = n_tok;
    // The graph's inputs: this llama.cpp mixes token and multimodal
    // embeddings through a copy the graph never frees. With no layer on
    // the CPU the first split is the device's, and its inputs come first.
    s.a(R::MixedEmbd, e4(t));
    s.a(R::MixedRows, e4(t));
    s.a(R::Slots, 4096);
    s.a(R::Embd, e4(t));
    if family == Family::Gemma3 {
        s.a(R::ScaleRows, 2048);
    }
    if cpu == 0 {
        s.pending = needs(0, false);
        s.split();
    }
    s.pin(R::Dup, e4(t));
    s.f(R::MixedEmbd);
    if family == Family::Gemma3 {
        s.i(R::Residual, R::Embd);
        s.f(R::ScaleRows);
        s.f(R::MixedRows);
        s.f(R::Slots);
        s.a(R::Norm, e4(t));
    } else {
        s.a(R::Norm, e4(t));
        s.f(R::MixedRows);
        s.f(R::Slots);
        s.i(R::Residual, R::Embd);
    }
    let freqs = p
        .globals
        .iter()
        .find(|g| g.name == "rope_freqs.weight")
        .map(|g| g.bytes);
    for (il, &ff_exp) in widths.iter().enumerate() {
        let own_layer = il >= cpu;
        s.copies = !own_layer;
        let last = to_the_end && il + 1 == n_layer;
        let hands_over = runs_rest && il + 1 == cpu;
        let pos_done = last_seen == Some(il);
        let h = heads(il);
        let hkv = u64::from(p.n_head_kv[il]);
        let q4 = f4(h.saturating_mul(dk).saturating_mul(t));
        let k4 = f4(hkv.saturating_mul(dk).saturating_mul(t));
        let v4 = f4(hkv.saturating_mul(dv).saturating_mul(t));
        let att4 = f4(h.saturating_mul(dv).saturating_mul(t));
        let (k_row, v_row) = kv_rows(p, ctx, il);
        let cache_k = k_row.saturating_mul(cells(il));
        let cache_v = v_row.saturating_mul(cells(il));
        let kq = kq_of(il);
        let mask = mask_of(il);
        let (k_idx, v_idx) = idx_of(il);
        let cache = usize::from(swa(il));
        let idx_done = own_layer && last_of[cache] == Some(il);
        let unmask = |s: &mut Sim| {
            if mask_last_of[cache] == Some(il) {
                s.unpin(mask);
            }
        };

        if il > 0 {
            s.a(R::Norm, e4(t));
        }
        s.w(wt(il, Role::AttnNorm));
        s.i(R::X, R::Norm);
        s.f(R::W);
        if own_layer {
            // The device's own layer: Q, K and V products together.
            let (q_norm, k_norm) = (R::Q, R::K);
            if family == Family::Gemma3 {
                s.a(R::Q0, q4);
                s.a(R::K0, k4);
                s.a(R::V, v4);
            } else {
                s.a(R::Q0, q4);
                s.a(R::V, v4);
                s.a(R::K0, k4);
            }
            s.f(R::X);
            // Normed or rotated out of place (Llama's RoPE; the others'
            // norms, with RoPE in place), V written to the cache.
            s.a(q_norm, q4);
            s.f(R::Q0);
            let v_written = |s: &mut Sim| {
                s.f(R::V);
                if idx_done {
                    s.unpin(v_idx);
                }
            };
            if family != Family::Gemma3 {
                v_written(&mut s);
            }
            s.a(k_norm, k4);
            s.f(R::K0);
            if last {
                s.unpin(R::Pos);
            }
            s.f(R::K);
            if idx_done {
                s.unpin(k_idx);
            }
            if family == Family::Gemma3 {
                v_written(&mut s);
            }
            // The last layer's residual rows (`inp_out_ids`) are taken
            // before its attention, or after it when it comes back from the
            // CPU.
            let residual_rows = |s: &mut Sim| {
                if last {
                    s.a(R::ResidualRows, e4(n_out));
                    s.f(R::Residual);
                }
            };
            if refused(il) {
                s.f(R::Q);
                s.a(R::KqvCopy, att4);
                s.pending = needs(il, true);
                s.split();
                s.a(R::Att, att4);
                s.f(R::KqvCopy);
                residual_rows(&mut s);
            } else if ctx.flash_attn {
                residual_rows(&mut s);
                s.a(R::Att, att4);
                s.f(R::Q);
                unmask(&mut s);
            } else {
                residual_rows(&mut s);
                s.a(R::Kq, kq);
                s.f(R::Q);
                unmask(&mut s);
                s.a(R::Kqv, att4);
                s.f(R::Kq);
                s.a(R::Att, att4);
                s.f(R::Kqv);
            }
            s.attention_out(e4(t), last.then(|| e4(n_out)), false);
            if last {
                t = n_out;
            }
        } else {
            // The CPU's layer: each product a split with its weight's copy.
            // The Q/K norms (gemma3, qwen3): the norm is out of place, its
            // weight's product and the RoPE in place; the first query's
            // split brings the positions, the last key's RoPE is their last
            // use.
            let query_norm = |s: &mut Sim| {
                s.a(R::Q, q4);
                s.f(R::Q0);
                s.a(R::W, wt(il, Role::AttnQNorm));
                if il == 0 {
                    s.pin(R::Pos, f4(t));
                }
                s.f(R::W);
            };
            let key_norm = |s: &mut Sim| {
                s.a(R::K, k4);
                s.f(R::K0);
                s.a(R::W, wt(il, Role::AttnKNorm));
                s.f(R::W);
                if pos_done {
                    s.unpin(R::Pos);
                }
            };
            match family {
                Family::Gemma3 => {
                    s.proj(R::Q0, wt(il, Role::AttnQ), q4);
                    query_norm(&mut s);
                    s.proj(R::K0, wt(il, Role::AttnK), k4);
                    key_norm(&mut s);
                    s.proj(R::V, wt(il, Role::AttnV), v4);
                    s.f(R::X);
                    s.f(R::K);
                    s.f(R::V);
                }
                Family::Qwen3Moe | Family::Qwen3 => {
                    s.proj(R::Q0, wt(il, Role::AttnQ), q4);
                    query_norm(&mut s);
                    s.proj(R::V, wt(il, Role::AttnV), v4);
                    s.proj(R::K0, wt(il, Role::AttnK), k4);
                    s.f(R::X);
                    key_norm(&mut s);
                    s.f(R::K);
                    s.f(R::V);
                }
                Family::Llama => {
                    // Llama 3's `rope_freqs` is a weight: each RoPE starts a
                    // split, the first with the positions and the factors as
                    // inputs, the later ones with none, so V's product (and
                    // its weight's copy) joins the query's RoPE.
                    if il == 0 && freqs.is_none() {
                        s.a(R::W, wt(il, Role::AttnQ));
                        s.pin(R::Pos, f4(t));
                        s.a(R::Q0, q4);
                        s.f(R::W);
                    } else {
                        s.proj(R::Q0, wt(il, Role::AttnQ), q4);
                    }
                    if il == 0
                        && let Some(bytes) = freqs
                    {
                        s.pin(R::Pos, f4(t));
                        s.pin(R::Freqs, bytes);
                    }
                    if freqs.is_some() && il > 0 {
                        s.a(R::W, wt(il, Role::AttnV));
                        s.a(R::Q, q4);
                        s.f(R::Q0);
                        s.a(R::V, v4);
                        s.f(R::W);
                    } else {
                        s.a(R::Q, q4);
                        s.f(R::Q0);
                        s.proj(R::V, wt(il, Role::AttnV), v4);
                    }
                    s.proj(R::K0, wt(il, Role::AttnK), k4);
                    s.f(R::X);
                    s.a(R::K, k4);
                    s.f(R::K0);
                    if pos_done {
                        s.unpin(R::Pos);
                    }
                    // The device's own layers read their own copy of the
                    // factors (duplicated per layer at load).
                    if pos_done || hands_over {
                        s.unpin(R::Freqs);
                    }
                    s.f(R::K);
                    s.f(R::V);
                }
            }
            if refused(il) {
                // The CPU computes the attention; its output comes back.
                s.f(R::Q);
                s.a(R::KqvCopy, att4);
                s.a(R::Att, att4);
                s.f(R::KqvCopy);
            } else {
                let first_mask = first_of[cache] == Some(il);
                s.a(R::CacheK, cache_k);
                if ctx.flash_attn {
                    s.a(R::CacheV, cache_v);
                    if first_mask {
                        s.pin(mask, mask_bytes(il));
                    }
                    s.a(R::Att, att4);
                    s.f(R::Q);
                    s.f(R::CacheK);
                    s.f(R::CacheV);
                    unmask(&mut s);
                } else {
                    if first_mask {
                        s.pin(mask, mask_bytes(il));
                    }
                    s.a(R::CacheV, cache_v);
                    s.a(R::Kq, kq);
                    s.f(R::CacheK);
                    s.f(R::Q);
                    unmask(&mut s);
                    s.a(R::Kqv, att4);
                    s.f(R::CacheV);
                    s.f(R::Kq);
                    s.a(R::Att, att4);
                    s.f(R::Kqv);
                }
            }
            if last {
                // The last layer keeps the output rows only (`inp_out_ids`).
                let rows = e4(n_out);
                s.a(R::W, wt(il, Role::AttnOutput));
                s.a(R::Ids, f4(n_out));
                s.a(R::O, e4(t));
                s.f(R::W);
                s.f(R::Att);
                if family == Family::Gemma3 {
                    s.a(R::AttnRows, rows);
                    s.f(R::O);
                    s.a(R::W, wt(il, Role::PostAttentionNorm));
                    s.f(R::W);
                    s.a(R::ResidualRows, rows);
                    s.f(R::Residual);
                    s.f(R::Ids);
                } else {
                    s.a(R::ResidualRows, rows);
                    s.f(R::Residual);
                    s.a(R::AttnRows, rows);
                    s.f(R::O);
                    s.f(R::Ids);
                }
                s.i(R::Sa, R::AttnRows);
                s.f(R::ResidualRows);
                t = n_out;
            } else {
                s.proj(R::O, wt(il, Role::AttnOutput), e4(t));
                s.f(R::Att);
                if family == Family::Gemma3 {
                    s.a(R::W, wt(il, Role::PostAttentionNorm));
                    s.f(R::W);
                }
                s.i(R::Sa, R::O);
                s.f(R::Residual);
            }
        }
        s.a(R::Norm, e4(t));
        s.w(wt(il, Role::FfnNorm));
        s.i(R::FfnIn, R::Norm);
        s.f(R::W);
        // The split a layer's last product starts (the down projection's
        // weight copy, or the experts' output coming back) brings the
        // inputs of the layers after it on this device.
        let next = |s: &mut Sim| {
            if hands_over || (own_layer && il + 1 < n_layer) {
                s.pending = needs(il + 1, false);
            }
            s.split();
        };
        if let Some(x) = p.experts.filter(|_| family == Family::Qwen3Moe) {
            let n_exp = u64::from(x.count);
            let used = u64::from(x.used);
            let router = f4(n_exp.saturating_mul(t));
            let chosen = f4(used.saturating_mul(t));
            s.router(wt(il, Role::FfnGateInp), router, chosen, f4(t), false);
            let act = f4(ff_exp.saturating_mul(used).saturating_mul(t));
            let down = f4(e.saturating_mul(used).saturating_mul(t));
            let gate = wt(il, Role::FfnGateExps);
            let up = wt(il, Role::FfnUpExps);
            let down_w = wt(il, Role::FfnDownExps);
            // A layerless device's last CPU layer: the experts' output the
            // CPU computes goes on to the next device (read beside two RPC
            // workers), and so does the rest of the layer.
            let passed_on = own == Own::None && il + 1 == cpu && down_w > max_tensor;
            let gate_up = gate <= max_tensor && up <= max_tensor;
            if gate_up {
                s.gate_up(gate, up, act);
            } else {
                s.f(R::FfnIn);
            }
            if passed_on {
                s.f(R::Act);
                s.f(R::Argsort);
                s.f(R::RouterWNorm);
                s.f(R::Sa);
                continue;
            }
            if gate_up {
                if down_w <= max_tensor {
                    s.w(down_w);
                    if !own_layer {
                        next(&mut s);
                    }
                    s.a(R::Down, down);
                    s.f(R::W);
                    s.f(R::Act);
                    s.f(R::Argsort);
                } else {
                    s.f(R::Act);
                    s.f(R::Argsort);
                    s.a(R::Down, down);
                    next(&mut s);
                }
            } else {
                s.f(R::Argsort);
                if down_w <= max_tensor {
                    if own_layer {
                        // Not read from a graph yet.
                        return None;
                    }
                    s.a(R::ActCopy, act);
                    s.w(down_w);
                    next(&mut s);
                    s.a(R::Down, down);
                    s.f(R::W);
                    s.f(R::ActCopy);
                } else {
                    s.a(R::Down, down);
                    next(&mut s);
                }
            }
            s.expert_sum(e4(t));
        } else {
            let ff = f4(u64::from(p.n_ff).saturating_mul(t));
            s.gate_up(wt(il, Role::FfnGate), wt(il, Role::FfnUp), ff);
            s.w(wt(il, Role::FfnDown));
            if family != Family::Gemma3 && !own_layer {
                next(&mut s);
            }
            s.a(R::Down, e4(t));
            s.f(R::W);
            s.f(R::Act);
        }
        if family == Family::Gemma3 {
            s.w(wt(il, Role::PostFfwNorm));
            if !own_layer {
                next(&mut s);
            }
            s.f(R::W);
        }
        s.i(R::Residual, R::Down);
        s.f(R::Sa);
    }
    let out = p.output.as_ref().or(p.token_embd.as_ref());
    match own {
        // The output layer on the device: its norm in place, its product
        // when the device takes the matrix.
        Own::Rest { output: true } => {
            if let Some(out) = out
                && out.bytes <= max_tensor
            {
                s.a(R::Logits, f4(p.n_vocab.saturating_mul(n_out)));
            }
        }
        // The output layer stays on the CPU: its norm is offloaded, and so
        // is its product when the batch has rows enough and the device
        // takes the matrix.
        _ if to_the_end => {
            let norm = p
                .globals
                .iter()
                .find(|g| g.name == "output_norm.weight")
                .map_or(0, |g| g.bytes);
            s.a(R::W, norm);
            s.f(R::W);
            if let Some(out) = out
                && n_out >= u64::from(super::OP_OFFLOAD_MIN_BATCH)
                && out.bytes <= max_tensor
            {
                s.a(R::W, out.bytes);
                s.a(R::Logits, f4(p.n_vocab.saturating_mul(n_out)));
                s.f(R::W);
            }
        }
        _ => {}
    }
    Some(s.d.size())
}

#[cfg(test)]
mod tests {
    use super::Dyn;

    /// ggml-alloc's best fit: the smallest hole that holds the tensor (the
    /// later of equals), else the open end, which grows the buffer.
    #[test]
    fn the_allocator_fits_the_smallest_hole_and_merges_what_is_freed() {
        let mut d = Dyn::new(16, 1 << 30);
        let a = d.alloc(100);
        let b = d.alloc(50);
        let c = d.alloc(100);
        let _end = d.alloc(10);
        assert_eq!((a.1, b.1, c.1), (0, 112, 176));
        d.free(a, 100);
        d.free(c, 100);
        // 48 bytes fit both 112-byte holes: the later one is taken.
        assert_eq!(d.alloc(48).1, 176);
        // Freeing b merges it with the hole before it.
        d.free(b, 50);
        assert_eq!(d.alloc(160).1, 0);
        // No hole holds 200 (16 bytes are left at 160, 64 at 224): the
        // open end, after the 10-byte tensor, grows the buffer.
        assert_eq!(d.size(), 304);
        let e = d.alloc(200);
        assert_eq!(e.1, 304);
        assert_eq!(d.size(), 304 + 208);
    }
}
