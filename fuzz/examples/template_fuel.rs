//! Measures what chat templates cost in minijinja fuel, to choose and check
//! `FUEL` in app/src/runner/template/jinja.rs (its comment quotes this
//! program's figures): for each template, one render of a conversation of
//! 3, 100 and 1,000 messages (a system message, then user and assistant in
//! turn, 200 bytes each), and the time an endless template takes to be
//! stopped at the app's fuel.
//!
//! `cargo run --release --manifest-path fuzz/Cargo.toml --example template_fuel [FILE.jinja...]`
//!
//! Without files it measures `assets/templates/*.jinja`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

#[allow(dead_code)] // The app uses parts of it that this program does not.
#[path = "../../app/src/runner/template/jinja.rs"]
mod jinja;

fn conversation(n: usize) -> Vec<BTreeMap<&'static str, String>> {
    let text = "x".repeat(200);
    (0..n)
        .map(|i| {
            let role = match i {
                0 => "system",
                i if i % 2 == 1 => "user",
                _ => "assistant",
            };
            BTreeMap::from([("role", role.to_string()), ("content", text.clone())])
        })
        .collect()
}

fn main() -> Result<(), String> {
    let mut files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/templates");
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{dir}: {e}"))?;
        files = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
    }
    println!("fuel per render, by number of messages");
    println!("{:<40} {:>8} {:>10} {:>10}", "template", "3", "101", "1001");
    for path in &files {
        let src = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let env = jinja::environment("t", &src).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut row = Vec::new();
        for n in [3, 100, 1000] {
            // Some templates insist on alternating turns after the system
            // one, ending with the user's.
            let messages = conversation(n + usize::from(n % 2 == 0));
            row.push(
                match jinja::render(&env, "t", &messages, None, true, "<s>", "</s>") {
                    Ok((_, used)) => used.to_string(),
                    Err(e) => format!("error: {e}"),
                },
            );
        }
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        println!("{name:<40} {:>8} {:>10} {:>10}", row[0], row[1], row[2]);
    }
    let endless =
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
    let env = jinja::environment("endless", endless).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let result = jinja::render(&env, "endless", &conversation(3), None, true, "<s>", "</s>");
    println!(
        "an endless template: {:?} after {:.2} s",
        result.err().map(|e| e.to_string()),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
