#!/usr/bin/env bash
# Where the CPU of the 64 MiB `dump binary memory` goes: GDB vs the server.
#   bash bench/memdump_cpu.sh BUILD_DIR [branchstub|gdbserver]...
# Runs the memory-read session of bench.py once per server, with /usr/bin/time on the
# server and on GDB (whole sessions: start-up included, which is small next to the dump).
set -euo pipefail
build=${1:?usage: memdump_cpu.sh BUILD_DIR [servers...]}; shift
servers=("$@"); [[ ${#servers[@]} -gt 0 ]] || servers=(branchstub gdbserver)
prog=$build/inferiors/memdump
dump=$(mktemp); cmds=$(mktemp); trap 'rm -f "$dump" "$cmds"' EXIT
for s in "${servers[@]}"; do
  case $s in
    branchstub) exe=$build/server/branchstub ;;
    gdbserver) exe=$(command -v gdbserver) ;;
    *) echo "unknown server $s" >&2; exit 2 ;;
  esac
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  log=$(mktemp)
  /usr/bin/time -f "$s: user %U s, sys %S s, wall %e s, maxrss %M kB" -o "$log.time" \
    "$exe" --once ":$port" "$prog" >"$log" 2>&1 &
  spid=$!
  for _ in $(seq 200); do grep -q "Listening on port" "$log" && break; sleep 0.05; done
  cat >"$cmds" <<EOF
set pagination off
set confirm off
target remote :$port
break ready
continue
python import time; __t0 = time.perf_counter()
dump binary memory $dump buf buf+buf_size
python print('dump: %.3f s wall in GDB' % (time.perf_counter() - __t0))
kill
EOF
  /usr/bin/time -f "gdb ($s session): user %U s, sys %S s, wall %e s" gdb -batch -nx -x "$cmds" "$prog" 2>&1 \
    | grep -E '^(dump:|gdb \()' | sed "s/^dump:/$s dump:/"
  wait "$spid" || true
  cat "$log.time"; rm -f "$log" "$log.time"
done
