//! The `headroom` binary: parse, dispatch, print the error chain once, exit.
//!
//! Exit codes: 0 success (a plan that fits), 1 error, 2 bad usage, 3 the plan
//! does not fit. Nothing below `main` calls `process::exit`, so destructors
//! and terminal restoration always run.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = headroom::cli::rewrite_llama_flags(std::env::args_os());
    let cli = match headroom::cli::parse(args) {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with exit 0 and errors with exit 2.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    headroom::cli::init_logging(cli.verbose);
    match headroom::commands::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            let _ = std::io::stdout().flush();
            eprintln!("headroom: error: {err:#}");
            ExitCode::from(headroom::error::exit_code_for(&err))
        }
    }
}

/// A closed pipe (`headroom plan … | head`) is not an error worth reporting.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
