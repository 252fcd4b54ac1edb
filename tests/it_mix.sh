#!/usr/bin/env bash
# it_mix.sh: the mixed-call soak: it_mix over many seeds, each seed in the
# next of several setups (4 ranks, faults injected, daemons, two channels,
# the gated path, small chunks with algorithms forced, 4 ranks as daemons).  A failing seed's
# log is kept and its replay command printed; the run goes on.
# usage: it_mix.sh SLUICE_RUN IT_MIX [SEEDS [FIRST_SEED]]
#   env: MIX_CALLS (default 300), MIX_MAX_BYTES (default 4 MiB), MIX_MODES (space-separated
#   mode names from the list below; default all), MIX_LOGS (where failing logs go; default /tmp)
set -u
run=$1 prog=$2 seeds=${3:-20} first=${4:-1}
export MIX_CALLS=${MIX_CALLS:-300} MIX_MAX_BYTES=${MIX_MAX_BYTES:-4194304}
faults='drop:0.01,reorder:16,dup:0.002,corrupt:0.0001'
# name: sluice-run options | environment
declare -A modes=(
	[plain4]='-n 4 --embedded|'
	[faults4]="-n 4 --embedded|SLUICE_FAULT=$faults"
	[daemons3]="-n 3 --daemons|SLUICE_FAULT=$faults"
	[channels2]='-n 2 --daemons --channels 2|'
	[gated3]="-n 3 --embedded|SLUICE_GATE_HOST=1 SLUICE_CHUNK_SIZE=4K SLUICE_FAULT=$faults"
	[chunks3]='-n 3 --embedded|SLUICE_CHUNK_SIZE=4K SLUICE_ALGO=rd,tree,pairwise,direct'
	# many small calls: lingering ones, leaves and roots running ahead, early packets
	[small4]='-n 4 --embedded|MIX_MAX_BYTES=70000 MIX_CALLS=1500'
	[small3]="-n 3 --daemons|MIX_MAX_BYTES=70000 MIX_CALLS=1500 SLUICE_FAULT=$faults"
	[channels3]='-n 3 --embedded --channels 2|'
	# 1 KiB packets: stashes reach DP_STASH_HOLD packets, senders are held
	[packets3]="-n 3 --embedded --payload 1024|SLUICE_FAULT=$faults"
	# 4 sluiced and 4 ranks: 8 processes, more than cores on small machines
	[daemons4]='-n 4 --daemons|'
	[daemons4f]="-n 4 --daemons|SLUICE_FAULT=$faults"
	[packets4d]="-n 4 --daemons --payload 1024|SLUICE_FAULT=$faults"
)
read -r -a names <<<"${MIX_MODES:-plain4 faults4 daemons3 channels2 gated3 chunks3 small4 small3 channels3 packets3 daemons4 daemons4f packets4d}"
logs=${MIX_LOGS:-/tmp}
failed=0 calls=0
for ((s = first; s < first + seeds; s++)); do
	mode=${names[$(((s - first) % ${#names[@]}))]}
	spec=${modes[$mode]:?unknown mode $mode}
	read -r -a opts <<<"${spec%%|*}"
	read -r -a envs <<<"${spec#*|}"
	envs=("${envs[@]/%SLUICE_FAULT=$faults/SLUICE_FAULT=$faults,seed:$s}")
	log=$(mktemp "$logs/mix-$mode-$s.XXXXXX")
	start=$(date +%s)
	env "${envs[@]}" "$run" "${opts[@]}" --timeout 20 -- "$prog" "$s" >"$log" 2>&1
	rc=$?
	line=$(grep '^it_mix rank 0' "$log")
	n=$(sed -n 's/.*, \([0-9]*\) calls (.*/\1/p' <<<"$line")
	calls=$((calls + ${n:-0}))
	if [ $rc -ne 0 ]; then
		failed=$((failed + 1))
		echo "it_mix.sh: seed $s ($mode) FAILED (status $rc, $(($(date +%s) - start)) s), log $log; replay:"
		echo "  MIX_CALLS=$MIX_CALLS MIX_MAX_BYTES=$MIX_MAX_BYTES ${envs[*]} $run ${opts[*]} --timeout 20 -- $prog $s"
		grep -v '^\[sluiced' "$log" | grep -m 5 -E 'rank [0-9]+:|sluice-run' | sed 's/^/  /'
	else
		echo "it_mix.sh: seed $s ($mode) ok, $(($(date +%s) - start)) s: ${line#*calls }"
		rm -f "$log"
	fi
done
echo "it_mix.sh: $seeds seeds from $first, $calls calls checked, $failed failed"
[ $failed -eq 0 ]
