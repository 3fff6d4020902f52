#!/usr/bin/env bash
# GDB 13.1's own DejaGnu testsuite against branchstub, compared with committed expected results.
#
#   tests/gdb-testsuite/run.sh [--update-expected] [SET...]
#   tests/gdb-testsuite/run.sh --list [SET...]
#
# SET: server, server-ext (gdb.server/*.exp), btrace, btrace-ext (gdb.btrace/*.exp and
# gdb.python/py-record-btrace*.exp), multi-ext (gdb.multi/*.exp: several inferiors in one
# session); "-ext" runs on the board native-extended-gdbserver (target extended-remote), the
# others on native-gdbserver; reverse (gdb.reverse/*.exp) on boards/branchstub-replay.exp, server
# replay-server.sh, which records the program with `branchstub record` and serves it with
# `branchstub replay` (reverse execution by the server: gdb,can_reverse 1, gdb,use_precord 0).
# trace (gdb.trace/*.exp: tracepoints) on native-gdbserver. Default: all seven.
# SET:FILE runs one file, e.g. server-ext:gdb.server/abspath.exp.
#
# The run fails (exit 1) when a line of expected/<set>.pass does not PASS now; each lost line
# is printed with its gdb.log. New passes are listed. --update-expected rewrites the lists
# (for a SET:FILE run only that file's lines). flaky.txt names what is left out of the
# comparison, skip.txt the files that are not run at all; both say why.
#
# Environment:
#   BRANCHSTUB_BUILD             build directory (default: ./build); the server is its server/branchstub
#   GDB_TESTSUITE_SERVER         another server binary (e.g. /usr/bin/gdbserver for a side-by-side run)
#   GDB_TESTSUITE_SERVER_ARGS    extra server options (a wrapper script puts them first)
#   GDB_TESTSUITE_BOARD          the board for every set, instead of each set's own; e.g.
#                                GDB_TESTSUITE_SERVER=/usr/bin/gdbserver GDB_TESTSUITE_BOARD=native-gdbserver
#                                run.sh reverse: gdb.reverse with gdbserver and GDB's record full
#   GDB_TESTSUITE_WORK           results directory (default: $BRANCHSTUB_BUILD/gdb-testsuite)
#   GDB_TESTSUITE_JOBS           .exp files run at once (default: nproc)
#   GDB_TESTSUITE_FILE_TIMEOUT   seconds one .exp file may take (default: 240); over it = failure
#   GDB_TESTSUITE_DEADLINE       seconds for all the files (default: none); files not started by
#                                then are not run, running ones are stopped then (both = failure)
#   GDB_TESTSUITE_CACHE          where the source tarball and the unpacked testsuite are kept
#                                (default: /var/cache/branchstub as root, else ~/.cache/branchstub)
#   GDB_TESTSUITE_OPTIONAL=1     exit 77 ("skipped") instead of failing when the testsuite
#                                cannot be fetched
#   GDB_TESTSUITE_NO_SKIP=1      run the files of skip.txt too (to see whether they still need it)
#
# Exit status: 0 no expected PASS lost; 1 some lost; 2 usage or setup error; 77 skipped.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

GDB_UPSTREAM=13.1
GDB_DEBIAN=13.1-3
GDB_TARBALL=gdb_$GDB_UPSTREAM.orig.tar.xz
# sha256 of Debian's (= upstream's) gdb-13.1 tarball, so a cached or fetched copy is the one
# the expected results were made with.
GDB_TARBALL_SHA256=d861181d5fa473787ed647895ec22d6ab001bb0a2354d76537fc0d6e244f5a15
GDB=/usr/bin/gdb

all_sets=(server server-ext btrace btrace-ext multi-ext reverse trace)

die() { echo "gdb-testsuite: $*" >&2; exit 2; }
say() { echo "gdb-testsuite: $*"; }

usage() { sed -n '2,39p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

update=0 list=0 args=()
for a in "$@"; do
  case $a in
    --update-expected) update=1 ;;
    --list) list=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $a (see --help)" ;;
    *) args+=("$a") ;;
  esac
done
[[ ${#args[@]} -gt 0 ]] || args=("${all_sets[@]}")

board_of() {
  if [[ -n ${GDB_TESTSUITE_BOARD:-} ]]; then echo "$GDB_TESTSUITE_BOARD"
  elif [[ $1 == reverse ]]; then echo branchstub-replay
  elif [[ $1 == *-ext ]]; then echo native-extended-gdbserver
  else echo native-gdbserver
  fi
}

# The .exp files of a set, relative to gdb/testsuite.
files_of() {
  case $1 in
    server|server-ext) (cd "$ts" && printf '%s\n' gdb.server/*.exp) ;;
    btrace|btrace-ext) (cd "$ts" && printf '%s\n' gdb.btrace/*.exp gdb.python/py-record-btrace*.exp) ;;
    multi-ext) (cd "$ts" && printf '%s\n' gdb.multi/*.exp) ;;
    reverse) (cd "$ts" && printf '%s\n' gdb.reverse/*.exp) ;;
    trace) (cd "$ts" && printf '%s\n' gdb.trace/*.exp) ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# The testsuite: Debian's gdb source package, fetched once, only gdb/testsuite unpacked.
# ---------------------------------------------------------------------------------------------
if [[ -n ${GDB_TESTSUITE_CACHE:-} ]]; then cache=$GDB_TESTSUITE_CACHE
elif [[ $(id -u) -eq 0 ]]; then cache=/var/cache/branchstub
else cache=${XDG_CACHE_HOME:-$HOME/.cache}/branchstub
fi
src=$cache/gdb-$GDB_UPSTREAM
ts=$src/gdb/testsuite

unavailable() {
  echo "gdb-testsuite: GDB's testsuite is not available: $*" >&2
  if [[ ${GDB_TESTSUITE_OPTIONAL:-0} == 1 ]]; then
    echo "gdb-testsuite: SKIPPED (GDB_TESTSUITE_OPTIONAL=1)" >&2
    exit 77
  fi
  echo "gdb-testsuite: this is a failure; set GDB_TESTSUITE_OPTIONAL=1 to skip the stage instead" >&2
  exit 2
}

has_deb_src() {
  grep -qsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*\bdeb-src\b)' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
}

# One deb-src entry for every configured deb entry (one-line and deb822 formats).
add_deb_src() {
  local out=/etc/apt/sources.list.d/branchstub-deb-src f
  say "no deb-src entry configured; adding $out.{list,sources} mirroring the deb entries"
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] && sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f"
  done >"$out.list.tmp"
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    # deb822: paragraphs separated by blank lines; keep those whose Types include "deb".
    awk 'BEGIN { RS = ""; ORS = "\n\n" }
         /(^|\n)Types:([^\n]*[ \t])?deb([ \t\n]|$)/ { sub(/Types:[^\n]*/, "Types: deb-src"); print }' "$f"
  done >"$out.sources.tmp"
  local e
  for e in list sources; do
    if [[ -s $out.$e.tmp ]]; then mv "$out.$e.tmp" "$out.$e"; else rm -f "$out.$e.tmp"; fi
  done
  has_deb_src || return 1
  say "+ apt-get update"
  apt-get update -q >/dev/null || echo "gdb-testsuite: warning: apt-get update failed" >&2
}

fetch_tarball() {
  local dl=$cache/dl tmp
  mkdir -p "$dl" || return 1
  tmp=$(mktemp -d "$dl/apt.XXXXXX") || return 1
  say "fetching Debian's gdb $GDB_DEBIAN source (apt-get source --download-only) into $dl"
  if ! (cd "$tmp" && apt-get source -q --download-only "gdb=$GDB_DEBIAN" >apt.log 2>&1); then
    if ! has_deb_src; then
      [[ $(id -u) -eq 0 ]] || { cat "$tmp/apt.log" >&2; rm -rf "$tmp"; echo "no deb-src entry and not root to add one" >&2; return 1; }
      add_deb_src || { rm -rf "$tmp"; return 1; }
    else
      say "+ apt-get update (gdb=$GDB_DEBIAN not found in the source lists)"
      apt-get update -q >/dev/null 2>&1
    fi
    (cd "$tmp" && apt-get source -q --download-only "gdb=$GDB_DEBIAN" >apt.log 2>&1) ||
      { sed 's/^/  apt: /' "$tmp/apt.log" >&2; rm -rf "$tmp"; return 1; }
  fi
  mv "$tmp/$GDB_TARBALL" "$dl/$GDB_TARBALL" || { rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
}

ensure_testsuite() {
  [[ -f $src/.unpacked ]] && return 0
  mkdir -p "$cache" 2>/dev/null || unavailable "cannot create $cache"
  # Several worktrees may run this at once: one fetches, the others wait.
  exec 9>"$cache/.lock"
  flock 9
  if [[ ! -f $src/.unpacked ]]; then
    local tarball=$cache/dl/$GDB_TARBALL
    if [[ ! -s $tarball ]] || ! sha256sum -c --status <<<"$GDB_TARBALL_SHA256  $tarball"; then
      rm -f "$tarball"
      fetch_tarball || unavailable "apt-get source gdb=$GDB_DEBIAN failed (no deb-src entry reachable?)"
      sha256sum -c --status <<<"$GDB_TARBALL_SHA256  $tarball" ||
        unavailable "$tarball does not have the expected sha256 $GDB_TARBALL_SHA256"
    fi
    say "unpacking gdb/testsuite from $tarball"
    local tmp
    tmp=$(mktemp -d "$cache/unpack.XXXXXX") || unavailable "cannot write to $cache"
    # lib/gdb.exp also reads gdb/contrib (gdb-add-index.sh) and gdb/tsan-suppressions.txt.
    tar -C "$tmp" -xJf "$tarball" "gdb-$GDB_UPSTREAM/gdb/testsuite" "gdb-$GDB_UPSTREAM/gdb/contrib" \
        "gdb-$GDB_UPSTREAM/gdb/tsan-suppressions.txt" || { rm -rf "$tmp"; unavailable "tar failed"; }
    rm -rf "$src"
    mv "$tmp/gdb-$GDB_UPSTREAM" "$src" && rmdir "$tmp"
    touch "$src/.unpacked"
  fi
  flock -u 9
  exec 9>&-
}

# ---------------------------------------------------------------------------------------------
# What runs: "set<TAB>file" jobs.
# ---------------------------------------------------------------------------------------------
valid_set() { local s; for s in "${all_sets[@]}"; do [[ $1 == "$s" ]] && return 0; done; return 1; }

# flaky.txt / skip.txt lines: "SETS  ENTRY  -- reason", SETS = "*" or comma-separated set names,
# ENTRY = a .exp file or "file: test name". Prints the entries that apply to SET.
entries_for() {
  local file=$1 set=$2
  [[ -f $file ]] || return 0
  awk -v set="$set" -v fname="$file" '
    /^[[:space:]]*(#|$)/ { next }
    {
      sets = $1
      line = $0; sub(/^[[:space:]]*[^[:space:]]+[[:space:]]+/, "", line)
      n = index(line, " -- ")
      # the last " -- " separates the entry from its reason
      while (n > 0 && (m = index(substr(line, n + 4), " -- ")) > 0) n += m + 3
      if (n == 0 || substr(line, n + 4) ~ /^[[:space:]]*$/) {
        printf "%s:%d: no \" -- reason\"\n", fname, NR > "/dev/stderr"; bad = 1; next
      }
      entry = substr(line, 1, n - 1); sub(/[[:space:]]+$/, "", entry)
      split(sets, s, ",")
      for (i in s) if (s[i] == "*" || s[i] == set) { print entry; break }
    }
    END { exit bad }' "$file" || die "fix $file"
}

jobs_list=()     # "set<TAB>file"
sets_run=()      # sets with at least one file, in order
declare -A skipped=()   # "set<TAB>file" -> 1 (skip.txt)

resolve_jobs() {
  local a sname f skips files=()
  declare -A seen=()
  for a in "${args[@]}"; do
    sname=${a%%:*}
    valid_set "$sname" || die "unknown set '$sname' (sets: ${all_sets[*]})"
    if [[ $a == *:* ]]; then
      files=("${a#*:}")
      [[ -f $ts/${files[0]} ]] || die "no such test file: ${files[0]}"
    else
      mapfile -t files < <(files_of "$sname")
    fi
    skips=$(entries_for "$here/skip.txt" "$sname") || exit 2
    for f in "${files[@]}"; do
      [[ -n ${seen[$sname$'\t'$f]:-} ]] && continue
      seen[$sname$'\t'$f]=1
      if [[ ${GDB_TESTSUITE_NO_SKIP:-0} != 1 && $'\n'$skips$'\n' == *$'\n'$f$'\n'* ]]; then
        skipped[$sname$'\t'$f]=1
        continue
      fi
      jobs_list+=("$sname"$'\t'"$f")
    done
    [[ " ${sets_run[*]} " == *" $sname "* ]] || sets_run+=("$sname")
  done
}

# ---------------------------------------------------------------------------------------------
# Running one .exp file: own runtest, own directory, own network namespace.
# ---------------------------------------------------------------------------------------------
write_site_exp() {
  cat >"$1/site.exp" <<EOF
set host_triplet x86_64-pc-linux-gnu
set target_alias x86_64-pc-linux-gnu
set target_triplet x86_64-pc-linux-gnu
set build_triplet x86_64-pc-linux-gnu
set srcdir $ts
set tool gdb
source \${srcdir}/lib/append_gdb_boards_dir.exp
# our boards (branchstub-replay); after the source, so its trace puts GDB's own boards last
lappend boards_dir $here/boards
EOF
}

# SIGKILL every process left in the job's network namespace (the server, its inferiors,
# anything a test spawned). A sentinel sleep keeps the namespace, so its inode number cannot
# be reused by another job's namespace while we scan; it is killed last.
reap_netns() {
  local d=$1 ns sentinel p pid left
  ns=$(cat "$d/netns" 2>/dev/null) && sentinel=$(cat "$d/sentinel" 2>/dev/null) || return 0
  [[ -n $ns && -n $sentinel && $(readlink "/proc/$sentinel/ns/net" 2>/dev/null) == "$ns" ]] || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    left=0
    for p in /proc/[0-9]*; do
      pid=${p#/proc/}
      [[ $pid != "$sentinel" && $(readlink "$p/ns/net" 2>/dev/null) == "$ns" ]] || continue
      kill -9 "$pid" 2>/dev/null && left=1
    done
    [[ $left == 1 ]] || break
    sleep 0.2
  done
  kill -9 "$sentinel" 2>/dev/null
}

# The server command the testsuite gets for BOARD: the replay board records first.
server_for() { [[ $1 == branchstub-replay ]] && echo "$here/replay-server.sh" || echo "$server"; }

# run_one SET FILE CAP
run_one() {
  local set=$1 exp=$2 cap=$3 d t0 rc
  d=$work/results/$set/${exp%.exp}
  rm -rf "$d" && mkdir -p "$d" || return
  write_site_exp "$d"
  t0=$(date +%s.%N)
  # (timeout -k ends by SIGKILLing its own process group; the braces keep bash's "Killed" quiet)
  { (cd "$d" && exec timeout -k 10 "$cap" unshare -n sh -c '
      ip link set lo up || exit 97
      readlink /proc/self/ns/net >netns
      setsid sleep 1000000 </dev/null >/dev/null 2>&1 &
      echo $! >sentinel
      exec runtest --tool gdb --srcdir "$1" --target_board="$2" GDB="$3" GDBSERVER="$4" "$5" \
        </dev/null >runtest.out 2>&1' sh "$ts" "$(board_of "$set")" "$GDB" "$(server_for "$(board_of "$set")")" "$exp"); } 2>/dev/null
  rc=$?
  reap_netns "$d"
  printf 'rc=%s seconds=%s cap=%s\n' "$rc" "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')" \
    "$cap" >"$d/status"
}

# Before spending minutes on timeouts: does the server start, listen and take a connection
# the way the testsuite drives it? (A server that never prints "Listening on" costs every
# file its full connection timeouts.) Prints what went wrong and returns 1 if it did not.
# preflight [SERVER]  (default: $server)
preflight() {
  local d=$work/preflight server=${1:-$server}
  rm -rf "$d" && mkdir -p "$d" || return 1
  printf 'int main (void) { return 0; }\n' >"$d/prog.c"
  gcc -g -o "$d/prog" "$d/prog.c" || { echo "preflight: gcc failed"; return 1; }
  (cd "$d" && timeout -k 5 60 unshare -n sh -c '
      ip link set lo up || exit 97
      readlink /proc/self/ns/net >netns
      setsid sleep 1000000 </dev/null >/dev/null 2>&1 &
      echo $! >sentinel
      "$1" --once localhost:2346 ./prog </dev/null >server.out 2>&1 &
      spid=$! i=0
      until grep -qs "Listening on" server.out; do
        kill -0 $spid 2>/dev/null || { wait $spid; echo "it exited (status $?) without printing \"Listening on\"" >result; exit 1; }
        i=$((i + 1)); [ $i -le 200 ] || { echo "no \"Listening on\" within 20 s" >result; exit 1; }
        sleep 0.1
      done
      timeout 30 "$2" -nx -batch -iex "set auto-connect-native-target off" -iex "set sysroot" \
        -ex "target remote localhost:2346" -ex "info registers rip" -ex "monitor exit" ./prog >gdb.out 2>&1
      grep -q "^rip " gdb.out ||
        { echo "GDB could not connect (see gdb.out)" >result; exit 1; }
      echo ok >result' sh "$server" "$GDB")
  reap_netns "$d"
  [[ $(cat "$d/result" 2>/dev/null) == ok ]] && return 0
  echo "preflight: the server failed to start and accept GDB: $(cat "$d/result" 2>/dev/null || echo "no result")"
  echo "preflight: $server --once localhost:2346 ./prog printed:"
  sed -n '1,20s/^/    /p' "$d/server.out" 2>/dev/null
  [[ -f $d/gdb.out ]] && { echo "preflight: gdb printed:"; sed -n '1,20s/^/    /p' "$d/gdb.out"; }
  return 1
}

abort_run() {
  trap - TERM INT HUP
  echo "gdb-testsuite: interrupted; killing what the running test files left" >&2
  local d
  for d in "$work"/results/*/*/*/; do
    [[ -f $d/sentinel && ! -f $d/status ]] && reap_netns "$d"
  done
  exit 1
}

# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------
# Every result line of a set as "STATUS<TAB>file: test name", the test name normalised:
# DejaGnu's " (timeout)" suffix goes, so does anything that differs from run to run.
collect_results() {
  local set=$1 f d rc
  for f in "${set_files[@]}"; do
    d=$work/results/$set/${f%.exp}
    if [[ ! -d $d ]]; then
      printf 'ERROR\t%s: [runner] not run: the deadline of %ss had passed\n' "$f" "$deadline"
      continue
    fi
    rc=$(sed -n 's/^rc=\([0-9]*\).*/\1/p' "$d/status" 2>/dev/null)
    if [[ -f $d/gdb.sum ]]; then
      sed -nE 's/^(PASS|FAIL|XPASS|XFAIL|KPASS|KFAIL|UNSUPPORTED|UNTESTED|UNRESOLVED|ERROR): (.*)$/\1\t\2/p' "$d/gdb.sum" |
        awk -F'\t' -v f="$f" '{
          name = $2
          if (index(name, f ": ") == 1) name = substr(name, length(f) + 3)
          else if (name == f) name = ""
          sub(/ \(timeout\)$/, "", name)
          print $1 "\t" f ": " name
        }'
    fi
    if [[ $rc == 124 || $rc == 137 ]]; then
      printf 'ERROR\t%s: [runner] timed out after %ss\n' "$f" "$(sed -n 's/.*cap=//p' "$d/status")"
    elif [[ ! -f $d/gdb.sum ]]; then
      printf 'ERROR\t%s: [runner] no gdb.sum (exit %s, see runtest.out)\n' "$f" "${rc:-?}"
    fi
  done | sed -E -f "$here/normalize.sed"
}

# The files of SET that run now, one a line.
files_run() { local j; for j in "${jobs_list[@]}"; do [[ ${j%%$'\t'*} == "$1" ]] && echo "${j#*$'\t'}"; done; }

# Lines of expected/SET.pass that belong to files that run now (keep=1) or to the others (keep=0).
expected_lines() {
  local f=$here/expected/$1.pass
  [[ -f $f ]] || return 0
  awk -v files="$(files_run "$1")" -v keep="$2" '
    BEGIN { n = split(files, a, "\n"); for (i = 1; i <= n; i++) ran[a[i]] = 1 }
    { f = $0; sub(/: .*/, "", f); if ((f in ran) == keep) print }' "$f"
}

# Lines of stdin not matched by an entry of flaky.txt for SET.
drop_flaky() {
  local set=$1
  awk -v entries="$(entries_for "$here/flaky.txt" "$set")" '
    BEGIN { n = split(entries, e, "\n"); for (i = 1; i <= n; i++) if (e[i] != "") x[e[i]] = 1 }
    {
      if ($0 in x) next
      f = $0; sub(/: .*/, "", f)
      if (f in x) next
      print
    }'
}

# ---------------------------------------------------------------------------------------------
main() {
  [[ -x $GDB ]] || die "$GDB not found (apt-get install gdb)"
  local c
  for c in runtest expect unshare ip flock; do
    command -v "$c" >/dev/null || die "$c not found: run scripts/setup-deps.sh (dejagnu, expect, iproute2, util-linux)"
  done
  # A malformed flaky.txt or skip.txt line stops the run here (later uses are in subshells).
  for c in flaky.txt skip.txt; do entries_for "$here/$c" server >/dev/null; done
  ensure_testsuite
  resolve_jobs

  if [[ $list == 1 ]]; then
    printf '%s\n' "${jobs_list[@]}" | sed 's/\t/  /'
    local k; for k in "${!skipped[@]}"; do printf '%s  (skip.txt)\n' "${k/$'\t'/  }"; done | sort
    exit 0
  fi

  [[ $(id -u) -eq 0 ]] || die "run as root: each test file gets its own network namespace (unshare -n)"
  local build=${BRANCHSTUB_BUILD:-$root/build}
  case $build in /*) ;; *) build=$root/$build ;; esac
  server=${GDB_TESTSUITE_SERVER:-$build/server/branchstub}
  [[ -x $server ]] || die "server $server is not executable (build first: bash scripts/build.sh)"
  # For replay-server.sh (the branchstub-replay board): the binary itself, and the options.
  export BRANCHSTUB=$server BRANCHSTUB_REPLAY_ARGS=${GDB_TESTSUITE_SERVER_ARGS:-}
  work=${GDB_TESTSUITE_WORK:-$build/gdb-testsuite}
  mkdir -p "$work" || die "cannot create $work"
  work=$(cd "$work" && pwd)
  jobs=${GDB_TESTSUITE_JOBS:-$(nproc)}
  file_timeout=${GDB_TESTSUITE_FILE_TIMEOUT:-240}
  deadline=${GDB_TESTSUITE_DEADLINE:-0}
  if [[ -n ${GDB_TESTSUITE_SERVER_ARGS:-} ]]; then
    printf '#!/bin/sh\nexec %q %s "$@"\n' "$server" "$GDB_TESTSUITE_SERVER_ARGS" >"$work/server-wrapper.sh"
    chmod +x "$work/server-wrapper.sh"
    server=$work/server-wrapper.sh
  fi
  local gdbver; gdbver=$("$GDB" --version | head -1)
  [[ $gdbver == *" $GDB_UPSTREAM" ]] ||
    echo "gdb-testsuite: warning: $GDB is '$gdbver'; the testsuite and the expected results are $GDB_UPSTREAM" >&2

  say "server $server${GDB_TESTSUITE_SERVER_ARGS:+ (options: $GDB_TESTSUITE_SERVER_ARGS)}"
  say "${#jobs_list[@]} files, $jobs at a time, ${file_timeout}s cap each${GDB_TESTSUITE_DEADLINE:+, ${deadline}s for all}; logs under $work/results"

  # Longest first (durations of the previous run), so the last files do not leave a core idle.
  local order=() j
  if [[ -f $work/durations ]]; then
    mapfile -t order < <(printf '%s\n' "${jobs_list[@]}" |
      awk -F'\t' 'NR == FNR { t[$1 "\t" $2] = $3; next } { print ($0 in t ? t[$0] : 1000) "\t" $0 }' "$work/durations" - |
      sort -t$'\t' -k1,1gr | cut -f2-)
  else
    order=("${jobs_list[@]}")
  fi

  local pre_ok=1 sname
  preflight || pre_ok=0
  # The replay board's wrapper too (it records the program first), once, if a set uses it.
  for sname in "${sets_run[@]}"; do
    if [[ $pre_ok == 1 && $(board_of "$sname") == branchstub-replay ]]; then
      preflight "$here/replay-server.sh" || pre_ok=0
      break
    fi
  done
  if [[ $pre_ok == 0 ]]; then
    local n=0
    for sname in "${sets_run[@]}"; do
      n=$((n + $(expected_lines "$sname" 1 | drop_flaky "$sname" | wc -l)))
    done
    echo "gdb-testsuite: not running the testsuite: every file would only wait for timeouts"
    echo
    echo "0 passed, $n failed"
    exit 1
  fi

  # Stopped from outside (test.sh's stage timeout, ^C): the files still running leave nothing.
  trap 'abort_run' TERM INT HUP
  local t_start=$SECONDS running=0
  local cap left
  for j in "${order[@]}"; do
    cap=$file_timeout
    if [[ $deadline -gt 0 ]]; then
      left=$((deadline - (SECONDS - t_start)))
      if [[ $left -le 0 ]]; then   # not run; no stale results of an earlier run either
        rm -rf "$work/results/${j%%$'\t'*}/$(f=${j#*$'\t'}; echo "${f%.exp}")"
        continue
      fi
      [[ $left -lt $cap ]] && cap=$left
    fi
    run_one "${j%%$'\t'*}" "${j#*$'\t'}" "$cap" &
    running=$((running + 1))
    if [[ $running -ge $jobs ]]; then wait -n; running=$((running - 1)); fi
  done
  wait
  local wall=$((SECONDS - t_start))

  # Durations for the next run's ordering (merged with those of files not run this time).
  {
    for j in "${jobs_list[@]}"; do
      local s=${j%%$'\t'*} f=${j#*$'\t'}
      printf '%s\t%s\t%s\n' "$s" "$f" "$(sed -n 's/.*seconds=//p' "$work/results/$s/${f%.exp}/status" 2>/dev/null)"
    done
    if [[ -f $work/durations ]]; then cat "$work/durations"; fi
  } | awk -F'\t' '!seen[$1 "\t" $2]++' >"$work/durations.new" && mv "$work/durations.new" "$work/durations"

  local set total_kept=0 total_lost=0 total_new=0
  local table
  table=$(printf '%-11s %6s %5s %5s %5s %5s %5s %5s %5s %5s %5s %5s %6s\n' \
    SET PASS FAIL XFAIL KFAIL XPASS UNSUP UNTST UNRES ERROR FILES TMOUT FILE_S)
  : >"$work/lost.txt"
  : >"$work/new.txt"
  for set in "${sets_run[@]}"; do
    mapfile -t set_files < <(files_run "$set")
    collect_results "$set" >"$work/$set.results"
    local counts tmo=0 fsec
    counts=$(cut -f1 "$work/$set.results" | awk '
      { c[$1]++ }
      END { printf "%d %d %d %d %d %d %d %d %d", c["PASS"], c["FAIL"], c["XFAIL"], c["KFAIL"],
            c["XPASS"] + c["KPASS"], c["UNSUPPORTED"], c["UNTESTED"], c["UNRESOLVED"], c["ERROR"] }')
    tmo=$(grep -c $'^ERROR\t.*\[runner\] timed out' "$work/$set.results")
    fsec=$(for f in "${set_files[@]}"; do sed -n 's/.*seconds=//p' "$work/results/$set/${f%.exp}/status" 2>/dev/null; done |
      awk '{ s += $1 } END { printf "%.0f", s }')
    # shellcheck disable=SC2086
    table+=$'\n'$(printf '%-11s %6d %5d %5d %5d %5d %5d %5d %5d %5d %5d %5d %6s' \
      "$set" $counts "${#set_files[@]}" "$tmo" "$fsec")

    # The comparison: expected PASS lines of the files that ran, minus flaky.txt.
    local expected=$here/expected/$set.pass
    awk -F'\t' '$1 == "PASS" { print $2 }' "$work/$set.results" | drop_flaky "$set" | LC_ALL=C sort >"$work/$set.pass"
    expected_lines "$set" 1 | drop_flaky "$set" | LC_ALL=C sort >"$work/$set.expected"
    LC_ALL=C comm -23 "$work/$set.expected" "$work/$set.pass" >"$work/$set.lost"
    LC_ALL=C comm -13 "$work/$set.expected" "$work/$set.pass" >"$work/$set.new"
    local nexp nlost nnew
    nexp=$(wc -l <"$work/$set.expected"); nlost=$(wc -l <"$work/$set.lost"); nnew=$(wc -l <"$work/$set.new")
    total_kept=$((total_kept + nexp - nlost)); total_lost=$((total_lost + nlost)); total_new=$((total_new + nnew))
    # What each lost line is now, and where to look.
    awk -F'\t' -v set="$set" -v res="$work/results/$set" '
        FILENAME == ARGV[1] {
          if (!($2 in now) || $1 != "PASS") now[$2] = $1
          f = $2; sub(/: .*/, "", f)
          # what the file said that was not a PASS, for tests it never reached
          if ($1 != "PASS" && !(f in why)) why[f] = $1 ": " substr($2, length(f) + 3)
          if ($1 == "ERROR" && $2 ~ /\[runner\] timed out/) why[f] = "file timed out"
          next
        }
        {
          f = $0; sub(/: .*/, "", f)
          st = ($0 in now) ? now[$0] : "never reached" ((f in why) ? " (first non-PASS result of the file: " why[f] ")" : "")
          sub(/\.exp$/, "", f)
          printf "LOST %s: %s\n    now: %s\n    log: %s/%s/gdb.log\n", set, $0, st, res, f
        }' "$work/$set.results" "$work/$set.lost" >>"$work/lost.txt"
    sed "s/^/NEW  $set: /" "$work/$set.new" >>"$work/new.txt"

    if [[ $update == 1 ]]; then
      mkdir -p "$here/expected"
      # Keep the lines of files that did not run (SET:FILE runs, skip.txt), replace the others.
      { expected_lines "$set" 0
        cat "$work/$set.pass"; } | LC_ALL=C sort >"$expected.new" && mv "$expected.new" "$expected"
    fi
  done

  {
    echo
    echo "GDB $GDB_UPSTREAM testsuite, server $server"
    echo "$table"
    echo "wall ${wall}s for ${#jobs_list[@]} files, $jobs at a time (FILE_S: seconds summed over a set's files)"
    local notrun
    notrun=$(for set in "${sets_run[@]}"; do cat "$work/$set.results"; done |
      grep -c $'^ERROR\t.*\[runner\] not run: the deadline')
    [[ $notrun -eq 0 ]] || echo "$notrun file(s) not started: the deadline of ${deadline}s (GDB_TESTSUITE_DEADLINE) had passed"
    if [[ ${#skipped[@]} -gt 0 ]]; then
      echo "not run (tests/gdb-testsuite/skip.txt says why): ${#skipped[@]} file(s)"
      printf '%s\n' "${!skipped[@]}" | sort | awk -F'\t' '{ printf "  %-11s %s\n", $1, $2 }'
    fi
  } | tee "$work/summary.txt"

  if [[ -s $work/new.txt ]]; then
    echo
    echo "$total_new PASS lines not in the expected lists (tests/gdb-testsuite/run.sh --update-expected adds them):"
    head -n 40 "$work/new.txt"
    [[ $total_new -gt 40 ]] && echo "  ... all in $work/new.txt"
  fi
  if [[ -s $work/lost.txt ]]; then
    echo
    echo "$total_lost expected PASS lines do not pass now; by file:"
    for set in "${sets_run[@]}"; do
      sed 's/: .*//' "$work/$set.lost" | uniq -c | awk -v set="$set" '{ printf "  %-11s %-50s %5d\n", set, $2, $1 }'
    done
    echo
    # Three lines per lost test; a broken server can lose a thousand.
    head -n 300 "$work/lost.txt"
    [[ $total_lost -gt 100 ]] && echo "... the first 100 shown; all $total_lost in $work/lost.txt"
  fi
  if [[ $update == 1 ]]; then
    echo
    echo "expected lists rewritten: $(cd "$root" && git status --short --untracked-files=all -- tests/gdb-testsuite/expected | wc -l) changed file(s) under tests/gdb-testsuite/expected/"
  fi
  echo
  echo "$total_kept passed, $total_lost failed"
  [[ $update == 1 || $total_lost -eq 0 ]]
}

main
