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

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is missing; install Rust from https://rustup.rs first" >&2
  exit 1
fi
