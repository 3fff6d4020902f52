#!/usr/bin/env bash
# Run the LLDB integration tests with LLDB 14 instead of 16.
#
# Debian 12's lldb-14 and lldb-16 packages conflict, so this script swaps them:
#   1. removes lldb-16 / python3-lldb-16, installs lldb-14 / python3-lldb-14;
#   2. runs tests/integration/test_lldb.py with BRANCHSTUB_LLDB=/usr/bin/lldb-14;
#   3. swaps back (also when the tests fail or the script is interrupted).
# Needs root (or sudo), apt access and a built tree (bash scripts/build.sh).
#   bash scripts/check-lldb14.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "check-lldb14: needs root or sudo" >&2; exit 1; }
  as_root=(sudo)
fi
apt() { echo "check-lldb14: + apt-get $*"; DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get "$@"; }
is_installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]; }

had16=0
is_installed lldb-16 && had16=1

swap_back() {
  local rc=$?
  echo "check-lldb14: swapping back to LLDB 16"
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

echo "check-lldb14: $(/usr/bin/lldb-14 --version | head -1)"
echo "check-lldb14: + BRANCHSTUB_LLDB=/usr/bin/lldb-14 /usr/bin/python3 -m pytest -q tests/integration/test_lldb.py $*"
BRANCHSTUB_BUILD=${BRANCHSTUB_BUILD:-$PWD/build} BRANCHSTUB_LLDB=/usr/bin/lldb-14 \
  /usr/bin/python3 -m pytest -q tests/integration/test_lldb.py "$@"
