#!/usr/bin/env bash
# Builds llama.cpp's own programs, `llama-bench`, `llama-completion`,
# `llama-server` and the RPC worker `ggml-rpc-server`, against the very llama.cpp that headroom links, so the
# run-speed and serve benchmarks (app/benches/run_speed, serve_speed.rs)
# compare headroom with llama.cpp on equal terms: same sources, same CPU
# flags, same static libs; and the tests of `--rpc` start workers that speak
# exactly the RPC protocol headroom's llama.cpp speaks.
#
# llama-cpp-sys-2's crate leaves out llama.cpp's tools/ sources, but cargo has
# already compiled everything else (ggml, llama, common, cpp-httplib) into
# static libs under target/release/build/llama-cpp-sys-2-*/out. Only the
# tools' front ends are missing: their sources come from the llama-cpp-python
# sdist on PyPI (vendor/llama.cpp/tools), pinned by version and sha256; they
# are compiled with the flags CMake used for llama.cpp's common/ library (read
# from its compile_commands.json) and linked with the crate's static libs.
# llama.cpp itself is never rebuilt.
#
# llama-server also needs tools/mtmd (multimodal support, which it links even
# when serving text) and its web UI's asset table: the UI is left out, as
# llama.cpp's CMake does with -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
# (an empty table, generated here from the sdist's ui.h.in and ui.cpp.in the
# way scripts/ui-assets.cmake generates it). Everything is compiled with
# $(nproc) jobs.
#
# Idempotent: the tool sources are cached in $HEADROOM_CACHE_DIR (default
# ~/.cache/headroom) and the binaries in target/llama-tools; both are reused
# while the crate's libraries and this script's inputs are unchanged.
#
# Prints four lines on stdout: the paths of llama-bench, llama-completion,
# llama-server and ggml-rpc-server. Progress goes to stderr.
#
# Needs: a release build of headroom first (`cargo build --release -p headroom`),
# python3 with pip, a C++ compiler (the one CMake used).
# Environment: HEADROOM_CACHE_DIR, CARGO_TARGET_DIR, LLAMA_SYS_OUT (an
# explicit llama-cpp-sys-2 out dir, when several builds are present).
set -euo pipefail

# The sdist whose vendored llama.cpp is closest to llama-cpp-sys-2 0.1.160's
# (the crate's is a few commits newer; the tools' front ends compile against
# its common/ headers unchanged).
LCP_VERSION=0.3.36
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# What is taken from the sdist (paths under vendor/llama.cpp/).
TOOL_FILES=(
  tools/llama-bench/llama-bench.cpp
  tools/llama-bench/main.cpp
  tools/completion/completion.cpp
  tools/completion/main.cpp
  tools/server/main.cpp
  tools/server/server.cpp
  tools/mtmd/mtmd.cpp
  tools/mtmd/clip.cpp
  tools/ui/ui.h.in
  tools/ui/ui.cpp.in
  tools/rpc/rpc-server.cpp
  LICENSE
)
# Whole directories taken with them (sources and headers).
TOOL_DIRS=(tools/server tools/mtmd)
# llama-server's sources: tools/server's CMake targets server-context,
# llama-server-impl and llama-server.
SERVER_SOURCES=(
  server-chat server-task server-queue server-common server-context server-stream
  server-tools server-mcp server-schema server server-http server-models main
)

root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
cache_dir="${HEADROOM_CACHE_DIR:-$HOME/.cache/headroom}"
src_dir="$cache_dir/llama-tools/llama-cpp-python-$LCP_VERSION"
out_dir="$target_dir/llama-tools"

log() { echo "llama-tools: $*" >&2; }
die() { log "error: $*"; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is needed (pip fetches the tool sources)"

# --- The llama-cpp-sys-2 build to link against --------------------------------
# The build headroom links by default (CPU, RPC and Vulkan; or CPU and RPC
# only with --no-default-features), the newest one when several feature sets
# were built; never one with CUDA, Metal, HIP or SYCL, whose libraries this
# script does not link. The tools then start llama.cpp's backends exactly as
# headroom does (Vulkan's start costs memory even when no device is used).
find_sys_out() {
  if [ -n "${LLAMA_SYS_OUT:-}" ]; then
    echo "$LLAMA_SYS_OUT"
    return
  fi
  local best="" best_t=0 d t
  for d in "$target_dir"/release/build/llama-cpp-sys-2-*/out; do
    [ -f "$d/lib/libllama.a" ] && [ -f "$d/build/compile_commands.json" ] || continue
    if grep -Eq '^GGML_(CUDA|METAL|HIP|SYCL):BOOL=ON' "$d/build/CMakeCache.txt"; then
      continue
    fi
    t=$(stat -c %Y "$d/lib/libllama.a")
    if [ "$t" -gt "$best_t" ]; then best="$d" best_t="$t"; fi
  done
  echo "$best"
}
sys_out="$(find_sys_out)"
[ -n "$sys_out" ] && [ -f "$sys_out/lib/libllama.a" ] ||
  die "no CPU or Vulkan llama-cpp-sys-2 build under $target_dir/release/build (run \`cargo build --release -p headroom\` first, or set LLAMA_SYS_OUT)"
build="$sys_out/build"

libs=(
  "$build/common/libllama-common.a"
  "$build/common/libllama-common-base.a"
  "$build/vendor/cpp-httplib/libcpp-httplib.a"
  "$build/vendor/hash/libvendor-hash.a"
  "$sys_out/lib/libllama.a"
  "$sys_out/lib/libggml.a"
  "$sys_out/lib/libggml-rpc.a"
  "$sys_out/lib/libggml-vulkan.a"
  "$sys_out/lib/libggml-cpu.a"
  "$sys_out/lib/libggml-base.a"
)
present=()
for l in "${libs[@]}"; do
  if [ -f "$l" ]; then present+=("$l"); fi
done
[ -f "$build/common/libllama-common.a" ] ||
  die "$build has no libllama-common.a (llama-cpp-sys-2 built without llama.cpp's common library)"
[ -f "$sys_out/lib/libggml-rpc.a" ] ||
  die "$sys_out has no libggml-rpc.a (llama-cpp-sys-2 built without GGML_RPC=ON: see .cargo/config.toml)"

# The compile command CMake used for common/common.cpp: its defines, include
# dirs and optimisation flags are the ones the tools' front ends must share
# (common.h's structs are compiled into libllama-common.a).
read_flags() {
  python3 - "$build/compile_commands.json" <<'PY'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("/common/common.cpp"):
        args = e.get("arguments") or shlex.split(e["command"])
        out, skip = [], False
        for a in args[1:]:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c"):
                skip = True
                continue
            if a.startswith("-W") or a == "-w":
                continue
            out.append(a)
        print(args[0])
        print(shlex.join(out))
        break
else:
    sys.exit("no compile command for common/common.cpp")
PY
}
mapfile -t flag_lines < <(read_flags) || true
[ "${#flag_lines[@]}" -eq 2 ] || die "could not read common.cpp's compile command from $build/compile_commands.json"
cxx="${flag_lines[0]}"
eval "cxxflags=(${flag_lines[1]})"
command -v "$cxx" >/dev/null 2>&1 || die "the C++ compiler CMake used ($cxx) is missing"

# Link flags that llama.cpp's CMake build resolved: OpenMP and OpenSSL.
cache="$build/CMakeCache.txt"
ldflags=()
if grep -q '^GGML_OPENMP_ENABLED:INTERNAL=ON' "$cache"; then ldflags+=(-fopenmp); fi
if grep -q '^LLAMA_OPENSSL:BOOL=ON' "$cache" && grep -q '^OPENSSL_SSL_LIBRARY:FILEPATH=/' "$cache"; then
  ldflags+=(-lssl -lcrypto)
fi
if grep -q '^GGML_VULKAN:BOOL=ON' "$cache"; then
  [ -f "$sys_out/lib/libggml-vulkan.a" ] || die "$sys_out was configured with Vulkan but has no libggml-vulkan.a"
  ldflags+=(-lvulkan)
fi
ldflags+=(-lpthread -ldl -lm)

# --- Reuse when nothing changed -----------------------------------------------
# Objects depend on the sources (pinned by the sdist), the compiler and flags
# and the crate's build (its headers come with its libraries); binaries on
# those and this script.
inputs() {
  echo "lcp $LCP_VERSION $LCP_SHA256"
  echo "cxx $cxx ${cxxflags[*]} ${ldflags[*]}"
  for l in "${present[@]}"; do stat -c '%n %s %Y' "$l"; done
}
obj_key="$(inputs | sha256sum | cut -c1-16)"
key="$( { inputs; sha256sum "$0" | cut -d' ' -f1; } | sha256sum | cut -d' ' -f1)"
bench_bin="$out_dir/bin/llama-bench"
completion_bin="$out_dir/bin/llama-completion"
server_bin="$out_dir/bin/llama-server"
rpc_bin="$out_dir/bin/ggml-rpc-server"

mkdir -p "$out_dir"
exec 9>"$out_dir/.lock"
flock 9 # another build (a test and the bench at once) finishes first

if [ -x "$bench_bin" ] && [ -x "$completion_bin" ] && [ -x "$server_bin" ] && [ -x "$rpc_bin" ] &&
  [ "$(cat "$out_dir/stamp" 2>/dev/null)" = "$key" ]; then
  echo "$bench_bin"
  echo "$completion_bin"
  echo "$server_bin"
  echo "$rpc_bin"
  exit 0
fi

# --- Tool sources from the sdist (cached) -------------------------------------
have_sources() {
  local f
  for f in "${TOOL_FILES[@]}"; do [ -f "$src_dir/$f" ] || return 1; done
}
if ! have_sources; then
  log "fetching llama-cpp-python $LCP_VERSION's sdist for llama.cpp's tool sources"
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  # The sdist only: `--no-binary :all:` would also build pip's metadata step's
  # own build dependencies from source (minutes instead of seconds).
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$LCP_VERSION" -d "$dl" >&2 ||
    die "pip could not download llama-cpp-python==$LCP_VERSION"
  sdist="$dl/llama_cpp_python-$LCP_VERSION.tar.gz"
  [ -f "$sdist" ] || die "pip saved no $sdist"
  got="$(sha256sum "$sdist" | cut -d' ' -f1)"
  [ "$got" = "$LCP_SHA256" ] || die "sdist sha256 $got, expected $LCP_SHA256"
  members=()
  for f in "${TOOL_FILES[@]}" "${TOOL_DIRS[@]}"; do
    members+=("llama_cpp_python-$LCP_VERSION/vendor/llama.cpp/$f")
  done
  tar -xzf "$sdist" -C "$dl" "${members[@]}" || die "the sdist lacks the tool sources"
  rm -rf "$src_dir.tmp"
  mkdir -p "$src_dir.tmp"
  cp -r "$dl/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp/." "$src_dir.tmp/"
  rm -rf "$src_dir"
  mv "$src_dir.tmp" "$src_dir"
  rm -rf "$dl"
  trap - EXIT
fi

# --- Compile the front ends, link the crate's libraries -----------------------
log "building llama-bench, llama-completion, llama-server and ggml-rpc-server against $sys_out"
# Objects of other inputs are stale: only this set is kept.
for d in "$out_dir"/obj-*; do [ "$d" = "$out_dir/obj-$obj_key" ] || rm -rf "$d"; done
rm -rf "$out_dir/obj"
obj="$out_dir/obj-$obj_key"
ui="$out_dir/ui"
mkdir -p "$obj" "$out_dir/bin" "$ui"

# The web UI's asset table, empty (no UI): what ui-assets.cmake writes when
# it has no assets.
sed -e 's|^#cmakedefine LLAMA_UI_HAS_ASSETS 1|/* #undef LLAMA_UI_HAS_ASSETS */|' \
  -e 's|@N_ASSETS@|0|g' "$src_dir/tools/ui/ui.h.in" >"$ui/ui.h"
sed -e 's|@N_ASSETS@|0|g' -e 's|@ASSET_ARRAYS@||' -e 's|@ASSET_TABLE@||' \
  -e 's|@USE_GZIP@|false|' "$src_dir/tools/ui/ui.cpp.in" >"$ui/ui.cpp"
if grep -q '@' "$ui/ui.h" "$ui/ui.cpp"; then die "ui.h.in or ui.cpp.in has placeholders this script does not know"; fi

# (source, object, extra flags) triples, compiled $(nproc) at a time.
jobs=()
add() { jobs+=("$1" "$2" "$3"); }
add "$src_dir/tools/llama-bench/llama-bench.cpp" "$obj/llama-bench.o" ""
add "$src_dir/tools/llama-bench/main.cpp" "$obj/llama-bench-main.o" ""
add "$src_dir/tools/completion/completion.cpp" "$obj/completion.o" ""
add "$src_dir/tools/completion/main.cpp" "$obj/completion-main.o" ""
add "$src_dir/tools/rpc/rpc-server.cpp" "$obj/rpc-server.o" ""
# The sdist's server is a few commits apart from the crate's common/ library;
# the one helper it calls that the crate's common.h lacks is declared here,
# with llama.cpp's own non-Windows body (guarded, so a crate that has it wins).
common_h=""
for f in "${cxxflags[@]}"; do
  case "$f" in -I*) [ -f "${f#-I}/common.h" ] && [ -f "${f#-I}/arg.h" ] && common_h="${f#-I}/common.h" ;; esac
done
[ -n "$common_h" ] || die "no common.h among the include directories of common.cpp's compile command"
compat="$out_dir/compat.h"
{
  echo '// Generated by scripts/llama-tools.sh: what the sdist server calls and the crate lacks.'
  echo '#pragma once'
  echo '#include <fstream>'
  echo '#include <string>'
  if ! grep -q 'fs_open_ifstream' "$common_h"; then
    echo 'inline std::ifstream fs_open_ifstream(const std::string & fname, std::ios_base::openmode mode) {'
    echo '    return std::ifstream(fname, mode);'
    echo '}'
  fi
} >"$compat"
server_flags="-I$src_dir/tools/server -I$src_dir/tools/mtmd -I$ui -include $compat"
server_objs=()
for f in "${SERVER_SOURCES[@]}"; do
  add "$src_dir/tools/server/$f.cpp" "$obj/server/$f.o" "$server_flags"
  server_objs+=("$obj/server/$f.o")
done
add "$ui/ui.cpp" "$obj/server/ui.o" "-I$ui"
server_objs+=("$obj/server/ui.o")
# mtmd's library sources, as its CMakeLists.txt lists them.
mapfile -t mtmd_sources < <(
  sed -n '/^add_library(mtmd/,/)/p' "$src_dir/tools/mtmd/CMakeLists.txt" |
    grep -oE '[A-Za-z0-9_./-]+\.cpp'
)
[ "${#mtmd_sources[@]}" -gt 10 ] || die "could not read mtmd's sources from tools/mtmd/CMakeLists.txt"
for f in "${mtmd_sources[@]}"; do
  o="$obj/mtmd/${f//\//_}"
  add "$src_dir/tools/mtmd/$f" "${o%.cpp}.o" "-I$src_dir/tools/mtmd"
  server_objs+=("${o%.cpp}.o")
done
mkdir -p "$obj/server" "$obj/mtmd"

failed="$out_dir/failed"
rm -f "$failed"
compile() { # source object extra-flags
  [ -f "$2" ] && return 0 # compiled from the same inputs by an earlier run
  # shellcheck disable=SC2086 # the extra flags are words
  if "$cxx" "${cxxflags[@]}" $3 -std=c++17 -c "$1" -o "$2.tmp"; then
    mv "$2.tmp" "$2"
  else
    echo "$1" >>"$failed"
  fi
}
max_jobs="$(nproc)"
for ((i = 0; i < ${#jobs[@]}; i += 3)); do
  while [ "$(jobs -rp | wc -l)" -ge "$max_jobs" ]; do wait -n || true; done
  compile "${jobs[i]}" "${jobs[i + 1]}" "${jobs[i + 2]}" &
done
wait
[ ! -s "$failed" ] || die "compiling failed: $(tr '\n' ' ' <"$failed")"

link() { # output objects...
  local out="$1"
  shift
  "$cxx" "$@" "${present[@]}" "${ldflags[@]}" -o "$out.tmp" || die "linking $out failed"
  mv "$out.tmp" "$out"
}
link "$bench_bin" "$obj/llama-bench-main.o" "$obj/llama-bench.o"
link "$completion_bin" "$obj/completion-main.o" "$obj/completion.o"
link "$server_bin" "${server_objs[@]}"
link "$rpc_bin" "$obj/rpc-server.o"

# A binary that cannot start (a missing symbol at load time, a bad link) must
# not be cached as good.
"$bench_bin" --help >/dev/null 2>&1 || die "$bench_bin does not run"
"$server_bin" --help >/dev/null 2>&1 || die "$server_bin does not run"
"$rpc_bin" --help >/dev/null 2>&1 || die "$rpc_bin does not run"
echo "$key" >"$out_dir/stamp"
log "built $bench_bin, $completion_bin, $server_bin and $rpc_bin"
echo "$bench_bin"
echo "$completion_bin"
echo "$server_bin"
echo "$rpc_bin"
