#!/usr/bin/env bash
# Packs what a bare x86-64 machine (no Debian, no gdb, no network: the lent device machines) needs
# to run the unit and integration tests in a chroot: Debian 12's gdb, gdbserver, python3 + pytest,
# gzip and their libraries (from this machine's packages), and the built server, test binaries and
# inferiors. Then, on that machine, from the repository root:  bash tests/device/run.sh
#
#   bash tests/device/make-bundle.sh [BUILD_DIR]     # writes .dev/rootfs.tar.xz and .dev/build.tar.xz
#
# .dev/ must be ignored (echo /.dev/ >> .git/info/exclude) and carried. Not packed: gcc (too big:
# the tests that compile at run time fail there), lldb, node, genhtml, dot.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}; case "$build" in /*) ;; *) build=$PWD/$build ;; esac
mkdir -p .dev
pkgs="gdb gdbserver python3-minimal python3 python3-pytest python3-pytest-xdist xz-utils binutils bsdextrautils libc6-dbg libcapstone4 libfmt9 coreutils bash dash procps util-linux findutils grep sed gawk gzip"
list=$(mktemp); trap 'rm -f "$list" "$list".*' EXIT
for p in $(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
             --no-replaces --no-enhances --installed $pkgs 2>/dev/null | grep -v '^ ' | sort -u); do
  dpkg -L "$p" 2>/dev/null || true
done | grep -v -E '^/usr/share/(doc|man|info|locale|lintian|bug)|__pycache__|/python3.11/(test|idlelib|tkinter|lib2to3|ensurepip|turtledemo)/' > "$list.pkg"
# Libraries the packages' ELF files load that their Depends do not name (gdb: boost_regex, ICU).
for f in $(cat "$list.pkg"); do
  if [[ -f $f && ! -L $f ]] && file -b "$f" 2>/dev/null | grep -q ELF; then
    ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
  fi
done | sort -u | while read -r l; do echo "$l"; readlink -f "$l"; done > "$list.libs"
printf '%s\n' /etc/passwd /etc/group /etc/hosts /etc/ld.so.cache /etc/nsswitch.conf > "$list.etc"
# usrmerge: store everything under usr/; run.sh makes /bin /lib /lib64 /sbin the links.
cat "$list.pkg" "$list.libs" "$list.etc" | sed -E 's#^/(lib|bin|sbin|lib64)(/|$)#/usr/\1\2#' \
  | grep -v -E '^/usr/(lib|bin|sbin|lib64)$' | sort -u > "$list"
tar --no-recursion -cf - -T "$list" 2>/dev/null | xz -T0 -9 > .dev/rootfs.tar.xz
stage=$(mktemp -d); trap 'rm -rf "$stage" "$list" "$list".*' EXIT
(cd "$build" && cp -a --parents inferiors tools tests/inferiors tests/tools tests/support "$stage"/ 2>/dev/null || true)
find "$stage" -name CMakeFiles -prune -exec rm -rf {} +
mkdir -p "$stage/server" "$stage/tests"
for f in server/branchstub tests/unit_protocol tests/unit_backend tests/unit_server tests/branchstub-testfeeds; do
  strip -o "$stage/$f" "$build/$f"
done
(cd "$stage" && tar cf - .) | xz -T0 -9 > .dev/build.tar.xz
ls -la .dev
