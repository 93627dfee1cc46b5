#!/usr/bin/env bash
# Makes the isolated Debian root that builds and runs the aarch64 wheel on an x86_64 host (idempotent: a root
# that already matches tools/aarch64/toolchain.lock is left alone). See docs/packaging.md, "aarch64".
#
# The root (amd64, with arm64 as a foreign architecture, made by mmdebstrap) holds Debian's rustc and cargo,
# the aarch64 standard library (libstd-rust-dev:arm64) and rust-src of one version, the arm64 C library (the
# sysroot qemu-aarch64 -L runs the binary against), qemu-user (static, run from the host as is; no binfmt
# handler is registered) and python3 with the wheel tools (maturin, ziglang, auditwheel: $WHEEL_TOOLS, the
# Makefile's pins) in /opt/wheel-tools.
#
# Pinned means: the versions are recorded in tools/aarch64/toolchain.lock (committed), every .deb the root
# was made from is kept in $AARCH64_TOOLCHAIN_DIR/debs, and
#   - with a complete cache for the lock, the root is made from the cache alone (a local flat repository,
#     no network);
#   - otherwise from the mirror, and a version that differs from the lock is an error naming both (set
#     AARCH64_REPIN=1 to record the mirror's versions instead).
# Suites tried in order: the lock's, then unstable, then testing (unstable's arm64 build can lag amd64 for
# days; Multi-Arch then refuses to install rustc and libstd-rust-dev:arm64 together).
#
# Needs root (mmdebstrap --mode=root, chroot), mmdebstrap, dpkg-dev and Debian's archive keyring (installed
# with apt-get if missing).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCK=$REPO/tools/aarch64/toolchain.lock
DIR=${AARCH64_TOOLCHAIN_DIR:-$REPO/build/aarch64-toolchain}
ROOT=$DIR/root
CACHE=$DIR/debs
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WHEEL_TOOLS=${WHEEL_TOOLS:?WHEEL_TOOLS (the Makefile passes its pins)}
# What the root is made of; the first six are the ones the lock pins.
PINNED=(rustc cargo rust-src libstd-rust-dev:arm64 libc6:arm64 qemu-user)
EXTRA=(python3 python3-venv ca-certificates)

say() { printf 'aarch64 toolchain: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap --mode=root and chroot)"
[ "$(uname -m)" = x86_64 ] || die "made for an x86_64 host; on an aarch64 host plain 'make wheel' builds the aarch64 wheel"
missing=()
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v dpkg-scanpackages >/dev/null || missing+=(dpkg-dev)
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring) # on Ubuntu
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]} with apt-get"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# "<package>:<arch> <version>" per pinned package, sorted, as dpkg sees them in the root $1.
versions_in() {
	chroot "$1" dpkg-query -W -f '${Package}:${Architecture} ${Version}\n' "${PINNED[@]}" | sort
}
lock_versions() { grep -v '^#' "$LOCK" | grep -v '^suite ' | sort; }
lock_suite() { sed -n 's/^suite //p' "$LOCK" 2>/dev/null; }

# The standard library for aarch64 must be the compiler's own version (and rust-src with it).
check_one_rust() {
	local root=$1 rustc std src
	rustc=$(chroot "$root" dpkg-query -W -f '${Version}' rustc)
	std=$(chroot "$root" dpkg-query -W -f '${Version}' libstd-rust-dev:arm64)
	src=$(chroot "$root" dpkg-query -W -f '${Version}' rust-src)
	[ "$rustc" = "$std" ] && [ "$rustc" = "$src" ] ||
		die "rustc is $rustc but libstd-rust-dev:arm64 is $std and rust-src $src: they must be one version"
}

# The wheel tools inside the root, pinned by the Makefile; redone when the pins change.
ensure_wheel_tools() {
	local stamp=$ROOT/opt/wheel-tools/.tools
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$WHEEL_TOOLS" ] && return
	say "installing $WHEEL_TOOLS into $ROOT/opt/wheel-tools"
	rm -rf "$ROOT/opt/wheel-tools"
	"$REPO/tools/aarch64/in-root.sh" python3 -m venv /opt/wheel-tools
	# shellcheck disable=SC2086 # one word per requirement
	"$REPO/tools/aarch64/in-root.sh" /opt/wheel-tools/bin/pip install -q --disable-pip-version-check $WHEEL_TOOLS
	printf '%s' "$WHEEL_TOOLS" >"$stamp"
}

if [ -f "$ROOT/.toolchain.lock" ] && [ -f "$LOCK" ] && cmp -s "$ROOT/.toolchain.lock" "$LOCK"; then
	ensure_wheel_tools
	say "$ROOT is up to date ($(grep '^rustc:' "$LOCK"))"
	exit 0
fi

mkdir -p "$DIR" "$CACHE"
NEW=$DIR/root.new
rm -rf "$NEW"
started=$(date +%s)
common=(--mode=root --variant=apt --architectures=amd64,arm64 --format=directory
	--include="$(IFS=,; echo "${PINNED[*]},${EXTRA[*]}")"
	--skip=essential/unlink
	--customize-hook="sync-out /var/cache/apt/archives $CACHE")

made=
if [ -f "$LOCK" ] && [ -f "$CACHE/.lock" ] && cmp -s "$CACHE/.lock" "$LOCK"; then
	# Every .deb of the pinned root is cached: a flat repository of them, no network.
	say "making the root from the cached .debs in $CACHE (no network)"
	(cd "$CACHE" && dpkg-scanpackages --multiversion . 2>/dev/null >Packages)
	mmdebstrap "${common[@]}" --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
		"$(lock_suite)" "$NEW" "deb [trusted=yes] file://$CACHE ./" && made=cache
fi
if [ -z "$made" ]; then
	suites=$(printf '%s\n' "$(lock_suite)" unstable testing | awk 'NF && !seen[$0]++')
	for suite in $suites; do
		say "making the root from $MIRROR $suite (cached .debs reused where the versions match)"
		# The mirror here serves a Release file past its Valid-Until date; the signature is still checked.
		if mmdebstrap "${common[@]}" --aptopt='Acquire::Check-Valid-Until "false"' \
			--setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
			--setup-hook="sync-in $CACHE /var/cache/apt/archives" \
			"$suite" "$NEW" "$MIRROR"; then
			made=$suite
			break
		fi
		say "$suite did not install (above: apt's reason); trying the next suite"
		rm -rf "$NEW"
	done
	[ -n "$made" ] || die "neither unstable nor testing installs ${PINNED[*]} (apt's errors above). The next" \
		"fallback, not automated: a root without libstd-rust-dev:arm64, and the standard library built from" \
		"rust-src (cargo -Zbuild-std=std with RUSTC_BOOTSTRAP=1; docs/packaging.md)"
fi
check_one_rust "$NEW"
suite=$made
[ "$made" = cache ] && suite=$(lock_suite)
found=$(versions_in "$NEW")
if [ -f "$LOCK" ] && [ "$found" != "$(lock_versions)" ] && [ "${AARCH64_REPIN:-0}" != 1 ]; then
	say "the mirror's versions differ from tools/aarch64/toolchain.lock:"
	{ diff <(lock_versions) <(printf '%s\n' "$found") || true; } | sed -n 's/^< /  pinned:  /p; s/^> /  mirror:  /p' >&2
	say "the root made from them is left in $NEW. Either bring the pinned .debs into $CACHE"
	say "(with the .lock file of the machine that made them), or record the new versions: AARCH64_REPIN=1 $0"
	exit 1
fi
if [ ! -f "$LOCK" ] || [ "${AARCH64_REPIN:-0}" = 1 ]; then
	{
		echo "# The Debian packages the aarch64 toolchain root is made of (tools/aarch64/toolchain.sh writes this"
		echo "# with AARCH64_REPIN=1; docs/packaging.md). <package>:<arch> <version>, and the suite they came from."
		echo "suite $suite"
		printf '%s\n' "$found"
	} >"$LOCK"
	say "recorded $LOCK"
fi
# The cache now holds every .deb of this root: later roots are made from it alone.
rm -f "$CACHE"/Packages "$CACHE"/lock "$CACHE"/partial -r
chroot "$NEW" dpkg-query -W -f '${Package}:${Architecture} ${Version}\n' | sort >"$CACHE/manifest"
cp "$LOCK" "$CACHE/.lock"
cp "$LOCK" "$NEW/.toolchain.lock"
rm -rf "$ROOT"
mv "$NEW" "$ROOT"
ensure_wheel_tools
say "made $ROOT in $(($(date +%s) - started)) s ($(du -sh "$ROOT" | cut -f1); .debs $(du -sh "$CACHE" | cut -f1))"
