# idle_lines.sh, sourced by it_idle.sh and it_yield.sh: run a sluice program
# under sluice-run -v and count the dataplanes' "idle:" counter lines that
# match a pattern.  The sourcing script sets run, prog and name.
log=$(mktemp /tmp/sl-idle-lines.XXXXXX)
trap 'rm -f "$log"' EXIT
# expect_idle_lines WANT PATTERN SLUICE_RUN_ARGS...: exactly WANT lines match
expect_idle_lines() {
	local want=$1 pattern=$2 got
	shift 2
	if ! "$run" -v --timeout 20 "$@" -- "$prog" >"$log" 2>&1; then
		echo "$name: the run with [$*] (SLUICE_YIELD=${SLUICE_YIELD-unset}) failed; log:" >&2
		cat "$log" >&2
		exit 1
	fi
	grep 'idle:' "$log"
	got=$(grep -cE "$pattern" "$log")
	if [ "$got" -ne "$want" ]; then
		echo "$name: [$*] (SLUICE_YIELD=${SLUICE_YIELD-unset}): $got line(s) match '$pattern', want $want" >&2
		exit 1
	fi
}
