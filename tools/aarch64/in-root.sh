#!/usr/bin/env bash
# Runs a command inside the aarch64 toolchain root (tools/aarch64/toolchain.sh makes it), in the current
# directory. The repository, the directories in $IN_ROOT_BIND (colon-separated: the Cargo target directory
# when it lies outside the repository, the output folder) and the host's Cargo home (its registry and
# download cache, shared) are bind-mounted at the same paths, so paths mean the same inside and out. The
# mounts live in a private mount namespace and vanish with the command; the network and the trust store
# (/etc/ssl/certs/ca-certificates.crt) are the host's.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROOT=${AARCH64_TOOLCHAIN_DIR:-$REPO/build/aarch64-toolchain}/root
[ -d "$ROOT/usr/lib/rustlib/aarch64-unknown-linux-gnu" ] ||
	{ echo "no aarch64 toolchain root at $ROOT: make aarch64-toolchain" >&2; exit 1; }
CARGO_HOME_DIR=${CARGO_HOME:-$HOME/.cargo}
mkdir -p "$CARGO_HOME_DIR"
binds=("$REPO")
IFS=: read -r -a extra <<<"${IN_ROOT_BIND:-}"
for d in "${extra[@]}"; do [ -n "$d" ] && mkdir -p "$d" && binds+=("$(cd "$d" && pwd)"); done

# shellcheck disable=SC2016 # expanded by the inner shell
exec unshare --mount --propagation private -- bash -euo pipefail -c '
	root=$1 cargo_home=$2 cwd=$3 n=$4; shift 4
	for ((i = 0; i < n; i++)); do
		mkdir -p "$root$1" && mount --rbind "$1" "$root$1"; shift
	done
	mkdir -p "$root/root/.cargo" && mount --bind "$cargo_home" "$root/root/.cargo"
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev"
	cp -L /etc/resolv.conf "$root/etc/resolv.conf"
	# The trust store of the host (with any CA its HTTPS proxy signs with), for pip and cargo.
	[ -f /etc/ssl/certs/ca-certificates.crt ] &&
		mount --bind -o ro /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
	exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
		PATH=/opt/wheel-tools/bin:/usr/local/bin:/usr/bin:/bin \
		${CARGO_TERM_COLOR:+CARGO_TERM_COLOR=$CARGO_TERM_COLOR} \
		/bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
' _ "$ROOT" "$CARGO_HOME_DIR" "$PWD" "${#binds[@]}" "${binds[@]}" "$@"
