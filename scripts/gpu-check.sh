#!/usr/bin/env bash
# Holds headroom's plan for an NVIDIA GPU to llama.cpp's own CUDA build on
# that GPU (issue #21, item 7). Never part of the build or the tests: run it
# whenever such a machine is at hand, and put its table in the note.
#
# Two steps, because the GPU machine has CUDA, CMake and Python but no Rust:
#
#   1. Here, after scripts/test.sh built headroom:
#        scripts/gpu-check.sh prepare DIR "GPU NAME" [MODEL.gguf ...]
#      ("GPU NAME" as `headroom fit --gpu` knows it, e.g. "H200"; "-" for
#      this machine's own devices)
#      makes DIR with: the plans (`headroom plan --gpu "GPU NAME" --logits
#      batch --json`, one per case: each model at -ngl all and about half,
#      -c 4096 and 32768), the models (the two demo models when none is
#      given), the llama.cpp sources llama-cpp-sys-2 built headroom from
#      (only what llama-completion needs) and this script.
#   2. There:
#        bash DIR/gpu-check.sh check DIR
#      builds llama-completion with CUDA for that card
#      (CMAKE_CUDA_ARCHITECTURES from nvidia-smi's compute capability),
#      loads every case for real (8 tokens), reads llama.cpp's per-device
#      memory breakdown (printed at exit with -lv 4), samples the process's
#      VRAM with nvidia-smi while it runs, and prints per device the plan
#      against llama.cpp (weights, KV, compute) and the plan's device total
#      against the measured VRAM. DIR/results.json keeps every figure.
#
# The plans reserve a full batch of logits (`--logits batch`) because
# llama-completion does (llama.cpp's library default); headroom's own runner
# and llama-server reserve one row per sequence.
#
# LLAMA_COMPLETION=PATH skips the build and uses that binary (to try the
# script on a machine without CUDA: with GGML_VK_VISIBLE_DEVICES=0 and the
# Vulkan build from scripts/llama-tools.sh, plans made without --gpu).

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

prepare() {
    local dir=$1 gpu=$2
    shift 2
    local headroom=target/release/headroom
    [[ -x $headroom ]] || die "no $headroom: run scripts/test.sh (or cargo build --release) first"
    local models=("$@")
    # "-": this machine's own devices, as llama.cpp's registry lists them.
    local on=(--gpu "$gpu")
    [[ $gpu == - ]] && on=()
    if [[ ${#models[@]} -eq 0 ]]; then
        models=("$HOME/.cache/headroom/models/SmolLM2-135M-Instruct.Q4_1.gguf"
                "$HOME/.cache/headroom/models/gemma-3-270m-q4_k_m.gguf")
    fi
    local src
    src=$(llama_sources)
    [[ -n $src && -f $src/CMakeLists.txt ]] || die "cannot find the llama.cpp sources headroom was built from"
    mkdir -p "$dir/plans" "$dir/models" "$dir/llama.cpp/tools" "$dir/llama.cpp/ggml/src"
    # What llama-completion needs, with only the CPU and CUDA backends.
    cp -a "$src"/{CMakeLists.txt,LICENSE,cmake,common,include,src,vendor} "$dir/llama.cpp/"
    # llama-cpp-sys-2 ships no tool sources: llama-completion's come from
    # the llama-cpp-python sdist scripts/llama-tools.sh fetched (the
    # benchmarks' reference, built against these same sources).
    local tools
    tools=$(ls -d "${HEADROOM_CACHE_DIR:-$HOME/.cache/headroom}"/llama-tools/llama-cpp-python-*/tools/completion 2>/dev/null | head -1)
    [[ -f $tools/completion.cpp && -f $tools/main.cpp ]] ||
        die "no llama-completion sources: run scripts/llama-tools.sh (scripts/test.sh does) first"
    mkdir -p "$dir/llama.cpp/tools/completion"
    cp "$tools"/{completion.cpp,main.cpp} "$dir/llama.cpp/tools/completion/"
    printf '%s\n' 'add_executable(llama-completion completion.cpp main.cpp)' \
        'target_link_libraries(llama-completion PRIVATE common llama ${CMAKE_THREAD_LIBS_INIT})' \
        'target_compile_features(llama-completion PRIVATE cxx_std_17)' \
        >"$dir/llama.cpp/tools/completion/CMakeLists.txt"
    # tools/CMakeLists.txt adds every tool; this one adds llama-completion.
    printf '%s\n' 'find_package(Threads REQUIRED)' 'llama_add_compile_flags()' \
        'add_subdirectory(completion)' >"$dir/llama.cpp/tools/CMakeLists.txt"
    cp -a "$src"/ggml/{CMakeLists.txt,cmake,include} "$dir/llama.cpp/ggml/"
    # Every ggml source but the other backends' folders.
    for f in "$src"/ggml/src/*; do
        case $(basename "$f") in
            ggml-cpu | ggml-cuda | ggml-blas) cp -a "$f" "$dir/llama.cpp/ggml/src/" ;;
            *) [[ -d $f && $(basename "$f") == ggml-* ]] || cp -a "$f" "$dir/llama.cpp/ggml/src/" ;;
        esac
    done
    cp "$0" "$dir/gpu-check.sh"
    : >"$dir/cases.tsv"
    for m in "${models[@]}"; do
        [[ -f $m ]] || die "no model $m (the demo models come with scripts/test.sh)"
        cp -n "$m" "$dir/models/"
        local name n_layer
        name=$(basename "$m" .gguf)
        n_layer=$("$headroom" plan "$m" "${on[@]}" -ngl 999 -c 4096 --json |
            python3 -c 'import json,sys; print(sum(d["n_layers"] for d in json.load(sys.stdin)["devices"]))')
        for ngl in 999 $(((n_layer / 2) | 1)); do
            for ctx in 4096 32768; do
                local plan="plans/$name-ngl$ngl-c$ctx.json"
                "$headroom" plan "$m" "${on[@]}" -ngl "$ngl" -c "$ctx" --logits batch --json >"$dir/$plan"
                printf '%s\t%s\t%s\t%s\n' "models/$(basename "$m")" "$ngl" "$ctx" "$plan" >>"$dir/cases.tsv"
            done
        done
    done
    echo "gpu-check: $dir is ready ($(wc -l <"$dir/cases.tsv") cases, $(du -sh "$dir" | cut -f1)); on the GPU machine: bash $dir/gpu-check.sh check $dir"
}

build() {
    local dir=$1
    if [[ -n ${LLAMA_COMPLETION:-} ]]; then
        echo "$LLAMA_COMPLETION"
        return
    fi
    command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || die "no nvcc: the CUDA toolkit is needed"
    export PATH=$PATH:/usr/local/cuda/bin
    local cap
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
    [[ -n $cap ]] || die "nvidia-smi reports no compute capability"
    cmake -S "$dir/llama.cpp" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cap" -DGGML_NATIVE=ON \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_APP=OFF >&2
    cmake --build "$dir/build" --target llama-completion -j "$(nproc)" >&2
    echo "$dir/build/bin/llama-completion"
}

check() {
    local dir=$1
    [[ -f $dir/cases.tsv ]] || die "$dir has no cases.tsv: run 'prepare' first"
    local bin
    bin=$(build "$dir")
    [[ -x $bin ]] || die "no llama-completion at $bin"
    mkdir -p "$dir/logs"
    while IFS=$'\t' read -r model ngl ctx plan; do
        local tag log vram
        tag=$(basename "$plan" .json)
        log="$dir/logs/$tag.log"
        vram="$dir/logs/$tag.vram"
        : >"$vram"
        "$bin" -m "$dir/$model" -ngl "$ngl" -c "$ctx" -n 8 --temp 0 -no-cnv -lv 4 \
            -p "The capital of France is" >"$log.out" 2>"$log" &
        local pid=$!
        # The process's own VRAM, sampled while it loads and decodes.
        while kill -0 "$pid" 2>/dev/null; do
            if command -v nvidia-smi >/dev/null; then
                nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
                    awk -F', *' -v p="$pid" '$1 == p {print $2}' >>"$vram"
            fi
            sleep 0.2
        done
        wait "$pid" || die "llama-completion failed on $tag (log: $log)"
    done <"$dir/cases.tsv"
    python3 - "$dir" <<'EOF'
import json, pathlib, re, sys

MIB = 1 << 20
d = pathlib.Path(sys.argv[1])
row = re.compile(r"memory_breakdown_print: \|\s+- (.+?)\s+\|(.*)\|\s*$")
results, lines = [], []

def llama_rows(log):
    """The last breakdown llama.cpp printed (at exit): name -> (model, context, compute) MiB."""
    found = {}
    for line in log.read_text(errors="replace").splitlines():
        if "memory breakdown [MiB]" in line:
            found = {}
        m = row.search(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2)
        nums = [int(x) for x in re.findall(r"-?\d+", rest)]
        # GPU: total = free + (self = model + context + compute) + unaccounted
        # other: self = model + context + compute
        model, context, compute = (nums[3:6] if len(nums) >= 7 else nums[1:4])
        found[name.split(" (")[0]] = (model, context, compute)
    return found

def pct(ours, theirs):
    return "n/a" if theirs == 0 else f"{100.0 * (ours - theirs) / theirs:+.1f}%"

for case in (d / "cases.tsv").read_text().splitlines():
    model, ngl, ctx, plan_path = case.split("\t")
    tag = pathlib.Path(plan_path).stem
    plan = json.loads((d / plan_path).read_text())
    theirs = llama_rows(d / "logs" / f"{tag}.log")
    vram = [int(x) for x in (d / "logs" / f"{tag}.vram").read_text().split() if x.isdigit()]
    for dev in plan["devices"]:
        bufs = dev.get("buffers", [])
        if dev["kind"] == "cpu":
            key = "Host"
        else:
            key = bufs[0]["name"] if bufs else dev["name"]
        got = theirs.get(key)
        ours = (dev["weights_bytes"] / MIB, dev["kv_bytes"] / MIB, dev["compute_bytes"] / MIB)
        entry = {"case": tag, "device": key, "plan_mib": ours, "llama_mib": got}
        if got is None:
            lines.append(f"{tag:40} {key:10} not in llama.cpp's breakdown")
            results.append(entry)
            continue
        text = "  ".join(f"{n} {o:8.1f}/{t:6d} ({pct(o, t)})" for n, o, t in zip(("weights", "KV", "compute"), ours, got))
        if dev["kind"] != "cpu" and vram:
            planned = (dev["total_bytes"] - dev["margin_bytes"]) / MIB
            entry["vram_peak_mib"] = max(vram)
            entry["plan_total_mib"] = planned
            text += f"  VRAM peak {max(vram)} MiB, plan {planned:.0f} ({planned / max(vram):.3f})"
        lines.append(f"{tag:40} {key:10} {text}")
        results.append(entry)

print("plan / llama.cpp per device, MiB (llama.cpp prints whole MiB):")
print("\n".join(lines))
(d / "results.json").write_text(json.dumps(results, indent=1))
EOF
}

case ${1:-} in
    prepare) [[ $# -ge 3 ]] || die "usage: $0 prepare DIR \"GPU NAME\" [MODEL.gguf ...]"; shift; prepare "$@" ;;
    check) [[ $# -eq 2 ]] || die "usage: $0 check DIR"; check "$2" ;;
    *) die "usage: $0 prepare DIR \"GPU NAME\" [MODEL.gguf ...] | check DIR" ;;
esac
