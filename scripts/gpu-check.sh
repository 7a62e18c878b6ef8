#!/usr/bin/env bash
# Holds headroom's plan for an NVIDIA GPU to llama.cpp's own CUDA build on
# that GPU (issue #21, item 7). Never part of the build or the tests: run it
# whenever such a machine is at hand, and put its table in the note.
#
# Two steps, because the GPU machine has CUDA, CMake and Python but no Rust:
#
#   1. Here, after scripts/test.sh built headroom:
#        scripts/gpu-check.sh prepare DIR "GPU NAME"
#      ("GPU NAME" as `headroom fit --gpu` knows it, e.g. "H200")
#      makes DIR (about 10 MB) with:
#      - models.tar.xz: the header of every model the planner is tested on
#        (the synthetic shapes, the architectures of synth::zoo, the two demo
#        models), each with its file length: the GPU machine re-creates each
#        file as a sparse one, every weight zero, which llama.cpp loads as it
#        would the real file (memory does not depend on the weights' values);
#      - accounting.tsv: the accounting matrix (every model at -ngl all, about
#        half and 0; 4096 and 32768 tokens; flash attention auto, and off; one
#        and four sequences), for llama.cpp's own no_alloc accounting;
#      - loads.tsv and plans/: the real loads (llama-completion: a prompt of 1000-2000 tokens, then 32 tokens)
#        with headroom's plan for each (`plan --gpu "GPU NAME" --logits batch
#        --json`: llama-completion reserves a batch of logits);
#      - src.tar.xz: the llama.cpp sources llama-cpp-sys-2 built headroom
#        from (only what is needed), llama-completion's sources, and the
#        accounting driver (scripts/gpu-check/accounting-main.cpp with
#        headroom's own accounting shim, app/shim/accounting.cpp).
#   2. There:
#        bash DIR/gpu-check.sh check DIR
#      builds llama.cpp with CUDA for that card (CMAKE_CUDA_ARCHITECTURES
#      from nvidia-smi's compute capability; only the f16 flash-attention
#      kernels), runs the accounting matrix (8 processes), then the real
#      loads while sampling the GPU's used memory, and prints per device the
#      plan against llama.cpp's breakdown (weights, KV, compute), llama.cpp's
#      "unaccounted" VRAM (the CUDA context, cuBLAS) and the VRAM measured.
#      DIR/out/ keeps every figure (accounting.jsonl, loads.json, the logs);
#      with $OUT set, they are copied there too.
#      The accounting matrix is compared with the planner here, afterwards:
#      `cargo run --release -p headroom-planner --example gpu_check_compare
#      -- DIR/out/accounting.jsonl`.
#
# GPU_CHECK_CPU_ONLY=1 builds without CUDA (to try the script on a machine
# without a GPU; the loads then run on the CPU). GPU_CHECK_DEADLINE (seconds
# from the start of `check`, default 520) stops starting new loads after it.

set -euo pipefail

die() { echo "gpu-check: $*" >&2; exit 1; }

# The llama.cpp source tree llama-cpp-sys-2 compiled (its CMake cache says
# which), else the crate's copy in Cargo's registry.
llama_sources() {
    local cache
    cache=$(ls target/release/build/llama-cpp-sys-2-*/out/build/CMakeCache.txt 2>/dev/null | head -1 || true)
    if [[ -n $cache ]]; then
        sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache"
        return
    fi
    local version
    version=$(awk '/^name = "llama-cpp-sys-2"/{getline; print $3}' Cargo.lock | tr -d '"')
    ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/llama-cpp-sys-2-"$version"/llama.cpp 2>/dev/null | head -1
}

# Re-creates DIR/models/NAME.gguf from NAME.head and its length (a sparse file).
make_models() {
    local dir=$1 name len _
    while IFS=$'\t' read -r name len _; do
        cp "$dir/models/$name.head" "$dir/models/$name.gguf"
        truncate -s "$len" "$dir/models/$name.gguf"
    done <"$dir/models.tsv"
}

prepare() {
    local dir=$1 gpu=$2
    local headroom=target/release/headroom
    [[ -x $headroom ]] || die "no $headroom: run scripts/test.sh (or cargo build --release) first"
    local cache=${HEADROOM_CACHE_DIR:-$HOME/.cache/headroom}
    local demos=("$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$cache/models/gemma-3-270m-q4_k_m.gguf")
    for m in "${demos[@]}"; do
        [[ -f $m ]] || die "no model $m (the demo models come with scripts/test.sh)"
    done
    local src
    src=$(llama_sources)
    [[ -n $src && -f $src/CMakeLists.txt ]] || die "cannot find the llama.cpp sources headroom was built from"
    local tools
    tools=$(ls -d "$cache"/llama-tools/llama-cpp-python-*/tools/completion 2>/dev/null | head -1)
    [[ -f $tools/completion.cpp && -f $tools/main.cpp ]] ||
        die "no llama-completion sources: run scripts/llama-tools.sh (scripts/test.sh does) first"
    rm -rf "$dir"
    mkdir -p "$dir/plans"
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN

    # The models' headers and the accounting matrix.
    cargo build --release -q -p headroom-planner --example gpu_check_cases
    target/release/examples/gpu_check_cases "$work/cases" "${demos[@]}" >/dev/null
    cp "$work/cases/models.tsv" "$work/cases/accounting.tsv" "$dir/"
    tar -C "$work/cases" -cJf "$dir/models.tar.xz" models

    # The real loads, most telling first (the machine's time may run out):
    # model, -ngl, -c.
    make_models "$work/cases"
    : >"$dir/loads.tsv"
    local name ngl ctx
    while read -r name ngl ctx; do
        local plan="plans/$name-ngl$ngl-c$ctx.json"
        "$headroom" plan "$work/cases/models/$name.gguf" --gpu "$gpu" -ngl "$ngl" -c "$ctx" \
            --logits batch --json >"$dir/$plan"
        printf '%s\t%s\t%s\t%s\n' "models/$name.gguf" "$ngl" "$ctx" "$plan" >>"$dir/loads.tsv"
    done <<'EOF'
llama-8b-Q4_K_M 999 32768
llama-8b-Q4_K_M 17 32768
qwen3moe-30b-a3b-Q4_K_M 999 32768
qwen3moe-30b-a3b-Q4_K_M 25 32768
gemma3-4b-Q4_K_M 999 32768
gpt-oss-20b-MXFP4_MOE 999 32768
gemma4-26b-a4b-Q4_K_M 999 32768
SmolLM2-135M-Instruct.Q4_1 999 8192
SmolLM2-135M-Instruct.Q4_1 15 8192
gemma-3-270m-q4_k_m 999 32768
llama-8b-Q4_K_M 0 8192
mistral3-devstral-small-2-Q4_K_M 999 32768
qwen35moe-35b-a3b-Q4_K_M 999 32768
llama-70b-Q4_K_M 999 8192
EOF

    # What the build needs, with only the CPU and CUDA backends.
    local s="$work/llama.cpp"
    mkdir -p "$s/tools/completion" "$s/tools/hr-accounting" "$s/ggml/src"
    cp -a "$src"/{CMakeLists.txt,LICENSE,cmake,common,include,src,vendor} "$s/"
    cp -a "$src"/ggml/{CMakeLists.txt,cmake,include} "$s/ggml/"
    local f
    for f in "$src"/ggml/src/*; do
        case $(basename "$f") in
            ggml-cpu | ggml-cuda) cp -a "$f" "$s/ggml/src/" ;;
            *) [[ -d $f && $(basename "$f") == ggml-* ]] || cp -a "$f" "$s/ggml/src/" ;;
        esac
    done
    # llama-cpp-sys-2 ships no tool sources: llama-completion's come from the
    # llama-cpp-python sdist scripts/llama-tools.sh fetched (the benchmarks'
    # reference, built against these same sources).
    cp "$tools"/{completion.cpp,main.cpp} "$s/tools/completion/"
    printf '%s\n' 'add_executable(llama-completion completion.cpp main.cpp)' \
        'target_link_libraries(llama-completion PRIVATE llama-common llama ${CMAKE_THREAD_LIBS_INIT})' \
        'target_compile_features(llama-completion PRIVATE cxx_std_17)' \
        >"$s/tools/completion/CMakeLists.txt"
    cp scripts/gpu-check/accounting-main.cpp app/shim/accounting.{cpp,h} app/shim/shim_log.{cpp,h} \
        "$s/tools/hr-accounting/"
    printf '%s\n' 'add_executable(hr-accounting accounting-main.cpp accounting.cpp shim_log.cpp)' \
        'target_include_directories(hr-accounting PRIVATE ${PROJECT_SOURCE_DIR}/src)' \
        'target_link_libraries(hr-accounting PRIVATE llama ${CMAKE_THREAD_LIBS_INIT})' \
        'target_compile_features(hr-accounting PRIVATE cxx_std_17)' \
        >"$s/tools/hr-accounting/CMakeLists.txt"
    # tools/CMakeLists.txt adds every tool; this one adds these two.
    printf '%s\n' 'find_package(Threads REQUIRED)' 'llama_add_compile_flags()' \
        'add_subdirectory(completion)' 'add_subdirectory(hr-accounting)' >"$s/tools/CMakeLists.txt"
    tar -C "$work" -cJf "$dir/src.tar.xz" llama.cpp
    cp "$0" "$dir/gpu-check.sh"
    echo "gpu-check: $dir is ready ($(wc -l <"$dir/accounting.tsv") accounting cases, $(wc -l <"$dir/loads.tsv") loads, $(du -sh "$dir" | cut -f1)); on the GPU machine: bash $dir/gpu-check.sh check $dir"
}

elapsed() { echo $((SECONDS - START)); }

build() {
    local dir=$1
    local cuda=(-DGGML_CUDA=OFF)
    if [[ -z ${GPU_CHECK_CPU_ONLY:-} ]]; then
        export PATH=$PATH:/usr/local/cuda/bin
        command -v nvcc >/dev/null || die "no nvcc: the CUDA toolkit is needed"
        local cap
        cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
        [[ -n $cap ]] || die "nvidia-smi reports no compute capability"
        cuda=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cap" -DGGML_CUDA_FA_QUANTS=f16-f16
              -DGGML_CUDA_COMPRESSION_MODE=none -DGGML_CUDA_NCCL=OFF)
    fi
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S "$dir/llama.cpp" -B "$dir/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" \
        -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF
    cmake --build "$dir/build" --target llama-completion hr-accounting -j "$(nproc)"
}

check() {
    local dir=$1
    START=$SECONDS
    local deadline=${GPU_CHECK_DEADLINE:-520}
    [[ -f $dir/accounting.tsv ]] || die "$dir has no accounting.tsv: run 'prepare' first"
    local out=$dir/out
    rm -rf "$out" "$dir/llama.cpp" "$dir/build" "$dir/models"
    mkdir -p "$out/logs"
    tar -C "$dir" -xJf "$dir/src.tar.xz"
    tar -C "$dir" -xJf "$dir/models.tar.xz"
    (nvidia-smi || true; grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; nproc;
     free -g; nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null || true) >"$out/machine.txt" 2>&1
    echo "gpu-check: building llama.cpp ($(elapsed) s)"
    if ! build "$dir" >"$out/logs/build.log" 2>&1; then
        tail -30 "$out/logs/build.log"
        collect "$dir"
        die "the build failed after $(elapsed) s (log: $out/logs/build.log)"
    fi
    echo "gpu-check: built in $(elapsed) s"
    make_models "$dir"
    local bin=$dir/build/bin

    # The accounting matrix: no weight is read, nothing allocated; 8 processes.
    # (GPU_CHECK_SKIP_ACCOUNTING=1: only the loads.)
    local shards=8 f
    if [[ -z ${GPU_CHECK_SKIP_ACCOUNTING:-} ]]; then
        rm -f "$dir"/shard-*
        split -n "r/$shards" -d "$dir/accounting.tsv" "$dir/shard-"
        for f in "$dir"/shard-??; do
            (cd "$dir" && timeout 150 "$bin/hr-accounting" "$(basename "$f")" >"$f.jsonl" 2>"$f.err") &
        done
        wait || true
        cat "$dir"/shard-??.jsonl >"$out/accounting.jsonl"
        cat "$dir"/shard-??.err >"$out/logs/accounting.err" 2>/dev/null || true
        echo "gpu-check: accounting: $(grep -c '"status":0' "$out/accounting.jsonl" || true) of $(wc -l <"$dir/accounting.tsv") cases in $(elapsed) s"
    fi
    collect "$dir"

    # The real loads, with the GPU's used memory sampled meanwhile. The
    # prompt ("a " 1000 times: 1000 to 2000 tokens, by the vocabulary) is
    # processed in batches of 512, as a real prompt is: the peak includes
    # what large batches take (cuBLAS, the kernels they load, CUDA's pool).
    printf 'a %.0s' $(seq 1000) >"$dir/prompt.txt"
    local base=0
    if [[ -z ${GPU_CHECK_CPU_ONLY:-} ]]; then
        base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1 | tr -d ' ')
    fi
    echo "$base" >"$out/logs/vram-baseline"
    local model ngl ctx plan
    while IFS=$'\t' read -r model ngl ctx plan; do
        if (($(elapsed) > deadline)); then
            echo "gpu-check: past ${deadline} s, skipping $plan"
            continue
        fi
        local tag log vram
        tag=$(basename "$plan" .json)
        log="$out/logs/$tag.log"
        vram="$out/logs/$tag.vram"
        : >"$vram"
        (cd "$dir" && timeout 60 "$bin/llama-completion" -m "$model" -ngl "$ngl" -c "$ctx" -n 32 --temp 0 \
            -no-cnv -lv 4 -f prompt.txt) >"$log.out" 2>"$log" &
        local pid=$!
        while kill -0 "$pid" 2>/dev/null; do
            if [[ -z ${GPU_CHECK_CPU_ONLY:-} ]]; then
                nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 >>"$vram" || true
            fi
            sleep 0.1
        done
        if wait "$pid"; then
            echo "gpu-check: loaded $tag ($(elapsed) s)"
        else
            echo "gpu-check: llama-completion failed on $tag ($(elapsed) s): $(tail -3 "$log" | tr '\n' ' ')"
        fi
    done <"$dir/loads.tsv"
    summarize "$dir"
    collect "$dir"
    echo "gpu-check: done in $(elapsed) s"
}

# Copies what came out to $OUT (the device tool's folder), if set.
collect() {
    local dir=$1
    [[ -n ${OUT:-} ]] || return 0
    cp "$dir/out/accounting.jsonl" "$dir/out/loads.json" "$dir/out/machine.txt" "$OUT/" 2>/dev/null || true
    tar -C "$dir/out" -czf "$OUT/logs.tar.gz" logs 2>/dev/null || true
}

summarize() {
    python3 - "$1" <<'EOF'
import json, pathlib, re, sys

MIB = 1 << 20
d = pathlib.Path(sys.argv[1])
out = d / "out"
row = re.compile(r"memory_breakdown_print: \|\s+- (.+?)\s+\|(.*)\|\s*$")

def llama_rows(log):
    """The last breakdown llama.cpp printed (at exit): name -> figures in MiB."""
    found = {}
    if not log.exists():
        return found
    for line in log.read_text(errors="replace").splitlines():
        if "memory breakdown [MiB]" in line:
            found = {}
        m = row.search(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2)
        nums = [int(x) for x in re.findall(r"-?\d+", rest)]
        if len(nums) >= 7:  # a GPU: total = free + (self = model + context + compute) + unaccounted
            found[name.split(" (")[0]] = {"total": nums[0], "free": nums[1], "model": nums[3],
                                          "context": nums[4], "compute": nums[5], "unaccounted": nums[6]}
        elif len(nums) >= 4:  # the host: self = model + context + compute
            found[name.split(" (")[0]] = {"model": nums[1], "context": nums[2], "compute": nums[3]}
    return found

def pct(ours, theirs):
    return "   n/a" if theirs == 0 else f"{100.0 * (ours - theirs) / theirs:+6.1f}%"

base = int((out / "logs" / "vram-baseline").read_text().strip() or 0)
results, lines = [], []
for case in (d / "loads.tsv").read_text().splitlines():
    model, ngl, ctx, plan_path = case.split("\t")
    tag = pathlib.Path(plan_path).stem
    plan = json.loads((d / plan_path).read_text())
    theirs = llama_rows(out / "logs" / f"{tag}.log")
    vram_file = out / "logs" / f"{tag}.vram"
    vram = [int(x) for x in vram_file.read_text().split() if x.isdigit()] if vram_file.exists() else []
    if not theirs:
        lines.append(f"{tag:44} no breakdown in llama.cpp's log")
        continue
    for dev in plan["devices"]:
        bufs = dev.get("buffers", [])
        key = "Host" if dev["kind"] == "cpu" else (bufs[0]["name"] if bufs else dev["name"])
        got = theirs.get(key)
        ours = {"model": dev["weights_bytes"] / MIB, "context": dev["kv_bytes"] / MIB,
                "compute": dev["compute_bytes"] / MIB}
        entry = {"case": tag, "device": key, "plan_mib": ours, "llama_mib": got,
                 "plan_overhead_mib": dev["overhead_bytes"] / MIB, "plan_margin_mib": dev["margin_bytes"] / MIB,
                 "plan_total_mib": dev["total_bytes"] / MIB}
        if got is None:
            lines.append(f"{tag:44} {key:6} not in llama.cpp's breakdown")
            results.append(entry)
            continue
        text = "  ".join(f"{k} {ours[k]:8.1f}/{got[k]:6d} {pct(ours[k], got[k])}" for k in ("model", "context", "compute"))
        if dev["kind"] != "cpu":
            text += f"  unacc {got.get('unaccounted', 0)} plan-ovh {dev['overhead_bytes'] / MIB:.0f}"
            if vram:
                used = max(vram) - base
                planned = (dev["total_bytes"] - dev["margin_bytes"]) / MIB
                entry["vram_used_mib"] = used
                text += f"  VRAM {used} plan {planned:.0f} ({planned / max(used, 1):.3f})"
        lines.append(f"{tag:44} {key:6} {text}")
        results.append(entry)
    # Speed: llama.cpp's decode rate over 32 tokens (on zero weights)
    # against the plan's estimate.
    log = (out / "logs" / f"{tag}.log").read_text(errors="replace")
    m = re.search(r"(?<!prompt )eval time =.*?([0-9.]+) tokens per second", log)
    if m:
        est = plan.get("est_decode_tokens_per_s")
        results.append({"case": tag, "decode_tok_s": float(m.group(1)), "plan_decode_tok_s": est})
        lines.append(f"{tag:44} decode {float(m.group(1)):.1f} tok/s, plan {est if est is None else round(est, 1)}")

(out / "loads.json").write_text(json.dumps(results, indent=1))
print("plan / llama.cpp per device, MiB (llama.cpp prints whole MiB); VRAM = peak used - baseline:")
print("\n".join(lines))
EOF
}

case ${1:-} in
    prepare) [[ $# -eq 3 ]] || die "usage: $0 prepare DIR \"GPU NAME\""; prepare "$2" "$3" ;;
    check) [[ $# -eq 2 ]] || die "usage: $0 check DIR"; check "$2" ;;
    # The table again, from DIR/out/logs (e.g. the logs a GPU machine sent back).
    summarize) [[ $# -eq 2 ]] || die "usage: $0 summarize DIR"; summarize "$2" ;;
    *) die "usage: $0 prepare DIR \"GPU NAME\" | check DIR" ;;
esac
