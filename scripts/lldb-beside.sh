#!/usr/bin/env bash
# Get Debian's LLDB of another version beside the installed lldb-16, and run the LLDB tests
# with it.
#
#   bash scripts/lldb-beside.sh VERSION [options] [pytest args]     (VERSION: 14, 19, ...)
#
# Debian's python3-lldb-N packages conflict with each other (and lldb-N needs its own), so
# another LLDB cannot be installed next to lldb-16. Instead `apt-get download` fetches lldb-N,
# liblldb-N, python3-lldb-N and every run-time dependency of theirs that is not installed
# (or not in the version they need: libllvmN, libclang-cppN, ...; -dev packages are left out),
# and `dpkg -x` unpacks them under a private prefix. Wrappers there (bin/lldb-N, and
# bin/lldb-dap-N, bin/lldb-server-N, bin/lldb-vscode-N where the package has them) run those
# binaries with the right LD_LIBRARY_PATH / PYTHONHOME / PYTHONPATH. Nothing is installed or
# removed, no root needed (except to write /opt), safe next to a running lldb-16, and cached:
# a second run reuses the unpacked tree (a stamp file records the version) and downloads
# nothing. It only ever writes inside the prefix and a temporary download directory it deletes.
#
# Prefix: --prefix DIR, else $LLDB<N>_PREFIX, else /opt/lldb<N> when writable (or creatable),
# else ${XDG_CACHE_HOME:-~/.cache}/branchstub/lldb<N>. The tests find the wrappers there
# (tests/integration/harness.py).
#
# Options:
#   --prefix DIR   where to unpack (see above)
#   --setup-only   unpack and check LLDB N, print the wrapper path, run no tests
#   --check        only say whether LLDB N is ready in the prefix (exit 0 and print the
#                  wrapper path) or not (exit 1); never downloads
#   --refresh      download and unpack again even when the stamp says it is done
#   --all          also run the other LLDB tests (btrace monitor, stepbranch, exec, fork, DAP)
#   --swap         the old way: apt-get remove lldb-16, install lldb-N, run the tests,
#                  swap back (needs root or sudo; disturbs anyone using lldb-16 meanwhile)
#   -h, --help
# Pytest arguments: test paths (an existing file, optionally with ::name) replace the
# default list (tests/integration/test_lldb.py); all else (-k EXPR, -x, -v) is passed on.
# The tests run with BRANCHSTUB_LLDB (and BRANCHSTUB_LLDB_DAP where there is one) set to the
# wrappers. BRANCHSTUB_BUILD defaults to ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { echo "lldb-beside: $*"; }
die() { echo "lldb-beside: $*" >&2; exit 1; }

if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
ver=${1:-}
[[ $ver =~ ^[0-9]+$ ]] || die "usage: lldb-beside.sh VERSION [options] (e.g. 19); --help for more"
shift

mode=unpack
prefix_var=LLDB${ver}_PREFIX
prefix=${!prefix_var:-}
setup_only=0
check_only=0
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
    --check) check_only=1 ;;
    --refresh) refresh=1 ;;
    --all) all=1 ;;
    -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
  [[ -f tests/integration/test_lldb_dap.py ]] && tests+=(tests/integration/test_lldb_dap.py)
fi
[[ ${#pytest_paths[@]} -gt 0 ]] && tests=("${pytest_paths[@]}")

run_tests() {   # $1: the lldb binary, $2: lldb-dap (or empty)
  export BRANCHSTUB_BUILD=${BRANCHSTUB_BUILD:-$root/build}
  [[ -x $BRANCHSTUB_BUILD/server/branchstub ]] ||
    say "warning: no server at $BRANCHSTUB_BUILD/server/branchstub (bash scripts/build.sh, or set BRANCHSTUB_BUILD)"
  local dap=()
  [[ -n ${2:-} ]] && dap=("BRANCHSTUB_LLDB_DAP=$2")
  say "+ BRANCHSTUB_LLDB=$1 ${dap[*]} /usr/bin/python3 -m pytest -q ${tests[*]} ${pytest_opts[*]}"
  env BRANCHSTUB_LLDB="$1" "${dap[@]}" /usr/bin/python3 -m pytest -q "${tests[@]}" "${pytest_opts[@]}"
}

# ------------------------------------------------------------------ swap mode (old)
if [[ $mode == swap ]]; then
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "--swap needs root or sudo"
    as_root=(sudo)
  fi
  apt() { say "+ apt-get $*"; DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get "$@"; }
  apt update
  apt remove -y lldb-16 python3-lldb-16 || true
  swap_back() {
    local rc=$?
    say "swapping back to LLDB 16"
    apt remove -y "lldb-$ver" "python3-lldb-$ver" || true
    apt install -y --no-install-recommends lldb-16 python3-lldb-16 || rc=1
    exit $rc
  }
  trap swap_back EXIT
  apt install -y --no-install-recommends "lldb-$ver" "python3-lldb-$ver"
  say "$("/usr/bin/lldb-$ver" --version | head -1)"
  [[ $setup_only == 1 ]] && exit 0
  dap=""
  [[ -x /usr/bin/lldb-dap-$ver ]] && dap=/usr/bin/lldb-dap-$ver
  run_tests "/usr/bin/lldb-$ver" "$dap"
  exit $?
fi

# ------------------------------------------------------------------ unpack mode (default)
stampname=.branchstub-lldb$ver
if [[ -z $prefix ]]; then
  opt=/opt/lldb$ver
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/branchstub/lldb$ver
  if [[ -f $opt/$stampname ]]; then prefix=$opt          # set up already (maybe by root)
  elif [[ -f $cache/$stampname ]]; then prefix=$cache
  elif { [[ -d $opt ]] && [[ -w $opt ]]; } || { [[ ! -e $opt ]] && [[ -w /opt ]]; }; then prefix=$opt
  else prefix=$cache
  fi
fi
case "$prefix" in /*) ;; *) prefix=$root/$prefix ;; esac
stamp=$prefix/$stampname
wrapper=$prefix/bin/lldb-$ver
lib=$prefix/usr/lib
llvmbin=$lib/llvm-$ver/bin

if [[ $check_only == 1 ]]; then
  [[ -f $stamp ]] && [[ -x $wrapper ]] && [[ -x $llvmbin/lldb ]] || { say "LLDB $ver is not set up in $prefix"; exit 1; }
  echo "$wrapper"
  exit 0
fi

# Set up unless the stamp says it is done (then the prefix may even be read-only): download,
# unpack, write the wrappers and fix the Python paths, inside $prefix only.
if [[ $refresh == 1 ]] || [[ ! -f $stamp ]] || [[ ! -x $wrapper ]] || [[ ! -x $llvmbin/lldb ]]; then
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  die "needs apt-get and dpkg-deb (Debian/Ubuntu)"
mkdir -p "$prefix"
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

# A directory we did not make: leave it alone.
if [[ ! -f $stamp ]] && [[ -n "$(ls -A "$prefix" 2>/dev/null | grep -v -x -e usr -e bin -e .lock -e "$stampname.tmp")" ]]; then
  die "$prefix is not empty and was not made by this script; use --prefix DIR"
fi

# One setup at a time per prefix.
exec 9>"$prefix/.lock"
if command -v flock >/dev/null; then flock 9; fi

installed_version() {
  dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | sed -n 's/^install ok installed //p' | head -1
}

# satisfied "NAME (OP VERSION)": installed, in a version that fits.
satisfied() {
  local name=${1%% *} rel="" op v have
  name=${name%:any}
  [[ $1 == *"("* ]] && rel=${1#*(} && rel=${rel%)}
  have=$(installed_version "$name")
  [[ -n $have ]] || return 1
  [[ -z $rel ]] && return 0
  op=${rel%% *}; v=${rel#* }
  case "$op" in
    '>=') op=ge ;; '<=') op=le ;; '=') op=eq ;; '>>') op=gt ;; '<<') op=lt ;; *) return 0 ;;
  esac
  dpkg --compare-versions "$have" "$op" "$v"
}

if [[ $refresh == 1 ]] || [[ ! -f $stamp ]] || [[ ! -x $llvmbin/lldb ]]; then
  dl=$(mktemp -d "${TMPDIR:-/tmp}/lldb-beside.XXXXXX")
  trap 'rm -rf "$dl"' EXIT
  chmod 755 "$dl"   # apt's _apt user may download into it unsandboxed otherwise
  get() {   # apt-get download into $dl; prints nothing on success
    say "+ apt-get download $*"
    (cd "$dl" && apt-get download "$@" >/dev/null 2>"$dl/apt.err")
  }
  get "lldb-$ver" "liblldb-$ver" "python3-lldb-$ver" || {
    cat "$dl/apt.err" >&2
    die "apt-get download lldb-$ver failed (no package lists? run 'apt-get update' once as root)"
  }
  # The run-time dependencies that are not installed in a version that fits, transitively.
  # -dev packages (lldb-14 depends on llvm-14-dev) and the LLDB packages themselves are
  # not needed to run LLDB.
  declare -A seen=(["lldb-$ver"]=1 ["liblldb-$ver"]=1 ["python3-lldb-$ver"]=1)
  queue=("$dl"/*.deb)
  while [[ ${#queue[@]} -gt 0 ]]; do
    deb=${queue[0]}; queue=("${queue[@]:1}")
    IFS=',' read -r -a deps <<<"$(dpkg-deb -f "$deb" Depends Pre-Depends | sed 's/^[A-Za-z-]*: //' | paste -sd,)"
    for group in "${deps[@]}"; do
      IFS='|' read -r -a alts <<<"$group"
      ok=0 first=""
      for alt in "${alts[@]}"; do
        alt=$(echo "$alt" | sed 's/^ *//; s/ *$//')
        [[ -n $alt ]] || continue
        name=${alt%% *}; name=${name%:any}
        [[ -z $first ]] && first=$name
        if [[ -n ${seen[$name]:-} ]] || [[ $name == *-dev ]] || satisfied "$alt"; then ok=1; break; fi
      done
      [[ $ok == 1 || -z $first ]] && continue
      seen[$first]=1
      # A version pinned with "=" is fetched in that version.
      want=$first
      pin=$(echo "${alts[0]}" | sed -n 's/.*( *= *\([^)]*\)).*/\1/p')
      [[ -n $pin ]] && want="$first=$pin"
      before=$(ls "$dl"/*.deb)
      get "$want" || { cat "$dl/apt.err" >&2; die "cannot download $want (needed by $(basename "$deb"))"; }
      while read -r f; do queue+=("$f"); done < <(ls "$dl"/*.deb | grep -vxF "$before")
    done
  done
  v=$(dpkg-deb -f "$dl"/liblldb-"$ver"_*.deb Version)
  for deb in "$dl"/*.deb; do
    say "+ dpkg -x $(basename "$deb") $prefix"
    dpkg -x "$deb" "$prefix"
  done
  echo "$v" >"$stamp.tmp"
  # The stamp is written only once the checks below pass.
fi

[[ -x $llvmbin/lldb ]] || die "no $llvmbin/lldb after unpacking"

# The wrappers: these binaries and their libraries first, the system's Python (the one
# liblldb links: /usr), whatever python3 happens to be first in PATH (pyenv, venv).
mkdir -p "$prefix/bin"
pyline=""   # Python modules that had to be unpacked too (python3-six for LLDB 14)
[[ -f $lib/python3/dist-packages/six.py ]] &&
  pyline="export PYTHONPATH=\"$lib/python3/dist-packages\${PYTHONPATH:+:\$PYTHONPATH}\""
for tool in lldb lldb-dap lldb-vscode lldb-server; do
  [[ -x $llvmbin/$tool ]] || continue
  w=$prefix/bin/$tool-$ver
  cat >"$w.tmp" <<EOF
#!/bin/sh
# LLDB $ver unpacked (not installed) by scripts/lldb-beside.sh.
export LD_LIBRARY_PATH="$lib/$triplet:$prefix/lib/$triplet\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONHOME=/usr
$pyline
exec "$llvmbin/$tool" "\$@"
EOF
  chmod 755 "$w.tmp"
  mv -f "$w.tmp" "$w"
  missing=$(env LD_LIBRARY_PATH="$lib/$triplet:$prefix/lib/$triplet" ldd "$llvmbin/$tool" | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
  [[ -z $missing ]] || die "libraries not found for $tool-$ver: $missing(install their packages, or unpack them into $prefix)"
done

# Some Debian builds (lldb-14) look for the Python package in <libdir>/../local/lib/
# python3.X/dist-packages (a known packaging bug); point that path at the shipped package,
# inside the prefix only. Ask lldb itself where it looks.
pydir=$("$wrapper" -P 2>/dev/null | head -1 || true)
shipped=$(ls -d "$lib"/llvm-"$ver"/lib/python3*/*-packages 2>/dev/null | while read -r d; do
            if [[ -f $d/lldb/__init__.py ]]; then echo "$d"; fi; done | head -1)
[[ -n $shipped ]] || die "python3-lldb-$ver not unpacked (no lldb/__init__.py under $lib/llvm-$ver/lib)"
if [[ -n $pydir ]] && [[ ! -f $pydir/lldb/__init__.py ]]; then
  case "$pydir" in
    "$prefix"/*) mkdir -p "$(dirname "$pydir")"; ln -sfn "$shipped" "$pydir"
                 say "linked $pydir -> $shipped" ;;
    *) die "lldb-$ver looks for its Python package in $pydir, outside $prefix" ;;
  esac
fi
# _lldb points at ../lib/liblldb.so (from liblldb-N-dev); use the library we have, so
# that a plain `python3 -c 'import lldb'` with PYTHONPATH=$shipped works too.
so=$(ls "$shipped"/lldb/_lldb.cpython-*.so 2>/dev/null | head -1 || true)
if [[ -n $so ]] && [[ ! -e $so ]]; then
  ln -sfn "$lib/$triplet/liblldb-$ver.so.1" "$so"
fi

fi

version=$("$wrapper" --version | head -1)
[[ $version == "lldb version $ver."* ]] || die "unexpected: $wrapper --version says '$version'"
pyok=$("$wrapper" --no-lldbinit -b -o 'script import lldb; print("PYOK", lldb.SBDebugger.GetVersionString())' 2>&1 |
       grep '^PYOK' || true)
[[ $pyok == "PYOK lldb version $ver."* ]] || {
  "$wrapper" --no-lldbinit -b -o 'script import lldb' >&2 || true
  die "LLDB $ver's Python scripting does not work"
}
[[ -f $stamp.tmp ]] && mv -f "$stamp.tmp" "$stamp"
[[ -f $stamp ]] || "$wrapper" --version | head -1 >"$stamp"
say "$version (Python OK) via $(echo "$prefix"/bin/*-"$ver")"
[[ $setup_only == 1 ]] && exit 0
dap=""
[[ -x $prefix/bin/lldb-dap-$ver ]] && dap=$prefix/bin/lldb-dap-$ver
run_tests "$wrapper" "$dap"
