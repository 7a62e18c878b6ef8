//! Writes the seed corpus of the `gguf_header` target: small valid headers
//! (from the planner's own writer) that reach the profile and the solver on
//! each of their paths: dense, sliding window, experts, latent attention,
//! recurrent state, and a header with every metadata value type.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --example write_seeds`

use std::path::Path;

use headroom_fuzz::Tiny;
use headroom_planner::gguf::writer::{HeaderBuilder, to_bytes};
use headroom_planner::gguf::{Array, ArrayItems, GgmlType, GgufError, Header, Value};
use headroom_planner::profile;

/// Every scalar type, strings, nested arrays and a non-default alignment,
/// in a version 2 file.
fn all_values() -> Result<Header, GgufError> {
    let nested = Array::new(ArrayItems::Array(vec![
        Array::new(ArrayItems::I32(vec![-1, 2])),
        Array::new(ArrayItems::Array(vec![Array::new(ArrayItems::String(
            vec!["é".into(), String::new()],
        ))])),
    ]));
    HeaderBuilder::new()
        .version(2)
        .kv("general.alignment", 64u32)
        .kv("u8", Value::U8(255))
        .kv("i8", Value::I8(-128))
        .kv("u16", Value::U16(65535))
        .kv("i16", Value::I16(-1))
        .kv("u32", Value::U32(u32::MAX))
        .kv("i32", Value::I32(i32::MIN))
        .kv("u64", Value::U64(u64::MAX))
        .kv("i64", Value::I64(i64::MIN))
        .kv("f32", Value::F32(1.5))
        .kv("f64", Value::F64(-0.25))
        .kv("bool", Value::Bool(true))
        .kv("string", "text")
        .kv("bools", Array::new(ArrayItems::Bool(vec![true, false])))
        .kv("floats", Array::new(ArrayItems::F32(vec![0.5, -2.0])))
        .kv("nested", nested)
        .tensor("a", &[32, 2], GgmlType::Q8_0)
        .tensor("b", &[3], GgmlType::F16)
        .build()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/gguf_header");
    std::fs::create_dir_all(&dir)?;
    let llama = Tiny::llama();
    let seeds = [
        ("llama-q4_k", llama.build()?),
        (
            "gemma3-swa",
            Tiny {
                arch: "gemma3",
                n_layer: 6,
                sliding_window: Some(512),
                ty: GgmlType::Q8_0,
                ..llama.clone()
            }
            .build()?,
        ),
        (
            "qwen3moe-experts",
            Tiny {
                arch: "qwen3moe",
                experts: (4, 2),
                ..llama.clone()
            }
            .build()?,
        ),
        (
            "deepseek2-mla",
            Tiny {
                arch: "deepseek2",
                kv_lora_rank: Some(64),
                ty: GgmlType::F16,
                ..llama.clone()
            }
            .build()?,
        ),
        (
            "mamba-recurrent",
            Tiny {
                arch: "mamba",
                n_head: 0,
                n_head_kv: 0,
                ssm_inner: Some(512),
                ty: GgmlType::F16,
                ..llama.clone()
            }
            .build()?,
        ),
        ("all-values-v2", all_values()?),
    ];
    for (name, header) in seeds {
        let path = dir.join(format!("{name}.gguf"));
        let bytes = to_bytes(&header)?;
        std::fs::write(&path, &bytes)?;
        // A model seed that the profile refuses would leave the solver unfuzzed.
        let reaches = match profile::profile(&header) {
            Ok(_) => "profiles".to_string(),
            Err(e) if name == "all-values-v2" => format!("reader only: {e}"),
            Err(e) => return Err(format!("seed {name} does not profile: {e}").into()),
        };
        println!("{} ({} bytes, {reaches})", path.display(), bytes.len());
    }
    Ok(())
}
