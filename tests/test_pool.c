/*
 * test_pool.c: the engine's copy pool (dataplane/pool.h): blocks by size
 * class from an arena that is faulted in at start, then from malloc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "pool.h"
#include "faults.h"

/* A freed block serves the next request of its size class, not another's. */
static void test_blocks_come_back_by_size(void **state)
{
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	void *a = dp_pool_get(&p, 100), *b = dp_pool_get(&p, 1000);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(dp_pool_cap(a), 128);
	assert_int_equal(dp_pool_cap(b), 1024);
	assert_int_equal((uintptr_t)a % 16, 0);
	size_t used = dp_pool_used(&p);
	dp_pool_put(&p, a);
	dp_pool_put(&p, b);
	assert_ptr_equal(dp_pool_get(&p, 97), a);
	assert_ptr_equal(dp_pool_get(&p, 1024), b);
	assert_int_equal(dp_pool_used(&p), used);
	dp_pool_fini(&p);
}

/* A kept block (a collective's own buffer) never carves the arena, and
 * comes back by size as any other; a free arena block of its class serves
 * it. */
static void test_kept_blocks_leave_the_arena(void **state)
{
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	void *k = dp_pool_get_kept(&p, 65536);
	assert_non_null(k);
	assert_int_equal(dp_pool_used(&p), 0);
	dp_pool_put(&p, k);
	assert_ptr_equal(dp_pool_get_kept(&p, 65536), k);
	assert_int_equal(p.from_heap, 1);
	void *a = dp_pool_get(&p, 1000);
	dp_pool_put(&p, a);
	assert_ptr_equal(dp_pool_get_kept(&p, 1000), a);
	dp_pool_put(&p, k);
	dp_pool_put(&p, a);
	dp_pool_fini(&p);
}

/* Take n blocks of len bytes (own buffers when own), as a run of calls in
 * flight does. */
static void get_all(struct dp_pool *p, void **blk, unsigned n, size_t len, bool own)
{
	for (unsigned i = 0; i < n; i++)
		assert_non_null(blk[i] = own ? dp_pool_get_kept(p, len) : dp_pool_get(p, len));
}

/* Give n blocks back at once, as a run of calls ending together does. */
static void put_all(struct dp_pool *p, void **blk, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		dp_pool_put(p, blk[i]);
}

/* Of a run of own buffers freed at once (a leaf's ~256 lingering 64 KiB
 * in-place calls), DP_POOL_KEEP_OWN stay on their class's list and the rest
 * go back to glibc, for the next malloc (an early packet's, past the arena)
 * to reuse; the kept ones serve the next run. */
static void test_own_buffers_kept_are_bounded(void **state)
{
	enum { RUN = DP_POOL_KEEP_OWN + 8 };
	static void *own[RUN];
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	get_all(&p, own, RUN, 65536, true);
	put_all(&p, own, RUN);
	assert_int_equal(p.kept, (uint64_t)DP_POOL_KEEP_OWN * 65536);
	uint64_t heap = p.from_heap;
	get_all(&p, own, DP_POOL_KEEP_OWN, 65536, true);
	assert_int_equal(p.from_heap, heap);
	assert_int_equal(p.kept, 0);
	put_all(&p, own, DP_POOL_KEEP_OWN);
	dp_pool_fini(&p);
}

/* Filling the whole arena with written blocks faults no page in: the pool
 * touched them when it started (a fault costs 10-14 us on the VMs sluice
 * is measured on, pool.h). */
static void test_arena_faults_nothing_in(void **state)
{
	static void *blk[DP_POOL_BYTES / 1024];
	struct dp_pool p;
	char err[256];
	unsigned n = 0;
	(void)state;

	memset(blk, 0, sizeof(blk));
	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	long before = page_faults(RUSAGE_THREAD);
	while (n < sizeof(blk) / sizeof(blk[0]) && dp_pool_used(&p) + 1024 + 16 <= DP_POOL_BYTES) {
		blk[n] = dp_pool_get(&p, 1000);
		memset(blk[n], 0x5a, 1000);
		n++;
	}
	long faults = page_faults(RUSAGE_THREAD) - before;
	assert_true(n > 900);
	assert_int_equal(p.from_heap, 0);
	if (faults > 0)
		fail_msg("writing %u blocks of the arena faulted %ld pages in", n, faults);
	dp_pool_fini(&p);
}

/* A root's early packets for a whole receive budget (256 of memif's 16 KiB
 * payloads, each a 32 KiB block with its header) and the copies of lingering
 * calls of 128 KiB come from the arena: a 3-rank gather or scatter of 64-128
 * KiB faulted 100-800 pages in per size otherwise, most of its time. */
static void test_arena_holds_a_receive_budget(void **state)
{
	enum { PACKETS = 256, PAYLOAD = 16384, COPIES = 8, COPY = 128 << 10 };
	static void *blk[PACKETS + COPIES];
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	memset(blk, 0, sizeof(blk)); /* its own pages are not the pool's (a sanitizer build spaces them) */
	long before = page_faults(RUSAGE_THREAD);
	for (unsigned i = 0; i < PACKETS + COPIES; i++) {
		size_t len = i < PACKETS ? PAYLOAD + 64 : COPY + 1;
		assert_non_null(blk[i] = dp_pool_get(&p, len));
		memset(blk[i], 0x5a, len);
	}
	long faults = page_faults(RUSAGE_THREAD) - before;
	assert_int_equal(p.from_heap, 0);
	if (faults > 0)
		fail_msg("writing a receive budget of early packets faulted %ld pages in", faults);
	dp_pool_fini(&p);
}

/* Blocks come in powers of two and one and a half times those: the
 * smallest that holds the request. */
static void test_half_steps(void **state)
{
	static const size_t want[][2] = { { 1, 64 },	       { 64, 64 },	   { 65, 96 },
					  { 96, 96 },	       { 97, 128 },	   { 129, 192 },
					  { 4096, 4096 },      { 4097, 6144 },	   { 6145, 8192 },
					  { 196608, 196608 }, { 196609, 262144 } };
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		void *b = dp_pool_get(&p, want[i][0]);
		assert_non_null(b);
		if (dp_pool_cap(b) != want[i][1])
			fail_msg("a %zu-byte request got a %zu-byte block, not %zu", want[i][0], dp_pool_cap(b),
				 want[i][1]);
		dp_pool_put(&p, b);
	}
	dp_pool_fini(&p);
}

/* A 3-rank root's early packets of a 4 KiB reduce, both leaves ~1000 calls
 * ahead (each packet with its stash header, 112 bytes), come from the
 * arena: in 8 KiB blocks they overflowed it, and the malloc'd rest faulted
 * in at 20-30 us a call over a 1000-call run (perf/ALGORITHMS.md, small3). */
static void test_arena_holds_a_stash_of_4k_packets(void **state)
{
	enum { PACKETS = 2 * 1024, LEN = 4096 + 112 };
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	for (unsigned i = 0; i < PACKETS; i++)
		assert_non_null(dp_pool_get(&p, LEN));
	if (p.from_heap)
		fail_msg("%u stashed 4 KiB packets took %llu blocks from the heap", PACKETS,
			 (unsigned long long)p.from_heap);
	dp_pool_fini(&p);
}

/* Past the arena blocks come from malloc; freed ones are kept up to
 * DP_POOL_KEEP_BYTES, and blocks above the largest class are never kept. */
static void test_heap_beyond_the_arena(void **state)
{
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	while (dp_pool_used(&p) + 65536 + 16 <= DP_POOL_BYTES)
		assert_non_null(dp_pool_get(&p, 65536));
	void *h = dp_pool_get(&p, 65536);
	assert_non_null(h);
	assert_int_equal(p.from_heap, 1);
	dp_pool_put(&p, h);
	assert_int_equal(p.kept, 65536);
	assert_ptr_equal(dp_pool_get(&p, 50000), h);
	assert_int_equal(p.kept, 0);
	dp_pool_put(&p, h);
	size_t huge = ((size_t)1 << (DP_POOL_MIN_SHIFT + (DP_POOL_CLASSES - 1) / 2)) + 1;
	void *big = dp_pool_get(&p, huge);
	assert_non_null(big);
	assert_int_equal(dp_pool_cap(big), huge);
	assert_int_equal(p.from_heap, 2);
	dp_pool_put(&p, big);
	assert_int_equal(p.kept, 65536);
	dp_pool_fini(&p);
}

/* However many malloc'd blocks come back at once (a sweep of 32 calls in
 * flight freeing their copies), at most DP_POOL_KEEP_BYTES of them stay
 * kept and the rest go back to glibc: what a rank's peak RSS keeps after
 * such a sweep (perf/ALGORITHMS.md, regr17: +25-48 MB). */
static void test_kept_heap_is_bounded(void **state)
{
	enum { MIB = 1 << 20, RUN = DP_POOL_KEEP_BYTES / MIB + 16 };
	static void *blk[RUN];
	struct dp_pool p;
	char err[256];
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	get_all(&p, blk, RUN, MIB, false);
	assert_int_equal(p.from_heap, RUN);
	put_all(&p, blk, RUN);
	assert_int_equal(p.kept, DP_POOL_KEEP_BYTES);
	get_all(&p, blk, RUN, MIB, false);
	assert_int_equal(p.from_heap, RUN + 16); /* the kept ones served again, 16 malloc'd anew */
	put_all(&p, blk, RUN);
	dp_pool_fini(&p);
}

/* A block too large for the arena (a lingering call's copy of its send, 1.3
 * MiB in a 3-rank gather of 4 MiB) is kept when freed, and writing it again
 * faults nothing in: freed to glibc, such a block went back to the kernel
 * and every call faulted its pages in anew. */
static void test_large_blocks_are_kept_touched(void **state)
{
	struct dp_pool p;
	char err[256];
	size_t len = 1398100;
	(void)state;

	assert_int_equal(dp_pool_init(&p, err, sizeof(err)), 0);
	uint8_t *a = dp_pool_get(&p, len);
	assert_non_null(a);
	assert_int_equal(dp_pool_cap(a), 3u << 19);
	memset(a, 1, len);
	dp_pool_put(&p, a);
	assert_int_equal(p.kept, 3u << 19);
	long before = page_faults(RUSAGE_THREAD);
	uint8_t *b = dp_pool_get(&p, len);
	memset(b, 2, len);
	long faults = page_faults(RUSAGE_THREAD) - before;
	assert_ptr_equal(b, a);
	if (faults > 4)
		fail_msg("rewriting a kept %zu-byte block faulted %ld pages in", len, faults);
	dp_pool_put(&p, b);
	dp_pool_fini(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocks_come_back_by_size),
		cmocka_unit_test(test_kept_blocks_leave_the_arena),
		cmocka_unit_test(test_own_buffers_kept_are_bounded),
		cmocka_unit_test(test_arena_faults_nothing_in),
		cmocka_unit_test(test_arena_holds_a_receive_budget),
		cmocka_unit_test(test_half_steps),
		cmocka_unit_test(test_arena_holds_a_stash_of_4k_packets),
		cmocka_unit_test(test_heap_beyond_the_arena),
		cmocka_unit_test(test_kept_heap_is_bounded),
		cmocka_unit_test(test_large_blocks_are_kept_touched),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
