#!/usr/bin/env bash
# Runs each fuzz target of fuzz/ for a bounded time (issue #6): the GGUF
# header reader (through profile and plan), the planner's size arithmetic on
# extreme hyper-parameters and settings, the TOML hardware profile, and the
# TOML model catalog (`--catalog FILE`) through planning its entries, and
# chat templates through headroom's own minijinja setup (fuel and limits).
#
#   scripts/fuzz.sh [TARGET...]      FUZZ_SECONDS=60 by default, per target
#
# cargo-fuzz needs nightly-only flags (-Zsanitizer=address); RUSTC_BOOTSTRAP=1
# lets the stable toolchain accept them, as no nightly can be installed here.
# Builds use ASan, debug assertions and overflow checks. libFuzzer's limits
# turn an oversized allocation (-malloc_limit_mb), a runaway resident set
# (-rss_limit_mb) or a slow input (-timeout) into a crash, like a panic.
#
# New inputs go to fuzz/target/corpus/TARGET (ignored by git); the committed
# seeds in fuzz/corpus/TARGET are only read. A crash leaves its input in
# fuzz/artifacts/TARGET/ and makes the script exit 1, after the other targets
# have run; reproduce it with `RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=(gguf_header plan_sizes hw_profile catalog_toml template_render)
fi
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

# Longest input per target: a few model headers' worth of bytes for GGUF
# (the seeds are 0.5-4.5 KB), a generous profile for TOML, a few catalog
# entries (a real one with its quantizations is 1-3 KB; the seeds, 0.1-5 KB).
max_len() {
  case "$1" in
    gguf_header) echo 65536 ;;
    plan_sizes) echo 256 ;;
    catalog_toml) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

# Build first, so that a build error is not reported as a crash.
for t in "${targets[@]}"; do
  cargo fuzz build "$t"
done

failed=()
summary=()
for t in "${targets[@]}"; do
  work="fuzz/target/corpus/$t"
  log="fuzz/target/logs/$t.log"
  mkdir -p "$work" "$(dirname "$log")"
  echo "fuzz: $t for ${seconds}s" >&2
  rc=0
  cargo fuzz run "$t" "$work" "fuzz/corpus/$t" -- \
    -max_total_time="$seconds" \
    -max_len="$(max_len "$t")" \
    -rss_limit_mb=2048 \
    -malloc_limit_mb=64 \
    -timeout=10 \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  inputs="$(find "$work" -type f | wc -l)"
  if [ "$rc" -eq 0 ]; then
    summary+=("$t: ${execs:-?} executions in ${seconds}s (${rate:-?}/s), corpus $inputs inputs, no crash")
  else
    failed+=("$t")
    summary+=("$t: CRASH after ${execs:-?} executions (exit $rc); log $log")
    # The panic message or sanitizer report, and the reproducer's path.
    grep -E -A3 "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" | head -n 20 >&2 || true
    grep -E "^(Failing input|artifact_prefix|Test unit written)|fuzz/artifacts/" "$log" | head -n 5 >&2 || true
  fi
done

printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in ${failed[*]}" >&2
  exit 1
fi
