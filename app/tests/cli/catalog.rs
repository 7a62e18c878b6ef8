//! The catalog (`models.toml`) against its sources: every entry parses and
//! unknown fields are rejected; ids are unique; every listed number agrees
//! with the compiled facts (`tests/catalog/catalog-facts.json`, the research
//! notes the catalog was written from); the planner's derived file sizes
//! agree with the listed ones; and the quantization mirror that derives them
//! agrees with llama.cpp's own rules, tensor by tensor.

use std::collections::{BTreeMap, HashSet};

use headroom::catalog::plan::{ArchBasis, resolve_arch};
use headroom::catalog::{Catalog, Entry, Quant};
use headroom::llama::{AccountingParams, QuantModel, QuantTensor, breakdown, quant_types};
use headroom_planner::gguf::writer::{HeaderBuilder, create_sparse_file};
use headroom_planner::gguf::{Array, ArrayItems, GgmlType, Header};
use headroom_planner::synth::facts;
use headroom_planner::synth::mix::{self, FileType};
use serde_json::Value;

/// Both files are read when the tests run, not compiled in, so an edit to
/// the catalog is checked by the test binary already built (the built-in
/// copy is the same file: `catalog::BUILTIN` includes it).
fn workspace_file(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn catalog() -> Catalog {
    Catalog::parse(&workspace_file("../models.toml"), "models.toml").expect("the catalog parses")
}

fn facts_models() -> Vec<Value> {
    let v: Value = serde_json::from_str(&workspace_file("tests/catalog/catalog-facts.json"))
        .expect("facts are JSON");
    v["models"].as_array().expect("models").clone()
}

/// The facts record an entry was written from (by name; the demo model's
/// entry comes from its own header instead).
fn facts_for<'a>(facts: &'a [Value], e: &Entry) -> Option<&'a Value> {
    facts.iter().find(|m| m["name"] == e.name.as_str())
}

fn f64_of(v: &Value) -> Option<f64> {
    v.as_f64()
}

#[test]
fn every_entry_parses_with_unique_ids() {
    let cat = catalog();
    assert!(
        (40..=200).contains(&cat.entries().len()),
        "{} entries",
        cat.entries().len()
    );
    let mut seen = HashSet::new();
    for e in cat.entries() {
        assert!(seen.insert(e.id.to_lowercase()), "duplicate id {}", e.id);
        assert!(!e.quants.is_empty(), "{}", e.id);
        assert!(!e.sources.is_empty(), "{}: no sources", e.id);
        for q in &e.quants {
            assert!(
                !q.verified,
                "{} {}: only catalog refresh verifies",
                e.id, q.name
            );
        }
    }
    // The coverage the issue asks for.
    let has = |f: &dyn Fn(&Entry) -> bool| cat.entries().iter().any(f);
    let params = |e: &Entry| e.params_b.unwrap_or(0.0);
    assert!(has(&|e| params(e) < 0.5), "a model under 0.5B");
    assert!(has(&|e| params(e) >= 70.0), "a 70B+ model");
    for u in ["chat", "code", "small", "moe", "long-context", "reasoning"] {
        assert!(has(&|e| e.has_use(u)), "no {u} model");
    }
}

#[test]
fn unknown_fields_are_rejected_with_their_line() {
    let text = headroom::catalog::BUILTIN;
    let cases = [
        ("family = ", "familly = ", "unknown field"),
        (
            "[model.arch]\n",
            "[model.arch]\nlayers = 32\n",
            "unknown field",
        ),
        (
            "[[model.quant]]\n",
            "[[model.quant]]\nsha = \"x\"\n",
            "unknown field",
        ),
    ];
    for (from, to, what) in cases {
        let at = text.find(from).expect("present");
        let bad = format!("{}{}{}", &text[..at], to, &text[at + from.len()..]);
        let err = Catalog::parse(&bad, "models.toml").expect_err(what);
        let line = text[..at].lines().count() + 1 + usize::from(to.starts_with('['));
        assert!(err.message.contains(what), "{err}");
        assert_eq!(err.line, line, "{err}");
        assert!(!err.to_string().contains('\n'), "one line: {err}");
    }
}

/// An architecture fact as one source states it, under the catalog's name
/// (`block_count`, …): a number, a flag or a name.
type Stated = BTreeMap<&'static str, Value>;

/// The catalog's numeric facts and what each dialect calls them. A source
/// is kept verbatim in the facts file as `arch_sources[].excerpt`, in one of
/// these dialects:
/// - `config.json`: the model's Hugging Face config (a JSON fragment, or a
///   framework's embedded copy written as a Python dict, or a Hugging Face
///   file page as the docs corpus stores it, each line in table bars:
///   `| "hidden_size": 1536, | |`), with its `text_config` for multimodal
///   wrappers; LFM2's and Granite 4.0 H's own keys read as llama.cpp's
///   converter reads them (see [`lfm2_facts`], [`granite_hybrid_facts`]);
/// - `litgpt`: a `litgpt/config.py` entry (`n_layer=…`, and the `Config`
///   dataclass defaults it relies on);
/// - `maxtext`: a MaxText model YAML (`base_num_decoder_layers: …`);
/// - `llama.cpp log`: llama.cpp's dump of a GGUF header (its
///   `llama_model_loader: - kv …` and `print_info:` lines), or the same
///   `key type = value` lines read from a GGUF file;
/// - `gguf metadata json`: the same keys as JSON lines (`"llama4.block_count":
///   48,`), as Ollama's `/api/show` lists a model's `model_info`;
/// - `ollama metadata`: the same keys as Ollama's model pages list a
///   blob's metadata, each key on a bulleted line and its value on the next
///   (`• granitehybrid.block_count` / `40`); arrays are elided there
///   (`[0, 0, 0, 0, 0, ...]`) and state nothing;
/// - `model card`: a model card's overview ("Number of Layers: 24", "tied
///   word embeddings", "shared input/output embeddings", "MXFP4
///   quantization of the MoE weights");
/// - `model card table`: a card's architecture table (Markdown or HTML) that
///   covers several models, one column each: the source's `column` names
///   the model's header cell, and each row's label says what its cell in
///   that column states ("Number of KV heads", "Embedding size", "Number of
///   layers" as "4 attention / 36 Mamba2", …; IBM's Granite 4.0 cards);
/// - `gguf key table`: a Markdown table of a GGUF file's embedded keys,
///   without the architecture's prefix (`| context_length | 131072 |`), as
///   a user's notes list what a file carries; only rows whose key is one of
///   the catalog's names state anything;
/// - `transformers config`: the defaults a `transformers` config class
///   declares (`num_hidden_layers: int = 35`) where its docstring says they
///   are one model's ("a Gemma3nText gemma3n_text-E4B style
///   configuration"), read under the `config.json` names, with the layer
///   pattern its `__post_init__` writes (`(i + 1) % 5 == 0`);
/// - `gemma4 converter`: a variant of transformers' Gemma 4 converter
///   (`Gemma4TextConfig(hidden_size=1536, …)`, `intermediate_size=4 * 1536`,
///   `layer_types=_DEFAULT_LAYER_TYPES * 7` with that list's definition
///   `["sliding_attention"] * 5 + ["full_attention"]`) or the lines of
///   `Gemma4TextConfig`'s defaults it relies on, under Gemma 4's GGUF names
///   (`head_dim` is the sliding layers' `key_length_swa`, `global_head_dim`
///   the full layers' `key_length`).
const DIALECTS: &[&str] = &[
    "config.json",
    "transformers config",
    "gemma4 converter",
    "litgpt",
    "maxtext",
    "llama.cpp log",
    "gguf metadata json",
    "ollama metadata",
    "model card",
    "model card table",
    "gguf key table",
];

/// `config.json` `model_type` → GGUF architecture.
const MODEL_TYPES: &[(&str, &str)] = &[
    ("llama", "llama"),
    ("mistral", "llama"),
    ("mixtral", "llama"),
    ("qwen2", "qwen2"),
    ("qwen3", "qwen3"),
    ("qwen3_moe", "qwen3moe"),
    ("gemma2", "gemma2"),
    ("gemma3", "gemma3"),
    ("gemma3_text", "gemma3"),
    ("phi3", "phi3"),
    ("deepseek_v2", "deepseek2"),
    // GLM-4.7-Flash: llama.cpp's converter writes it as deepseek2.
    ("glm4_moe_lite", "deepseek2"),
    ("gpt_oss", "gpt-oss"),
    ("gemma3n", "gemma3n"),
    ("gemma3n_text", "gemma3n"),
    ("qwen3_next", "qwen3next"),
    ("qwen3_5", "qwen35"),
    ("qwen3_5_text", "qwen35"),
    ("qwen3_5_moe", "qwen35moe"),
    ("qwen3_5_moe_text", "qwen35moe"),
    ("smollm3", "smollm3"),
    ("lfm2", "lfm2"),
    // Granite 4.0 H: llama.cpp's converter writes GraniteMoeHybridForCausalLM
    // with Mamba-2 layers as granitehybrid.
    ("granitemoehybrid", "granitehybrid"),
];

/// The gated delta-net hybrids (Qwen3-Next, Qwen3.5/3.6), whose recurrent
/// layers' sizes, layer interval and MTP blocks the catalog lists.
const DELTA_NETS: &[&str] = &["qwen3next", "qwen35", "qwen35moe"];

/// MaxText `decoder_block` → GGUF architecture.
const DECODER_BLOCKS: &[(&str, &str)] = &[
    ("llama2", "llama"),
    ("mistral", "llama"),
    ("mixtral", "llama"),
    ("gemma2", "gemma2"),
    ("gemma3", "gemma3"),
    ("qwen3", "qwen3"),
    ("qwen3_moe", "qwen3moe"),
    ("gpt_oss", "gpt-oss"),
];

/// A number as sources write it (`262_144`, `131072`, `8.0` is not one).
fn int(s: &str) -> Option<u64> {
    let s = s.trim().trim_matches('"').replace('_', "");
    s.parse().ok()
}

fn flag(s: &str) -> Option<bool> {
    match s.trim() {
        "true" | "True" => Some(true),
        "false" | "False" => Some(false),
        _ => None,
    }
}

/// A Python literal (a framework's embedded copy of a config) as JSON:
/// `True`/`False`/`None` outside strings, no trailing commas.
fn python_to_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_str = false;
    let mut escaped = false;
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(match word.as_str() {
            "True" => "true",
            "False" => "false",
            "None" => "null",
            w => w,
        });
        word.clear();
    };
    for c in text.chars() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut out);
        if c == '"' {
            in_str = true;
        }
        out.push(c);
    }
    flush(&mut word, &mut out);
    // Trailing commas before a closing bracket, and after the last entry.
    let mut cleaned = String::with_capacity(out.len());
    let chars: Vec<char> = out.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, None | Some('}') | Some(']')) {
                continue;
            }
        }
        cleaned.push(c);
    }
    cleaned
}

/// `config.json` (or a fragment of it) as the catalog's facts.
fn from_config_json(excerpt: &str) -> Result<Stated, String> {
    let unbarred = without_table_bars(excerpt);
    let mut text = python_to_json(unbarred.as_deref().unwrap_or(excerpt).trim());
    if !text.starts_with('{') {
        text = format!("{{{text}}}");
    }
    let v: Value = serde_json::from_str(&text)
        .or_else(|e| serde_json::from_str(&closed(&text)).map_err(|_| e))
        .map_err(|e| format!("not JSON: {e}"))?;
    Ok(from_config_value(v))
}

/// A page the store cut short after a whole line (`"num_attention_heads":
/// 12`), closed with the brackets still open: it states what it shows.
fn closed(text: &str) -> String {
    let mut open = Vec::new();
    let (mut in_str, mut escaped) = (false, false);
    for c in text.chars() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => open.push('}'),
            '[' => open.push(']'),
            '}' | ']' => {
                open.pop();
            }
            _ => {}
        }
    }
    let mut out = text.trim_end().trim_end_matches(',').to_string();
    out.extend(open.iter().rev());
    out
}

/// A Hugging Face file page as the docs corpus stores it, every line in
/// table bars (`| "block_dim": 1536, | |`, a lone `|` between rows), as the
/// file's own lines; `None` where a line is not so barred.
fn without_table_bars(excerpt: &str) -> Option<String> {
    let lines: Vec<&str> = excerpt
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() || !lines.iter().all(|l| l.starts_with('|')) {
        return None;
    }
    Some(
        lines
            .iter()
            .map(|l| l.trim_matches(|c: char| c == '|' || c.is_whitespace()))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// LFM2's own keys as llama.cpp's converter writes them (`LFM2Model`):
/// `feed_forward_length` is `block_ff_dim` (else `intermediate_size`), and
/// with `block_auto_adjust_ff_dim` two thirds of it, times
/// `block_ffn_dim_multiplier`, rounded up to `block_multiple_of`; a layer
/// attends unless its `layer_types` entry is "conv" (a config without
/// `layer_types` has `full_attn_idxs`, from which `Lfm2Config` writes
/// them); `conv_L_cache` is `shortconv.l_cache`; the output is tied where
/// `tie_word_embeddings` or the original `tie_embedding` says so.
fn lfm2_facts(v: &Value, s: &mut Stated) {
    let n = |k: &str| v.get(k).and_then(Value::as_u64);
    s.remove("feed_forward_length");
    let adjust = v.get("block_auto_adjust_ff_dim").and_then(Value::as_bool);
    let ff = match (n("block_ff_dim").or(n("intermediate_size")), adjust) {
        (Some(ff), Some(false)) => Some(ff),
        (Some(ff), Some(true)) => n("block_multiple_of").filter(|&m| m > 0).map(|m| {
            let mut ff = 2 * ff / 3;
            if let Some(mult) = v.get("block_ffn_dim_multiplier").and_then(Value::as_f64) {
                ff = (mult * ff as f64) as u64;
            }
            m * ff.div_ceil(m)
        }),
        _ => None,
    };
    if let Some(ff) = ff {
        s.insert("feed_forward_length", ff.into());
    }
    if let Some(l) = n("conv_L_cache") {
        s.insert("shortconv_l_cache", l.into());
    }
    let attention: Option<Vec<u64>> = match v.get("layer_types").and_then(Value::as_array) {
        Some(types) => Some(
            (0..types.len() as u64)
                .filter(|&i| types[i as usize] != "conv")
                .collect(),
        ),
        None => v
            .get("full_attn_idxs")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_u64).collect()),
    };
    if let Some(a) = attention {
        s.insert("attention_layers", a.into());
    }
    if let Some(t) = v
        .get("tie_word_embeddings")
        .or(v.get("tie_embedding"))
        .and_then(Value::as_bool)
    {
        s.insert("tied_embeddings", t.into());
    }
}

/// Granite 4.0 H's own keys as llama.cpp's converter writes them
/// (`GraniteHybridModel`, which looks each key up bare and then with the
/// `mamba_` prefix): `ssm.conv_kernel` is `mamba_d_conv`, `ssm.state_size`
/// `mamba_d_state`, `ssm.group_count` `mamba_n_groups`,
/// `ssm.time_step_rank` `mamba_n_heads`, `ssm.inner_size` `mamba_expand`
/// times `hidden_size`; the attention layers are those `layer_types` calls
/// "attention"; `expert_shared_feed_forward_length` is
/// `shared_intermediate_size`; and a hybrid without RoPE (not Bamba) gets
/// the context 2^20, whatever `max_position_embeddings` says.
fn granite_hybrid_facts(v: &Value, s: &mut Stated) {
    let find = |keys: &[&str]| {
        keys.iter()
            .map(|k| k.to_string())
            .chain(keys.iter().map(|k| format!("mamba_{k}")))
            .find_map(|k| v.get(&k).and_then(Value::as_u64))
    };
    let mut put = |key: &'static str, x: Option<u64>| {
        if let Some(x) = x {
            s.insert(key, x.into());
        }
    };
    put("ssm_conv_kernel", find(&["conv_kernel", "d_conv"]));
    put(
        "ssm_state_size",
        find(&["state_size", "d_state", "state_dim", "ssm_state_size"]),
    );
    put("ssm_group_count", find(&["n_groups", "num_groups"]));
    put("ssm_time_step_rank", find(&["n_heads", "num_heads"]));
    let d_model = find(&["mamba_head_dim", "hidden_size", "d_model"]);
    put(
        "ssm_inner_size",
        find(&["expand", "num_heads"])
            .zip(d_model)
            .map(|(e, d)| e * d),
    );
    put(
        "expert_shared_feed_forward_length",
        v.get("shared_intermediate_size").and_then(Value::as_u64),
    );
    if let Some(types) = v.get("layer_types").and_then(Value::as_array) {
        let attention: Vec<u64> = (0..types.len() as u64)
            .filter(|&i| types[i as usize] == "attention")
            .collect();
        let bamba = v
            .get("architectures")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "BambaForCausalLM"));
        if attention.len() < types.len() && !bamba {
            s.insert("context_length", (1u64 << 20).into());
        }
        s.insert("attention_layers", attention.into());
    }
}

/// A config (parsed JSON) as the catalog's facts.
fn from_config_value(mut v: Value) -> Stated {
    // A config quoted under its preset name (`"qwen3_4b": {…}`).
    while let Some(o) = v.as_object()
        && o.len() == 1
        && let Some(inner) = o.values().next().filter(|i| i.is_object())
        && !o.contains_key("text_config")
    {
        v = inner.clone();
    }
    // A multimodal wrapper: the language model's facts are its text_config.
    if let Some(text_config) = v.get("text_config").and_then(Value::as_object).cloned()
        && let Some(o) = v.as_object_mut()
    {
        for (k, x) in text_config {
            o.insert(k, x);
        }
    }
    // A per-layer list of one value (Gemma 3n's `intermediate_size`) is that
    // value; a list of several is no single fact.
    let n = |k: &str| {
        let x = v.get(k)?;
        x.as_u64().or_else(|| {
            let items = x.as_array()?;
            let first = items.first()?.as_u64()?;
            items
                .iter()
                .all(|i| i.as_u64() == Some(first))
                .then_some(first)
        })
    };
    let mut s = Stated::new();
    let mut put = |key: &'static str, value: Option<Value>| {
        if let Some(value) = value {
            s.insert(key, value);
        }
    };
    let num = |x: Option<u64>| x.map(Value::from);
    put(
        "architecture",
        v.get("model_type")
            .and_then(Value::as_str)
            .and_then(|t| MODEL_TYPES.iter().find(|(m, _)| *m == t))
            .map(|(_, a)| Value::from(*a)),
    );
    let delta_net = v
        .get("model_type")
        .and_then(Value::as_str)
        .and_then(|t| MODEL_TYPES.iter().find(|(m, _)| *m == t))
        .is_some_and(|(_, a)| DELTA_NETS.contains(a));
    // The GGUF counts a delta-net's MTP blocks in block_count (llama.cpp's
    // qwen35 loaders read them after the trunk).
    let mtp = if delta_net {
        n("mtp_num_hidden_layers")
    } else {
        None
    };
    put(
        "block_count",
        num(n("num_hidden_layers").map(|l| l + mtp.unwrap_or(0))),
    );
    put("embedding_length", num(n("hidden_size")));
    put("feed_forward_length", num(n("intermediate_size")));
    put("head_count", num(n("num_attention_heads")));
    put("head_count_kv", num(n("num_key_value_heads")));
    let mla_key = n("qk_nope_head_dim")
        .zip(n("qk_rope_head_dim"))
        .map(|(a, b)| a + b);
    put("key_length", num(mla_key.or(n("head_dim"))));
    put("value_length", num(n("v_head_dim").or(n("head_dim"))));
    put("vocab_size", num(n("vocab_size")));
    put("context_length", num(n("max_position_embeddings")));
    put("sliding_window", num(n("sliding_window")));
    put(
        "tied_embeddings",
        v.get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .map(Value::from),
    );
    let experts = n("num_experts")
        .or(n("num_local_experts"))
        .or(n("n_routed_experts"));
    put("expert_count", num(experts));
    put("expert_used_count", num(n("num_experts_per_tok")));
    put(
        "expert_feed_forward_length",
        num(n("moe_intermediate_size").or(experts.and(n("intermediate_size")))),
    );
    put("expert_shared_count", num(n("n_shared_experts")));
    put("leading_dense_block_count", num(n("first_k_dense_replace")));
    put("kv_lora_rank", num(n("kv_lora_rank")));
    put("q_lora_rank", num(n("q_lora_rank")));
    put("rope_dimension_count", num(n("qk_rope_head_dim")));
    let rope_type = v
        .get("rope_scaling")
        .and_then(|r| r.get("rope_type"))
        .and_then(Value::as_str);
    put(
        "rope_freqs",
        (rope_type == Some("llama3")).then(|| true.into()),
    );
    let quant = v
        .get("quantization_config")
        .and_then(|q| q.get("quant_method"))
        .and_then(Value::as_str);
    put(
        "expert_type",
        (quant == Some("mxfp4")).then(|| "MXFP4".into()),
    );
    if delta_net {
        put("nextn_predict_layers", num(mtp));
        put("full_attention_interval", num(n("full_attention_interval")));
        put("ssm_conv_kernel", num(n("linear_conv_kernel_dim")));
        // llama.cpp has one delta-net head size for keys and values.
        put(
            "ssm_state_size",
            num(n("linear_key_head_dim").filter(|&k| n("linear_value_head_dim") == Some(k))),
        );
        put("ssm_group_count", num(n("linear_num_key_heads")));
        put("ssm_time_step_rank", num(n("linear_num_value_heads")));
        put(
            "expert_shared_feed_forward_length",
            num(n("shared_expert_intermediate_size")),
        );
        // The rotated part of a head: partial_rotary_factor of head_dim (at
        // the top, or in rope_parameters as transformers 5 writes it).
        let factor = v.get("partial_rotary_factor").or_else(|| {
            v.get("rope_parameters")
                .and_then(|r| r.get("partial_rotary_factor"))
        });
        let rope = factor
            .and_then(Value::as_f64)
            .zip(n("head_dim"))
            .map(|(f, h)| f * h as f64)
            .filter(|r| r.fract() == 0.0 && *r > 0.0)
            .map(|r| r as u64);
        put("rope_dimension_count", num(rope));
    }
    // Gemma 3n.
    put(
        "embedding_length_per_layer_input",
        num(n("hidden_size_per_layer_input")),
    );
    put("altup_num_inputs", num(n("altup_num_inputs")));
    put("laurel_rank", num(n("laurel_rank")));
    put("shared_kv_layers", num(n("num_kv_shared_layers")));
    put(
        "sliding_window_pattern",
        v.get("layer_types")
            .and_then(Value::as_array)
            .and_then(|t| full_attention_period(t))
            .map(Value::from),
    );
    match s.get("architecture").and_then(Value::as_str) {
        Some("lfm2") => lfm2_facts(&v, &mut s),
        Some("granitehybrid") => granite_hybrid_facts(&v, &mut s),
        _ => {}
    }
    s
}

/// The n of `layer_types` that make every n-th layer full attention and
/// the others sliding, if they do.
fn full_attention_period(types: &[Value]) -> Option<u64> {
    let first = types.iter().position(|t| t == "full_attention")?;
    let period = first + 1;
    let periodic = types.iter().enumerate().all(|(i, t)| {
        let want = if (i + 1) % period == 0 {
            "full_attention"
        } else {
            "sliding_attention"
        };
        t == want
    });
    periodic.then_some(period as u64)
}

/// A `transformers` config class's declared defaults (`name: type =
/// value`) as a config, then as the catalog's facts; the layer pattern
/// from its `__post_init__` line `"full_attention" if (i + 1) % N == 0`.
fn from_transformers_config(excerpt: &str) -> Stated {
    let mut o = serde_json::Map::new();
    for (k, raw) in assignments(excerpt) {
        let value = if let Some(n) = int(&raw).filter(|_| !raw.starts_with('"')) {
            Value::from(n)
        } else if let Some(b) = flag(&raw) {
            Value::from(b)
        } else if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
            Value::from(raw.trim_matches('"'))
        } else {
            continue;
        };
        o.insert(k, value);
    }
    let mut s = from_config_value(Value::Object(o));
    for line in excerpt.lines() {
        if line.contains("\"full_attention\" if (i + 1) % ")
            && let Some(n) = line
                .split("(i + 1) % ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(int)
        {
            s.insert("sliding_window_pattern", n.into());
        }
    }
    s
}

/// `key = value`, `key: type = value` and `key: value` lines; later lines
/// win (a dataclass default, then the entry that overrides it).
fn assignments(excerpt: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in excerpt.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let line = line.split(" #").next().unwrap_or(line);
        let (key, value) = match (line.find('='), line.find(':')) {
            (Some(eq), Some(colon)) if colon < eq => (&line[..colon], &line[eq + 1..]),
            (Some(eq), _) => (&line[..eq], &line[eq + 1..]),
            (None, Some(colon)) => (&line[..colon], &line[colon + 1..]),
            (None, None) => continue,
        };
        let key = key.trim();
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        out.insert(
            key.to_string(),
            value.trim().trim_end_matches(',').trim().to_string(),
        );
    }
    out
}

/// A Gemma 4 converter variant or `Gemma4TextConfig` default lines (see
/// [`DIALECTS`]).
fn from_gemma4_converter(excerpt: &str) -> Stated {
    let a = assignments(excerpt);
    // `1536`, `262_144` or `4 * 1536`.
    let number = |v: &str| -> Option<u64> {
        v.split('*')
            .map(int)
            .try_fold(1u64, |acc, x| x.map(|x| acc * x))
    };
    let n = |k: &str| a.get(k).and_then(|v| number(v)).map(Value::from);
    let b = |k: &str| a.get(k).and_then(|v| flag(v)).map(Value::from);
    let mut s = Stated::new();
    for (ours, theirs) in [
        ("block_count", "num_hidden_layers"),
        ("embedding_length", "hidden_size"),
        ("feed_forward_length", "intermediate_size"),
        ("head_count", "num_attention_heads"),
        ("head_count_kv", "num_key_value_heads"),
        ("head_count_kv_full", "num_global_key_value_heads"),
        ("key_length_swa", "head_dim"),
        ("key_length", "global_head_dim"),
        ("vocab_size", "vocab_size"),
        ("context_length", "max_position_embeddings"),
        ("sliding_window", "sliding_window"),
        ("shared_kv_layers", "num_kv_shared_layers"),
        (
            "embedding_length_per_layer_input",
            "hidden_size_per_layer_input",
        ),
    ] {
        if let Some(v) = n(theirs) {
            s.insert(ours, v);
        }
    }
    for (ours, theirs) in [
        ("tied_embeddings", "tie_word_embeddings"),
        ("double_wide_mlp", "use_double_wide_mlp"),
        ("attention_k_eq_v", "attention_k_eq_v"),
    ] {
        if let Some(v) = b(theirs) {
            s.insert(ours, v);
        }
    }
    // `global_head_dim = kwargs.pop("global_head_dim", 512)`.
    if let Some(v) = a.get("global_head_dim")
        && let Some(d) = v
            .strip_prefix("kwargs.pop(\"global_head_dim\",")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(int)
    {
        s.insert("key_length", d.into());
    }
    // `layer_types=NAME * k` with `NAME = ["sliding_attention"] * n +
    // ["full_attention"]`: a full layer every n + 1.
    if let Some(name) = a
        .get("layer_types")
        .and_then(|v| v.split('*').next())
        .map(str::trim)
        && let Some(def) = a.get(name)
        && let Some(rest) = def.strip_prefix("[\"sliding_attention\"] * ")
        && let Some(k) = rest.strip_suffix(" + [\"full_attention\"]").and_then(int)
    {
        s.insert("sliding_window_pattern", (k + 1).into());
    }
    s
}

/// A `litgpt/config.py` entry.
fn from_litgpt(excerpt: &str) -> Stated {
    let a = assignments(excerpt);
    let n = |k: &str| a.get(k).and_then(|v| int(v)).map(Value::from);
    let mut s = Stated::new();
    for (ours, theirs) in [
        ("block_count", "n_layer"),
        ("embedding_length", "n_embd"),
        ("feed_forward_length", "intermediate_size"),
        ("head_count", "n_head"),
        ("head_count_kv", "n_query_groups"),
        ("key_length", "head_size"),
        ("vocab_size", "padded_vocab_size"),
        ("context_length", "block_size"),
        ("sliding_window", "sliding_window_size"),
        ("expert_count", "n_expert"),
        ("expert_used_count", "n_expert_per_token"),
        ("expert_shared_count", "n_shared_expert"),
        ("leading_dense_block_count", "first_k_dense_replace"),
    ] {
        if let Some(v) = n(theirs) {
            s.insert(ours, v);
        }
    }
    let experts = n("n_expert").is_some_and(|v| v.as_u64() > Some(0));
    if let Some(v) = n("moe_intermediate_size").or(n("intermediate_size").filter(|_| experts)) {
        s.insert("expert_feed_forward_length", v);
    }
    // Llama 3.1's RoPE (`rope_type: llama3`) in litgpt's words.
    if a.get("rope_adjustments")
        .is_some_and(|r| r.contains("low_freq_factor"))
    {
        s.insert("rope_freqs", true.into());
    }
    s
}

/// A MaxText model YAML.
fn from_maxtext(excerpt: &str) -> Stated {
    let a = assignments(excerpt);
    let n = |k: &str| a.get(k).and_then(|v| int(v)).map(Value::from);
    let mut s = Stated::new();
    for (ours, theirs) in [
        ("block_count", "base_num_decoder_layers"),
        ("embedding_length", "base_emb_dim"),
        ("feed_forward_length", "base_mlp_dim"),
        ("head_count", "base_num_query_heads"),
        ("head_count_kv", "base_num_kv_heads"),
        ("key_length", "head_dim"),
        ("vocab_size", "vocab_size"),
        ("context_length", "max_position_embeddings"),
        ("sliding_window", "sliding_window_size"),
        ("expert_count", "num_experts"),
        ("expert_used_count", "num_experts_per_tok"),
        ("expert_feed_forward_length", "base_moe_mlp_dim"),
        ("expert_shared_count", "shared_experts"),
        ("leading_dense_block_count", "first_num_dense_layers"),
    ] {
        if let Some(v) = n(theirs) {
            s.insert(ours, v);
        }
    }
    if let Some(t) = a.get("logits_via_embedding").and_then(|v| flag(v)) {
        s.insert("tied_embeddings", t.into());
    }
    if let Some(arch) = a.get("decoder_block").and_then(|b| {
        let b = b.trim_matches('"');
        DECODER_BLOCKS.iter().find(|(d, _)| *d == b)
    }) {
        s.insert("architecture", arch.1.into());
    }
    s
}

/// llama.cpp's dump of a GGUF header: `- kv N: arch.key type = value`
/// lines (or the same lines without the `- kv N:` prefix, as read from a
/// file) and `print_info:` / `llm_load_print_meta:` lines.
fn from_llama_cpp_log(excerpt: &str) -> Stated {
    let mut kv = BTreeMap::new();
    let mut info = BTreeMap::new();
    let mut tokens = None;
    let mut tensors = None;
    // Array keys (`arr[bool,30] = [true, ...`), kept as their text: a dump
    // elides all but the first few values.
    let mut arrays = BTreeMap::new();
    for line in excerpt.lines() {
        // `loaded meta data with 46 key-value pairs and 320 tensors from`:
        // the file's tensor count.
        if let Some(at) = line.find("key-value pairs and ") {
            let rest = &line[at + "key-value pairs and ".len()..];
            tensors = rest.split_whitespace().next().and_then(int);
        }
        // `tokenizer.ggml.tokens arr[str,262144]` may come without its
        // (elided) value.
        let (left, value) = line.split_once('=').unwrap_or((line, ""));
        let value = value.trim().to_string();
        for prefix in ["print_info:", "llm_load_print_meta:"] {
            if let Some(at) = left.find(prefix) {
                info.insert(left[at + prefix.len()..].trim().to_string(), value.clone());
            }
        }
        let left = left.find("- kv").map_or(left, |at| {
            left[at + 4..]
                .trim_start()
                .trim_start_matches(|c: char| c.is_ascii_digit() || c == ':')
        });
        let mut words = left.split_whitespace();
        if let (Some(key), Some(ty)) = (words.next(), words.next()) {
            if key == "tokenizer.ggml.tokens"
                && let Some(n) = ty
                    .strip_prefix("arr[str,")
                    .and_then(|t| t.strip_suffix(']'))
            {
                tokens = int(n);
            }
            if key.contains('.') && !ty.starts_with("arr") {
                kv.insert(key.to_string(), value.trim_matches('"').to_string());
            }
            if key.contains('.') && ty.starts_with("arr") {
                arrays.insert(key.to_string(), value.clone());
            }
        }
    }
    let mut s = Stated::new();
    // The architecture, or the prefix its keys carry (a dump cut before
    // `general.architecture`).
    let arch = kv
        .get("general.architecture")
        .or(info.get("arch"))
        .cloned()
        .or_else(|| {
            kv.keys().find_map(|k| {
                [
                    ".block_count",
                    ".context_length",
                    ".embedding_length",
                    ".feed_forward_length",
                ]
                .iter()
                .find_map(|suffix| k.strip_suffix(suffix))
                .map(str::to_string)
            })
        });
    if let Some(a) = &arch {
        s.insert("architecture", a.clone().into());
    }
    let k = |key: &str| -> Option<u64> {
        let a = arch.as_deref()?;
        kv.get(&format!("{a}.{key}")).and_then(|v| int(v))
    };
    let i = |key: &str| info.get(key).and_then(|v| int(v));
    for (ours, kv_key, info_key) in [
        ("block_count", "block_count", "n_layer"),
        ("embedding_length", "embedding_length", "n_embd"),
        ("feed_forward_length", "feed_forward_length", "n_ff"),
        ("head_count", "attention.head_count", "n_head"),
        ("head_count_kv", "attention.head_count_kv", "n_head_kv"),
        ("key_length", "attention.key_length", "n_embd_head_k"),
        ("value_length", "attention.value_length", "n_embd_head_v"),
        ("vocab_size", "vocab_size", "n_vocab"),
        ("context_length", "context_length", "n_ctx_train"),
        ("sliding_window", "attention.sliding_window", "n_swa"),
        ("expert_count", "expert_count", "n_expert"),
        ("expert_used_count", "expert_used_count", "n_expert_used"),
        (
            "expert_feed_forward_length",
            "expert_feed_forward_length",
            "n_ff_exp",
        ),
        (
            "expert_shared_count",
            "expert_shared_count",
            "n_expert_shared",
        ),
        (
            "leading_dense_block_count",
            "leading_dense_block_count",
            "n_layer_dense_lead",
        ),
        ("kv_lora_rank", "attention.kv_lora_rank", "n_lora_kv"),
    ] {
        // print_info prints 0 for what the model does not have.
        if let Some(v) = k(kv_key).or(i(info_key).filter(|&v| v > 0)) {
            s.insert(ours, v.into());
        }
    }
    // Keys only the zoo's layouts read (GLM-4.5, Llama 4, latent attention
    // with a compressed query, the recurrent hybrids), from the header only.
    for (ours, kv_key) in [
        ("rope_dimension_count", "rope.dimension_count"),
        ("nextn_predict_layers", "nextn_predict_layers"),
        ("interleave_moe_layer_step", "interleave_moe_layer_step"),
        ("q_lora_rank", "attention.q_lora_rank"),
        ("full_attention_interval", "full_attention_interval"),
        ("ssm_conv_kernel", "ssm.conv_kernel"),
        ("ssm_state_size", "ssm.state_size"),
        ("ssm_group_count", "ssm.group_count"),
        ("ssm_time_step_rank", "ssm.time_step_rank"),
        ("ssm_inner_size", "ssm.inner_size"),
        ("shortconv_l_cache", "shortconv.l_cache"),
        (
            "expert_shared_feed_forward_length",
            "expert_shared_feed_forward_length",
        ),
        // Gemma 4's sliding layers' head, and its per-layer inputs and
        // shared cache (0 where it has none).
        ("key_length_swa", "attention.key_length_swa"),
        ("shared_kv_layers", "attention.shared_kv_layers"),
        (
            "embedding_length_per_layer_input",
            "embedding_length_per_layer_input",
        ),
    ] {
        if let Some(v) = k(kv_key) {
            s.insert(ours, v.into());
        }
    }
    // Per-layer KV heads of two kinds of layer (Gemma 4: fewer on its full
    // layers): print_info's whole `n_head_kv` list, read against the first
    // `sliding_window_pattern` flags the header dump shows (true: a sliding
    // layer). Stated only where the flags give one count to the sliding
    // layers and another to the full ones, and the full layers (those with
    // the full count, in the whole list) fall every `period`-th layer: then
    // the list states head_count_kv, head_count_kv_full and that period.
    let whole = |v: &str| -> Option<Vec<u64>> {
        let inner = v.trim().strip_prefix('[')?.strip_suffix(']')?;
        inner.split(',').map(int).collect()
    };
    let flags: Option<Vec<bool>> = arch
        .as_deref()
        .and_then(|a| arrays.get(&format!("{a}.attention.sliding_window_pattern")))
        .and_then(|v| v.trim().strip_prefix('['))
        .map(|v| v.split(',').map_while(flag).collect());
    if let (Some(heads), Some(flags)) = (info.get("n_head_kv").and_then(|v| whole(v)), flags) {
        let of = |sliding: bool| -> Vec<u64> {
            heads
                .iter()
                .zip(&flags)
                .filter(|&(_, &f)| f == sliding)
                .map(|(&h, _)| h)
                .collect()
        };
        let one = |v: Vec<u64>| v.first().copied().filter(|&h| v.iter().all(|&x| x == h));
        if let (Some(kv_swa), Some(kv_full)) = (one(of(true)), one(of(false)))
            && kv_swa != kv_full
            && heads.iter().all(|&h| h == kv_swa || h == kv_full)
        {
            let full_at: Vec<usize> = (0..heads.len()).filter(|&i| heads[i] == kv_full).collect();
            let period = full_at[0] + 1;
            let every: Vec<usize> = (period - 1..heads.len()).step_by(period).collect();
            if full_at == every && i("n_layer").is_none_or(|n| n == heads.len() as u64) {
                s.insert("head_count_kv", kv_swa.into());
                s.insert("head_count_kv_full", kv_full.into());
                s.insert("sliding_window_pattern", (period as u64).into());
            }
        }
    }
    // The recurrent hybrids (LFM2, Granite 4.0 H): a layer attends iff its
    // KV head count is not 0 (llama.cpp's loaders), so print_info's whole
    // `n_head_kv` list states the attention layers and their one KV count.
    if matches!(arch.as_deref(), Some("lfm2" | "granitehybrid"))
        && let Some(heads) = info.get("n_head_kv").and_then(|v| whole(v))
        && i("n_layer").is_none_or(|n| n == heads.len() as u64)
    {
        let attention: Vec<u64> = (0..heads.len() as u64)
            .filter(|&il| heads[il as usize] > 0)
            .collect();
        let counts: Vec<u64> = heads.iter().copied().filter(|&h| h > 0).collect();
        if let Some(&kv) = counts.first()
            && counts.iter().all(|&h| h == kv)
        {
            s.insert("head_count_kv", kv.into());
            s.insert("attention_layers", attention.into());
        }
    }
    // A scale, not a count (mistral3's Llama-4-style temperature scaling).
    if let Some(t) = arch
        .as_deref()
        .and_then(|a| kv.get(&format!("{a}.attention.temperature_scale")))
        .and_then(|v| v.parse::<f64>().ok())
    {
        s.insert("attention_temperature_scale", t.into());
    }
    if !s.contains_key("vocab_size")
        && let Some(t) = tokens
    {
        s.insert("vocab_size", t.into());
    }
    if let Some(t) = tensors {
        s.insert("tensor_count", t.into());
    }
    s
}

/// A GGUF header's keys as JSON (`"llama4.block_count": 48,`, as
/// Ollama's `/api/show` lists a model's `model_info`), read as the
/// `key type = value` lines of a llama.cpp log.
fn from_gguf_metadata_json(excerpt: &str) -> Stated {
    let lines: Vec<String> = excerpt
        .lines()
        .filter_map(|line| {
            let (key, value) = line.trim().trim_end_matches(',').split_once("\":")?;
            let key = key.trim().trim_start_matches('"');
            let value = value.trim();
            (!key.is_empty() && value != "null").then(|| format!("{key} json = {value}"))
        })
        .collect();
    from_llama_cpp_log(&lines.join("\n"))
}

/// A blob's metadata as Ollama's model pages list it: `• key` on one line,
/// its value on the next non-empty one; read as the `key type = value`
/// lines of a llama.cpp log (an elided array, `[0, 0, 0, 0, 0, ...]`, is no
/// number and states nothing).
fn from_ollama_metadata(excerpt: &str) -> Stated {
    let mut lines = Vec::new();
    let mut key: Option<&str> = None;
    for line in excerpt.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(k) = line.strip_prefix('•') {
            key = Some(k.trim());
        } else if let Some(k) = key.take() {
            lines.push(format!("{k} ollama = {line}"));
        }
    }
    from_llama_cpp_log(&lines.join("\n"))
}

/// A Markdown table of GGUF keys without their prefix: a row states its
/// key where the key is one of the catalog's names and the value a count.
fn from_gguf_key_table(excerpt: &str) -> Stated {
    const KEYS: &[&str] = &[
        "block_count",
        "context_length",
        "embedding_length",
        "feed_forward_length",
        "vocab_size",
    ];
    let mut s = Stated::new();
    for cells in table_rows(excerpt) {
        if let (Some(key), Some(value)) = (cells.get(1), cells.get(2))
            && let Some(&k) = KEYS.iter().find(|&&k| k == key)
            && let Some(v) = int(value)
        {
            s.insert(k, v.into());
        }
    }
    s
}

/// One model's column of a card's architecture table: the header row holds
/// `column`, and each labelled row's cell in that column states one fact.
/// A cell of several counts ("4 attention / 36 Mamba2") states their sum as
/// the layer count; "-" or a rounded figure ("128K") states nothing.
fn from_card_table(excerpt: &str, column: &str) -> Result<Stated, String> {
    let rows = table_rows(excerpt);
    if !rows.iter().flatten().any(|c| c == column) {
        return Err(format!("no header cell '{column}'"));
    }
    let cell = |label: &str| table_cell(&rows, |c| c == column, |l| l.eq_ignore_ascii_case(label));
    let count = |label: &str| cell(label).and_then(int);
    let mut s = Stated::new();
    let mut put = |key: &'static str, v: Option<u64>| {
        if let Some(v) = v {
            s.insert(key, v.into());
        }
    };
    let layers = cell("Number of layers").and_then(|c| {
        c.split('/')
            .map(|p| p.split_whitespace().next().and_then(int))
            .sum::<Option<u64>>()
    });
    put("block_count", layers);
    put("embedding_length", count("Embedding size"));
    put("key_length", count("Attention head size"));
    put("head_count", count("Number of attention heads"));
    put("head_count_kv", count("Number of KV heads"));
    put("ssm_state_size", count("Mamba2 state size"));
    put("ssm_time_step_rank", count("Number of Mamba2 heads"));
    let experts = count("Num. Experts");
    put("expert_count", experts);
    put("expert_used_count", count("Num. active Experts"));
    put("expert_feed_forward_length", count("Expert hidden size"));
    // One row for the dense MLP and the MoE models' shared expert.
    let mlp = count("MLP / Shared expert hidden size");
    if experts.is_some() {
        put("expert_shared_feed_forward_length", mlp);
    } else {
        put("feed_forward_length", mlp);
    }
    Ok(s)
}

/// A model card's overview (Qwen's list of layers, heads and context;
/// gpt-oss's MXFP4 experts).
fn from_model_card(excerpt: &str) -> Stated {
    let mut s = Stated::new();
    let number_after = |line: &str, label: &str| -> Option<u64> {
        let rest = &line[line.find(label)? + label.len()..];
        let digits: String = rest
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    for line in excerpt.lines() {
        let plain = line.replace("**", "");
        if let Some(n) = number_after(&plain, "Number of Layers:") {
            s.insert("block_count", n.into());
        }
        if plain.contains("Number of Attention Heads") {
            if let Some(q) = number_after(&plain, "):") {
                s.insert("head_count", q.into());
            }
            if let Some(kv) = number_after(&plain, "for Q and") {
                s.insert("head_count_kv", kv.into());
            }
        }
        if let Some(n) = number_after(&plain, "Context Length:") {
            s.insert("context_length", n.into());
        }
        if plain.contains("tied word embeddings")
            || plain.contains("shared input/output embeddings")
        {
            s.insert("tied_embeddings", true.into());
        }
        // gpt-oss: the experts ship (and stay) in MXFP4.
        if plain.contains("MXFP4 quantization of the MoE weights") {
            s.insert("expert_type", "MXFP4".into());
        }
    }
    s
}

/// What a kept excerpt states, under the catalog's names.
fn stated(dialect: &str, excerpt: &str) -> Result<Stated, String> {
    stated_in(dialect, excerpt, None)
}

/// What a kept excerpt states, with the column a `model card table` source
/// names.
fn stated_in(dialect: &str, excerpt: &str, column: Option<&str>) -> Result<Stated, String> {
    Ok(match dialect {
        "config.json" => from_config_json(excerpt)?,
        "transformers config" => from_transformers_config(excerpt),
        "gemma4 converter" => from_gemma4_converter(excerpt),
        "litgpt" => from_litgpt(excerpt),
        "maxtext" => from_maxtext(excerpt),
        "llama.cpp log" => from_llama_cpp_log(excerpt),
        "gguf metadata json" => from_gguf_metadata_json(excerpt),
        "ollama metadata" => from_ollama_metadata(excerpt),
        "model card" => from_model_card(excerpt),
        "gguf key table" => from_gguf_key_table(excerpt),
        "model card table" => from_card_table(
            excerpt,
            column.ok_or("a model card table source needs its column")?,
        )?,
        d => return Err(format!("unknown dialect '{d}' (known: {DIALECTS:?})")),
    })
}

/// Architectures whose output projection is always the token embedding
/// (the `always_tied` layouts of `synth::facts`).
const ALWAYS_TIED: &[&str] = &["gemma2", "gemma3", "gemma3n", "gemma4"];

/// Every architecture number of entry `e` against the excerpts its facts
/// record keeps: each number the catalog lists is stated by at least one
/// excerpt and contradicted by none, and each fact an excerpt states that
/// changes the plan is listed.
fn check_arch(e: &Entry, m: &Value, laid_out_tensors: Option<u64>) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(sources) = m["arch_sources"].as_array().filter(|s| !s.is_empty()) else {
        if e.arch_like.is_none() {
            bad.push("no arch_sources".into());
        }
        return bad;
    };
    let mut all: Vec<(String, Stated)> = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        let (Some(address), Some(dialect), Some(excerpt)) = (
            src["address"].as_str(),
            src["dialect"].as_str(),
            src["excerpt"].as_str(),
        ) else {
            bad.push(format!(
                "arch_sources[{i}] needs address, dialect and excerpt"
            ));
            continue;
        };
        if address.trim().is_empty() || excerpt.trim().is_empty() {
            bad.push(format!("arch_sources[{i}] is empty"));
        }
        match stated_in(dialect, excerpt, src["column"].as_str()) {
            Ok(s) if s.is_empty() => bad.push(format!("{address}: states no fact")),
            Ok(s) => all.push((address.to_string(), s)),
            Err(err) => bad.push(format!("{address}: {err}")),
        }
    }
    let listed = serde_json::to_value(&e.arch).expect("serialises");
    let listed = listed.as_object().expect("an object");
    // Catalog → excerpts.
    for (key, ours) in listed.iter().filter(|(_, v)| !v.is_null()) {
        let mut seen = false;
        for (address, s) in &all {
            if let Some(theirs) = s.get(key.as_str()) {
                seen = true;
                if theirs != ours {
                    bad.push(format!("{key} {ours} ≠ {theirs} in {address}"));
                }
            }
        }
        // Tied embeddings no dump states as a key: a dump's tensor count
        // shows them where it is the count the entry's facts lay out (an
        // untied layout holds one more tensor, `output.weight`); Gemma 4's full layers without a V projection
        // (`attention_k_eq_v`) likewise: the layout with them holds one
        // `attn_v` more per full layer.
        let counted = (key == "tied_embeddings" || key == "attention_k_eq_v")
            && *ours == Value::from(true)
            && laid_out_tensors.is_some_and(|t| {
                all.iter()
                    .any(|(_, s)| s.get("tensor_count") == Some(&Value::from(t)))
            });
        // The architecture is a name, checked where a source names it.
        if !seen && !counted && key != "architecture" {
            bad.push(format!("{key} {ours} is in no excerpt"));
        }
    }
    // Excerpts → catalog: what changes a plan must be listed.
    let arch = listed["architecture"].as_str().unwrap_or("");
    let get = |k: &str| all.iter().find_map(|(_, s)| s.get(k)).cloned();
    let n = |k: &str| get(k).and_then(|v| v.as_u64());
    let mut required = vec![
        "block_count",
        "embedding_length",
        "feed_forward_length",
        "head_count",
        "head_count_kv",
        "vocab_size",
        "context_length",
        "expert_count",
        "expert_used_count",
        "expert_feed_forward_length",
        "expert_shared_count",
        "leading_dense_block_count",
        "kv_lora_rank",
        "expert_type",
        "attention_temperature_scale",
    ];
    if n("expert_count").unwrap_or(0) == 0 {
        required.retain(|k| !k.starts_with("expert_") && *k != "leading_dense_block_count");
    }
    if n("kv_lora_rank").is_some() {
        required.push("rope_dimension_count");
    }
    if n("q_lora_rank").is_some_and(|r| r > 0) {
        required.extend(["q_lora_rank", "key_length", "value_length"]);
    }
    if let (Some(k), Some(e_), Some(h)) = (
        n("key_length"),
        n("embedding_length"),
        n("head_count").filter(|&h| h > 0),
    ) && k != e_ / h
    {
        required.push("key_length");
    }
    if let (Some(v), Some(k)) = (n("value_length"), n("key_length"))
        && v != k
    {
        required.push("value_length");
    }
    if get("tied_embeddings") == Some(true.into()) && !ALWAYS_TIED.contains(&arch) {
        required.push("tied_embeddings");
    }
    if get("rope_freqs") == Some(true.into()) {
        required.push("rope_freqs");
    }
    if headroom_planner::arch::swa_default(arch).is_some() {
        required.push("sliding_window");
    }
    if arch == "glm4moe" {
        required.extend(["key_length", "rope_dimension_count", "nextn_predict_layers"]);
    }
    if arch == "llama4" {
        required.push("interleave_moe_layer_step");
    }
    if arch == "gemma3n" {
        required.extend([
            "sliding_window",
            "sliding_window_pattern",
            "shared_kv_layers",
            "embedding_length_per_layer_input",
            "altup_num_inputs",
            "laurel_rank",
        ]);
    }
    if DELTA_NETS.contains(&arch) {
        required.extend([
            "key_length",
            "rope_dimension_count",
            "nextn_predict_layers",
            "full_attention_interval",
            "ssm_conv_kernel",
            "ssm_state_size",
            "ssm_group_count",
            "ssm_time_step_rank",
            "expert_shared_feed_forward_length",
        ]);
    }
    if arch == "lfm2" {
        required.extend(["shortconv_l_cache", "attention_layers"]);
    }
    if arch == "granitehybrid" {
        required.extend([
            "attention_layers",
            "ssm_conv_kernel",
            "ssm_inner_size",
            "ssm_state_size",
            "ssm_group_count",
            "ssm_time_step_rank",
            "expert_shared_feed_forward_length",
        ]);
    }
    if arch == "gemma4" {
        required.extend([
            "key_length",
            "key_length_swa",
            "head_count_kv_full",
            "sliding_window_pattern",
            "shared_kv_layers",
            "embedding_length_per_layer_input",
            "double_wide_mlp",
            "attention_k_eq_v",
        ]);
    }
    for key in required {
        if get(key).is_some() && listed.get(key).is_none_or(Value::is_null) {
            bad.push(format!("{key} is stated in an excerpt but not listed"));
        }
    }
    bad
}

fn check_quant(q: &Quant, fq: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    match fq["files"].as_array() {
        Some(files) => {
            let files: Vec<&str> = files.iter().filter_map(Value::as_str).collect();
            if q.files != files {
                bad.push(format!("files {:?} ≠ {files:?}", q.files));
            }
        }
        None => {
            if !q.files.is_empty() {
                bad.push("files listed where the facts have none".into());
            }
            if q.folder.as_deref() != fq["folder"].as_str() {
                bad.push(format!("folder {:?} ≠ {}", q.folder, fq["folder"]));
            }
        }
    }
    match (&q.size_listed, f64_of(&fq["size_gb"])) {
        (Some(listed), Some(gb)) => {
            let num: f64 = listed
                .trim_end_matches(" GB")
                .parse()
                .expect("sizes are GB here");
            if (num - gb).abs() > 1e-9 {
                bad.push(format!("size {listed} ≠ {gb} GB"));
            }
        }
        (None, None) => {}
        (a, b) => bad.push(format!("size {a:?} vs facts {b:?}")),
    }
    let exact = fq["size_bytes"].as_u64();
    if q.size_precision == 0 && q.size_bytes != exact {
        bad.push(format!("bytes {:?} ≠ {exact:?}", q.size_bytes));
    }
    bad
}

#[test]
fn listed_numbers_agree_with_the_facts() {
    let cat = catalog();
    let facts = facts_models();
    let mut problems = Vec::new();
    let mut matched = 0;
    for e in cat.entries() {
        let Some(m) = facts_for(&facts, e) else {
            problems.push(format!("{}: not in the facts", e.id));
            continue;
        };
        matched += 1;
        let mut bad = Vec::new();
        let alt = &m["alt_quants"];
        let (repo, quants) = if alt["repo"] == e.repo.as_str() {
            (alt["repo"].as_str(), alt["quants"].as_array())
        } else {
            (m["gguf_repo"].as_str(), m["quants"].as_array())
        };
        if repo != Some(e.repo.as_str()) {
            bad.push(format!("repo {} ≠ {repo:?}", e.repo));
        }
        if m["family"] != e.family.as_str() {
            bad.push(format!("family {} ≠ {}", e.family, m["family"]));
        }
        let stated = f64_of(&m["params_b"]);
        let named = f64_of(&m["params_b_nominal_from_name"]);
        let want = stated.or(named);
        let nominal = (stated.is_none() && named.is_some())
            || m["params_b_source"]
                .as_str()
                .is_some_and(|s| s.contains("nominal"));
        if e.params_b != want || e.params_nominal != nominal {
            bad.push(format!(
                "params {:?} (nominal {}) ≠ {want:?} (nominal {nominal})",
                e.params_b, e.params_nominal
            ));
        }
        if e.params_active_b != f64_of(&m["params_active_b"]) {
            bad.push("params_active_b".into());
        }
        match (&e.license, m["license"].as_str()) {
            (Some(l), Some(t)) if t.to_lowercase().starts_with(l.as_str()) => {}
            (None, None) => {}
            (l, t) => bad.push(format!("license {l:?} vs {t:?}")),
        }
        let uses: Vec<&str> = m["use"]
            .as_array()
            .map(|u| u.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let base_model = m["notes"].to_string().contains("base model");
        for u in &e.uses {
            let listed = uses.contains(&u.as_str()) || (u == "base" && base_model);
            if !listed {
                bad.push(format!("use {u} not in the facts"));
            }
        }
        for q in &e.quants {
            let fq = quants
                .into_iter()
                .flatten()
                .find(|fq| fq["quant"] == q.name.as_str());
            match fq {
                Some(fq) => bad.extend(
                    check_quant(q, fq)
                        .into_iter()
                        .map(|b| format!("{}: {b}", q.name)),
                ),
                None => bad.push(format!("quant {} not in the facts", q.name)),
            }
        }
        let arch = resolve_arch(&cat, e).expect("resolves");
        let q = e.quant("Q4_K_M").unwrap_or(&e.quants[0]);
        let tensors = facts::header(&arch.facts, q.file_type)
            .ok()
            .map(|h| h.tensors.len() as u64);
        bad.extend(check_arch(e, m, tensors));
        if !bad.is_empty() {
            problems.push(format!("{}: {}", e.id, bad.join("; ")));
        }
    }
    assert!(matched >= 40, "{matched} entries matched the facts");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The excerpt check catches a number that is not its source's: a changed
/// one, and one no excerpt states.
#[test]
fn a_number_unlike_its_excerpt_is_caught() {
    let facts = facts_models();
    let text = workspace_file("../models.toml");
    let at = text.find("id = \"gemma-3-12b-it\"").expect("present");
    let end = at + text[at..].find("[[model.quant]]").expect("quants");
    for (from, to, complaint) in [
        (
            "block_count = 48",
            "block_count = 47",
            "block_count 47 ≠ 48",
        ),
        (
            "head_count_kv = 8",
            "head_count_kv = 8\nvalue_length = 128",
            "value_length 128 ≠ 256",
        ),
        ("sliding_window = 1024\n", "", "sliding_window is stated"),
    ] {
        let i = at + text[at..end].find(from).expect("in the entry");
        let bad = format!("{}{to}{}", &text[..i], &text[i + from.len()..]);
        let cat = Catalog::parse(&bad, "t.toml").expect("parses");
        let e = cat.get("gemma-3-12b-it").expect("entry");
        let m = facts_for(&facts, e).expect("facts");
        let problems = check_arch(e, m, None);
        assert!(
            problems.iter().any(|p| p.contains(complaint)),
            "{from} → {to}: {problems:?}"
        );
    }
    // Each dialect reads its own words.
    let n = |s: &Stated, k: &str| s.get(k).and_then(Value::as_u64);
    let c = stated(
        "config.json",
        r#""text_config": {"num_hidden_layers": 48, "tie_word_embeddings": True,}"#,
    )
    .expect("JSON");
    assert_eq!(n(&c, "block_count"), Some(48));
    assert_eq!(c.get("tied_embeddings"), Some(&Value::from(true)));
    let l = stated(
        "litgpt",
        "    n_embd: int = 4096\n        n_layer=32,\n        padded_vocab_size=128256,",
    )
    .expect("litgpt");
    assert_eq!(
        (n(&l, "embedding_length"), n(&l, "vocab_size")),
        (Some(4096), Some(128256))
    );
    let y = stated(
        "maxtext",
        "base_num_decoder_layers: 48\nvocab_size: 262_144 # comment",
    )
    .expect("yaml");
    assert_eq!(
        (n(&y, "block_count"), n(&y, "vocab_size")),
        (Some(48), Some(262144))
    );
    let g = stated(
        "llama.cpp log",
        "llama_model_loader: - kv  16:   gemma3.attention.head_count_kv u32  = 8\n\
         llama_model_loader: - kv  14:   gemma3.block_count u32  = 48\nprint_info: n_vocab = 262208",
    )
    .expect("log");
    assert_eq!(
        (
            n(&g, "head_count_kv"),
            n(&g, "block_count"),
            n(&g, "vocab_size")
        ),
        (Some(8), Some(48), Some(262208))
    );
    let card = stated(
        "model card",
        "- **Number of Attention Heads (GQA)**: 14 for Q and 2 for KV\n- Context Length: Full 32,768 tokens",
    )
    .expect("card");
    assert_eq!(
        (
            n(&card, "head_count"),
            n(&card, "head_count_kv"),
            n(&card, "context_length")
        ),
        (Some(14), Some(2), Some(32768))
    );
    // LFM2's keys, from a Hugging Face file page in its table bars: the FFN
    // width adjusted as llama.cpp's converter adjusts it (2/3 of 10240 is
    // 6826, rounded up to 256: 6912), the attention layers from
    // `full_attn_idxs`, the convolution from `conv_L_cache`.
    let lfm2 = stated(
        "config.json",
        "| { | |\n| \"block_auto_adjust_ff_dim\": true, | |\n| \"block_ff_dim\": 10240, | |\n\
         | \"block_ffn_dim_multiplier\": 1.0, | |\n| \"block_multiple_of\": 256, | |\n\
         | \"conv_L_cache\": 3, | |\n| \"full_attn_idxs\": [ | |\n| 2, | |\n| 5 | |\n| ], | |\n\
         | \"model_type\": \"lfm2\", | |\n| \"num_hidden_layers\": 6 | |\n| } | |",
    )
    .expect("a barred page");
    assert_eq!(lfm2.get("architecture"), Some(&Value::from("lfm2")));
    assert_eq!(
        (
            n(&lfm2, "feed_forward_length"),
            n(&lfm2, "shortconv_l_cache"),
            lfm2.get("attention_layers")
        ),
        (Some(6912), Some(3), Some(&Value::from(vec![2u64, 5])))
    );
    // Without the adjustment the width is `block_ff_dim` as it stands (not
    // `intermediate_size`); `layer_types` names the attention layers, and
    // the original `tie_embedding` key ties the output.
    let lfm2 = stated(
        "config.json",
        r#"{"model_type": "lfm2", "block_auto_adjust_ff_dim": false, "block_ff_dim": 10752,
            "intermediate_size": 4096, "tie_embedding": true,
            "layer_types": ["conv", "full_attention", "conv", "full_attention"]}"#,
    )
    .expect("JSON");
    assert_eq!(
        (
            n(&lfm2, "feed_forward_length"),
            lfm2.get("attention_layers"),
            lfm2.get("tied_embeddings")
        ),
        (
            Some(10752),
            Some(&Value::from(vec![1u64, 3])),
            Some(&Value::from(true))
        )
    );
    // Granite 4.0 H's `mamba_*` keys as the converter writes them: the inner
    // size is `mamba_expand` times the hidden size, the time-step rank the
    // Mamba-2 heads; the attention layers from `layer_types`; the context
    // 2^20 (no RoPE), not `max_position_embeddings`.
    let granite = stated(
        "config.json",
        r#"{"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
            "hidden_size": 1536, "intermediate_size": 512, "shared_intermediate_size": 1024,
            "num_local_experts": 64, "mamba_d_conv": 4, "mamba_d_state": 128,
            "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 48, "mamba_d_head": 64,
            "max_position_embeddings": 131072,
            "layer_types": ["mamba", "attention", "mamba", "mamba"]}"#,
    )
    .expect("JSON");
    assert_eq!(
        granite.get("architecture"),
        Some(&Value::from("granitehybrid"))
    );
    assert_eq!(
        [
            "ssm_conv_kernel",
            "ssm_state_size",
            "ssm_group_count",
            "ssm_time_step_rank",
            "ssm_inner_size",
            "expert_shared_feed_forward_length",
            "feed_forward_length",
            "expert_feed_forward_length",
            "context_length",
        ]
        .map(|k| n(&granite, k)),
        [4, 128, 1, 48, 3072, 1024, 512, 512, 1 << 20].map(Some)
    );
    assert_eq!(
        granite.get("attention_layers"),
        Some(&Value::from(vec![1u64]))
    );
    // A Hugging Face page the store cut short after a whole line still
    // states what it shows.
    let cut = stated(
        "config.json",
        "| { |\n| \"hidden_size\": 1536, |\n| \"layer_types\": [ |\n| \"mamba\", |\n\
         | \"attention\" |\n| ], |\n| \"model_type\": \"granitemoehybrid\", |\n\
         | \"num_attention_heads\": 12, |",
    )
    .expect("a cut page");
    assert_eq!(
        (
            n(&cut, "embedding_length"),
            n(&cut, "head_count"),
            cut.get("attention_layers")
        ),
        (Some(1536), Some(12), Some(&Value::from(vec![1u64])))
    );
    // Ollama's page of a blob's metadata: a key on a bulleted line, its
    // value on the next; an elided array states nothing.
    let ollama = stated(
        "ollama metadata",
        "9811e90b0eec · 4.2GB\n    Metadata\n  • general.architecture\n    granitehybrid\n\
         \x20 • granitehybrid.attention.head_count_kv\n    [0, 0, 0, 0, 0, ...]\n\
         \x20 • granitehybrid.block_count\n    40\n  • granitehybrid.ssm.time_step_rank\n    48",
    )
    .expect("ollama");
    assert_eq!(
        (
            ollama.get("architecture"),
            n(&ollama, "block_count"),
            n(&ollama, "ssm_time_step_rank"),
            n(&ollama, "head_count_kv")
        ),
        (
            Some(&Value::from("granitehybrid")),
            Some(40),
            Some(48),
            None
        )
    );
    // A card's table of several models: the named column's cells.
    let table = "<tr>\n<th>Model</th>\n<th>H Micro Dense</th>\n<th>H Tiny MoE</th>\n</tr>\n\
         <tr>\n<td>Number of layers</td>\n<td>4 attention / 36 Mamba2</td>\n<td>4 attention / 36 Mamba2</td>\n</tr>\n\
         <tr>\n<td>Number of KV heads</td>\n<td>8</td>\n<td>4</td>\n</tr>\n\
         <tr>\n<td>MLP / Shared expert hidden size</td>\n<td>8192</td>\n<td>1024</td>\n</tr>\n\
         <tr>\n<td>Num. Experts</td>\n<td>-</td>\n<td>64</td>\n</tr>\n\
         <tr>\n<td>Sequence length</td>\n<td>128K</td>\n<td>128K</td>\n</tr>";
    let tiny = stated_in("model card table", table, Some("H Tiny MoE")).expect("table");
    assert_eq!(
        [
            "block_count",
            "head_count_kv",
            "expert_count",
            "expert_shared_feed_forward_length",
            "feed_forward_length",
            "context_length",
        ]
        .map(|k| n(&tiny, k)),
        [Some(40), Some(4), Some(64), Some(1024), None, None]
    );
    let micro = stated_in("model card table", table, Some("H Micro Dense")).expect("table");
    assert_eq!(
        ["head_count_kv", "expert_count", "feed_forward_length"].map(|k| n(&micro, k)),
        [Some(8), None, Some(8192)]
    );
    assert!(stated("model card table", table).is_err(), "needs a column");
    // A table of a file's embedded keys: only the catalog's names count.
    let keys = stated(
        "gguf key table",
        "| Context Window | 131,072 tokens (128K) |\n| Parameter | Value |\n|---|---|\n\
         | max_tokens | 131072 |\n| context_length | 131072 |",
    )
    .expect("table");
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        vec![("context_length", Value::from(131072u64))]
    );
    assert!(stated_in("model card table", table, Some("H Huge")).is_err());
    // A llama.cpp dump of a hybrid: print_info's whole `n_head_kv` list
    // states the attention layers and their KV heads; the convolution's
    // length is `shortconv.l_cache`.
    let dump = stated(
        "llama.cpp log",
        "llama_model_loader: - kv  23:                     lfm2.shortconv.l_cache u32              = 3\n\
         print_info: arch             = lfm2\n\
         print_info: n_layer          = 6\n\
         print_info: n_head_kv        = [0, 0, 8, 0, 8, 0]",
    )
    .expect("log");
    assert_eq!(
        (
            n(&dump, "shortconv_l_cache"),
            n(&dump, "head_count_kv"),
            dump.get("attention_layers")
        ),
        (Some(3), Some(8), Some(&Value::from(vec![2u64, 4])))
    );
}

#[test]
fn every_architecture_is_the_model_s_own_or_its_card_s_sibling() {
    let cat = catalog();
    let facts = facts_models();
    for e in cat.entries() {
        let arch = resolve_arch(&cat, e).expect("resolves");
        match (&e.arch_like, &arch.basis) {
            (None, ArchBasis::Own) => assert!(e.arch.is_complete()),
            (Some(like), ArchBasis::Like(id)) => {
                assert_eq!(like, id);
                // Only where the model's card says it has that architecture,
                // and the facts keep the card's words.
                let quote = facts_for(&facts, e).and_then(|m| m["arch_like_quote"].as_str());
                assert!(
                    quote.is_some_and(|q| !q.trim().is_empty()),
                    "{}: arch_like {like} without the card's quote in the facts",
                    e.id
                );
            }
            (l, b) => panic!(
                "{}: arch_like {l:?} but basis {b:?}: an entry without its own architecture is left out",
                e.id
            ),
        }
        // Whatever the basis, the facts the entry states are kept.
        let conflicts = e.arch.conflicts(&arch.facts.partial());
        assert!(conflicts.is_empty(), "{}: {conflicts:?}", e.id);
    }
    // Qwen3-30B-A3B's own facts are the planner's tested synthetic shape.
    let qwen = cat.get("qwen3-30b-a3b").expect("present");
    let spec = headroom_planner::synth::Shape::Qwen3Moe30BA3B.spec();
    let f = qwen.arch.complete().expect("complete");
    assert_eq!(
        (
            f.block_count,
            f.embedding_length,
            f.feed_forward_length,
            f.expert_feed_forward_length,
            f.vocab_size
        ),
        (
            spec.n_layer,
            spec.n_embd,
            spec.n_ff,
            spec.n_ff_exp,
            spec.n_vocab
        )
    );
}

/// Bytes a GGUF tokenizer takes that the synthetic header leaves out: per
/// token its text (an 8-byte length and about 8 bytes), a 4-byte type and a
/// 4-byte score. An estimate (BPE merges add more; some tokenizers store no
/// scores), worth about 1% of a 0.4 GB file and nothing for a large one.
fn tokenizer_bytes(vocab: u64) -> u64 {
    vocab * 24
}

#[test]
fn derived_sizes_match_the_listed_ones() {
    let cat = catalog();
    let mut lines = Vec::new();
    let mut worst_required: f64 = 0.0;
    let mut checked = 0;
    let mut failed = Vec::new();
    for e in cat.entries() {
        let arch = resolve_arch(&cat, e).expect("resolves");
        let derived_params = arch.skeleton.n_params() as f64 / 1e9;
        if let Some(b) = e
            .params_b
            .filter(|_| !e.params_nominal && arch.basis == ArchBasis::Own)
        {
            let dev = derived_params / b - 1.0;
            assert!(
                dev.abs() < 0.05,
                "{}: {derived_params:.2}B derived vs {b}B stated",
                e.id
            );
        }
        for q in &e.quants {
            let (Some(listed), precision) = (q.size_bytes, q.size_precision) else {
                continue;
            };
            let p = arch.skeleton.profile(q.file_type).expect("profile");
            let derived = (p.file_bytes() + tokenizer_bytes(arch.facts.vocab_size)) as f64;
            let dev = derived / listed as f64 - 1.0;
            let required = matches!(q.file_type, FileType::Q4_K_M | FileType::Q8_0);
            if required {
                checked += 1;
                worst_required = worst_required.max(dev.abs());
            }
            let tolerance = if required { 0.03 } else { 0.06 };
            if dev.abs() >= tolerance {
                failed.push(format!(
                    "{} {}: derived {derived:.0} vs listed {listed} (±{precision}): {:+.1}%",
                    e.id,
                    q.name,
                    dev * 100.0
                ));
            }
            lines.push(format!(
                "{:<34} {:<7} listed {:>7.2} GB derived {:>7.2} GB {:+6.2}%{}",
                e.id,
                q.name,
                listed as f64 / 1e9,
                derived / 1e9,
                dev * 100.0,
                if required { "" } else { "  (not required)" }
            ));
        }
    }
    println!("{}", lines.join("\n"));
    println!(
        "{checked} Q4_K_M/Q8_0 files checked, worst {:.2}%",
        worst_required * 100.0
    );
    assert!(checked >= 30, "only {checked} Q4_K_M/Q8_0 sizes checked");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_demo_entry_is_the_demo_file_tensor_for_tensor() {
    let cat = catalog();
    let e = cat.get("gemma-3-270m").expect("demo entry");
    assert_eq!(e.repo, headroom::source::demo::HF_REPO);
    let q = e.quant("Q4_K_M").expect("Q4_K_M");
    assert_eq!(q.files, vec![headroom::source::demo::FILE_NAME.to_string()]);
    assert_eq!(q.size_bytes, Some(headroom::source::demo::SIZE));
    let path =
        headroom::source::demo::demo_model().expect("the test model is fetched by scripts/test.sh");
    let real = headroom_planner::gguf::read_header_from_file(&path).expect("header");
    let f = e.arch.complete().expect("complete facts");
    let ours = facts::tensors(&f, FileType::Q4_K_M);
    let mut theirs: Vec<_> = real
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.dims.clone(), t.ty))
        .collect();
    let mut mine: Vec<_> = ours.into_iter().map(|t| (t.name, t.dims, t.ty)).collect();
    theirs.sort();
    mine.sort();
    assert_eq!(
        mine, theirs,
        "same tensors, shapes and types as the real file"
    );
}

/// The source type a converter writes (what llama-quantize starts from):
/// 16 bits for what llama-quantize may quantize and for Gemma 3n's matrices
/// it leaves as converted, F32 for the rest.
fn source_type(name: &str, dims: &[u64]) -> GgmlType {
    if mix::allows_quantization(name, dims) || mix::converted_in_16_bits(name, dims) {
        GgmlType::F16
    } else {
        GgmlType::F32
    }
}

#[test]
fn quantization_mirror_matches_llama_cpp_for_every_catalog_file() {
    let cat = catalog();
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for e in cat.entries() {
        let arch = resolve_arch(&cat, e).expect("resolves");
        let f = &arch.facts;
        let u = |v: u64| u32::try_from(v).expect("small");
        let model = QuantModel {
            arch: f.architecture.clone(),
            n_embd: u(f.embedding_length),
            n_ff: u(f.feed_forward_length),
            n_layer: f.block_count,
            n_head: u(f.head_count),
            n_head_kv: u(f.head_count_kv),
            n_expert: f.expert_count,
            n_embd_head_k: u(f.key_length),
            n_embd_head_v: u(f.value_length),
        };
        let types: HashSet<FileType> = e.quants.iter().map(|q| q.file_type).collect();
        for ftype in types {
            let ours = facts::tensors(f, ftype);
            let input: Vec<QuantTensor> = ours
                .iter()
                .map(|t| QuantTensor {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    src_type: source_type(&t.name, &t.dims),
                })
                .collect();
            let theirs = quant_types(&model, ftype.id(), &input).expect("llama.cpp answers");
            for (o, t) in ours.iter().zip(&theirs) {
                // gpt-oss files keep their MXFP4 experts, whatever the mix.
                let fixed = f.expert_type.is_some() && o.name.contains("_exps.weight");
                if o.ty != *t && !fixed {
                    mismatches.push(format!(
                        "{} {}: {} ours {} llama.cpp {}",
                        e.id,
                        ftype.name(),
                        o.name,
                        o.ty.name(),
                        t.name()
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked} files checked");
    mismatches.truncate(40);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// `h` with what llama.cpp requires to load it that the facts leave out
/// because it sizes nothing: a tokenizer of `n_vocab` tokens (an SPM
/// vocabulary of `<unk>`, `<s>`, `</s>`, the 256 byte tokens, then fillers)
/// and the RMS norm epsilon.
fn with_vocabulary(h: &Header, n_vocab: u64) -> Header {
    let n = usize::try_from(n_vocab).expect("fits");
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![2i32, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    // Control tokens some architectures' vocabulary loaders look up by text
    // (phi3's `<|end|>`), then fillers.
    for text in [
        "<|end|>",
        "<|endoftext|>",
        "<|im_end|>",
        "<end_of_turn>",
        "<|eot_id|>",
    ] {
        tokens.push(text.into());
        types.push(3);
    }
    for id in tokens.len()..n {
        tokens.push(format!("t{id}"));
        types.push(1);
    }
    tokens.truncate(n);
    types.truncate(n);
    let scores = (0..tokens.len()).map(|i| -(i as f32)).collect();
    let mut b = HeaderBuilder::new();
    for (k, v) in &h.metadata {
        b = b.kv(k.clone(), v.clone());
    }
    // The norm epsilon llama.cpp requires and the facts leave out (it sizes
    // nothing).
    let arch = h.get_str("general.architecture").expect("an architecture");
    let eps = format!("{arch}.attention.layer_norm_rms_epsilon");
    if h.get(&eps).is_none() {
        b = b.kv(eps, 1e-6f32);
    }
    b = b
        .kv("tokenizer.ggml.model", "llama")
        .kv(
            "tokenizer.ggml.tokens",
            Array::new(ArrayItems::String(tokens)),
        )
        .kv("tokenizer.ggml.scores", Array::new(ArrayItems::F32(scores)))
        .kv(
            "tokenizer.ggml.token_type",
            Array::new(ArrayItems::I32(types)),
        )
        .kv("tokenizer.ggml.bos_token_id", 1u32)
        .kv("tokenizer.ggml.eos_token_id", 2u32);
    for t in &h.tensors {
        b = b.tensor(t.name.clone(), &t.dims, t.ty);
    }
    b.build().expect("a valid header")
}

/// An entry, its file, architecture, header and header file.
type Distinct<'a> = (
    &'a Entry,
    &'a Quant,
    headroom::catalog::plan::ResolvedArch,
    Header,
    std::path::PathBuf,
);

/// For each distinct shape among the entries whose architecture `wanted`
/// accepts (entries of one shape, a fine-tune or another context length,
/// load alike): the entry, the file planned (its Q4_K_M file, else its
/// first), its architecture, and the synthetic header with a tokenizer of
/// its vocabulary's size, written as a sparse file in `dir` (the path).
fn distinct_headers<'a>(
    cat: &'a Catalog,
    dir: &std::path::Path,
    wanted: impl Fn(&str) -> bool,
) -> Vec<Distinct<'a>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for e in cat.entries() {
        let arch = resolve_arch(cat, e).expect("resolves");
        if !wanted(&arch.facts.architecture) {
            continue;
        }
        let q = e.quant("Q4_K_M").unwrap_or(&e.quants[0]);
        let mut shape = arch.facts.clone();
        shape.context_length = 0;
        if !seen.insert((shape, q.file_type)) {
            continue;
        }
        let header = facts::header(&arch.facts, q.file_type).expect("header");
        let header = with_vocabulary(&header, arch.facts.vocab_size);
        let path = dir.join(format!("{}.gguf", e.id));
        create_sparse_file(&path, &header).expect("write");
        out.push((e, q, arch, header, path));
    }
    out
}

/// The synthetic header of every entry (its Q4_K_M file, else its first),
/// with a tokenizer of its vocabulary's size, loads in llama.cpp's
/// `no_alloc` accounting (nothing read or allocated) with the entry's
/// layers and vocabulary, and llama.cpp counts the tensor bytes the header
/// holds: llama.cpp accepts the architecture as the facts lay it out.
#[test]
fn every_entry_s_synthetic_header_loads_in_llama_cpp() {
    let cat = catalog();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut failed = Vec::new();
    // Entries of one shape (a fine-tune, another context length) load alike.
    for (e, q, arch, header, path) in distinct_headers(&cat, dir.path(), |_| true) {
        let p = AccountingParams {
            n_ctx: 512,
            ..AccountingParams::for_model(&path)
        };
        match breakdown(&p) {
            Ok(b) => {
                let got = (b.info.n_layer, i64::from(b.info.n_vocab), b.info.model_size);
                // llama.cpp counts the trunk: MTP blocks are not layers.
                let layers = arch.facts.block_count - arch.facts.nextn_predict_layers;
                let want = (
                    i32::try_from(layers).expect("fits"),
                    i64::try_from(arch.facts.vocab_size).expect("fits"),
                    header.total_tensor_bytes().expect("sums"),
                );
                if got != want {
                    failed.push(format!(
                        "{}: (layers, vocabulary, bytes) {got:?} ≠ {want:?}",
                        e.id
                    ));
                }
            }
            Err(err) => failed.push(format!("{} {}: {err}", e.id, q.name)),
        }
        std::fs::remove_file(&path).expect("remove");
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A kept table's rows as cells, each row led by an empty cell as a
/// Markdown row splits ("| GPQA | 75.2 |" gives "", "GPQA", "75.2", ""):
/// Markdown rows are lines split at `|`; an HTML table's rows are its
/// `<tr>` elements, their cells the text of each `<th>`/`<td>`.
fn table_rows(excerpt: &str) -> Vec<Vec<String>> {
    if !excerpt.contains("<tr") {
        return excerpt
            .lines()
            .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
            .collect();
    }
    excerpt
        .split("<tr")
        .skip(1)
        .map(|row| {
            let mut cells = vec![String::new()];
            let mut rest = row;
            loop {
                let open = match (rest.find("<td"), rest.find("<th")) {
                    (Some(td), Some(th)) => td.min(th),
                    (Some(at), None) | (None, Some(at)) => at,
                    (None, None) => break,
                };
                let Some(gt) = rest[open..].find('>') else {
                    break;
                };
                let body = &rest[open + gt + 1..];
                let end = body.find("</t").unwrap_or(body.len());
                cells.push(body[..end].trim().to_string());
                rest = &body[end..];
            }
            cells
        })
        .collect()
}

/// The cell of `rows` (from [`table_rows`]) in the column of the first cell
/// `header` accepts and the first row whose label (its first cell) `label`
/// accepts.
fn table_cell(
    rows: &[Vec<String>],
    header: impl Fn(&str) -> bool,
    label: impl Fn(&str) -> bool,
) -> Option<&str> {
    let at = rows
        .iter()
        .find_map(|cells| cells.iter().position(|c| header(c)))?;
    rows.iter()
        .find(|cells| cells.get(1).is_some_and(|l| label(l)))?
        .get(at)
        .map(String::as_str)
}

/// A table's cell ("75.2", "32.59", "**70.07%**") is the record's score, a
/// fraction, as written.
fn same_score(cell: &str, gpqa: f64) -> bool {
    cell.trim_matches(|c| c == '*' || c == '%')
        .parse::<f64>()
        .is_ok_and(|c| (c - gpqa * 100.0).abs() < 1e-9)
}

/// Every `quality` of `models.toml` follows from the evidence kept in
/// `tests/catalog/quality-facts.json` (issue #20): a board row whose score
/// it is, a board sibling of the same release and the stated Elo per
/// doubling of parameters, or a card's GPQA through the stated fit. An entry
/// without a record has no figure.
#[test]
fn every_quality_figure_follows_from_its_kept_evidence() {
    let cat = catalog();
    let v: Value = serde_json::from_str(&workspace_file("tests/catalog/quality-facts.json"))
        .expect("quality facts are JSON");
    let records = v["models"].as_array().expect("models");
    let by_id = |id: &str| records.iter().find(|r| r["id"] == id);
    let k = v["k_family"].as_f64().expect("k_family");
    let max_factor = v["max_factor"].as_f64().expect("max_factor");
    let fit = &v["card_fit"];
    let (a, b) = (fit["a"].as_f64().expect("a"), fit["b"].as_f64().expect("b"));
    let offset = (fit["reasoning_residual_mean"].as_f64().expect("offset") * 10.0).round() / 10.0;
    // A board row: rank, rank upper bound, model, score, ….
    let board_score = |excerpt: &str| -> (String, f64) {
        let cols: Vec<&str> = excerpt.split(',').collect();
        (
            cols[2].to_string(),
            cols[3].parse().expect("a score in the row"),
        )
    };
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for e in cat.entries() {
        let r = by_id(&e.id);
        let (Some(q), Some(r)) = (e.quality, r) else {
            assert!(
                e.quality.is_none() && r.is_none(),
                "{}: a quality figure and its record go together",
                e.id
            );
            continue;
        };
        assert_eq!(r["quality"].as_f64(), Some(q), "{}", e.id);
        let basis = e.quality_basis.as_deref().expect("basis");
        assert_eq!(r["basis"].as_str(), Some(basis), "{}", e.id);
        let kind = r["kind"].as_str().expect("kind");
        *kinds.entry(kind.to_string()).or_default() += 1;
        let excerpt = r["excerpt"].as_str().expect("excerpt");
        match kind.trim_end_matches("-qat") {
            "board" => {
                let (name, score) = board_score(excerpt);
                assert!(basis.contains(&name), "{}: {basis}", e.id);
                assert_eq!(score, q, "{}: {excerpt}", e.id);
            }
            "family" => {
                let (_, sib) = board_score(excerpt);
                assert_eq!(r["sibling_elo"].as_f64(), Some(sib), "{}", e.id);
                let sibling = r["sibling"].as_str().expect("sibling");
                assert_eq!(
                    cat.get(sibling).and_then(|s| s.quality),
                    Some(sib),
                    "{}",
                    e.id
                );
                let (n, ns) = (
                    r["params_b"].as_f64().expect("params"),
                    r["sibling_params_b"].as_f64().expect("sibling params"),
                );
                assert!(n.max(ns) / n.min(ns) <= max_factor, "{}: {n} vs {ns}", e.id);
                assert_eq!((sib + k * (n / ns).log2()).round(), q, "{}", e.id);
            }
            "card" => {
                let gpqa = r["gpqa"].as_f64().expect("gpqa");
                // A leaderboard's JSON, or a card's table row ("GPQA
                // Diamond | … 84.3% …").
                let in_table =
                    excerpt.contains("GPQA") && excerpt.contains(&format!("{:.1}%", gpqa * 100.0));
                // Or a card's table that writes its scores without a %: the
                // record names the model's column, whose header cell is in
                // the kept header row and whose cell in the GPQA row is the
                // score ("| GPQA Diamond | 75.2 | 73.4 | …", or the same
                // rows as HTML).
                let in_column = r["column"].as_str().is_some_and(|column| {
                    let rows = table_rows(excerpt);
                    table_cell(&rows, |c| c == column, |l| l.starts_with("GPQA"))
                        .is_some_and(|cell| same_score(cell, gpqa))
                });
                // Or a table with a row per model and a GPQA column ("|
                // **Magistral Small 1.2** | … | **70.07%** |"): the record
                // names the model's row.
                let in_row = r["row"].as_str().is_some_and(|label| {
                    let rows = table_rows(excerpt);
                    table_cell(&rows, |c| c.starts_with("GPQA"), |l| l == label)
                        .is_some_and(|cell| same_score(cell, gpqa))
                });
                assert!(
                    excerpt.contains(&format!("\"score\": {gpqa}"))
                        || in_table
                        || in_column
                        || in_row,
                    "{}: {excerpt}",
                    e.id
                );
                let reasoning = r["reasoning"].as_bool().expect("reasoning");
                let want = a + b * gpqa + if reasoning { offset } else { 0.0 };
                assert_eq!(want.round(), q, "{}", e.id);
            }
            other => panic!("{}: unknown kind {other}", e.id),
        }
    }
    // What the issue's machines are ranked by: most models have a figure.
    let with: usize = kinds.values().sum();
    let ranked = cat.entries().iter().filter(|e| !e.has_use("base")).count();
    assert!(
        with * 3 >= ranked * 2,
        "{with} of {ranked} have a figure: {kinds:?}"
    );
}

/// The architectures the catalog lays out with the zoo's builders beyond
/// the plain transformer (per-layer embeddings and a shared cache, MoE with
/// MTP blocks, chunked attention, recurrent state): each entry's synthetic
/// header, with its vocabulary, is planned on this CPU and loaded by
/// llama.cpp with `no_alloc` at short and long contexts, one and four
/// sequences. Weights exact, KV cache (and recurrent state) within 2%,
/// compute within 15%, as the zoo's own accounting test (an entry of
/// another size than the zoo's model is held to llama.cpp here).
#[test]
fn zoo_laid_out_entries_match_llama_cpp_accounting() {
    use headroom::llama;
    use headroom_planner::hw::{self, Overrides, ProbeOptions};
    use headroom_planner::plan::{FlashAttn, Settings};
    use headroom_planner::solve::{self, Build};
    const ARCHS: &[&str] = &[
        "gemma3n",
        "gemma4",
        "glm4moe",
        "llama4",
        "qwen3next",
        "qwen35",
        "qwen35moe",
        "mistral3",
        "olmo2",
        "smollm3",
        "lfm2",
        "granitehybrid",
    ];
    let cat = catalog();
    let hw = hw::apply_overrides(
        hw::probe(&ProbeOptions {
            measure_bandwidth: false,
            cache_dir: None,
        }),
        &Overrides {
            ram_bytes: Some(512 << 30),
            vram_bytes: Some(vec![]),
            profile: None,
        },
    )
    .expect("overrides");
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut report, mut failed) = (Vec::new(), Vec::new());
    // And latent attention with a compressed query (GLM-4.7-Flash), which
    // the zoo's latent builder lays out.
    let wanted = |a: &str| ARCHS.contains(&a) || a == "deepseek2";
    for (e, q, arch, _, path) in distinct_headers(&cat, dir.path(), wanted) {
        if arch.facts.architecture == "deepseek2" && arch.facts.q_lora_rank == 0 {
            std::fs::remove_file(&path).expect("remove");
            continue;
        }
        let profile = headroom::source::load_profile(&path).expect("planner reads the header");
        let n_ctx_train = u32::try_from(arch.facts.context_length).unwrap_or(u32::MAX);
        for n_ctx in [4096u32, 32768]
            .into_iter()
            .filter(|&c| c <= n_ctx_train.max(4096))
        {
            for np in [1u32, 4] {
                let s = Settings {
                    n_ctx: Some(n_ctx),
                    n_batch: 2048,
                    n_ubatch: 512,
                    n_parallel: np,
                    flash_attn: FlashAttn::Auto,
                    ..Settings::default()
                };
                let plan = solve::plan(&profile, &e.id, &s, &hw, Build { gpu: false });
                let ours = &plan.devices[0].buffers;
                let p = AccountingParams::from_settings(&path, &s, n_ctx, 0).expect("params");
                let theirs = llama::memory_breakdown(&p).expect("llama.cpp accounts the entry");
                let sum = |f: &dyn Fn(&headroom_planner::plan::BufferUse) -> u64| {
                    ours.iter().map(f).sum::<u64>()
                };
                let o = [
                    sum(&|b| b.model_bytes),
                    sum(&|b| b.context_bytes),
                    sum(&|b| b.compute_bytes),
                ];
                let t = [
                    theirs.iter().map(|b| b.model).sum::<u64>(),
                    theirs.iter().map(|b| b.context).sum::<u64>(),
                    theirs.iter().map(|b| b.compute).sum::<u64>(),
                ];
                let rel = |a: u64, b: u64| (a as f64 - b as f64) / (b.max(1) as f64);
                let label = format!("{} {} c{n_ctx} np{np}", e.id, q.name);
                report.push(format!(
                    "{label:<44} weights {} vs {} ({:+.3}%)  KV {} vs {} ({:+.2}%)  compute {} vs {} ({:+.1}%)",
                    o[0], t[0], rel(o[0], t[0]) * 100.0,
                    o[1], t[1], rel(o[1], t[1]) * 100.0,
                    o[2], t[2], rel(o[2], t[2]) * 100.0
                ));
                if o[0] != t[0] || rel(o[1], t[1]).abs() > 0.02 || rel(o[2], t[2]).abs() > 0.15 {
                    failed.push(label);
                }
            }
        }
        std::fs::remove_file(&path).expect("remove");
    }
    println!(
        "catalog entries vs llama.cpp no_alloc:\n{}",
        report.join("\n")
    );
    assert!(!report.is_empty(), "no entry of {ARCHS:?}");
    assert!(failed.is_empty(), "out of tolerance: {failed:?}");
}
