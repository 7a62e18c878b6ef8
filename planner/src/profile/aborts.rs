//! Hyper-parameters llama.cpp checks with `GGML_ASSERT` (or divides by)
//! while it loads a model: a header that fails one of these checks aborts
//! the whole process instead of returning an error, so the profile refuses
//! it first, naming the key and its values.
//!
//! Line numbers refer to llama.cpp as vendored by llama-cpp-sys-2 0.1.160:
//! `llama_model_base::load_hparams` in `src/llama-model.cpp`.

use super::{Experts, ProfileError, key, opt_u32, per_layer};
use crate::gguf::Header;

/// llama.cpp's `LLAMA_MAX_EXPERTS` (`llama-hparams.h`): it aborts on a
/// model with more experts per layer.
pub const MAX_EXPERTS: u32 = 1024;

/// The `rope.scaling.type` names llama.cpp knows (`LLAMA_ROPE_SCALING_TYPES`);
/// any other string aborts it (llama-model.cpp:1422).
pub const ROPE_SCALING_TYPES: [&str; 4] = ["none", "linear", "yarn", "longrope"];

fn invalid(key: String, why: String) -> ProfileError {
    ProfileError::Invalid { key, why }
}

/// `{arch}.nextn_predict_layers`, the multi-token-prediction blocks counted
/// in `block_count`: llama.cpp asserts `n_layer_nextn <= n_layer_all`
/// (llama-model.cpp:1332).
pub(super) fn nextn_layers(h: &Header, a: &str, n_layer: u32) -> Result<u32, ProfileError> {
    let k = key(a, "nextn_predict_layers");
    let nextn = opt_u32(h, &k)?.unwrap_or(0);
    if nextn > n_layer {
        return Err(invalid(
            k,
            format!("{nextn} prediction layers but block_count is {n_layer}"),
        ));
    }
    Ok(nextn)
}

/// The mixture-of-experts keys, held to llama.cpp's asserts
/// (llama-model.cpp:1363-1375): at most [`MAX_EXPERTS`] experts; with
/// experts, between 1 and `expert_count` used per token (the maximum over
/// layers when `expert_used_count` is per layer), fewer groups than
/// experts, and with more than one group, groups that divide the experts and
/// between 1 and `groups - 1` groups used; without experts, none used and no
/// groups. `used` is the per-layer maximum.
pub(super) fn experts(h: &Header, a: &str, n_layer: u32) -> Result<Option<Experts>, ProfileError> {
    let k_count = key(a, "expert_count");
    let k_used = key(a, "expert_used_count");
    let k_groups = key(a, "expert_group_count");
    let k_group_used = key(a, "expert_group_used_count");
    let mut count = opt_u32(h, &k_count)?.unwrap_or(0);
    let mut used = per_layer(h, &k_used, n_layer)?
        .and_then(|v| v.into_iter().max())
        .unwrap_or(0);
    let groups = opt_u32(h, &k_groups)?.unwrap_or(0);
    let group_used = opt_u32(h, &k_group_used)?.unwrap_or(0);
    // llama.cpp reads these two as dense when they have at most one expert.
    if matches!(a, "hunyuan-dense" | "hunyuan_vl") && count <= 1 {
        count = 0;
        used = 0;
    }
    if count > MAX_EXPERTS {
        return Err(invalid(
            k_count,
            format!("{count} experts, more than llama.cpp's {MAX_EXPERTS}"),
        ));
    }
    if count == 0 {
        if used > 0 {
            return Err(invalid(
                k_used,
                format!("{used} experts used per token but {k_count} is 0 or absent"),
            ));
        }
        if groups > 0 {
            return Err(invalid(
                k_groups,
                format!("{groups} expert groups but {k_count} is 0 or absent"),
            ));
        }
        return Ok(None);
    }
    if used == 0 || used > count {
        return Err(invalid(k_used, format!("{used} used of {count} experts")));
    }
    if groups >= count {
        return Err(invalid(
            k_groups,
            format!("{groups} groups for {count} experts (llama.cpp needs fewer groups)"),
        ));
    }
    if groups > 1 {
        if count % groups != 0 {
            return Err(invalid(
                k_groups,
                format!("{count} experts do not split into {groups} groups"),
            ));
        }
        if group_used == 0 || group_used >= groups {
            return Err(invalid(
                k_group_used,
                format!("{group_used} used of {groups} expert groups"),
            ));
        }
    }
    let shared = opt_u32(h, &key(a, "expert_shared_count"))?.unwrap_or(0);
    Ok(Some(Experts {
        count,
        used,
        shared,
    }))
}

/// `{arch}.rope.scaling.type`: a string llama.cpp knows, else it aborts
/// (llama-model.cpp:1420-1422).
pub(super) fn rope_scaling(h: &Header, a: &str) -> Result<(), ProfileError> {
    let k = key(a, "rope.scaling.type");
    match h.get(&k).map(|v| v.as_str()) {
        None => Ok(()),
        Some(Some(name)) if ROPE_SCALING_TYPES.contains(&name) => Ok(()),
        Some(Some(name)) => Err(invalid(
            k,
            format!(
                "'{}' is not one of llama.cpp's {}",
                shown(name),
                ROPE_SCALING_TYPES.join(", ")
            ),
        )),
        // llama.cpp reads it as a string and throws on another type.
        Some(None) => Err(ProfileError::MissingKey(k)),
    }
}

/// A header string as it may appear in a one-line message: escaped, and
/// cut short (the reader allows strings of megabytes).
fn shown(s: &str) -> String {
    const MAX_CHARS: usize = 40;
    let mut out: String = s
        .chars()
        .take(MAX_CHARS)
        .collect::<String>()
        .escape_debug()
        .collect();
    if s.chars().nth(MAX_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// `{arch}.full_attention_interval`: Qwen3-Next, Qwen3.5 and MiniMax-01
/// take every layer number modulo it (`models/qwen3next.cpp:21`), so 0
/// kills llama.cpp with a division by zero.
pub(super) fn full_attention_interval(h: &Header, a: &str) -> Result<(), ProfileError> {
    let k = key(a, "full_attention_interval");
    if opt_u32(h, &k)? == Some(0) {
        return Err(invalid(k, "zero (llama.cpp divides by it)".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::HeaderBuilder;
    use crate::gguf::{Array, ArrayItems, GgmlType, Value};
    use crate::profile::profile;

    /// A complete two-layer llama with `extra` metadata appended.
    fn llama(extra: &[(&str, Value)]) -> Header {
        llama_arch("llama", extra)
    }

    fn llama_arch(arch: &str, extra: &[(&str, Value)]) -> Header {
        let k = |s: &str| format!("{arch}.{s}");
        let mut b = HeaderBuilder::new()
            .kv("general.architecture", arch)
            .kv(k("block_count"), 2u32)
            .kv(k("embedding_length"), 32u32)
            .kv(k("attention.head_count"), 4u32)
            .kv(k("vocab_size"), 8u32)
            .tensor("token_embd.weight", &[32, 8], GgmlType::F32);
        for (key, v) in extra {
            b = b.kv(*key, v.clone());
        }
        for il in 0..2 {
            b = b.tensor(format!("blk.{il}.attn_q.weight"), &[32, 32], GgmlType::F32);
        }
        b.build().expect("the header itself is valid")
    }

    /// The `Invalid` error of `h`, as (key, why).
    fn refused(h: &Header) -> (String, String) {
        match profile(h) {
            Err(ProfileError::Invalid { key, why }) => (key, why),
            other => panic!("expected an invalid value, got {other:?}"),
        }
    }

    fn u32s(v: &[u32]) -> Value {
        Value::Array(Array::new(ArrayItems::U32(v.to_vec())))
    }

    #[test]
    fn the_base_header_is_accepted() {
        let p = profile(&llama(&[])).expect("valid");
        assert_eq!(p.experts, None);
    }

    #[test]
    fn more_prediction_layers_than_blocks_are_refused() {
        let (key, why) = refused(&llama(&[("llama.nextn_predict_layers", Value::U32(3))]));
        assert_eq!(key, "llama.nextn_predict_layers");
        assert!(
            why.contains('3') && why.contains("block_count is 2"),
            "{why}"
        );
        // As many as the blocks is what llama.cpp allows.
        profile(&llama(&[("llama.nextn_predict_layers", Value::U32(2))])).expect("allowed");
    }

    #[test]
    fn expert_counts_past_llama_cpp_limit_are_refused() {
        let h = llama(&[
            ("llama.expert_count", Value::U32(MAX_EXPERTS + 1)),
            ("llama.expert_used_count", Value::U32(8)),
        ]);
        let (key, why) = refused(&h);
        assert_eq!(key, "llama.expert_count");
        assert!(why.contains("1025") && why.contains("1024"), "{why}");
        let h = llama(&[
            ("llama.expert_count", Value::U32(MAX_EXPERTS)),
            ("llama.expert_used_count", Value::U32(8)),
        ]);
        let e = profile(&h).expect("at the limit").experts.expect("experts");
        assert_eq!((e.count, e.used), (MAX_EXPERTS, 8));
    }

    #[test]
    fn experts_used_must_be_between_one_and_the_count() {
        for used in [Value::U32(0), Value::U32(9), u32s(&[2, 9]), u32s(&[0, 0])] {
            let h = llama(&[
                ("llama.expert_count", Value::U32(8)),
                ("llama.expert_used_count", used.clone()),
            ]);
            let (key, why) = refused(&h);
            assert_eq!(key, "llama.expert_used_count", "{used:?}");
            assert!(why.contains("of 8 experts"), "{why}");
        }
        // Per layer, the maximum counts; dense layers may use none.
        let h = llama(&[
            ("llama.expert_count", Value::U32(8)),
            ("llama.expert_used_count", u32s(&[0, 4])),
        ]);
        let e = profile(&h).expect("valid").experts.expect("experts");
        assert_eq!(e.used, 4);
    }

    #[test]
    fn experts_used_or_grouped_without_experts_are_refused() {
        for count in [None, Some(0)] {
            let mut extra = vec![("llama.expert_used_count", Value::U32(2))];
            extra.extend(count.map(|c| ("llama.expert_count", Value::U32(c))));
            let (key, why) = refused(&llama(&extra));
            assert_eq!(key, "llama.expert_used_count");
            assert!(why.contains("llama.expert_count is 0 or absent"), "{why}");
        }
        let (key, why) = refused(&llama(&[("llama.expert_group_count", Value::U32(1))]));
        assert_eq!(key, "llama.expert_group_count");
        assert!(why.contains("1 expert groups"), "{why}");
    }

    #[test]
    fn expert_groups_are_held_to_llama_cpp_asserts() {
        let moe = |groups: u32, group_used: u32| {
            llama(&[
                ("llama.expert_count", Value::U32(16)),
                ("llama.expert_used_count", Value::U32(4)),
                ("llama.expert_group_count", Value::U32(groups)),
                ("llama.expert_group_used_count", Value::U32(group_used)),
            ])
        };
        for (groups, group_used, key, words) in [
            (
                16,
                1,
                "llama.expert_group_count",
                "16 groups for 16 experts",
            ),
            (
                3,
                1,
                "llama.expert_group_count",
                "16 experts do not split into 3",
            ),
            (
                4,
                0,
                "llama.expert_group_used_count",
                "0 used of 4 expert groups",
            ),
            (
                4,
                4,
                "llama.expert_group_used_count",
                "4 used of 4 expert groups",
            ),
        ] {
            let (k, why) = refused(&moe(groups, group_used));
            assert_eq!(k, key, "{groups} groups, {group_used} used");
            assert!(why.contains(words), "{why}");
        }
        // DeepSeek-V3's shape (8 groups, 4 used), and one group (no grouping).
        for (groups, group_used) in [(8, 4), (1, 0), (0, 0)] {
            profile(&moe(groups, group_used)).expect("valid grouping");
        }
    }

    #[test]
    fn hunyuan_dense_with_one_expert_is_dense_as_in_llama_cpp() {
        let extra = [
            ("hunyuan-dense.expert_count", Value::U32(1)),
            ("hunyuan-dense.expert_used_count", Value::U32(1)),
        ];
        let p = profile(&llama_arch("hunyuan-dense", &extra)).expect("valid");
        assert_eq!(p.experts, None);
    }

    #[test]
    fn unknown_rope_scaling_types_are_refused() {
        for name in ROPE_SCALING_TYPES {
            profile(&llama(&[("llama.rope.scaling.type", Value::from(name))])).expect(name);
        }
        let long = "x".repeat(100_000);
        for name in ["su", "YARN", "", "line\nbreak", long.as_str()] {
            let (key, why) = refused(&llama(&[("llama.rope.scaling.type", Value::from(name))]));
            assert_eq!(key, "llama.rope.scaling.type");
            assert!(why.contains("none, linear, yarn, longrope"), "{why}");
            assert!(why.len() < 200 && !why.contains('\n'), "{why}");
        }
        assert_eq!(
            profile(&llama(&[("llama.rope.scaling.type", Value::U32(1))])),
            Err(ProfileError::MissingKey("llama.rope.scaling.type".into()))
        );
    }

    #[test]
    fn a_zero_full_attention_interval_is_refused() {
        let (key, why) = refused(&llama(&[("llama.full_attention_interval", Value::U32(0))]));
        assert_eq!(key, "llama.full_attention_interval");
        assert!(why.contains("zero"), "{why}");
        profile(&llama(&[("llama.full_attention_interval", Value::U32(4))])).expect("valid");
    }
}
