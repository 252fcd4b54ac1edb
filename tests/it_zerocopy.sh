#!/usr/bin/env bash
# it_zerocopy.sh: with hugepages, the client end of every memif mesh link
# (sluice-run --net memif; the default mesh is sluice's own shm links)
# runs net_memif's zero-copy mode (its own buffers are the ring's), and the
# roles alternate so that every dataplane is the client of half its links.
# Every collective must still give exact results, as daemons with several
# zero-copy links in one process (4 channels: 22.11's memif closes EAL's
# hugepage file after the first, which the dataplane puts back) and embedded
# with 3 ranks; each dataplane's start line and -v link lines must say which
# links run zero-copy, and SLUICE_ZERO_COPY=0 must turn it off.  Reserves
# (and mounts) the hugepages it needs when it may, and gives them back;
# skips (77) where it cannot have them.
#   usage: it_zerocopy.sh SLUICE_RUN IT_COLLS
set -u
run=$1 colls=$2
# 3 embedded dataplanes of 2 links take EAL's minimum, 512 MiB, each
need_mb=1600

skip() { echo "it_zerocopy: SKIP: $*"; exit 77; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }

# The hugepages reserved here are this test's alone: its hugetlbfs mount is
# in a mount namespace of its own, which other runs on the machine do not
# see (a dataplane beside it took them, and one of the two failed in EAL
# when they went), and which goes with the test even when it is killed; two
# of it at once (test runs side by side) take turns, and each gives back
# what it added, not the count it saw at its start.
if [ -z "${IT_ZEROCOPY_NS:-}" ] && unshare -m --propagation private true 2>/dev/null; then
	IT_ZEROCOPY_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
exec 9>/tmp/sluice-it-zerocopy.lock
flock -w 240 9 || skip "another zerocopy test held the hugepages for 240 s"
page_kb=$(meminfo Hugepagesize)
[ -n "$page_kb" ] || skip "this kernel has no hugepages"
need=$(((need_mb * 1024 + page_kb - 1) / page_kb))
nr=/proc/sys/vm/nr_hugepages added=0 mnt=""
cleanup() {
	[ -n "$mnt" ] && umount "$mnt" && rmdir "$mnt"
	[ "$added" -gt 0 ] && echo $(($(cat $nr) - added)) >$nr
}
trap cleanup EXIT
free=$(meminfo HugePages_Free)
if [ "$free" -lt "$need" ]; then
	[ -w $nr ] || skip "needs $need free hugepages of $page_kb kB, $free are, and $nr is not writable (run as root)"
	before=$(cat $nr)
	echo $((before + need - free)) >$nr 2>/dev/null
	added=$(($(cat $nr) - before))
	free=$(meminfo HugePages_Free)
	[ "$free" -ge "$need" ] || skip "needs $need free hugepages of $page_kb kB; the kernel gave only $free (memory short or fragmented)"
fi
if [ -n "${IT_ZEROCOPY_NS:-}" ] || ! grep -q " hugetlbfs " /proc/mounts; then
	mnt=$(mktemp -d /tmp/it_zerocopy.XXXXXX)
	mount -t hugetlbfs nodev "$mnt" 2>/dev/null || { rmdir "$mnt"; mnt=""; skip "no hugetlbfs mounted and cannot mount one"; }
fi

fail=0
# expect_zc LINES STARTS LINKS SLUICE_RUN-ARGS...: a clean run whose output has
# STARTS start lines matching LINES and LINKS link lines marked zero-copy
expect_zc() {
	local lines=$1 starts=$2 links=$3 out rc got zc
	shift 3
	out=$("$run" --net memif "$@" -v --timeout 20 -- "$colls" 2>&1)
	rc=$?
	got=$(grep -cE "$lines" <<<"$out")
	zc=$(grep -cE "link [0-9]+ \(to node [0-9]+, zero-copy\)" <<<"$out")
	echo "it_zerocopy ($*${SLUICE_ZERO_COPY:+, SLUICE_ZERO_COPY=$SLUICE_ZERO_COPY}): exit $rc, $got start" \
		"line(s) matching \"$lines\" (want $starts), $zc link(s) zero-copy (want $links)"
	if [ $rc -ne 0 ] || [ "$got" -ne "$starts" ] || [ "$zc" -ne "$links" ]; then
		grep -E "zero-copy|failures|FAIL|hugepage|rror" <<<"$out" | grep -v "link [0-9]* (to node [0-9]*):" | tail -20
		fail=1
	fi
}
expect_zc 'sluiced node [01]: 1 link\(s\) up per channel, 2 of 4 zero-copy, hugepages' 2 4 -n 2 --daemons --channels 4
expect_zc 'sluiced node [0-2]: 2 link\(s\) up, 1 of 2 zero-copy, hugepages' 3 3 -n 3 --embedded
SLUICE_ZERO_COPY=0 expect_zc 'sluiced node [01]: 1 link\(s\) up, 0 of 1 zero-copy, hugepages' 2 0 -n 2 --daemons
# A shm mesh runs no DPDK port and leaves the hugepages alone: taking them
# only raced their owner (a run failed in EAL when they were given back).
expect_zc 'sluiced node [01]: 1 link\(s\) up \(mesh over shm\), 0 of 1 zero-copy, no hugepages' 2 0 -n 2 --daemons --net shm
[ $fail -eq 0 ] || echo "FAIL: see above"
exit $fail
