#!/bin/bash
# Builds msr_helper.ko against kernel headers other than the ones the QEMU test boots, so that an
# API change in a newer kernel shows up here and not on a user's machine.
#
#   build-check.sh WORKDIR [KVER...]     (default: the newest linux-headers-*-amd64 apt knows)
#
# Headers that are installed (/lib/modules/KVER/build) are used as they are. Others are
# downloaded and unpacked into WORKDIR (apt-get download + dpkg-deb -x, never installed: the
# headers package depends on its kernel image), with the -common and linux-kbuild packages the
# headers need. The build must give no warning. Exit status 0 = every version built.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODSRC=$(cd "$HERE/.." && pwd)
WORK=${1:?work dir}
shift
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)

log() { echo "[build-check] $*"; }

versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
	newest=$(apt-cache search --names-only '^linux-headers-[0-9].*-amd64$' 2>/dev/null |
		awk '{print $1}' | grep -v -e '-cloud-' -e '-rt-' | sed 's/^linux-headers-//' | sort -V | tail -1)
	[ -n "$newest" ] || { log "no linux-headers-*-amd64 known to apt"; exit 1; }
	versions=("$newest")
fi

# KVER -> a directory to build against (stdout); downloads and unpacks when not installed.
headers_dir() {
	local v=$1 root=$WORK/headers-$1 dl common kbuild deb
	if [ -z "${MSRH_HEADERS_DOWNLOAD:-}" ] && [ -f "/lib/modules/$v/build/Makefile" ]; then
		echo "/lib/modules/$v/build"
		return 0
	fi
	if [ ! -f "$root/.done" ]; then
		rm -rf "$root" && mkdir -p "$root/dl" || return 1
		common=$(apt-cache depends "linux-headers-$v" | sed -n 's/.*Depends: \(linux-headers-.*-common\)$/\1/p' | head -1)
		kbuild=$(apt-cache depends "linux-headers-$v" | sed -n 's/.*Depends: \(linux-kbuild-.*\)$/\1/p' | head -1)
		[ -n "$common" ] && [ -n "$kbuild" ] || { log "cannot tell the packages linux-headers-$v needs" >&2; return 1; }
		(cd "$root/dl" && apt-get download -qq "linux-headers-$v" "$common" "$kbuild") >&2 ||
			{ log "apt-get download linux-headers-$v $common $kbuild failed" >&2; return 1; }
		for deb in "$root"/dl/*.deb; do dpkg-deb -x "$deb" "$root" || return 1; done
		rm -rf "$root/dl"
		# the headers' Makefile includes the -common one by absolute path
		sed -i "s|include /usr/src/|include $root/usr/src/|" "$root/usr/src/linux-headers-$v/Makefile" || return 1
		touch "$root/.done"
	fi
	echo "$root/usr/src/linux-headers-$v"
}

rc=0
for v in "${versions[@]}"; do
	kdir=$(headers_dir "$v") || { log "$v: headers not available"; rc=1; continue; }
	b=$WORK/build-$v
	rm -rf "$b" && mkdir -p "$b/include/uapi"
	cp "$MODSRC/msr_helper.c" "$MODSRC/msr_helper_logic.h" "$MODSRC/Kbuild" "$b/" &&
		cp "$MODSRC/include/uapi/msr_helper.h" "$b/include/uapi/" || { rc=1; continue; }
	if ! make -C "$kdir" M="$b" modules >"$b/build.log" 2>&1; then
		cat "$b/build.log"
		log "$v: FAILED to build"
		rc=1
		continue
	fi
	if grep -E 'warning|error' "$b/build.log" | grep -v 'Skipping BTF'; then
		log "$v: built with warnings"
		rc=1
		continue
	fi
	log "$v: msr_helper.ko built ($(modinfo -F vermagic "$b/msr_helper.ko" 2>/dev/null))"
done
exit $rc
