//! Writes what `scripts/gpu-check.sh` carries to a GPU machine for llama.cpp's
//! own accounting of the planner's model set: each model's GGUF header (the
//! bytes before its tensor data; the machine there re-creates the file as a
//! sparse one of the same length, weights all zero) and one accounting case
//! per line, for the C++ driver `scripts/gpu-check/accounting-main.cpp`.
//!
//! `gpu_check_cases DIR [REAL.gguf ...]`: writes `DIR/models/NAME.head`,
//! `DIR/models.tsv` (NAME, file length, header bytes) and `DIR/accounting.tsv`.
//!
//! The set: every shape of `synth` in Q4_K_M (Llama-3.1-70B too), every
//! architecture of `synth::zoo` in its file type, and the real files given.
//! Each at -ngl all, about half and 0; 4096 and 32768 tokens; flash attention
//! auto; then flash attention off and four sequences at -ngl all and 32768.
//! Logits: one row per sequence (headroom's runner, llama-server).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use headroom_planner::gguf::read_header_from_file;
use headroom_planner::plan::{DEFAULT_N_BATCH, DEFAULT_N_UBATCH};
use headroom_planner::profile;
use headroom_planner::synth::zoo::{self, Model};
use headroom_planner::synth::{self, Mix, Shape};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .ok_or("usage: gpu_check_cases DIR [REAL.gguf ...]")?,
    );
    let scratch = dir.join("scratch");
    fs::create_dir_all(dir.join("models"))?;
    fs::create_dir_all(&scratch)?;
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for shape in
        Shape::ALL
            .into_iter()
            .chain([Shape::SmolLm2_135M, Shape::Gemma3_270M, Shape::Llama70B])
    {
        let name = format!("{}-Q4_K_M", shape.name());
        let path = scratch.join(format!("{name}.gguf"));
        synth::write_sparse(&path, shape, Mix::Q4KM)?;
        files.push((name, path));
    }
    for m in Model::ALL {
        let name = format!("{}-{}", m.name(), m.file_type().name());
        let path = scratch.join(format!("{name}.gguf"));
        zoo::write_sparse(&path, m, m.file_type())?;
        files.push((name, path));
    }
    for real in &args[1..] {
        let p = PathBuf::from(real);
        let name = p
            .file_stem()
            .ok_or("a model path")?
            .to_string_lossy()
            .into_owned();
        files.push((name, p));
    }
    let mut models = fs::File::create(dir.join("models.tsv"))?;
    let mut cases = fs::File::create(dir.join("accounting.tsv"))?;
    for (name, path) in &files {
        let header = read_header_from_file(path)?;
        let len = fs::metadata(path)?.len();
        copy_head(
            path,
            &dir.join("models").join(format!("{name}.head")),
            header.data_offset,
        )?;
        writeln!(models, "{name}\t{len}\t{}", header.data_offset)?;
        let n_layer = profile::profile(&header)?.n_layer;
        let half = (n_layer / 2) | 1;
        let model = format!("models/{name}.gguf");
        // (ngl, n_ctx, flash attention, sequences)
        let mut set: Vec<(u32, u32, i32, u32)> = Vec::new();
        for ngl in [999, half, 0] {
            for ctx in [4096, 32768] {
                set.push((ngl, ctx, -1, 1));
            }
        }
        set.push((999, 32768, 0, 1));
        set.push((999, 32768, -1, 4));
        for (ngl, ctx, fa, seqs) in set {
            let fa_name = match fa {
                0 => "off",
                1 => "on",
                _ => "auto",
            };
            // id  path  ngl  n_ctx  n_batch  n_ubatch  n_seq  n_outputs_max  type_k  type_v  fa  swa_full  extra
            writeln!(
                cases,
                "{name}:ngl{ngl}:c{ctx}:fa-{fa_name}:np{seqs}\t{model}\t{ngl}\t{ctx}\t{DEFAULT_N_BATCH}\t{DEFAULT_N_UBATCH}\t{seqs}\t{seqs}\t1\t1\t{fa}\t0\t1"
            )?;
        }
    }
    fs::remove_dir_all(&scratch)?;
    println!("{}", dir.display());
    Ok(())
}

/// The first `n` bytes of `from` into `to`.
fn copy_head(from: &Path, to: &Path, n: u64) -> std::io::Result<()> {
    let mut head = Vec::new();
    fs::File::open(from)?.take(n).read_to_end(&mut head)?;
    fs::write(to, head)
}
