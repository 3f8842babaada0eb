#!/usr/bin/env bash
# build.sh builds Warden's microVM guest kernel from Debian's
# linux-source-6.1 package and installs it into the cache (`make
# microvm-kernel` runs it, as root). A shell script because every step is
# a kernel build tool; Go embeds this file and config.fragment and finds
# the kernel by their hash (internal/vmkernel).
#
# The kernel is installed atomically as $cache/kernel-<key>/ holding
# vmlinux, config (the final .config) and manifest.json. The key hashes
# the inputs (this script, the fragment) and the source package version:
# a build with the same key prints the installed path and does nothing.
# `build.sh --inputs` prints the inputs' hash only (Go's tests compare it).
set -euo pipefail
# The kernel is read by QEMU running as its own user.
umask 022

here=$(cd "$(dirname "$0")" && pwd)
cache=${WARDEN_MICROVM_CACHE:-/var/cache/warden/microvm}
fragment=$here/config.fragment
tarball=/usr/src/linux-source-6.1.tar.xz

die() { echo "build.sh: $*" >&2; exit 1; }
sum() { sha256sum <"$1" | cut -d' ' -f1; }
inputs=$(printf 'config.fragment %s\nbuild.sh %s\n' "$(sum "$fragment")" "$(sum "$here/build.sh")" | sha256sum | cut -d' ' -f1)
if [ "${1:-}" = --inputs ]; then
	echo "$inputs"
	exit 0
fi
[ $# = 0 ] || die "unknown arguments \"$*\": build.sh takes none (or --inputs)"

[ -r "$tarball" ] || die "$tarball is missing: install linux-source-6.1 (make microvm-kernel does)"
source=$(dpkg-query -W -f='${Version}' linux-source-6.1) ||
	die "linux-source-6.1 is not installed: make microvm-kernel installs it"
[[ $source =~ ^[A-Za-z0-9.+~:-]+$ ]] || die "unexpected linux-source-6.1 version \"$source\""

key=$(printf 'inputs %s\nsource %s\n' "$inputs" "$source" | sha256sum | cut -d' ' -f1)
dest=$cache/kernel-$key

mkdir -p "$cache"
chmod 0755 "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$dest/manifest.json" ]; then
	echo "$dest/vmlinux"
	exit 0
fi
# Under the lock, a leftover build directory is a killed build's.
rm -rf "$cache"/.build-*

tmp=$(mktemp -d "$cache/.build-XXXXXX")
cleanup() { rm -rf "$tmp" || echo "build.sh: removing $tmp failed" >&2; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "build.sh: building the microVM kernel from linux-source $source in $tmp" >&2
tar -xJf "$tarball" -C "$tmp" --no-same-owner
src=$tmp/linux-source-6.1
cd "$src"
export KBUILD_BUILD_USER=warden KBUILD_BUILD_HOST=warden KBUILD_BUILD_VERSION=1
# The build stamp (uname -v) is the source's, not the clock's: the same
# inputs build the same kernel.
KBUILD_BUILD_TIMESTAMP=$(date -u -r "$tarball" '+%Y-%m-%d %H:%M:%S UTC')
export KBUILD_BUILD_TIMESTAMP
make -s tinyconfig
scripts/kconfig/merge_config.sh -m .config "$fragment" >/dev/null
make -s olddefconfig

# Every option of the fragment must come out as asked: Kconfig drops a
# value silently when a dependency is missing.
missed=()
while IFS= read -r line; do
	if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
		grep -qxF "$line" .config || missed+=("$line (got: $(grep -E "^(# )?${BASH_REMATCH[1]}[= ]" .config || echo unset))")
	elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
		! grep -q "^${BASH_REMATCH[1]}=" .config || missed+=("$line (got: $(grep "^${BASH_REMATCH[1]}=" .config))")
	fi
done <"$fragment"
if [ ${#missed[@]} -gt 0 ]; then
	printf 'build.sh: config option not as asked: %s\n' "${missed[@]}" >&2
	die "${#missed[@]} option(s) of config.fragment did not come out as asked: fix their dependencies"
fi

make -s -j"$(nproc)" vmlinux
# The symbol table is of no use to QEMU (it loads the segments); strip
# keeps the notes, among them the PVH entry point QEMU boots through.
strip --strip-all -o "$tmp/vmlinux" vmlinux
notes=$(readelf -n "$tmp/vmlinux")
grep -qE '^ +Xen .*\(0x00000012\)$' <<<"$notes" ||
	die "vmlinux has no PVH entry note (Xen note 0x12): QEMU cannot boot it"

out=$tmp/out
mkdir "$out"
mv "$tmp/vmlinux" "$out/vmlinux"
cp .config "$out/config"
printf '{"key":"%s","inputs":"%s","source":"%s","built":"%s"}\n' \
	"$key" "$inputs" "$source" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$out/manifest.json"
chmod 0644 "$out"/*
chmod 0755 "$out"
mv -T "$out" "$dest"
for d in "$cache"/kernel-*; do
	[ "$d" = "$dest" ] || rm -rf "$d" || echo "build.sh: pruning $d failed" >&2
done
echo "$dest/vmlinux"
