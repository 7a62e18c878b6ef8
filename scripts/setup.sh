#!/usr/bin/env bash
# Installs what building headroom needs on a Debian machine, only when missing:
# llama-cpp-sys-2 compiles llama.cpp with CMake and generates bindings with
# libclang; the end-to-end tests drive the terminal UI through tmux, measure
# peak RSS with GNU time, cap address space with prlimit and count the bytes
# a plan reads with strace, and drive `serve` with the official openai client
# from a virtual environment. A test whose tool is missing fails; it never skips.
set -euo pipefail

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v clang >/dev/null 2>&1 || need+=(clang)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
[ -x /usr/bin/time ] || need+=(time)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v prlimit >/dev/null 2>&1 || need+=(util-linux)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-pip)
# The serve tests make a virtual environment for the official openai client.
python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# llama.cpp's Vulkan backend (built by default): glslc compiles its shaders,
# libvulkan-dev is the loader it links (libvulkan.so.1 at run time),
# spirv-headers the SPIR-V definitions its CMake asks for, and
# Mesa's lavapipe is a Vulkan device on any machine, which the tests use.
command -v glslc >/dev/null 2>&1 || need+=(glslc)
dpkg -s libvulkan-dev >/dev/null 2>&1 || need+=(libvulkan-dev)
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
dpkg -s spirv-headers >/dev/null 2>&1 || need+=(spirv-headers)
command -v curl >/dev/null 2>&1 || need+=(curl)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# ggml-vulkan.cpp uses VK_EXT_layer_settings, which Debian 12's Vulkan
# headers (1.3.239) lack. When the system's headers are older, Debian 13's
# libvulkan-dev (headers only are used: its loader would need a newer libc) is
# fetched from Debian's package pool, checked, and unpacked into .deps/;
# .cargo/config.toml puts its include folder on CPATH for every cargo command,
# so the README's commands all build llama.cpp against the same headers.
vk_dir=.deps/vulkan-headers
vk_deb=libvulkan-dev_1.4.309.0-1_amd64.deb
vk_sha=8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a
if ! grep -qs VK_EXT_LAYER_SETTINGS_EXTENSION_NAME /usr/include/vulkan/vulkan_core.h \
  && ! grep -qs VK_EXT_LAYER_SETTINGS_EXTENSION_NAME "$vk_dir/usr/include/vulkan/vulkan_core.h"; then
  echo "setup: fetching Vulkan headers ($vk_deb) into $vk_dir" >&2
  mkdir -p .deps
  tmp="$(mktemp .deps/vk.XXXXXX)"
  curl -fsSL --retry 3 -o "$tmp" "https://deb.debian.org/debian/pool/main/v/vulkan-loader/$vk_deb"
  if ! echo "$vk_sha  $tmp" | sha256sum -c --status; then
    rm -f "$tmp"
    echo "setup: $vk_deb does not match its sha256 ($vk_sha)" >&2
    exit 1
  fi
  rm -rf "$vk_dir" && dpkg-deb -x "$tmp" "$vk_dir" && rm -f "$tmp"
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is missing; install Rust from https://rustup.rs first" >&2
  exit 1
fi
