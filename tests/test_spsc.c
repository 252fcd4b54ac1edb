/*
 * test_spsc.c: the shared-memory ring of include/sluice/spsc.h.  Full and
 * empty conditions, counters wrapping past 2^32, two threads and two
 * processes moving millions of numbered slots with nothing lost, doubled or
 * reordered, bad geometry refused, and a consumer or producer whose shared
 * counters are scribbled on never touching memory outside the ring.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "sluice/spsc.h"

#define STRESS_SLOTS 3000000u

struct item {
	uint64_t seq;
	uint64_t check; /* ~seq: catches torn or stale slots */
};

static struct sl_spsc_shared *ring_new(uint32_t slots, uint32_t slot_size)
{
	size_t bytes = (sl_spsc_bytes(slots, slot_size) + SL_CACHE_LINE - 1) & ~(size_t)(SL_CACHE_LINE - 1);
	struct sl_spsc_shared *sh = aligned_alloc(SL_CACHE_LINE, bytes);

	assert_non_null(sh);
	sl_spsc_reset(sh);
	return sh;
}

static void put(struct sl_spsc *p, uint64_t seq)
{
	struct item it = {seq, ~seq};

	assert_true(sl_spsc_enqueue(p, &it));
}

static void get(struct sl_spsc *c, uint64_t want)
{
	struct item it;

	assert_true(sl_spsc_dequeue(c, &it));
	assert_int_equal(it.seq, want);
	assert_int_equal(it.check, ~want);
}

static void full_and_empty(void **state)
{
	struct sl_spsc_shared *sh = ring_new(8, sizeof(struct item));
	struct sl_spsc p, c;
	struct item it;

	(void)state;
	assert_true(sl_spsc_attach(&p, sh, 8, sizeof(struct item), true));
	assert_true(sl_spsc_attach(&c, sh, 8, sizeof(struct item), false));
	assert_false(sl_spsc_dequeue(&c, &it));
	for (uint64_t i = 0; i < 8; i++)
		put(&p, i);
	assert_int_equal(sl_spsc_count(&p), 8);
	assert_false(sl_spsc_enqueue(&p, &it));
	get(&c, 0);
	put(&p, 8);
	assert_false(sl_spsc_enqueue(&p, &it));
	for (uint64_t i = 1; i <= 8; i++)
		get(&c, i);
	assert_false(sl_spsc_dequeue(&c, &it));
	assert_int_equal(sl_spsc_count(&c), 0);
	free(sh);
}

/* A part enqueued writes its bytes alone: the rest of the slot keeps what
 * it held (a successful completion leaves its message unwritten); a slot
 * read in place through sl_spsc_front stays the producer's to not touch
 * until sl_spsc_pop, and a full ring opens only then. */
static void parts_and_reads_in_place(void **state)
{
	struct sl_spsc_shared *sh = ring_new(2, sizeof(struct item));
	struct sl_spsc p, c;
	struct item it = { 5, ~5ull };
	const struct item *at;

	(void)state;
	memset(sh->slots, 0x5a, 2 * sizeof(struct item));
	assert_true(sl_spsc_attach(&p, sh, 2, sizeof(struct item), true));
	assert_true(sl_spsc_attach(&c, sh, 2, sizeof(struct item), false));
	assert_true(sl_spsc_enqueue_part(&p, &it, sizeof(it.seq)));
	put(&p, 6);
	assert_false(sl_spsc_enqueue_part(&p, &it, sizeof(it.seq))); /* full */
	at = sl_spsc_front(&c);
	assert_non_null(at);
	assert_int_equal(at->seq, 5);
	if (at->check != 0x5a5a5a5a5a5a5a5aull)
		fail_msg("the part enqueue wrote past its %zu bytes: check is %#llx", sizeof(it.seq),
			 (unsigned long long)at->check);
	assert_ptr_equal(sl_spsc_front(&c), at); /* not consumed by looking */
	assert_false(sl_spsc_enqueue(&p, &it));   /* still full while read in place */
	sl_spsc_pop(&c);
	get(&c, 6);
	assert_null(sl_spsc_front(&c));
	assert_true(sl_spsc_enqueue_part(&p, &it, 4 * sizeof(it))); /* a len past the slot is cut to it */
	get(&c, 5);
	free(sh);
}

/* Counters start just below 2^32; batches of every size cross the wrap. */
static void wraps_past_2_32(void **state)
{
	struct sl_spsc_shared *sh = ring_new(16, sizeof(struct item));
	struct sl_spsc p, c;
	struct item it;
	uint64_t next_in = 0, next_out = 0;

	(void)state;
	atomic_store(&sh->head, UINT32_MAX - 20);
	atomic_store(&sh->tail, UINT32_MAX - 20);
	assert_true(sl_spsc_attach(&p, sh, 16, sizeof(struct item), true));
	assert_true(sl_spsc_attach(&c, sh, 16, sizeof(struct item), false));
	for (unsigned round = 0; round < 200; round++) {
		unsigned n = round % 17;

		for (unsigned i = 0; i < n; i++)
			put(&p, next_in++);
		assert_int_equal(sl_spsc_count(&p), n);
		if (n == 16)
			assert_false(sl_spsc_enqueue(&p, &it));
		while (next_out < next_in)
			get(&c, next_out++);
		assert_false(sl_spsc_dequeue(&c, &it));
	}
	assert_true(atomic_load(&sh->head) < UINT32_MAX - 20); /* it did wrap */
	free(sh);
}

static void bad_geometry_refused(void **state)
{
	struct sl_spsc_shared *sh = ring_new(8, 64);
	struct sl_spsc r;

	(void)state;
	assert_false(sl_spsc_attach(&r, sh, 0, 64, true));
	assert_false(sl_spsc_attach(&r, sh, 3, 64, true));
	assert_false(sl_spsc_attach(&r, sh, 12, 64, false));
	assert_false(sl_spsc_attach(&r, sh, 8, 0, true));
	assert_false(sl_spsc_attach(&r, sh, 8, 12, false));
	assert_false(sl_spsc_attach(&r, sh, 8, 4, true));
	assert_true(sl_spsc_attach(&r, sh, 1, 8, true));
	assert_true(sl_spsc_attach(&r, sh, 8, 64, false));
	free(sh);
}

/* ---- stress: one producer, one consumer ---- */

static void produce(struct sl_spsc_shared *sh, uint32_t n)
{
	struct sl_spsc p;
	struct item it;

	if (!sl_spsc_attach(&p, sh, 64, sizeof(it), true))
		abort();
	for (uint64_t i = 0; i < n; i++) {
		it.seq = i;
		it.check = ~i;
		while (!sl_spsc_enqueue(&p, &it))
			;
	}
}

/* Returns the number of slots that came out wrong (0 is right). */
static uint64_t consume(struct sl_spsc_shared *sh, uint32_t n)
{
	struct sl_spsc c;
	struct item it;
	uint64_t bad = 0;

	if (!sl_spsc_attach(&c, sh, 64, sizeof(it), false))
		abort();
	for (uint64_t i = 0; i < n; i++) {
		while (!sl_spsc_dequeue(&c, &it))
			;
		bad += it.seq != i || it.check != ~i;
	}
	return bad + (sl_spsc_dequeue(&c, &it) ? 1 : 0);
}

static void *producer_thread(void *sh)
{
	produce(sh, STRESS_SLOTS);
	return NULL;
}

static void two_threads(void **state)
{
	struct sl_spsc_shared *sh = ring_new(64, sizeof(struct item));
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, producer_thread, sh), 0);
	assert_int_equal(consume(sh, STRESS_SLOTS), 0);
	pthread_join(t, NULL);
	free(sh);
}

static void two_processes(void **state)
{
	size_t bytes = sl_spsc_bytes(64, sizeof(struct item));
	struct sl_spsc_shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status;
	pid_t pid;

	(void)state;
	assert_true(sh != MAP_FAILED);
	sl_spsc_reset(sh);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		produce(sh, STRESS_SLOTS);
		_exit(0);
	}
	assert_int_equal(consume(sh, STRESS_SLOTS), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	munmap(sh, bytes);
}

/* ---- a peer that scribbles on the shared counters ---- */

/*
 * The ring sits at the very end of a page with an inaccessible page after
 * it: any access past the slots faults.  The slots hold a known pattern,
 * so every slot read must return it.
 */
static void scribbled_counters_stay_inside(void **state)
{
	const uint32_t slots = 8, slot_size = 64;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = sl_spsc_bytes(slots, slot_size);
	uint8_t *mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const uint32_t junk[] = {1, 7, 8, 9, 0x7fffffffu, 0x80000000u, UINT32_MAX, 12345678u};
	struct sl_spsc_shared *sh;
	struct sl_spsc c, p;
	uint8_t slot[64], want[64];

	(void)state;
	assert_true(mem != MAP_FAILED);
	assert_int_equal(mprotect(mem + page, page, PROT_NONE), 0);
	sh = (struct sl_spsc_shared *)(mem + page - bytes);
	sl_spsc_reset(sh);
	memset(sh->slots, 0xab, (size_t)slots * slot_size);
	memset(want, 0xab, sizeof(want));
	assert_true(sl_spsc_attach(&c, sh, slots, slot_size, false));
	assert_true(sl_spsc_attach(&p, sh, slots, slot_size, true));
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		atomic_store(&sh->head, junk[i]);
		for (int n = 0; n < 40 && sl_spsc_dequeue(&c, slot); n++)
			assert_memory_equal(slot, want, sizeof(slot));
		atomic_store(&sh->tail, junk[(i + 3) % 8]);
		for (int n = 0; n < 40 && sl_spsc_enqueue(&p, want); n++)
			;
	}
	munmap(mem, 2 * page);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(full_and_empty),
		cmocka_unit_test(parts_and_reads_in_place),
		cmocka_unit_test(wraps_past_2_32),
		cmocka_unit_test(bad_geometry_refused),
		cmocka_unit_test(two_threads),
		cmocka_unit_test(two_processes),
		cmocka_unit_test(scribbled_counters_stay_inside),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
