#!/usr/bin/env bash
# it_vs_openmpi_compare.sh: perf/vs-openmpi.sh's ratio table from kept JSON
# (-c DIR), on numbers chosen so that a median taken over strings ("43.35"
# sorts before "5.87") differs from the true one.  usage: it_vs_openmpi_compare.sh VS_OPENMPI
set -u
vs=$1
d=$(mktemp -d /tmp/it_vs_compare.XXXXXX)
trap 'rm -rf "$d"' EXIT
fail() { echo "it_vs_openmpi_compare: FAIL: $*" >&2; cat "$d/out.txt" >&2; exit 1; }

row() { # tool size oop_time_us ip_time_us (busbw = size / time, as the tools write it)
	awk -v t="$1" -v z="$2" -v o="$3" -v i="$4" 'BEGIN {
		printf "{\"tool\":\"%s\",\"coll\":\"scatter\",\"size\":%d,\"oop_time_us\":%s,\"oop_busbw\":%.4f,", t, z, o, z / o / 1000
		printf "\"ip_time_us\":%s,\"ip_busbw\":%.4f}\n", i, z / i / 1000 }'
}
{ row sluice 65536 3.49 9; row sluice 65536 43.35 10; row sluice 65536 5.87 11
  row sluice 65536 6.47 12; row sluice 65536 44.85 8; } >"$d/sluice-scatter.json"
{ row mpi 65536 12.57 2; row mpi 65536 3.69 2; row mpi 65536 3.99 2
  row mpi 65536 4.00 2; row mpi 65536 4.69 2; } >"$d/mpi-scatter.json"
# a size with two lines a round (two sizes rounded to one count), and one sluice did not run
for r in 1 2 3 4 5; do row sluice 12 1 1; row sluice 12 1 1; row mpi 12 2 2; row mpi 12 2 2; row mpi 24 2 2; done >>"$d/both"
grep -h sluice "$d/both" >>"$d/sluice-scatter.json"; grep -h mpi "$d/both" >>"$d/mpi-scatter.json"

bash "$vs" -C scatter -c "$d" >"$d/out.txt" 2>&1 || fail "vs-openmpi.sh -c exited $?"
grep -q "medians of 5 rounds" "$d/out.txt" || fail "no '(medians of 5 rounds)' header"
awk '$1 == 12 { n++; if ($2 != "0.50") bad = 1 } $1 == 24 { bad = 1 } END { exit n != 1 || bad }' "$d/out.txt" ||
	fail "size 12 (ratio 0.50, two lines a round) or size 24 (no sluice lines) compared wrongly"
# medians: sluice oop 6.47 ip 10, mpi oop 4.00 ip 2: time 1.62 / 5.00, busbw their inverses
read -r size t_oop t_ip b_oop b_ip < <(awk '$1 == 65536' "$d/out.txt")
[ "$size $t_oop $t_ip $b_oop $b_ip" = "65536 1.62 5.00 0.62 0.20" ] ||
	fail "ratios '$t_oop $t_ip $b_oop $b_ip', expected '1.62 5.00 0.62 0.20'"
grep -q "timed together\|timed apart\|MIXED" "$d/out.txt" && fail "JSON without \"synced\" said how it was timed"
# the header says whether the ranks were timed together (-S, the default) or apart (-A)
timing() { # sluice's synced, mpi's synced: the header's words
	mkdir -p "$d/t" && rm -f "$d/t/"*
	sed "s/^{/{\"synced\":$1,/" "$d/sluice-scatter.json" >"$d/t/sluice-scatter.json"
	sed "s/^{/{\"synced\":$2,/" "$d/mpi-scatter.json" >"$d/t/mpi-scatter.json"
	bash "$vs" -C scatter -c "$d/t" 2>&1 | grep -o "timed together\|timed apart\|timing MIXED"
}
[ "$(timing true true)" = "timed together" ] || fail "both synced: header says '$(timing true true)'"
[ "$(timing false false)" = "timed apart" ] || fail "neither synced: header says '$(timing false false)'"
[ "$(timing true false)" = "timing MIXED" ] || fail "one synced: header says '$(timing true false)'"
# a barrier moves no bytes: no busbw ratio ("-", not 0.00, which would read as far behind);
# nor has it an in-place phase: sluice-perf writes null there ("-", even against an older
# mpi-allreduce-perf's JSON that has a figure; the null once read as 0, a ratio of 0.00)
for t in sluice mpi; do
	ip=$([ $t = sluice ] && echo null || echo 2)
	for r in 1 2 3; do echo "{\"tool\":\"$t\",\"coll\":\"barrier\",\"size\":0,\"oop_time_us\":$([ $t = sluice ] && echo 1 || echo 4),\"oop_busbw\":0,\"ip_time_us\":$ip,\"ip_busbw\":$([ $t = sluice ] && echo null || echo 0)}"; done >"$d/$t-barrier.json"
done
bash "$vs" -C barrier -c "$d" >"$d/out.txt" 2>&1 || fail "vs-openmpi.sh -c on a barrier exited $?"
[ "$(awk '$1 == 0 || $2 == "median" { $1 = $1; print }' "$d/out.txt" | tr '\n' ';')" = "0 0.25 - - -;# median 0.25 - - -;" ] ||
	fail "barrier rows: '$(awk '$1 == 0 || $2 == "median"' "$d/out.txt" | tr '\n' ';')', expected the out-of-place time ratio and '-' for the rest"
bash "$vs" -C gather -c "$d" >"$d/out.txt" 2>&1 && fail "a collective with no kept JSON was compared"
grep -q "has no sluice-gather.json" "$d/out.txt" || fail "no message for a missing JSON"
echo "it_vs_openmpi_compare: ok"
