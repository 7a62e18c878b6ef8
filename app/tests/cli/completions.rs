//! `headroom completions SHELL`: clap_complete's scripts for the command line
//! as it is, so a new flag completes without anyone editing a script.

use crate::common::run;

#[test]
fn every_shell_gets_a_script_that_knows_the_subcommands_and_flags() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = run(["completions", shell]);
        assert_eq!(out.code, Some(0), "{shell}: {}", out.stderr);
        for word in [
            "plan",
            "fit",
            "pull",
            "ctx-size",
            "n-gpu-layers",
            "flash-attn",
        ] {
            assert!(
                out.stdout.contains(word),
                "{shell}: no {word:?} in the script"
            );
        }
    }
}

#[test]
fn an_unknown_shell_is_bad_usage() {
    let out = run(["completions", "nosh"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("possible values"), "{}", out.stderr);
}
