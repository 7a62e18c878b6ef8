#!/usr/bin/env bash
# The project's test command (README quick start, .ci/run): installs build
# dependencies, builds once in the release profile (llama.cpp is compiled once
# and shared by the binary, the tests and the benchmarks), fetches and verifies
# the demo model, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

cargo build --release --workspace --all-targets
# Fetch (or verify) the real test model before the tests that need it.
HEADROOM_TEST_MODEL="$(./target/release/headroom demo-model)"
export HEADROOM_TEST_MODEL
# Planning speed against llama.cpp's own accounting (prints the ratios; fails under 20x).
cargo bench -p headroom --bench plan_speed
cargo test --release --workspace --no-fail-fast
