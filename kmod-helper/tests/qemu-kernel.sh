# Sourced (bash) by the QEMU guest tests: kmod-helper/tests/qemu-selftest.sh and
# tests/vendor-vm/run.sh. Debian 12's own kernel, taken from its .deb without installing it.
# The caller defines log MESSAGE and die MESSAGE (die exits).

# qemu_kernel_fetch WORK "MODULES": sets KVER (the ABI of linux-headers-amd64, so a module built
# against the installed headers loads), KIMG (vmlinuz-$KVER) and KMODS (a folder holding each
# named module's .ko). Both are cached in WORK; the .deb is downloaded only when one is missing,
# and modules are added to KMODS, never removed (callers sharing a WORK need different ones).
qemu_kernel_fetch() {
	local work=$1 mods=$2 have_all=1 m deb pats=()
	dpkg -s linux-headers-amd64 >/dev/null 2>&1 || die "linux-headers-amd64 is not installed (apt-get install linux-headers-amd64)"
	KVER=$(dpkg -s linux-headers-amd64 | sed -n 's/^Depends:.*linux-headers-\([0-9][^ ,]*-amd64\).*/\1/p')
	[ -n "$KVER" ] || die "cannot read the kernel ABI from linux-headers-amd64's Depends"
	KIMG=$work/vmlinuz-$KVER
	KMODS=$work/kmods-$KVER
	[ -s "$KIMG" ] || have_all=0
	for m in $mods; do [ -s "$KMODS/$m.ko" ] || have_all=0; done
	[ $have_all = 1 ] && return 0
	rm -rf "$work/dl" && mkdir -p "$work/dl"
	(cd "$work/dl" && apt-get download -qq "linux-image-$KVER") >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null; (cd "$work/dl" && apt-get download -qq "linux-image-$KVER"); } ||
		die "apt-get download linux-image-$KVER failed"
	deb=$(ls "$work"/dl/linux-image-"$KVER"_*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || die "downloaded package not found"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO "./boot/vmlinuz-$KVER" >"$KIMG.tmp" && mv "$KIMG.tmp" "$KIMG" ||
		die "cannot extract vmlinuz-$KVER"
	if [ -n "$mods" ]; then
		mkdir -p "$work/dl/x" "$KMODS"
		for m in $mods; do pats+=("*/$m.ko"); done
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work/dl/x" --wildcards "${pats[@]}" &&
			find "$work/dl/x" -name '*.ko' -exec cp {} "$KMODS/" \; || die "cannot extract the modules $mods"
	fi
	rm -rf "$work/dl"
}

# qemu_kernel_copy_mods DEST "MODULES": copies each module from KMODS into DEST and checks the
# order is a load order (each module's depends= names only modules listed before it).
qemu_kernel_copy_mods() {
	local dest=$1 mods=$2 loaded=" " m d
	mkdir -p "$dest"
	for m in $mods; do
		cp "$KMODS/$m.ko" "$dest/" || die "cannot copy $m.ko"
		for d in $(strings "$KMODS/$m.ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
			case "$loaded" in *" $d "*) ;; *) die "module order: $m needs $d first";; esac
		done
		loaded="$loaded$m "
	done
}
