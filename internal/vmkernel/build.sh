#!/usr/bin/env bash
# build.sh builds Warden's microVM guest kernel from Debian's
# linux-source-6.1 package and installs it into the cache (`make
# microvm-kernel` runs it, as root). A shell script because every step is
# a kernel build tool; Go embeds this file and config.fragment and finds
# the kernel by their hash (internal/vmkernel).
#
# The kernel is installed atomically as $cache/kernel-<key>/ holding
# vmlinux, config (the final .config) and manifest.json. The key hashes
# the inputs (this script, the fragment) and the source package's version
# (not the tarball's bytes: a source changed without a new version is not
# noticed): a build with the same key prints the installed path and does
# nothing. The cache ($WARDEN_MICROVM_CACHE, for building elsewhere by
# hand) and every directory above it must be root's and writable by no
# one else; the source is unpacked and compiled as nobody, and root only
# installs the result and prunes all but the newest kernels.
# `build.sh --inputs` prints the inputs' hash only (Go's tests compare it);
# `build.sh --check-cache DIR` checks (and makes) DIR only.
set -euo pipefail
# The kernel is read by QEMU running as its own user.
umask 022

here=$(cd "$(dirname "$0")" && pwd)
cache=${WARDEN_MICROVM_CACHE:-/var/cache/warden/microvm}
fragment=$here/config.fragment
tarball=/usr/src/linux-source-6.1.tar.xz
# The kernel builds as nobody: only installing it needs root.
builder=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
# Kernels kept in the cache: this build's and the newest others, which
# other checkouts' wardens (other inputs) may still boot.
keep=3

die() { echo "build.sh: $*" >&2; exit 1; }
sum() { sha256sum <"$1" | cut -d' ' -f1; }

# check_dir refuses $1 unless it is a directory (not a link) of root's
# that no one else can write; an ancestor ($2 = ancestor) may be sticky
# (/tmp), as others cannot rename or remove what is not theirs there.
# The same rule as Find's (cache_linux.go).
check_dir() {
	local uid mode
	[ ! -L "$1" ] && [ -d "$1" ] || die "$1 is not a directory (or is a symbolic link): the cache must lie in root's real directories"
	read -r uid mode < <(stat -c '%u %a' -- "$1")
	mode=$((8#$mode))
	[ "$uid" = 0 ] || die "$1 belongs to uid $uid, not root: the cache must lie in root's directories"
	if ((mode & 8#022)) && ! [[ ${2:-} = ancestor && $((mode & 8#1000)) != 0 ]]; then
		die "$1 is writable by group or others (mode $(printf %o "$mode")): make it 0755"
	fi
}

# make_cache checks the cache directory and every directory above it,
# top down, creating what is missing with mode 0755, so that no one else
# can replace a directory between its check and its use.
make_cache() {
	local p= part parts
	[[ $cache = /* && /$cache/ != */../* && /$cache/ != */./* ]] || die "cache \"$cache\" is not an absolute path without . or .."
	check_dir / ancestor
	IFS=/ read -ra parts <<<"${cache#/}"
	for part in "${parts[@]}"; do
		[ -n "$part" ] || continue
		p=$p/$part
		[ -e "$p" ] || [ -L "$p" ] || mkdir -m 0755 -- "$p"
		if [ "$p" = "${cache%/}" ]; then check_dir "$p"; else check_dir "$p" ancestor; fi
	done
}

inputs=$(printf 'config.fragment %s\nbuild.sh %s\n' "$(sum "$fragment")" "$(sum "$here/build.sh")" | sha256sum | cut -d' ' -f1)
case "${1:-}" in
--inputs)
	echo "$inputs"
	exit 0
	;;
--check-cache)
	# Checks (and makes) the cache $2 only: for the Go tests of make_cache.
	[ $# = 2 ] || die "--check-cache takes one directory"
	cache=$2
	make_cache
	exit 0
	;;
esac
[ $# = 0 ] || die "unknown arguments \"$*\": build.sh takes none (or --inputs, --check-cache DIR)"

[ -r "$tarball" ] || die "$tarball is missing: install linux-source-6.1 (make microvm-kernel does)"
source=$(dpkg-query -W -f='${Version}' linux-source-6.1) ||
	die "linux-source-6.1 is not installed: make microvm-kernel installs it"
[[ $source =~ ^[A-Za-z0-9.+~:-]+$ ]] || die "unexpected linux-source-6.1 version \"$source\""

key=$(printf 'inputs %s\nsource %s\n' "$inputs" "$source" | sha256sum | cut -d' ' -f1)
dest=$cache/kernel-$key

make_cache
# The lock is the directory itself: no file to plant a link at.
exec 9<"$cache"
flock 9
if grep -qF "\"key\":\"$key\"" "$dest/manifest.json" 2>/dev/null && [ -s "$dest/vmlinux" ] && [ -s "$dest/config" ]; then
	echo "$dest/vmlinux"
	exit 0
fi
# Under the lock, a leftover build or prune directory is a killed
# build's, and a $dest without a valid manifest a broken install.
rm -rf "$cache"/.build-* "$cache"/.prune-*
if [ -e "$dest" ] || [ -L "$dest" ]; then
	echo "build.sh: removing the incomplete $dest" >&2
	rm -rf -- "$dest"
fi

# prune removes all but the newest $keep kernels: each is first renamed
# out of Find's sight (one atomic rename), then deleted.
prune() {
	local d gone n=0
	while IFS= read -r d; do
		n=$((n + 1))
		[ "$n" -gt "$keep" ] && [ "$d" != "$dest" ] || continue
		gone=$(mktemp -u "$cache/.prune-XXXXXX")
		mv -T -- "$d" "$gone" && rm -rf -- "$gone" || echo "build.sh: pruning $d failed" >&2
	done < <(ls -1dt -- "$cache"/kernel-*)
}

tmp=$(mktemp -d "$cache/.build-XXXXXX")
chmod 0755 "$tmp"
cleanup() { rm -rf "$tmp" || echo "build.sh: removing $tmp failed" >&2; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
work=$tmp/work
mkdir -m 0700 "$work"
cp "$fragment" "$work/config.fragment"
chown -R nobody:nogroup "$work"

echo "build.sh: building the microVM kernel from linux-source $source in $tmp" >&2
"${builder[@]}" tar -xJf "$tarball" -C "$work" --no-same-owner
src=$work/linux-source-6.1
cd "$src"
export KBUILD_BUILD_USER=warden KBUILD_BUILD_HOST=warden KBUILD_BUILD_VERSION=1
# The build stamp (uname -v) is the source's, not the clock's: the same
# inputs build the same kernel.
KBUILD_BUILD_TIMESTAMP=$(date -u -r "$tarball" '+%Y-%m-%d %H:%M:%S UTC')
export KBUILD_BUILD_TIMESTAMP
"${builder[@]}" make -s tinyconfig
"${builder[@]}" scripts/kconfig/merge_config.sh -m .config "$work/config.fragment" >/dev/null
"${builder[@]}" make -s olddefconfig

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

"${builder[@]}" make -s -j"$(nproc)" vmlinux
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
prune
echo "$dest/vmlinux"
