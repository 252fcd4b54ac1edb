#!/usr/bin/env bash
# cli_help.sh: every command-line tool answers --help (or -h) with its usage
# and exit status 0, in a bare environment: no SLUICE_* variable set.
# usage: cli_help.sh TOOL...
set -u
for tool in "$@"; do
	flag=--help
	[ "$(basename "$tool")" = sluice-perf ] && flag=-h # getopt's short options only
	out=$(env -u SLUICE_MESH -u SLUICE_BUILD_ROOT "$tool" $flag 2>&1)
	rc=$?
	[ $rc = 0 ] || { echo "cli_help: FAIL: $tool $flag exited $rc: $out" >&2; exit 1; }
	grep -q '^usage: ' <<<"$out" || { echo "cli_help: FAIL: $tool $flag printed no usage line: $out" >&2; exit 1; }
	echo "$(basename "$tool") $flag: ok"
done
