#!/usr/bin/env bash
# Runs an aarch64 program on this x86_64 host: qemu-aarch64 from the toolchain root (Debian's qemu-user,
# statically linked), with the root as the sysroot its arm64 C library is found in (-L). Called explicitly:
# no binfmt handler is registered, so nothing changes for the rest of the host.
set -euo pipefail
ROOT=${AARCH64_TOOLCHAIN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/aarch64-toolchain}/root
exec "$ROOT/usr/bin/qemu-aarch64" -L "$ROOT" "$@"
