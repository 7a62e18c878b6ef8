#!/usr/bin/env bash
# Builds llama.cpp's own command-line tools, `llama-bench` and
# `llama-completion`, against the very llama.cpp that headroom links, so the
# run-speed benchmark (app/benches/run_speed.rs) compares headroom with
# llama.cpp on equal terms: same sources, same CPU flags, same static libs.
#
# llama-cpp-sys-2's crate leaves out llama.cpp's tools/ tree, but cargo has
# already compiled everything else (ggml, llama, common) into static libs under
# target/release/build/llama-cpp-sys-2-*/out. Only the two tools' front ends
# are missing: their sources come from the llama-cpp-python sdist on PyPI
# (vendor/llama.cpp/tools), pinned by version and sha256; they are compiled
# with the flags CMake used for llama.cpp's common/ library (read from its
# compile_commands.json) and linked with the crate's static libs. llama.cpp
# itself is never rebuilt.
#
# Idempotent: the tool sources are cached in $HEADROOM_CACHE_DIR (default
# ~/.cache/headroom) and the binaries in target/llama-tools; both are reused
# while the crate's libraries and this script's inputs are unchanged.
#
# Prints two lines on stdout: the path of llama-bench, then of llama-completion.
# Progress goes to stderr.
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
  LICENSE
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
# A CPU-only build (no CUDA/Vulkan/Metal libraries to link), the newest one when
# several feature sets were built.
find_sys_out() {
  if [ -n "${LLAMA_SYS_OUT:-}" ]; then
    echo "$LLAMA_SYS_OUT"
    return
  fi
  local best="" best_t=0 d t
  for d in "$target_dir"/release/build/llama-cpp-sys-2-*/out; do
    [ -f "$d/lib/libllama.a" ] && [ -f "$d/build/compile_commands.json" ] || continue
    if grep -Eq '^GGML_(CUDA|VULKAN|METAL|HIP|SYCL):BOOL=ON' "$d/build/CMakeCache.txt"; then
      continue
    fi
    t=$(stat -c %Y "$d/lib/libllama.a")
    if [ "$t" -gt "$best_t" ]; then best="$d" best_t="$t"; fi
  done
  echo "$best"
}
sys_out="$(find_sys_out)"
[ -n "$sys_out" ] && [ -f "$sys_out/lib/libllama.a" ] ||
  die "no CPU-only llama-cpp-sys-2 build under $target_dir/release/build (run \`cargo build --release -p headroom\` first, or set LLAMA_SYS_OUT)"
build="$sys_out/build"

libs=(
  "$build/common/libllama-common.a"
  "$build/common/libllama-common-base.a"
  "$build/vendor/cpp-httplib/libcpp-httplib.a"
  "$build/vendor/hash/libvendor-hash.a"
  "$sys_out/lib/libllama.a"
  "$sys_out/lib/libggml.a"
  "$sys_out/lib/libggml-cpu.a"
  "$sys_out/lib/libggml-base.a"
)
present=()
for l in "${libs[@]}"; do
  if [ -f "$l" ]; then present+=("$l"); fi
done
[ -f "$build/common/libllama-common.a" ] ||
  die "$build has no libllama-common.a (llama-cpp-sys-2 built without llama.cpp's common library)"

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
ldflags+=(-lpthread -ldl -lm)

# --- Reuse when nothing changed -----------------------------------------------
key="$(
  {
    echo "lcp $LCP_VERSION $LCP_SHA256"
    echo "cxx $cxx ${cxxflags[*]} ${ldflags[*]}"
    for l in "${present[@]}"; do stat -c '%n %s %Y' "$l"; done
    sha256sum "$0" | cut -d' ' -f1
  } | sha256sum | cut -d' ' -f1
)"
bench_bin="$out_dir/bin/llama-bench"
completion_bin="$out_dir/bin/llama-completion"

mkdir -p "$out_dir"
exec 9>"$out_dir/.lock"
flock 9 # another build (a test and the bench at once) finishes first

if [ -x "$bench_bin" ] && [ -x "$completion_bin" ] && [ "$(cat "$out_dir/stamp" 2>/dev/null)" = "$key" ]; then
  echo "$bench_bin"
  echo "$completion_bin"
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
  for f in "${TOOL_FILES[@]}"; do members+=("llama_cpp_python-$LCP_VERSION/vendor/llama.cpp/$f"); done
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
log "building llama-bench and llama-completion against $sys_out"
obj="$out_dir/obj"
mkdir -p "$obj" "$out_dir/bin"
compile() { # source object
  "$cxx" "${cxxflags[@]}" -std=c++17 -c "$1" -o "$2" || die "compiling $1 failed"
}
link() { # output objects...
  local out="$1"
  shift
  "$cxx" "$@" "${present[@]}" "${ldflags[@]}" -o "$out.tmp" || die "linking $out failed"
  mv "$out.tmp" "$out"
}
compile "$src_dir/tools/llama-bench/llama-bench.cpp" "$obj/llama-bench.o"
compile "$src_dir/tools/llama-bench/main.cpp" "$obj/llama-bench-main.o"
compile "$src_dir/tools/completion/completion.cpp" "$obj/completion.o"
compile "$src_dir/tools/completion/main.cpp" "$obj/completion-main.o"
link "$bench_bin" "$obj/llama-bench-main.o" "$obj/llama-bench.o"
link "$completion_bin" "$obj/completion-main.o" "$obj/completion.o"

# A binary that cannot start (a missing symbol at load time, a bad link) must
# not be cached as good.
"$bench_bin" --help >/dev/null 2>&1 || die "$bench_bin does not run"
echo "$key" >"$out_dir/stamp"
log "built $bench_bin and $completion_bin"
echo "$bench_bin"
echo "$completion_bin"
