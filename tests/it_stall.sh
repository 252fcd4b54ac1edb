#!/usr/bin/env bash
# it_stall.sh: a sluiced whose engine thread stops names it.  Two daemons
# run; node 0's engine thread alone is stopped for 3 s (ptrace's seize and
# interrupt stop one thread, not the process), and node 0's log must say
# the engine has not come round and where its thread is, then that it came
# round again (dataplane/stall_watch.h).  The ranks (sluice-perf) start only
# once the thread is stopped, so node 0's server spends the stall waiting
# for its engine to take rank 0's HELLO: the watch must go on from there
# (a failed run of session 24 had a server waiting so, blind).  Needs root
# and python3.
# --client-timeout: the ranks' SLUICE_TIMEOUT is 1 s, below the daemons' 20:
# rank 0's HELLO must fail at 1 s with the server's answer, naming the
# engine, where its thread is and the request (before, libsluice's own "did
# not answer HELLO within SLUICE_TIMEOUT=1 s" came 19 s before the server's).
# --wait-timeout: the same timeouts, and the thread is stopped for 5 s while
# the ranks run their calls: rank 0's wait, which gets no completion, must
# end with the dataplane's answer that the engine is stuck and where its
# thread is (before: libsluice's "the dataplane ... is stuck or a rank
# stopped", which named nothing).
# --process-stop: as --wait-timeout, but node 0's whole process is stopped
# (SIGSTOP) for 4 s, 2 s into the calls (a rank stopped in its first calls
# may be in a request to its dataplane, not a wait): rank 0's wait runs
# out at 3 s (SLUICE_TIMEOUT and libsluice's 2 s) and asks while the
# process is stopped; the answer, given once it runs again, must name the
# engine that came round again after its stall and say that its thread had
# (next to) no CPU in it (before: the engine was passing again by then, and
# the answer named nothing).
# usage: it_stall.sh SLUICE_RUN SLUICE_PERF [--client-timeout | --wait-timeout | --process-stop]
set -u
run=$1 perf=$2 client=${3:-}
ranks=("$perf" -b 8 -e 8 -n 5 -w 1) stop_s=3 stop_after=0 whole=0
[ "$client" = --client-timeout ] && ranks=(env SLUICE_TIMEOUT=1 "${ranks[@]}")
[ "$client" = --wait-timeout ] && ranks=(env SLUICE_TIMEOUT=1 "$perf" -b 8 -e 8 -n 100000000 -w 1) stop_s=5 stop_after=1
[ "$client" = --process-stop ] && ranks=(env SLUICE_TIMEOUT=1 "$perf" -b 8 -e 8 -n 100000000 -w 1) stop_s=4 stop_after=2 whole=1
log=$(mktemp /tmp/sl-stall.XXXXXX) go=$(mktemp -u /tmp/sl-stall-go.XXXXXX)
trap 'rm -f "$log" "$go"' EXIT
"$run" -n 2 --daemons -v --timeout 20 -- bash -c 'while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"' \
	"$go" "${ranks[@]}" >"$log" 2>&1 &
runner=$!
# The run ends by itself (--wait-timeout's ranks when a wait fails); one that went wrong is
# stopped after $1 s, its log shown, not left to meson's timeout, which killed one at 120 s with
# no log at all (session 32, a load of 17-24 on 2 cores).  Its status is sluice-run's.
end_run() {
	for ((t = 0; t < $1 * 10; t++)); do kill -0 $runner 2>/dev/null || break; sleep 0.1; done
	kill -0 $runner 2>/dev/null && { echo "it_stall: sluice-run had not ended $1 s later: stopped" >>"$log"; kill $runner; }
	wait $runner
}

node0="" tid=""
for _ in $(seq 1 200); do # EAL's start is slow on a loaded machine
	worker=$(pgrep -d, -P "$runner") # sluice-run's worker starts the dataplanes
	[ -n "$worker" ] && node0=$(pgrep -P "$worker" -f "sluiced --node 0 " | head -1)
	[ -n "$node0" ] && tid=$(grep -l '^rte-worker' /proc/$node0/task/*/comm 2>/dev/null | head -1 | cut -d/ -f5) &&
		[ -n "$tid" ] && break
	sleep 0.1
done
[ -n "$node0" ] && [ -n "$tid" ] || { touch "$go"; end_run 5; cat "$log"; echo "FAIL: node 0's engine thread never showed"; exit 1; }

# the ranks start before the stop when stop_after > 0: stop_after seconds after rank 0 printed
# its table's header, in its calls by then (a fixed time from their start once stopped a loaded
# machine's ranks in their communicator's creation, and the run then timed out elsewhere), else
# once the stop began
python3 - "$tid" "$go" "$stop_s" "$stop_after" "$log" "$whole" "$node0" <<'PY' || { touch "$go"; end_run 5; cat "$log"; echo "FAIL: could not stop thread $tid"; exit 1; }
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
SEIZE, INTERRUPT, DETACH, WALL = 0x4206, 0x4207, 17, 0x40000000
tid, stop_s, after = int(sys.argv[1]), float(sys.argv[3]), float(sys.argv[4])
whole, pid = sys.argv[6] == "1", int(sys.argv[7])
if after:
    open(sys.argv[2], "w").close()
    for _ in range(1200):
        if "(elements)" in open(sys.argv[5]).read():
            break
        time.sleep(0.05)
    else:
        sys.exit("rank 0 printed no table header within 60 s")
    time.sleep(after)
if whole:
    os.kill(pid, signal.SIGSTOP)
    time.sleep(stop_s)
    os.kill(pid, signal.SIGCONT)
    sys.exit(0)
if libc.ptrace(SEIZE, tid, 0, 0) or libc.ptrace(INTERRUPT, tid, 0, 0):
    sys.exit(f"ptrace: {os.strerror(ctypes.get_errno())}")
os.waitpid(tid, WALL)
open(sys.argv[2], "w").close()  # the ranks may start
time.sleep(stop_s)
libc.ptrace(DETACH, tid, 0, 0)
PY
end_run 30
rc=$?
grep -E "come round|came round" "$log"
if [ "$client" = --client-timeout ]; then
	grep -q "did not answer" "$log" && { cat "$log"; echo "FAIL: libsluice's own timeout, not the server's answer"; exit 1; }
	grep -Eq "channel 0's engine \(dataplane node 0\) has not come round for 1\.[0-9] s \(the client's SLUICE_TIMEOUT\): its thread $tid .*the request to add a client was not applied" "$log" ||
		{ cat "$log"; echo "FAIL: rank 0's HELLO did not end at its SLUICE_TIMEOUT naming node 0's engine thread $tid"; exit 1; }
	echo "it_stall: ok" # the ranks, and so the daemons, end before the stall does: the watch is the plain mode's
	exit 0
elif [ "$client" = --process-stop ]; then
	# the engine came round again before the question, or (starved once its process ran again) not yet
	grep -Eq "sluice_wait: request [0-9]+ got no completion .* says: channel 0's engine \(dataplane node 0\) (came round again [0-9.]+ s ago, after ([3-9]|[1-9][0-9]+)\.[0-9] s without a pass: its thread had [0-9.]+ ms of a CPU in that time|has not come round for ([3-9]|[1-9][0-9]+)\.[0-9] s \(since the dataplane last saw it pass; for [0-9.]+ s of that its whole process did not run)" "$log" ||
		{ cat "$log"; echo "FAIL: rank 0's wait did not end with the dataplane naming node 0's engine, stopped with its process"; exit 1; }
	echo "it_stall: ok"
	exit 0
elif [ "$client" = --wait-timeout ]; then
	grep -Eq "sluice_wait: request [0-9]+ got no completion .* says: channel 0's engine \(dataplane node 0\) has not come round for ([1-9]|[1-9][0-9]+)\.[0-9] s \(since the dataplane last saw it pass\): its thread $tid " "$log" ||
		{ cat "$log"; echo "FAIL: rank 0's wait did not end with the dataplane naming node 0's stopped engine thread $tid"; exit 1; }
	echo "it_stall: ok"
	exit 0
elif [ $rc -ne 0 ]; then
	cat "$log"; echo "FAIL: sluice-run exited $rc"; exit 1
fi
grep -q "sluiced node 0: the engine has not come round for [0-9.]* s: its thread $tid " "$log" ||
	{ cat "$log"; echo "FAIL: node 0 did not name its stopped engine thread $tid"; exit 1; }
# the stop is 3 s; the watch looks every 100 ms (a 3 s stop read 2.9 s once) and load stretches it
grep -Eq "sluiced node 0: the engine came round again after (2\.[5-9]|[3-9]\.[0-9]|[1-9][0-9]+\.[0-9]) s" "$log" ||
	{ cat "$log"; echo "FAIL: node 0 did not say its engine came back"; exit 1; }
# node 1's engine may be named only as waiting for a CPU: with a load of 27 on 2 cores it went
# 2.8 s without coming round once (session 32), and the watch called that a loop
if grep "sluiced node 1: the engine has not come round" "$log" | grep -vq "it waits for one (the machine is overloaded"; then
	cat "$log"; echo "FAIL: node 1's engine, never stopped, was reported"; exit 1
fi
echo "it_stall: ok"
