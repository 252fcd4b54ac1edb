#!/usr/bin/env bash
# run_fuzz.sh: a short, bounded libFuzzer run for the test suite.  New inputs
# go to a scratch directory (the first one libFuzzer is given), so the
# repository's seed corpus is only read.  usage: run_fuzz.sh TARGET CORPUS [RUNS]
set -u
target=$1 corpus=$2 runs=${3:-20000}
scratch=$(mktemp -d /tmp/sl-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
"$target" "$scratch" "$corpus" -runs="$runs" -seed=1 -max_total_time=60 -timeout=10 \
	-rss_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$scratch/" 2>&1 | tail -25
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo "run_fuzz: $target failed (status $rc); the crashing input is printed above" >&2
	for f in "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-*; do
		[ -f "$f" ] && { echo "$f:"; od -An -tx1 "$f" | head -20; }
	done
fi
exit "$rc"
