#!/usr/bin/env bash
# The project's test command (README quick start, .ci/run): installs build
# dependencies, builds once in the release profile (llama.cpp is compiled once
# and shared by the binary, the tests and the benchmarks), fetches and verifies
# the demo model, runs the benchmarks (ratios against llama.cpp measured in the same
# run), every test of the workspace, and the fuzz targets for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase prints how long it took, so a slow CI run says where its time went.
phase() {
  local name="$1" t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "test.sh: $name: $((SECONDS - t0)) s (exit $rc; $((SECONDS / 60)) min $((SECONDS % 60)) s in all)" >&2
  return "$rc"
}

phase setup bash scripts/setup.sh
# The benchmarks' and tests' runs are not this machine's history: they run
# beside other work (a build, other test binaries), and recorded in the
# user's calibration log they would scale every later estimate here (after
# one CI run, `plan demo` read "calibrated from 10 runs: CPU decode x0.80",
# all of them the chat tests' and run_speed's). They get a data directory of
# their own, removed at the end; tests that need a particular one set theirs.
if [ -z "${HEADROOM_DATA_DIR:-}" ]; then
  HEADROOM_DATA_DIR="$(mktemp -d)"
  export HEADROOM_DATA_DIR
  trap 'rm -rf "$HEADROOM_DATA_DIR"' EXIT
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

phase build cargo build --release --workspace --all-targets
# Fetch (or verify) the real test model before the tests that need it.
HEADROOM_TEST_MODEL="$(./target/release/headroom demo-model demo-base)"
export HEADROOM_TEST_MODEL
# Planning speed against llama.cpp's own accounting (prints the ratios; fails under 20x).
status=0
phase plan_speed cargo bench -p headroom --bench plan_speed || status=$?
# Run speed and peak RSS against llama.cpp's own llama-bench and llama-completion, built
# once from the same llama.cpp (scripts/llama-tools.sh); prints the ratios, fails only
# with HEADROOM_BENCH_STRICT=1 (shared CI machines are too noisy for a hard gate).
phase run_speed cargo bench -p headroom --bench run_speed || status=$?
# `headroom serve` against llama.cpp's own llama-server, built by the same
# script: aggregate tokens/s with 4 clients, time to first token, and the
# server's peak RSS against its plan (report-only like run_speed).
phase serve_speed cargo bench -p headroom --bench serve_speed || status=$?
# Ranking the whole catalog for a machine, offline (prints the time per fit; a miss
# of its 200 ms CPU mark fails only with HEADROOM_BENCH_STRICT=1).
phase fit_speed cargo bench -p headroom --bench fit_speed || status=$?
# A failed benchmark fails the run, but after the tests below have run too.
phase tests cargo test --release --workspace --no-fail-fast -- --skip soak:: || status=$?
# The soak tests measure this process's own resident set over hundreds of
# generations: alone, so no other test's allocations or CPU share move them.
phase soak cargo test --release -p headroom --test run -- soak:: --test-threads=1 || status=$?
# Every fuzz target for a bounded time each (cargo-fuzz on the stable toolchain): the GGUF
# header reader, the planner's size arithmetic, the hardware profile, the catalog
# (TOML) and chat-template rendering; a crash fails.
phase fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-30}" bash scripts/fuzz.sh gguf_header plan_sizes hw_profile catalog_toml template_render || status=$?
exit "$status"
