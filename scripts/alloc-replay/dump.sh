#!/usr/bin/env bash
# Records every graph llama.cpp's scheduler builds for a model, node by node
# (op, size, backend, view source, flags, layout, sources), for `replay.py`.
#
#   scripts/alloc-replay/dump.sh MODEL.gguf OUT.dump [llama-completion args…]
#   e.g. GGML_VK_VISIBLE_DEVICES=0 scripts/alloc-replay/dump.sh m.gguf m.dump -c 4096 -ngl 0
#
# How: a copy of the crate's own ggml-backend.cpp with a dump added where
# `ggml_backend_sched_split_graph` finishes the graph it hands to ggml-alloc
# (the copy is made here, in target/alloc-replay, from the llama.cpp that
# llama-cpp-sys-2 builds; nothing of it is kept in the repository), linked
# into llama-completion before the crate's static libraries, which it
# overrides. Needs `cargo build --release -p headroom` and
# `scripts/llama-tools.sh` first (the tools' objects and static libs). The
# dump goes to OUT.dump; llama-completion's log (with `-v`, the buffer sizes
# llama.cpp prints) to OUT.log. A dev tool: no test depends on it.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 MODEL.gguf OUT.dump [llama-completion args...]" >&2; exit 2; }
model=$1 out=$2; shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
sys_out=$(ls -d "$target"/release/build/llama-cpp-sys-2-*/out | while read -r d; do
  [ -f "$d/lib/libllama.a" ] && echo "$d"; done | head -1)
[ -n "$sys_out" ] || { echo "no llama-cpp-sys-2 build under $target/release" >&2; exit 1; }
src=$(ls -d "$HOME"/.cargo/registry/src/*/llama-cpp-sys-2-*/llama.cpp | tail -1)
obj=$(ls -d "$target"/llama-tools/obj-* | head -1)
work=$target/alloc-replay
mkdir -p "$work"
bin=$work/llama-completion-dump
if [ ! -x "$bin" ]; then
  python3 - "$src/ggml/src/ggml-backend.cpp" "$work/ggml-backend-dump.cpp" <<'PY'
import sys
s = open(sys.argv[1]).read()
anchor = "    // set ids for all splits\n"
assert s.count(anchor) == 1, "ggml-backend.cpp changed: no single anchor"
dump = r'''    if (getenv("GGML_SCHED_DUMP")) {
        FILE * df = fopen(getenv("GGML_SCHED_DUMP"), "a");
        for (int i = 0; i < graph_copy->n_leafs; i++) {
            struct ggml_tensor * t = graph_copy->leafs[i];
            fprintf(df, "GDUMP L %d %p %s %zu %d %p %d |%s|\n", i, (void*)t, ggml_op_name(t->op), ggml_nbytes(t),
                sched->leaf_backend_ids[i], (void*)t->view_src, t->flags, t->name);
        }
        for (int i = 0; i < graph_copy->n_nodes; i++) {
            struct ggml_tensor * t = graph_copy->nodes[i];
            fprintf(df, "GDUMP N %d %p %s %zu %d %p %d %d %lld,%lld,%lld,%lld %zu,%zu,%zu,%zu", i, (void*)t,
                ggml_op_name(t->op), ggml_nbytes(t), sched->node_backend_ids[i], (void*)t->view_src, t->flags,
                (int)t->type, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                t->nb[0], t->nb[1], t->nb[2], t->nb[3]);
            for (int j = 0; j < GGML_MAX_SRC; j++) {
                fprintf(df, " %p", (void*)t->src[j]);
            }
            fprintf(df, " buf=%d data=%d voff=%zu |%s|\n", t->buffer != NULL, t->data != NULL, t->view_offs, t->name);
        }
        fprintf(df, "GDUMP END\n");
        fclose(df);
    }
'''
open(sys.argv[2], "w").write(s.replace(anchor, dump + anchor))
PY
  b=$sys_out/build
  c++ -DGGML_SCHED_MAX_COPIES=4 -DGGML_USE_OPENMP -D_GNU_SOURCE -D_XOPEN_SOURCE=600 \
    -I"$src/ggml/src" -I"$b/ggml/src" -I"$src/ggml/include" -fPIC -O2 -DNDEBUG -fopenmp -w -std=gnu++17 \
    -c "$work/ggml-backend-dump.cpp" -o "$work/ggml-backend-dump.o"
  libs=()
  for l in "$b/common/libllama-common.a" "$b/common/libllama-common-base.a" \
    "$b/vendor/cpp-httplib/libcpp-httplib.a" "$b/vendor/hash/libvendor-hash.a" \
    "$sys_out/lib/libllama.a" "$sys_out/lib/libggml.a" "$sys_out/lib/libggml-rpc.a" \
    "$sys_out/lib/libggml-vulkan.a" "$sys_out/lib/libggml-cpu.a" "$sys_out/lib/libggml-base.a"; do
    [ -f "$l" ] && libs+=("$l")
  done
  extra=(-fopenmp -lssl -lcrypto)
  [ -f "$sys_out/lib/libggml-vulkan.a" ] && extra+=(-lvulkan)
  c++ "$obj/completion-main.o" "$obj/completion.o" "$work/ggml-backend-dump.o" "${libs[@]}" "${extra[@]}" -o "$bin"
fi
rm -f "$out"
GGML_SCHED_DUMP="$out" "$bin" -m "$model" -n 1 -p hi -no-cnv --no-warmup -v "$@" >"${out%.dump}.log" 2>&1
grep "compute buffer size =" "${out%.dump}.log" | head -4 || true
