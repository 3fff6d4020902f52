#!/usr/bin/env bash
# Run the LLDB integration tests with LLDB 14 instead of 16.
#
#   bash scripts/check-lldb14.sh [options] [pytest args]
#
# Default (unpack mode): Debian's lldb-14 and lldb-16 packages conflict, so LLDB 14 is NOT
# installed. `apt-get download` fetches lldb-14, liblldb-14, python3-lldb-14 (plus
# libllvm14 / libclang-cpp14 / python3-six when the installed ones are missing or of another
# version) and `dpkg -x` unpacks them under a private prefix; a wrapper there runs that
# lldb with the right LD_LIBRARY_PATH / PYTHONHOME / PYTHONPATH. Nothing is installed or
# removed, no root needed (except to write /opt), safe next to a running lldb-16, and
# idempotent: a second run reuses the unpacked tree (a stamp file records the version).
# It only ever writes inside the prefix and a temporary download directory it deletes.
#
# Prefix: --prefix DIR, else $LLDB14_PREFIX, else /opt/lldb14 when writable (or creatable),
# else ${XDG_CACHE_HOME:-~/.cache}/branchstub/lldb14. The wrapper is <prefix>/bin/lldb-14.
#
# Options:
#   --prefix DIR   where to unpack (see above)
#   --setup-only   unpack and check LLDB 14, print the wrapper path, run no tests
#   --refresh      download and unpack again even when the stamp says it is done
#   --all          also run the other LLDB tests (btrace monitor, stepbranch, exec, fork)
#   --swap         the old way: apt-get remove lldb-16, install lldb-14, run the tests,
#                  swap back (needs root or sudo; disturbs anyone using lldb-16 meanwhile)
#   -h, --help
# Pytest arguments: test paths (an existing file, optionally with ::name) replace the
# default list (tests/integration/test_lldb.py); all else (-k EXPR, -x, -v) is passed on.
# BRANCHSTUB_BUILD defaults to ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { echo "check-lldb14: $*"; }
die() { echo "check-lldb14: $*" >&2; exit 1; }

mode=unpack
prefix=${LLDB14_PREFIX:-}
setup_only=0
refresh=0
all=0
pytest_opts=()
pytest_paths=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --swap) mode=swap ;;
    --prefix) [[ $# -ge 2 ]] || die "--prefix needs a directory"; prefix=$2; shift ;;
    --prefix=*) prefix=${1#--prefix=} ;;
    --setup-only) setup_only=1 ;;
    --refresh) refresh=1 ;;
    --all) all=1 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; while [[ $# -gt 0 ]]; do
          if [[ -e ${1%%::*} ]]; then pytest_paths+=("$1"); else pytest_opts+=("$1"); fi; shift
        done; break ;;
    *) if [[ -e ${1%%::*} ]]; then pytest_paths+=("$1"); else pytest_opts+=("$1"); fi ;;
  esac
  shift
done

tests=(tests/integration/test_lldb.py)
if [[ $all == 1 ]]; then
  tests+=(tests/integration/test_btrace.py::test_lldb_monitor_btrace_calls
          tests/integration/test_stepbranch.py::test_lldb_stepbranch
          tests/integration/test_gdb_fork_exec.py::test_lldb_stops_at_exec_and_follows
          tests/integration/test_gdb_fork_exec.py::test_lldb_fork_child_detached)
fi
[[ ${#pytest_paths[@]} -gt 0 ]] && tests=("${pytest_paths[@]}")

run_tests() {   # $1: the lldb binary
  export BRANCHSTUB_BUILD=${BRANCHSTUB_BUILD:-$root/build}
  [[ -x $BRANCHSTUB_BUILD/server/branchstub ]] ||
    say "warning: no server at $BRANCHSTUB_BUILD/server/branchstub (bash scripts/build.sh, or set BRANCHSTUB_BUILD)"
  say "+ BRANCHSTUB_LLDB=$1 /usr/bin/python3 -m pytest -q ${tests[*]} ${pytest_opts[*]}"
  BRANCHSTUB_LLDB=$1 /usr/bin/python3 -m pytest -q "${tests[@]}" "${pytest_opts[@]}"
}

# ------------------------------------------------------------------ swap mode (old)
if [[ $mode == swap ]]; then
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "--swap needs root or sudo"
    as_root=(sudo)
  fi
  apt() { say "+ apt-get $*"; DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get "$@"; }
  is_installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]; }
  had16=0
  is_installed lldb-16 && had16=1
  swap_back() {
    local rc=$?
    say "swapping back to LLDB 16"
    apt remove -y lldb-14 python3-lldb-14 || true
    if [[ $had16 == 1 ]] || [[ ${RESTORE_LLDB16:-1} == 1 ]]; then
      apt install -y --no-install-recommends lldb-16 python3-lldb-16 || rc=1
    fi
    exit $rc
  }
  apt update
  apt remove -y lldb-16 python3-lldb-16 || true
  trap swap_back EXIT
  apt install -y --no-install-recommends lldb-14 python3-lldb-14
  say "$(/usr/bin/lldb-14 --version | head -1)"
  [[ $setup_only == 1 ]] && exit 0
  run_tests /usr/bin/lldb-14
  exit $?
fi

# ------------------------------------------------------------------ unpack mode (default)
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  die "needs apt-get and dpkg-deb (Debian/Ubuntu)"

if [[ -z $prefix ]]; then
  if { [[ -d /opt/lldb14 ]] && [[ -w /opt/lldb14 ]]; } || { [[ ! -e /opt/lldb14 ]] && [[ -w /opt ]]; }; then
    prefix=/opt/lldb14
  else
    prefix=${XDG_CACHE_HOME:-$HOME/.cache}/branchstub/lldb14
  fi
fi
case "$prefix" in /*) ;; *) prefix=$root/$prefix ;; esac
mkdir -p "$prefix"
stamp=$prefix/.branchstub-lldb14
wrapper=$prefix/bin/lldb-14
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

# A directory we did not make: leave it alone.
if [[ ! -f $stamp ]] && [[ -n "$(ls -A "$prefix" 2>/dev/null | grep -v -x -e usr -e bin -e .lock -e .branchstub-lldb14.tmp)" ]]; then
  die "$prefix is not empty and was not made by this script; use --prefix DIR"
fi

# One setup at a time per prefix.
exec 9>"$prefix/.lock"
if command -v flock >/dev/null; then flock 9; fi

installed_version() { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null | sed -n 's/^install ok installed //p'; }

if [[ $refresh == 1 ]] || [[ ! -f $stamp ]] || [[ ! -x $prefix/usr/lib/llvm-14/bin/lldb ]]; then
  dl=$(mktemp -d "${TMPDIR:-/tmp}/check-lldb14.XXXXXX")
  trap 'rm -rf "$dl"' EXIT
  chmod 755 "$dl"   # apt's _apt user may download into it unsandboxed otherwise
  get() {   # apt-get download into $dl; prints nothing on success
    say "+ apt-get download $*"
    (cd "$dl" && apt-get download "$@" >/dev/null 2>"$dl/apt.err") || {
      cat "$dl/apt.err" >&2
      die "apt-get download $* failed (no package lists? run 'apt-get update' once as root)"
    }
  }
  get lldb-14 liblldb-14 python3-lldb-14
  v=$(dpkg-deb -f "$dl"/liblldb-14_*.deb Version)
  # lldb-14 needs exactly this libllvm14; libclang-cpp14 and python3-six at all.
  extra=()
  [[ "$(installed_version "libllvm14:$arch")" == "$v" || "$(installed_version libllvm14)" == "$v" ]] ||
    extra+=("libllvm14=$v")
  [[ -n "$(installed_version "libclang-cpp14:$arch")$(installed_version libclang-cpp14)" ]] ||
    extra+=(libclang-cpp14)
  [[ -n "$(installed_version python3-six)" ]] || extra+=(python3-six)
  [[ ${#extra[@]} -gt 0 ]] && get "${extra[@]}"
  for deb in "$dl"/*.deb; do
    say "+ dpkg -x $(basename "$deb") $prefix"
    dpkg -x "$deb" "$prefix"
  done
  echo "$v" >"$stamp.tmp"
  # The stamp is written only once the checks below pass.
fi

lib=$prefix/usr/lib
[[ -x $lib/llvm-14/bin/lldb ]] || die "no $lib/llvm-14/bin/lldb after unpacking"

# The wrapper: this lldb and its libraries first, the system's Python (the one liblldb-14
# links: /usr), whatever python3 happens to be first in PATH (pyenv, venv).
mkdir -p "$prefix/bin"
pyline=""   # python3-six, when it had to be unpacked too
[[ -f $lib/python3/dist-packages/six.py ]] &&
  pyline="export PYTHONPATH=\"$lib/python3/dist-packages\${PYTHONPATH:+:\$PYTHONPATH}\""
cat >"$wrapper.tmp" <<EOF
#!/bin/sh
# LLDB 14 unpacked (not installed) by scripts/check-lldb14.sh.
export LD_LIBRARY_PATH="$lib/$triplet\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONHOME=/usr
$pyline
exec "$lib/llvm-14/bin/lldb" "\$@"
EOF
chmod 755 "$wrapper.tmp"
mv -f "$wrapper.tmp" "$wrapper"

missing=$(env LD_LIBRARY_PATH="$lib/$triplet" ldd "$lib/llvm-14/bin/lldb" "$lib/$triplet/liblldb-14.so.1" |
          awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
[[ -z $missing ]] || die "libraries not found for lldb-14: $missing(install their packages, or unpack them into $prefix)"

# Debian's lldb-14 looks for its Python package in <libdir>/../local/lib/python3.X/
# dist-packages (a known packaging bug); point that path at the shipped package, inside
# the prefix only. Ask lldb itself where it looks.
pydir=$("$wrapper" -P 2>/dev/null | head -1 || true)
shipped=$(ls -d "$lib"/llvm-14/lib/python3.*/dist-packages 2>/dev/null | while read -r d; do
            [[ -f $d/lldb/__init__.py ]] && echo "$d"; done | head -1)
[[ -n $shipped ]] || die "python3-lldb-14 not unpacked (no lldb/__init__.py under $lib/llvm-14/lib)"
if [[ -n $pydir ]] && [[ ! -f $pydir/lldb/__init__.py ]]; then
  case "$pydir" in
    "$prefix"/*) mkdir -p "$(dirname "$pydir")"; ln -sfn "$shipped" "$pydir"
                 say "linked $pydir -> $shipped" ;;
    *) die "lldb-14 looks for its Python package in $pydir, outside $prefix" ;;
  esac
fi
# _lldb points at ../lib/liblldb.so (from liblldb-14-dev); use the library we have, so
# that a plain `python3 -c 'import lldb'` with PYTHONPATH=$shipped works too.
so=$(ls "$shipped"/lldb/_lldb.cpython-*.so 2>/dev/null | head -1 || true)
if [[ -n $so ]] && [[ ! -e $so ]]; then
  ln -sfn "$lib/$triplet/liblldb-14.so.1" "$so"
fi

ver=$("$wrapper" --version | head -1)
[[ $ver == "lldb version 14."* ]] || die "unexpected: $wrapper --version says '$ver'"
pyok=$("$wrapper" --no-lldbinit -b -o 'script import lldb; print("PYOK", lldb.SBDebugger.GetVersionString())' 2>&1 |
       grep '^PYOK' || true)
[[ $pyok == "PYOK lldb version 14."* ]] || {
  "$wrapper" --no-lldbinit -b -o 'script import lldb' >&2 || true
  die "LLDB 14's Python scripting does not work"
}
[[ -f $stamp.tmp ]] && mv -f "$stamp.tmp" "$stamp"
[[ -f $stamp ]] || "$wrapper" --version | head -1 >"$stamp"
say "$ver (Python OK) via $wrapper"
[[ $setup_only == 1 ]] && exit 0
run_tests "$wrapper"
