//! The catalog (`models.toml`) against its sources: every entry parses and
//! unknown fields are rejected; ids are unique; every listed number agrees
//! with the compiled facts (`tests/catalog/catalog-facts.json`, the research
//! notes the catalog was written from); the planner's derived file sizes
//! agree with the listed ones; and the quantization mirror that derives them
//! agrees with llama.cpp's own rules, tensor by tensor.

use std::collections::HashSet;

use headroom::catalog::plan::{ArchBasis, resolve_arch};
use headroom::catalog::{Catalog, Entry, Quant};
use headroom::llama::{QuantModel, QuantTensor, quant_types};
use headroom_planner::gguf::GgmlType;
use headroom_planner::synth::facts;
use headroom_planner::synth::mix::{self, FileType};
use serde_json::Value;

const FACTS: &str = include_str!("../catalog/catalog-facts.json");

fn catalog() -> Catalog {
    Catalog::builtin().expect("the built-in catalog parses")
}

fn facts_models() -> Vec<Value> {
    let v: Value = serde_json::from_str(FACTS).expect("facts are JSON");
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
        (40..=60).contains(&cat.entries().len()),
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

/// Catalog arch keys and the config.json keys the facts use for them.
const ARCH_KEYS: &[(&str, &str)] = &[
    ("block_count", "num_hidden_layers"),
    ("embedding_length", "hidden_size"),
    ("feed_forward_length", "intermediate_size"),
    ("head_count", "num_attention_heads"),
    ("head_count_kv", "num_key_value_heads"),
    ("vocab_size", "vocab_size"),
    ("expert_count", "num_experts"),
    ("expert_used_count", "num_experts_per_tok"),
];

fn check_arch(e: &Entry, m: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let arch = serde_json::to_value(&e.arch).expect("serialises");
    let a = &m["arch"];
    let x = &m["arch_extra"];
    for (ours, theirs) in ARCH_KEYS {
        if let (Some(o), Some(t)) = (arch[ours].as_u64(), a[theirs].as_u64())
            && o != t
        {
            bad.push(format!("{ours} {o} ≠ {theirs} {t}"));
        }
        if arch[ours].is_u64() && a[theirs].is_null() && e.id != "qwen3-30b-a3b" {
            bad.push(format!("{ours} is not in the facts"));
        }
    }
    if let Some(hd) = a["head_dim"].as_u64()
        && arch["key_length"].as_u64() != Some(hd)
    {
        bad.push(format!("key_length ≠ head_dim {hd}"));
    }
    if let Some(ctx) = a["max_position_embeddings"].as_u64()
        && arch["context_length"].as_u64() != Some(ctx)
    {
        bad.push(format!("context_length ≠ {ctx}"));
    }
    if let Some(t) = x["tie_word_embeddings"].as_bool()
        && arch["tied_embeddings"].as_bool() != Some(t)
    {
        bad.push(format!("tied_embeddings ≠ {t}"));
    }
    if x["model_type"] == "deepseek_v2" {
        let want = [
            ("kv_lora_rank", x["kv_lora_rank"].as_u64()),
            ("rope_dimension_count", x["qk_rope_head_dim"].as_u64()),
            (
                "expert_feed_forward_length",
                x["moe_intermediate_size"].as_u64(),
            ),
            ("expert_shared_count", x["n_shared_experts"].as_u64()),
            (
                "leading_dense_block_count",
                x["first_k_dense_replace"].as_u64(),
            ),
            ("value_length", x["v_head_dim"].as_u64()),
            (
                "key_length",
                x["qk_nope_head_dim"]
                    .as_u64()
                    .zip(x["qk_rope_head_dim"].as_u64())
                    .map(|(a, b)| a + b),
            ),
        ];
        for (k, v) in want {
            if arch[k].as_u64() != v {
                bad.push(format!("{k} ≠ {v:?}"));
            }
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
            assert_eq!(e.id, "gemma-3-270m", "{} is not in the facts", e.id);
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
        bad.extend(check_arch(e, m));
        if !bad.is_empty() {
            problems.push(format!("{}: {}", e.id, bad.join("; ")));
        }
    }
    assert!(matched >= 40, "{matched} entries matched the facts");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn borrowed_architecture_is_the_sibling_s_and_estimates_are_marked() {
    let cat = catalog();
    for e in cat.entries() {
        let arch = resolve_arch(&cat, e).expect("resolves");
        match (&e.arch_like, &arch.basis) {
            (Some(like), ArchBasis::Like(id)) => assert_eq!(like, id),
            (None, ArchBasis::Own) => assert!(e.arch.is_complete()),
            (None, ArchBasis::Estimated) => assert!(!e.arch.is_complete()),
            (l, b) => panic!("{}: arch_like {l:?} but basis {b:?}", e.id),
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

#[test]
fn derived_sizes_match_the_listed_ones() {
    let cat = catalog();
    let mut lines = Vec::new();
    let mut worst_required: f64 = 0.0;
    let mut checked = 0;
    for e in cat.entries() {
        let arch = resolve_arch(&cat, e).expect("resolves");
        if arch.basis == ArchBasis::Estimated {
            continue;
        }
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
            let derived = p.file_bytes() as f64;
            let dev = derived / listed as f64 - 1.0;
            let required = matches!(q.file_type, FileType::Q4_K_M | FileType::Q8_0);
            if required {
                checked += 1;
                worst_required = worst_required.max(dev.abs());
                assert!(
                    dev.abs() < 0.05,
                    "{} {}: derived {derived:.0} vs listed {listed} (±{precision}): {:+.1}%",
                    e.id,
                    q.name,
                    dev * 100.0
                );
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

/// The source type a converter writes (what llama-quantize starts from).
fn source_type(name: &str, dims: &[u64]) -> GgmlType {
    if mix::allows_quantization(name, dims) {
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
