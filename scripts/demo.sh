#!/usr/bin/env bash
# The one demo command: branch history and stepbranch on the bundled example program.
#
#   bash scripts/demo.sh             # installs what is missing (no kmod packages), builds, runs
#   bash scripts/demo.sh --no-deps   # skip scripts/setup-deps.sh
#
# It starts `build/server/branchstub --once :PORT build/inferiors/branches` on a free
# loopback port and drives it with a scripted `gdb -batch` session: `record btrace` from
# trace_begin() to trace_end(), `info record`, the function-call and instruction history,
# `reverse-step`, `reverse-stepbranch`, then `stepbranch` on the live program.
set -euo pipefail
cd "$(dirname "$0")/.."

deps=1
for arg in "$@"; do
  case "$arg" in
    --no-deps|--skip-deps) deps=0 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown option: $arg" >&2; exit 2 ;;
  esac
done

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if [[ $deps == 1 ]]; then
  say "dependencies"
  bash scripts/setup-deps.sh --no-kmod
fi

build_dir=${BUILD_DIR:-build}
say "build ($build_dir: the server and the example program only; test.sh builds the rest)"
mkdir -p "$build_dir"
log=$build_dir/demo-build.log
TARGETS="branchstub branches" BUILD_DIR=$build_dir bash scripts/build.sh >"$log" 2>&1 || {
  tail -40 "$log"; echo "demo: build failed (log: $log)" >&2; exit 1; }
echo "built; log in $log"

server=$build_dir/server/branchstub
prog=$build_dir/inferiors/branches
for f in "$server" "$prog"; do
  [[ -x $f ]] || { echo "demo: $f was not built" >&2; exit 1; }
done

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# A free loopback port: bind to port 0 and let the kernel choose.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

say "server: $server --once :$port $prog"
"$server" --once ":$port" "$prog" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  grep -q "Listening on port" "$work/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; echo "demo: the server exited" >&2; exit 1; }
  sleep 0.1
done
grep -q "Listening on port" "$work/server.log" || { cat "$work/server.log"; echo "demo: the server did not start listening" >&2; exit 1; }
sed 's/^/  [server] /' "$work/server.log"

cat >"$work/demo.gdb" <<GDB
set pagination off
set confirm off
set width 0
set record instruction-history-size 12
set record function-call-history-size 30
source scripts/gdb/branchstub.py
echo \n--- target remote :$port\n
target remote :$port
break trace_begin
break trace_end
continue
echo \n--- record btrace   (branchstub serves GDB's own btrace packets)\n
record btrace
echo \n--- continue to trace_end()\n
continue
echo \n--- info record\n
info record
echo \n--- record function-call-history /c   (the calls, indented by depth)\n
record function-call-history /c
echo \n--- record instruction-history   (the last 12 instructions)\n
record instruction-history
echo \n--- reverse-step   (replays the recorded history backwards)\n
reverse-step
echo \n--- reverse-stepbranch 3   (back through the last three taken branches)\n
reverse-stepbranch 3
echo \n--- record goto end\n
record goto end
echo \n--- stepbranch   (runs the live program to its next taken branch)\n
stepbranch
echo \n--- stepbranch 3\n
stepbranch 3
echo \n--- monitor help\n
monitor help
echo \n--- record stop, continue to the end\n
record stop
delete
continue
GDB

say "gdb -batch -x demo.gdb $prog"
timeout 120 gdb -batch -nx -x "$work/demo.gdb" "$prog" 2>&1 | grep -v '^warning: File transfers from remote targets can be slow' || true

wait "$server_pid" 2>/dev/null || true
server_pid=
say "server output after the session"
sed 's/^/  [server] /' "$work/server.log" | tail -n +2
say "done"
