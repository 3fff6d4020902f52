#!/usr/bin/env bash
# Install what branchstub needs on a Debian 12 machine, and nothing that is already there.
#
#   bash scripts/setup-deps.sh            # build, test and kmod-test packages
#   bash scripts/setup-deps.sh --no-kmod  # skip the kernel-module test packages
#                                         # (linux-headers, qemu, busybox, cpio)
#
# Run it as root (or with sudo available). It is idempotent: when every package is
# already installed (checked with dpkg -s) it does not touch apt at all.
set -euo pipefail

want_kmod=1
for arg in "$@"; do
  case "$arg" in
    --no-kmod|--skip-kmod) want_kmod=0 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup-deps: unknown option: $arg" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libcapstone-dev libcli11-dev libfmt-dev catch2
  gdb gdbserver lldb-16 python3-lldb-16 python3-pytest
  clang libclang-rt-14-dev
  graphviz lcov   # coverage pictures (dot -Tsvg) and the genhtml check of the lcov output
  # GDB's own testsuite (tests/gdb-testsuite/run.sh): DejaGnu's runtest, expect, "ip" for the
  # loopback of each test's network namespace, xz for the source tarball.
  dejagnu expect iproute2 xz-utils
  libipt-dev            # tools/pt_tool: the Intel PT tests make and decode real PT streams
)
if [[ $want_kmod == 1 ]]; then
  # dwarves: pahole, which kbuild needs to build a module against headers made with BTF (6.12+)
  packages+=(linux-headers-amd64 qemu-system-x86 busybox-static cpio dwarves)
fi

installed() {
  # "install ok installed" is the only state that means the package is really there.
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup-deps: all ${#packages[@]} packages already installed; nothing to do."
  exit 0
fi

echo "setup-deps: missing: ${missing[*]}"

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup-deps: not root and no sudo; install these as root: ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "setup-deps: + ${as_root[*]:+${as_root[*]} }apt-get update"
"${as_root[@]}" apt-get update
echo "setup-deps: + ${as_root[*]:+${as_root[*]} }apt-get install -y --no-install-recommends ${missing[*]}"
"${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup-deps: done."
