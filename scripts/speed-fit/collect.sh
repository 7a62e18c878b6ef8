#!/usr/bin/env bash
# Appends N rounds of first runs of both demo models to OUT, one line per
# run: LABEL (the spell, default "new"; fit.py weighs spells alike), model, the plan's decode estimate, the measured decode speed,
# the stream bandwidth measured for it, the bytes read per token, the CPU's
# per-layer cost, and the cores other processes used. Each run gets a fresh
# cache (so the bandwidth is measured anew) and a fresh data directory (no
# calibration). Run on a quiet machine, from the repository root, after
# `cargo build --release`: bash scripts/speed-fit/collect.sh 8 /tmp/runs.txt e
set -euo pipefail
n="$1" out="$2" label="${3:-new}"
bin=target/release/headroom
models="$($bin demo-model demo | xargs dirname)"
for i in $(seq 1 "$n"); do
  for m in demo demo-base; do
    t="$(mktemp -d)"
    mkdir -p "$t/c"
    ln -s "$models" "$t/c/models"
    HEADROOM_CACHE_DIR="$t/c" HEADROOM_DATA_DIR="$t/d" "$bin" run "$m" --json \
      -p "Explain how a fridge works." -n 32 --ignore-eos --temp 0 2>/dev/null |
      python3 -c "
import json, sys
r = json.load(sys.stdin); b = r['planned']['speed_basis']['ram']
print('$label', '$m', r['planned']['decode_tokens_per_s'], r['decode_tokens_per_s'],
      b['bandwidth_bytes_per_s'], b['bytes_per_token'], b['per_layer_s'],
      r['measured'].get('other_cpu_cores'))" >> "$out"
    rm -rf "$t"
  done
done
