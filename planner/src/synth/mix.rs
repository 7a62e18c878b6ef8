//! llama.cpp's file types (`enum llama_ftype`) and the tensor type each one
//! gives each tensor, for every mix `llama-quantize` makes.
//!
//! [`super::quant_type`] mirrors the rules for the three mixes the synthetic
//! shapes need; catalog models come in many more (`Q3_K_M`, `IQ4_XS`,
//! `MXFP4_MOE`, …), so this module mirrors `llama_tensor_get_type_impl` and
//! `tensor_type_fallback` of the vendored `src/llama-quant.cpp` whole, for
//! quantizations without an importance matrix and without manual overrides.
//! The app's `catalog` test compares it, tensor by tensor, with llama.cpp's
//! own rules through the shim.

use crate::gguf::GgmlType;
use crate::profile::ftype_label;

/// A llama.cpp file type: the quantization mix named in a file's name
/// (`Q4_K_M`) and stored as `general.file_type`.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// All 32-bit floats.
    F32 = 0,
    /// 16-bit floats (1-D tensors stay F32).
    F16 = 1,
    /// `Q4_0`.
    Q4_0 = 2,
    /// `Q4_1`.
    Q4_1 = 3,
    /// `Q8_0`.
    Q8_0 = 7,
    /// `Q5_0`.
    Q5_0 = 8,
    /// `Q5_1`.
    Q5_1 = 9,
    /// `Q2_K`.
    Q2_K = 10,
    /// `Q3_K_S`.
    Q3_K_S = 11,
    /// `Q3_K_M`.
    Q3_K_M = 12,
    /// `Q3_K_L`.
    Q3_K_L = 13,
    /// `Q4_K_S`.
    Q4_K_S = 14,
    /// `Q4_K_M`.
    Q4_K_M = 15,
    /// `Q5_K_S`.
    Q5_K_S = 16,
    /// `Q5_K_M`.
    Q5_K_M = 17,
    /// `Q6_K`.
    Q6_K = 18,
    /// `IQ2_XXS`.
    IQ2_XXS = 19,
    /// `IQ2_XS`.
    IQ2_XS = 20,
    /// `Q2_K_S`.
    Q2_K_S = 21,
    /// `IQ3_XS`.
    IQ3_XS = 22,
    /// `IQ3_XXS`.
    IQ3_XXS = 23,
    /// `IQ1_S`.
    IQ1_S = 24,
    /// `IQ4_NL`.
    IQ4_NL = 25,
    /// `IQ3_S`.
    IQ3_S = 26,
    /// `IQ3_M`.
    IQ3_M = 27,
    /// `IQ2_S`.
    IQ2_S = 28,
    /// `IQ2_M`.
    IQ2_M = 29,
    /// `IQ4_XS`.
    IQ4_XS = 30,
    /// `IQ1_M`.
    IQ1_M = 31,
    /// bfloat16 (1-D tensors stay F32).
    BF16 = 32,
    /// MXFP4 experts, Q8_0 for everything else (gpt-oss).
    MXFP4_MOE = 38,
}

/// Names some repositories use for a mix, and the mix they mean
/// (llama-quantize itself accepts `Q4_K` for `Q4_K_M`, and so on).
const ALIASES: &[(&str, FileType)] = &[
    ("Q3_K", FileType::Q3_K_M),
    ("Q4_K", FileType::Q4_K_M),
    ("Q5_K", FileType::Q5_K_M),
    ("MXFP4", FileType::MXFP4_MOE),
];

impl FileType {
    /// Every file type, in `llama_ftype` order.
    pub const ALL: [FileType; 31] = {
        use FileType::*;
        [
            F32, F16, Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M,
            Q5_K_S, Q5_K_M, Q6_K, IQ2_XXS, IQ2_XS, Q2_K_S, IQ3_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S,
            IQ3_M, IQ2_S, IQ2_M, IQ4_XS, IQ1_M, BF16, MXFP4_MOE,
        ]
    };

    /// The `general.file_type` value.
    #[must_use]
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The name llama.cpp prints (`Q4_K_M`), the same as
    /// [`crate::profile::ftype_label`].
    #[must_use]
    pub fn name(self) -> &'static str {
        ftype_label(u64::from(self.id())).unwrap_or("unknown")
    }

    /// The file type called `name`, case-insensitively, accepting the short
    /// aliases `Q3_K`, `Q4_K`, `Q5_K` (the `_M` mixes) and `MXFP4`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<FileType> {
        FileType::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
            .or_else(|| {
                ALIASES
                    .iter()
                    .find(|(a, _)| a.eq_ignore_ascii_case(name))
                    .map(|(_, f)| *f)
            })
    }

    /// The mix's base type (`llama_ftype_get_default_type`).
    #[must_use]
    pub fn default_type(self) -> GgmlType {
        use FileType as F;
        match self {
            F::F32 => GgmlType::F32,
            F::F16 => GgmlType::F16,
            F::BF16 => GgmlType::BF16,
            F::Q4_0 => GgmlType::Q4_0,
            F::Q4_1 => GgmlType::Q4_1,
            F::Q5_0 => GgmlType::Q5_0,
            F::Q5_1 => GgmlType::Q5_1,
            F::Q8_0 => GgmlType::Q8_0,
            F::MXFP4_MOE => GgmlType::MXFP4,
            F::Q2_K | F::Q2_K_S => GgmlType::Q2_K,
            F::IQ3_XS | F::IQ3_S | F::IQ3_M => GgmlType::IQ3_S,
            F::Q3_K_S | F::Q3_K_M | F::Q3_K_L => GgmlType::Q3_K,
            F::Q4_K_S | F::Q4_K_M => GgmlType::Q4_K,
            F::Q5_K_S | F::Q5_K_M => GgmlType::Q5_K,
            F::Q6_K => GgmlType::Q6_K,
            F::IQ2_XXS => GgmlType::IQ2_XXS,
            F::IQ2_XS | F::IQ2_S => GgmlType::IQ2_XS,
            F::IQ2_M => GgmlType::IQ2_S,
            F::IQ3_XXS => GgmlType::IQ3_XXS,
            F::IQ1_S => GgmlType::IQ1_S,
            F::IQ1_M => GgmlType::IQ1_M,
            F::IQ4_NL => GgmlType::IQ4_NL,
            F::IQ4_XS => GgmlType::IQ4_XS,
        }
    }
}

/// The facts about a model that llama.cpp's type rules read
/// (`llama_quant_model_desc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixModel {
    /// Repeating layers.
    pub n_layer: u32,
    /// Query heads.
    pub n_head: u64,
    /// Key/value heads.
    pub n_head_kv: u64,
    /// Experts per MoE layer (0: dense).
    pub n_expert: u32,
    /// llama.cpp's `LLM_TYPE_70B`: a `llama` model of 80 layers with GQA.
    pub is_70b: bool,
}

impl MixModel {
    /// `hparams.n_gqa()`.
    fn n_gqa(&self) -> u64 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }
}

/// One tensor to type: its name and shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixTensor<'a> {
    /// GGUF tensor name.
    pub name: &'a str,
    /// Dimensions, innermost first.
    pub dims: &'a [u64],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    TokenEmbd,
    AttnQ,
    AttnV,
    AttnK,
    AttnQkv,
    AttnKvB,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

/// `tensor_get_category`.
fn category(name: &str) -> Category {
    if name == "output.weight" {
        Category::Output
    } else if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
        Category::TokenEmbd
    } else if name.contains("attn_qkv.weight") {
        Category::AttnQkv
    } else if name.contains("attn_kv_b.weight") {
        Category::AttnKvB
    } else if name.contains("attn_v.weight") {
        Category::AttnV
    } else if name.contains("attn_k.weight") {
        Category::AttnK
    } else if name.contains("attn_q.weight") {
        Category::AttnQ
    } else if name.contains("attn_output.weight") {
        Category::AttnOutput
    } else if name.contains("ffn_up") {
        Category::FfnUp
    } else if name.contains("ffn_gate") {
        Category::FfnGate
    } else if name.contains("ffn_down") {
        Category::FfnDown
    } else {
        Category::Other
    }
}

fn is_attn_v(c: Category) -> bool {
    matches!(c, Category::AttnV | Category::AttnQkv | Category::AttnKvB)
}

/// Whether llama-quantize may change this tensor's type
/// (`tensor_allows_quantization`, for the tensors language models have).
/// Converters store the others as F32.
#[must_use]
pub fn allows_quantization(name: &str, dims: &[u64]) -> bool {
    let n_dims = dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    n_dims >= 2
        && name.ends_with("weight")
        && !name.contains("_norm.weight")
        && !name.contains("ffn_gate_inp.weight")
        && !name.contains("ssm_conv1d")
        && !name.contains("shortconv.conv.weight")
        && !name.contains("attn_rel_b.weight")
        && !kept_as_converted(name)
}

/// Gemma 3n's matrices llama-quantize leaves as they are ("altup", "laurel",
/// "per_layer_model_proj" in `tensor_allows_quantization`).
fn kept_as_converted(name: &str) -> bool {
    name.contains("altup") || name.contains("laurel") || name.contains("per_layer_model_proj")
}

/// Whether the converter writes this tensor, which llama-quantize leaves as
/// it is, as a 16-bit float: the matrices of [`kept_as_converted`] but the
/// AltUp coefficients (llama.cpp's converter forces those to F32, as every
/// 1-D tensor and norm; synthetic files store all of those as F32).
#[must_use]
pub fn converted_in_16_bits(name: &str, dims: &[u64]) -> bool {
    let n_dims = dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    n_dims >= 2
        && name.ends_with("weight")
        && !name.contains("_norm.weight")
        && kept_as_converted(name)
        && !name.contains("altup_correct_coef")
        && !name.contains("altup_predict_coef")
}

/// `layer_info`: the block index of an FFN tensor.
fn layer_of(name: &str) -> Option<u32> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

fn use_more_bits(i: i64, n: i64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// `tensor_type_fallback`: rows that are not whole blocks of the chosen type
/// get a type with smaller blocks, else F16.
fn fallback(ty: GgmlType, ne0: u64) -> GgmlType {
    if ne0.is_multiple_of(ty.block_size()) {
        return ty;
    }
    use GgmlType as G;
    let next = match ty {
        G::IQ1_S
        | G::IQ1_M
        | G::IQ2_XXS
        | G::IQ2_XS
        | G::IQ2_S
        | G::IQ3_XXS
        | G::IQ3_S
        | G::IQ4_XS => G::IQ4_NL,
        G::Q2_K | G::Q3_K | G::TQ1_0 | G::TQ2_0 => G::Q4_0,
        G::Q4_K => G::Q5_0,
        G::Q5_K => G::Q5_1,
        G::Q6_K => G::Q8_0,
        other => other,
    };
    if ne0.is_multiple_of(next.block_size()) {
        next
    } else {
        G::F16
    }
}

/// llama-quantize's per-tensor counters (`quantize_state_impl`).
#[derive(Default)]
struct Counters {
    n_attention_wv: i64,
    i_attention_wv: i64,
    i_ffn_down: i64,
    i_ffn_gate: i64,
    i_ffn_up: i64,
}

/// What the rules read about one tensor, worked out once.
#[derive(Debug, Clone, Copy)]
struct Facts {
    cat: Category,
    layer: Option<u32>,
    allows: bool,
    /// Left alone by llama-quantize but stored in 16 bits
    /// ([`converted_in_16_bits`]).
    kept_16bit: bool,
    ne0: u64,
    ne2: u64,
}

/// A model's tensors prepared for typing under any file type: the rules'
/// inputs are read from the names once, so typing the same tensors for
/// every mix of a model costs little.
#[derive(Debug, Clone)]
pub struct MixPlan {
    model: MixModel,
    /// Tensor indices in llama.cpp's visiting order (by block, then name).
    order: Vec<usize>,
    facts: Vec<Facts>,
    tied: bool,
    n_attention_wv: i64,
}

impl MixPlan {
    /// Prepare `tensors` of `model`.
    #[must_use]
    pub fn new(model: &MixModel, tensors: &[MixTensor<'_>]) -> MixPlan {
        let facts: Vec<Facts> = tensors
            .iter()
            .map(|t| Facts {
                cat: category(t.name),
                layer: layer_of(t.name),
                allows: allows_quantization(t.name, t.dims),
                kept_16bit: converted_in_16_bits(t.name, t.dims),
                ne0: t.dims.first().copied().unwrap_or(0),
                ne2: t.dims.get(2).copied().unwrap_or(1),
            })
            .collect();
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        order.sort_by(|&a, &b| {
            let key = |i: usize| (facts[i].layer.map_or(-1, i64::from), tensors[i].name);
            key(a).cmp(&key(b))
        });
        MixPlan {
            model: *model,
            order,
            tied: !tensors.iter().any(|t| t.name == "output.weight"),
            n_attention_wv: facts.iter().filter(|f| is_attn_v(f.cat)).count() as i64,
            facts,
        }
    }

    /// The type llama-quantize gives each tensor for `ftype`, in the order
    /// the tensors were given.
    #[must_use]
    pub fn types(&self, ftype: FileType) -> Vec<GgmlType> {
        let mut c = Counters {
            n_attention_wv: self.n_attention_wv,
            ..Counters::default()
        };
        let mut out = vec![GgmlType::F32; self.facts.len()];
        for &i in &self.order {
            out[i] = tensor_type(&self.model, ftype, &self.facts[i], self.tied, &mut c);
        }
        out
    }
}

/// The type llama-quantize gives each tensor of `tensors` for `ftype`, in the
/// same order. Tensors are visited in llama.cpp's order (by block, then by
/// name), because the rules count attention and FFN tensors as they go.
#[must_use]
pub fn tensor_types(model: &MixModel, ftype: FileType, tensors: &[MixTensor<'_>]) -> Vec<GgmlType> {
    MixPlan::new(model, tensors).types(ftype)
}

/// `llama_tensor_get_type` for one tensor.
fn tensor_type(m: &MixModel, ftype: FileType, t: &Facts, tied: bool, c: &mut Counters) -> GgmlType {
    if ftype == FileType::F32 {
        return GgmlType::F32;
    }
    if !t.allows {
        return match (t.kept_16bit, ftype) {
            (false, _) => GgmlType::F32,
            (true, FileType::BF16) => GgmlType::BF16,
            (true, _) => GgmlType::F16,
        };
    }
    let default = ftype.default_type();
    if !default.is_quantized() {
        return default;
    }
    let ty = rules(m, ftype, t, tied, default, c);
    fallback(ty, t.ne0)
}

/// `llama_tensor_get_type_impl` (no imatrix, no Falcon, no per-tensor overrides).
#[allow(clippy::too_many_lines)]
fn rules(
    m: &MixModel,
    ftype: FileType,
    t: &Facts,
    tied: bool,
    default: GgmlType,
    c: &mut Counters,
) -> GgmlType {
    use FileType as F;
    use GgmlType as G;
    let cat = t.cat;
    let n_expert = m.n_expert.max(1);
    let n_layer = i64::from(m.n_layer);
    // `layer_info`: MoE models read the block from the name; dense ones count.
    let layer = |counter: i64| -> i64 {
        if n_expert > 1 {
            t.layer.map_or(counter, i64::from)
        } else {
            counter
        }
    };
    let iq2_family = matches!(
        ftype,
        F::IQ2_XXS | F::IQ2_XS | F::IQ1_S | F::IQ2_S | F::IQ2_M | F::IQ1_M
    );
    let mut ty = default;
    if cat == Category::Output || (tied && cat == Category::TokenEmbd) {
        if ftype == F::MXFP4_MOE || !t.ne0.is_multiple_of(ty.block_size()) {
            ty = G::Q8_0;
        } else if matches!(
            ftype,
            F::IQ2_XXS | F::IQ2_XS | F::IQ3_XXS | F::IQ1_S | F::IQ2_S | F::IQ2_M | F::IQ1_M
        ) {
            ty = G::Q5_K;
        } else if ty != G::Q8_0 {
            ty = G::Q6_K;
        }
    } else if ftype == F::MXFP4_MOE {
        ty = if t.ne2 > 1 { G::MXFP4 } else { G::Q8_0 };
    } else if cat == Category::TokenEmbd {
        match ftype {
            F::IQ2_XXS | F::IQ2_XS | F::IQ1_S | F::IQ1_M => ty = G::Q2_K,
            F::IQ2_S | F::IQ2_M | F::IQ3_XXS => ty = G::IQ3_S,
            _ => {}
        }
    } else if iq2_family {
        let s_or_m = matches!(ftype, F::IQ2_S | F::IQ2_M);
        if is_attn_v(cat) {
            ty = if m.n_gqa() >= 4 || m.n_expert >= 4 {
                G::Q4_K
            } else if s_or_m {
                G::IQ3_S
            } else {
                G::Q2_K
            };
            c.i_attention_wv += 1;
        } else if m.n_expert == 8 && cat == Category::AttnK {
            ty = G::Q4_K;
        } else if cat == Category::FfnDown {
            if c.i_ffn_down < n_layer / 8 {
                ty = if s_or_m { G::IQ3_S } else { G::Q2_K };
            }
            c.i_ffn_down += 1;
        } else if cat == Category::AttnOutput {
            if m.n_expert == 8 {
                ty = G::Q5_K;
            } else if matches!(ftype, F::IQ1_S | F::IQ1_M) {
                ty = G::IQ2_XXS;
            } else if s_or_m {
                ty = G::IQ3_S;
            }
        }
    } else if is_attn_v(cat) {
        let gqa4 = m.n_gqa() >= 4;
        match ftype {
            F::Q2_K => ty = if gqa4 { G::Q4_K } else { G::Q3_K },
            F::Q2_K_S if gqa4 => ty = G::Q4_K,
            // Without an imatrix llama.cpp uses IQ3_S here.
            F::IQ3_XXS => ty = if gqa4 { G::Q4_K } else { G::IQ3_S },
            F::IQ3_XS | F::IQ3_S if gqa4 => ty = G::Q4_K,
            F::IQ3_M => ty = G::Q4_K,
            F::Q3_K_M => {
                ty = if c.i_attention_wv < 2 {
                    G::Q5_K
                } else {
                    G::Q4_K
                }
            }
            F::Q3_K_L => ty = G::Q5_K,
            F::IQ4_NL | F::IQ4_XS if gqa4 => ty = G::Q5_K,
            F::Q4_K_M | F::Q5_K_M if use_more_bits(c.i_attention_wv, c.n_attention_wv) => {
                ty = G::Q6_K;
            }
            F::Q4_K_S if c.i_attention_wv < 4 => ty = G::Q5_K,
            _ => {}
        }
        if m.is_70b && matches!(ty, G::Q3_K | G::Q4_K) {
            ty = G::Q5_K;
        }
        if m.n_expert == 8 {
            ty = G::Q8_0;
        }
        c.i_attention_wv += 1;
    } else if cat == Category::AttnK {
        if m.n_expert == 8 {
            ty = G::Q8_0;
        } else if ftype == F::IQ3_XS {
            ty = G::IQ3_XXS;
        } else if ftype == F::IQ3_XXS {
            ty = G::IQ2_S;
        }
    } else if cat == Category::AttnQ {
        if ftype == F::IQ3_XS {
            ty = G::IQ3_XXS;
        } else if ftype == F::IQ3_XXS {
            ty = G::IQ2_S;
        }
    } else if cat == Category::FfnDown {
        let i = layer(c.i_ffn_down);
        let n = n_layer;
        match ftype {
            F::Q2_K => ty = G::Q3_K,
            F::Q2_K_S if i < n / 8 => ty = G::Q4_K,
            F::IQ3_XXS => ty = if i < n / 8 { G::Q4_K } else { G::Q3_K },
            F::Q3_K_M => ty = if i < n / 16 { G::Q5_K } else { G::Q4_K },
            F::IQ3_M if i < n / 8 || (m.n_expert == 8 && use_more_bits(i, n)) => ty = G::Q4_K,
            F::Q3_K_L => ty = G::Q5_K,
            F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n) => ty = G::Q6_K,
            F::IQ4_NL | F::IQ4_XS if i < n / 8 => ty = G::Q5_K,
            F::Q4_K_S if i < n / 8 => ty = G::Q5_K,
            _ => {}
        }
        c.i_ffn_down += 1;
    } else if cat == Category::AttnOutput {
        if m.n_expert == 8 {
            if matches!(
                ftype,
                F::Q2_K
                    | F::IQ3_XS
                    | F::IQ3_XXS
                    | F::Q3_K_S
                    | F::Q3_K_M
                    | F::IQ4_NL
                    | F::Q4_K_S
                    | F::Q4_K_M
                    | F::IQ3_S
                    | F::IQ3_M
                    | F::IQ4_XS
            ) {
                ty = G::Q5_K;
            }
        } else {
            match ftype {
                F::Q2_K => ty = G::Q3_K,
                F::IQ3_XXS => ty = G::IQ3_S,
                F::Q3_K_M | F::IQ3_M => ty = G::Q4_K,
                F::Q3_K_L => ty = G::Q5_K,
                _ => {}
            }
        }
    } else if cat == Category::FfnGate || cat == Category::FfnUp {
        let counter = if cat == Category::FfnGate {
            &mut c.i_ffn_gate
        } else {
            &mut c.i_ffn_up
        };
        let i = layer(*counter);
        if ftype == F::IQ3_XS && i >= n_layer / 8 && i < 7 * n_layer / 8 {
            ty = G::IQ3_XXS;
        }
        *counter += 1;
    }
    ty
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, dims: &[u64]) -> (String, Vec<u64>) {
        (name.to_string(), dims.to_vec())
    }

    fn types(m: &MixModel, f: FileType, ts: &[(String, Vec<u64>)]) -> Vec<GgmlType> {
        let input: Vec<MixTensor<'_>> = ts
            .iter()
            .map(|(name, dims)| MixTensor { name, dims })
            .collect();
        tensor_types(m, f, &input)
    }

    #[test]
    fn names_round_trip_and_aliases() {
        for f in FileType::ALL {
            assert_eq!(FileType::from_name(f.name()), Some(f));
            assert_eq!(FileType::from_name(&f.name().to_lowercase()), Some(f));
        }
        assert_eq!(FileType::from_name("Q4_K"), Some(FileType::Q4_K_M));
        assert_eq!(FileType::from_name("mxfp4"), Some(FileType::MXFP4_MOE));
        assert_eq!(FileType::from_name("Q7_K"), None);
    }

    #[test]
    fn k_quant_rules_on_a_dense_model() {
        let m = MixModel {
            n_layer: 32,
            n_head: 32,
            n_head_kv: 8,
            n_expert: 0,
            is_70b: false,
        };
        let mut ts = vec![t("token_embd.weight", &[4096, 128_256])];
        for il in 0..32 {
            ts.push(t(&format!("blk.{il}.attn_v.weight"), &[4096, 1024]));
            ts.push(t(&format!("blk.{il}.ffn_down.weight"), &[14336, 4096]));
            ts.push(t(&format!("blk.{il}.attn_norm.weight"), &[4096]));
        }
        ts.push(t("output.weight", &[4096, 128_256]));
        let types = |f| types(&m, f, &ts);
        let q3m = types(FileType::Q3_K_M);
        assert_eq!(q3m[1], GgmlType::Q5_K, "first two attn_v get Q5_K");
        assert_eq!(q3m[3 * 2 + 1], GgmlType::Q4_K);
        assert_eq!(q3m[2], GgmlType::Q5_K, "ffn_down below n/16");
        assert_eq!(q3m[3], GgmlType::F32, "norms stay F32");
        assert_eq!(*q3m.last().expect("output"), GgmlType::Q6_K);
        let iq2m = types(FileType::IQ2_M);
        assert_eq!(iq2m[0], GgmlType::IQ3_S, "IQ2_M embeddings");
        assert_eq!(*iq2m.last().expect("output"), GgmlType::Q5_K);
        assert_eq!(iq2m[1], GgmlType::Q4_K, "GQA 4 attn_v");
        let f16 = types(FileType::F16);
        assert_eq!((f16[1], f16[3]), (GgmlType::F16, GgmlType::F32));
    }

    #[test]
    fn fallbacks_for_odd_rows() {
        assert_eq!(fallback(GgmlType::Q4_K, 2880), GgmlType::Q5_0);
        assert_eq!(fallback(GgmlType::IQ4_XS, 2880), GgmlType::IQ4_NL);
        assert_eq!(fallback(GgmlType::Q6_K, 1152), GgmlType::Q8_0);
        assert_eq!(fallback(GgmlType::Q4_K, 100), GgmlType::F16);
        assert_eq!(fallback(GgmlType::Q4_K, 4096), GgmlType::Q4_K);
    }

    #[test]
    fn mxfp4_moe_puts_experts_in_mxfp4() {
        let m = MixModel {
            n_layer: 1,
            n_head: 64,
            n_head_kv: 8,
            n_expert: 32,
            is_70b: false,
        };
        let ts = vec![
            t("blk.0.ffn_up_exps.weight", &[2880, 2880, 32]),
            t("blk.0.attn_q.weight", &[2880, 4096]),
            t("output.weight", &[2880, 201_088]),
        ];
        assert_eq!(
            types(&m, FileType::MXFP4_MOE, &ts),
            vec![GgmlType::MXFP4, GgmlType::Q8_0, GgmlType::Q8_0]
        );
    }
}
