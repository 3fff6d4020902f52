#!/usr/bin/env bash
# Install what branchstub needs on a Debian 12 machine, and nothing that is already there.
#
#   bash scripts/setup-deps.sh            # build, test and kmod-test packages, and LLDB 19
#   bash scripts/setup-deps.sh --no-kmod  # skip the kernel-module test packages
#                                         # (linux-headers, qemu, busybox, cpio)
#   bash scripts/setup-deps.sh --no-lldb19  # skip LLDB 19 / lldb-dap-19
#   bash scripts/setup-deps.sh --no-cdt     # skip Eclipse CDT's GDB debug adapter (npm)
#
# Run it as root (or with sudo available). It is idempotent: when every package is
# already installed (checked with dpkg -s) it does not touch apt at all. LLDB 19 (the LLDB 19
# tests and lldb-dap-19) cannot be installed next to lldb-16 (their Python packages
# conflict), so scripts/lldb-beside.sh 19 unpacks it under /opt/lldb19 (or
# ~/.cache/branchstub/lldb19), once: later runs find it there and download nothing. The IDE
# tests' debug adapter (cdt-gdb-adapter) comes from npm's registry the same way, once, by
# scripts/cdt-gdb-adapter.sh (node and npm from Debian when the machine has none).
set -euo pipefail
cd "$(dirname "$0")/.."

want_kmod=1
want_lldb19=1
want_cdt=1
for arg in "$@"; do
  case "$arg" in
    --no-kmod|--skip-kmod) want_kmod=0 ;;
    --no-lldb19) want_lldb19=0 ;;
    --no-cdt) want_cdt=0 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup-deps: unknown option: $arg" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libcapstone-dev libcli11-dev libfmt-dev catch2
  gdb gdbserver lldb-16 python3-lldb-16 python3-pytest
  python3-pytest-xdist  # the integration tests, several at a time (scripts/test.sh)
  clang libclang-rt-14-dev
  graphviz lcov   # coverage pictures (dot -Tsvg) and the genhtml check of the lcov output
  # GDB's own testsuite (tests/gdb-testsuite/run.sh): DejaGnu's runtest, expect, "ip" for the
  # loopback of each test's network namespace, xz for the source tarball.
  dejagnu expect iproute2 xz-utils
  libipt-dev            # tools/pt_tool: the Intel PT tests make and decode real PT streams
  procps                # ps: one of the everyday programs the record/replay tests record
)
if [[ $want_kmod == 1 ]]; then
  # dwarves: pahole, which kbuild needs to build a module against headers made with BTF (6.12+)
  packages+=(linux-headers-amd64 qemu-system-x86 busybox-static cpio dwarves)
fi

installed() {
  # "install ok installed" is the only state that means the package is really there.
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

need_cdt=0
if [[ $want_cdt == 1 ]] && ! bash scripts/cdt-gdb-adapter.sh --check >/dev/null 2>&1; then
  need_cdt=1
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

# LLDB 19 is ready when installed (lldb-19 and lldb-dap-19 in PATH) or unpacked beside.
lldb19_ready() {
  { command -v lldb-19 && command -v lldb-dap-19; } >/dev/null 2>&1 ||
    bash scripts/lldb-beside.sh 19 --check >/dev/null 2>&1
}
need_lldb19=0
[[ $want_lldb19 == 1 ]] && ! lldb19_ready && need_lldb19=1

if [[ ${#missing[@]} -eq 0 ]] && [[ $need_lldb19 == 0 ]] && [[ $need_cdt == 0 ]]; then
  ready=""
  [[ $want_lldb19 == 1 ]] && ready=", LLDB 19 ready"
  [[ $want_cdt == 1 ]] && ready="$ready, cdt-gdb-adapter ready"
  echo "setup-deps: all ${#packages[@]} packages already installed$ready; nothing to do."
  exit 0
fi

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  elif [[ ${#missing[@]} -gt 0 ]]; then
    echo "setup-deps: not root and no sudo; install these as root: ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() {
  echo "setup-deps: + ${as_root[*]:+${as_root[*]} }apt-get update"
  "${as_root[@]}" apt-get update
  updated=1
}

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup-deps: missing: ${missing[*]}"
  apt_update
  echo "setup-deps: + ${as_root[*]:+${as_root[*]} }apt-get install -y --no-install-recommends ${missing[*]}"
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [[ $need_lldb19 == 1 ]]; then
  # apt-get download needs package lists: when it fails without a fresh update, update once
  # (as root) and try again.
  echo "setup-deps: + bash scripts/lldb-beside.sh 19 --setup-only"
  if ! bash scripts/lldb-beside.sh 19 --setup-only; then
    if [[ $updated == 1 ]] || { [[ $(id -u) -ne 0 ]] && [[ ${#as_root[@]} -eq 0 ]]; }; then
      echo "setup-deps: LLDB 19 could not be set up (see above)" >&2
      exit 1
    fi
    apt_update
    echo "setup-deps: + bash scripts/lldb-beside.sh 19 --setup-only"
    bash scripts/lldb-beside.sh 19 --setup-only
  fi
fi
if [[ $need_cdt == 1 ]]; then
  echo "setup-deps: + bash scripts/cdt-gdb-adapter.sh --setup-only"
  bash scripts/cdt-gdb-adapter.sh --setup-only
fi
echo "setup-deps: done."
