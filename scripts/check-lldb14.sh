#!/usr/bin/env bash
# Run the LLDB integration tests with LLDB 14 instead of 16: Debian's lldb-14 unpacked beside
# lldb-16 (not installed) under /opt/lldb14 or ~/.cache/branchstub/lldb14.
#
#   bash scripts/check-lldb14.sh [options] [pytest args]
#
# The same as `bash scripts/lldb-beside.sh 14 ...`; options (--prefix, --setup-only, --refresh,
# --all, --swap) and $LLDB14_PREFIX: see scripts/lldb-beside.sh --help.
exec bash "$(dirname "$0")/lldb-beside.sh" 14 "$@"
