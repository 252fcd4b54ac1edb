/*
 * test_gpu_ring.c: gpu_dma's work ring and bookkeeping, through the CPU
 * consumer, on any machine.  Geometry, full and empty, tickets crossing
 * 2^32, completions out of order reaped in order, every datatype and op
 * applied exactly as coll/'s sl_reduce does, two threads (and two strided
 * consumers, as the kernel's blocks are) moving many items with none lost or
 * applied twice, the front end's splitting, back-pressure and refusals, and
 * the landing arena of sl_gdma_post_copy (copies taken at post, space
 * returned in ticket order, wrap-around).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gdma.h"
#include "gdma_impl.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void fill(void *p, size_t bytes)
{
	uint8_t *b = p;

	for (size_t i = 0; i < bytes; i++)
		b[i] = (uint8_t)rnd();
}

/* Random values that are finite and moderate in every type, so that no NaN
 * hides a difference. */
static void fill_values(void *p, size_t count, enum sl_dtype t)
{
	for (size_t i = 0; i < count; i++) {
		double v = (double)(int)(rnd() % 2001 - 1000) / 37.0;
		switch (t) {
		case SL_FLOAT16: ((uint16_t *)p)[i] = sl_float_to_half((float)v); break;
		case SL_BFLOAT16: ((uint16_t *)p)[i] = sl_float_to_bf16((float)v); break;
		case SL_FLOAT32: ((float *)p)[i] = (float)v; break;
		case SL_FLOAT64: ((double *)p)[i] = v; break;
		default: fill((uint8_t *)p + i * sl_dtype_size(t), sl_dtype_size(t)); break;
		}
	}
}

struct ring_fixture {
	struct sl_gdma_ring r;
	void *mem;
	uint32_t slots;
};

static struct ring_fixture *ring_new(uint32_t slots, uint32_t first)
{
	struct ring_fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->slots = slots;
	f->mem = aligned_alloc(64, sl_gdma_ring_bytes(slots));
	assert_non_null(f->mem);
	assert_int_equal(sl_gdma_ring_init(&f->r, f->mem, slots, first), 0);
	return f;
}

static void ring_free(struct ring_fixture *f)
{
	free(f->mem);
	free(f);
}

static struct sl_gdma_item add_item(int64_t *dst, const int64_t *one)
{
	return (struct sl_gdma_item){ .dst = (uintptr_t)dst, .a = (uintptr_t)dst, .src = (uintptr_t)one,
				      .count = 1, .dtype = SL_INT64, .op = SL_SUM, .kind = SL_GDMA_REDUCE };
}

/* ---- the ring ---- */

static void test_geometry(void **state)
{
	struct sl_gdma_ring r;
	static uint8_t mem[1 << 16] __attribute__((aligned(64)));

	(void)state;
	assert_int_equal(sl_gdma_ring_init(&r, mem, 0, 0), -1);
	assert_int_equal(sl_gdma_ring_init(&r, mem, 1, 0), -1);
	assert_int_equal(sl_gdma_ring_init(&r, mem, 6, 0), -1);
	assert_int_equal(sl_gdma_ring_init(&r, mem, 1u << 25, 0), -1);
	assert_int_equal(sl_gdma_ring_init(&r, NULL, 8, 0), -1);
	assert_int_equal(sl_gdma_ring_bytes(8) % 64, 0);
	assert_true(sl_gdma_ring_bytes(8) >= 64 + 8 * 64 + 8 * 4);
	assert_int_equal(sl_gdma_ring_init(&r, mem, 8, 0), 0);
	assert_int_equal(sl_gdma_ring_pending(&r), 0);
	assert_int_equal(sl_gdma_ring_reap(&r), 0); /* fresh memory reads as nothing applied */
}

static void test_full_and_empty(void **state)
{
	struct ring_fixture *f = ring_new(8, 0);
	struct sl_gdma_cursor c = { .next = 0, .stride = 1 };
	int64_t cnt = 0, one = 1;
	struct sl_gdma_item it = add_item(&cnt, &one);
	uint32_t t;

	(void)state;
	assert_int_equal(sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, 100), 0); /* empty */
	for (uint32_t i = 0; i < 8; i++) {
		assert_int_equal(sl_gdma_ring_push(&f->r, &it, &t), 0);
		assert_int_equal(t, i);
	}
	assert_int_equal(sl_gdma_ring_push(&f->r, &it, &t), -1);
	assert_int_equal(sl_gdma_ring_reap(&f->r), 0);
	assert_false(sl_gdma_ring_passed(&f->r, 0));
	assert_int_equal(sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, 3), 3);
	assert_int_equal(sl_gdma_ring_reap(&f->r), 3);
	assert_true(sl_gdma_ring_passed(&f->r, 2));
	assert_false(sl_gdma_ring_passed(&f->r, 3));
	assert_int_equal(sl_gdma_ring_push(&f->r, &it, &t), 0);
	assert_int_equal(sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, 100), 6);
	assert_int_equal(sl_gdma_ring_reap(&f->r), 6);
	assert_int_equal(sl_gdma_ring_pending(&f->r), 0);
	assert_int_equal(cnt, 9);
	ring_free(f);
}

static void test_wrap_past_2_32(void **state)
{
	uint32_t first = 0xffffff00u;
	struct ring_fixture *f = ring_new(64, first);
	struct sl_gdma_cursor c = { .next = first, .stride = 1 };
	int64_t cnt = 0, one = 1;
	struct sl_gdma_item it = add_item(&cnt, &one);
	uint32_t t = 0, posted = 0;

	(void)state;
	while (posted < 64 * 10) {
		while (sl_gdma_ring_push(&f->r, &it, &t) == 0) {
			assert_int_equal(t, first + posted);
			posted++;
		}
		assert_int_equal(sl_gdma_ring_pending(&f->r), 64);
		assert_int_equal(sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, 40), 40);
		assert_int_equal(sl_gdma_ring_reap(&f->r), 40);
		assert_true(sl_gdma_ring_passed(&f->r, f->r.tail - 1));
		assert_false(sl_gdma_ring_passed(&f->r, f->r.tail));
	}
	assert_true(f->r.head < first); /* it did cross 2^32 */
	sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, UINT32_MAX);
	sl_gdma_ring_reap(&f->r);
	assert_int_equal(cnt, posted);
	ring_free(f);
}

/* Blocks finish out of order; the producer reaps only the applied prefix. */
static void test_out_of_order_done(void **state)
{
	struct ring_fixture *f = ring_new(8, 0);
	int64_t cnt = 0, one = 1;
	struct sl_gdma_item it = add_item(&cnt, &one);
	uint32_t t;

	(void)state;
	for (int i = 0; i < 4; i++)
		sl_gdma_ring_push(&f->r, &it, &t);
	f->r.done[3] = 3;
	f->r.done[1] = 1;
	f->r.done[2] = 2;
	assert_int_equal(sl_gdma_ring_reap(&f->r), 0);
	f->r.done[0] = 0;
	assert_int_equal(sl_gdma_ring_reap(&f->r), 4);
	assert_true(sl_gdma_ring_passed(&f->r, 3));
	ring_free(f);
}

/* Consumers stop at the stop word, leaving the rest for a restart. */
static void test_stop_word(void **state)
{
	struct ring_fixture *f = ring_new(8, 0);
	struct sl_gdma_cursor c = { .next = 0, .stride = 1 };
	int64_t cnt = 0, one = 1;
	struct sl_gdma_item it = add_item(&cnt, &one);
	uint32_t t;

	(void)state;
	for (int i = 0; i < 5; i++)
		sl_gdma_ring_push(&f->r, &it, &t);
	f->r.sh->stop = 1;
	assert_int_equal(sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, 100), 0);
	f->r.sh->stop = 0;
	assert_int_equal(sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, 100), 5);
	assert_int_equal(cnt, 5);
	ring_free(f);
}

/* ---- what an item does ---- */

static void check_one(enum sl_dtype t, enum sl_redop op, enum sl_gdma_kind kind, uint32_t avg_div, bool in_place)
{
	enum { N = 301 };
	size_t es = sl_dtype_size(t);
	uint8_t a[N * 8], src[N * 8], dst[N * 8], want[N * 8];
	struct ring_fixture *f = ring_new(4, 0);
	struct sl_gdma_cursor c = { .next = 0, .stride = 1 };
	/* odd offsets: payloads sit unaligned in their frames */
	uint8_t *pa = in_place ? dst + 1 : a + 1, *ps = src + 3, *pd = dst + 1;
	struct sl_gdma_item it = { .dst = (uintptr_t)pd, .a = (uintptr_t)pa, .src = (uintptr_t)ps, .count = N - 1,
				   .avg_div = avg_div, .dtype = (uint8_t)t, .op = (uint8_t)op, .kind = (uint8_t)kind };
	uint32_t tk;

	fill_values(a, N, t);
	fill_values(src, N, t);
	fill_values(dst, N, t);
	memcpy(want, dst, sizeof(want));
	if (kind == SL_GDMA_COPY) {
		memcpy(want + 1, ps, (N - 1) * es);
	} else {
		sl_reduce(want + 1, in_place ? want + 1 : pa, ps, N - 1, t, op);
		if (avg_div)
			sl_scale_avg(want + 1, N - 1, t, avg_div);
	}
	assert_int_equal(sl_gdma_ring_push(&f->r, &it, &tk), 0);
	assert_int_equal(sl_gdma_cpu_consume(f->r.sh, f->r.mask, &c, 1), 1);
	assert_int_equal(sl_gdma_ring_reap(&f->r), 1);
	assert_memory_equal(dst, want, sizeof(want));
	ring_free(f);
}

static void test_every_type_and_op(void **state)
{
	(void)state;
	for (int t = 0; t < SL_DTYPE_COUNT; t++) {
		for (int op = 0; op < SL_AVG; op++) {
			check_one((enum sl_dtype)t, (enum sl_redop)op, SL_GDMA_REDUCE, 0, false);
			check_one((enum sl_dtype)t, (enum sl_redop)op, SL_GDMA_REDUCE, 0, true);
		}
		check_one((enum sl_dtype)t, SL_SUM, SL_GDMA_REDUCE, 3, false); /* AVG's last step */
		check_one((enum sl_dtype)t, SL_SUM, SL_GDMA_COPY, 0, false);
	}
}

/* ---- threads ---- */

#define STRESS_ITEMS 400000u
#define COUNTERS 64

struct stress {
	struct ring_fixture *f;
	struct sl_gdma_cursor cur;
	int64_t cnt[COUNTERS];
	int64_t one;
};

static void *consumer_thread(void *arg)
{
	struct stress *s = arg;
	struct sl_gdma_cursor *c = &s->cur;
	uint32_t end = STRESS_ITEMS;

	/* strided consumers (as CUDA blocks are) each stop past their last ticket;
	 * one with nothing to do gives its core away: with more threads than
	 * cores, a spinning one held up the thread it waited for (19 s on 2 cores) */
	while ((int32_t)(c->next - end) < 0)
		if (sl_gdma_cpu_consume(s->f->r.sh, s->f->r.mask, c, 64) == 0)
			sched_yield();
	return NULL;
}

static void stress(uint32_t consumers)
{
	struct stress *s = calloc(consumers, sizeof(*s));
	struct ring_fixture *f = ring_new(256, 0);
	pthread_t th[4];
	uint32_t t;
	int64_t total[COUNTERS] = { 0 };

	assert_non_null(s);
	for (uint32_t k = 0; k < consumers; k++) {
		s[k] = (struct stress){ .f = f, .cur = { .next = k, .stride = consumers }, .one = 1 };
		assert_int_equal(pthread_create(&th[k], NULL, consumer_thread, &s[k]), 0);
	}
	/* Item i adds one to counter i % COUNTERS in consumer (i % consumers)'s
	 * own array, so no two threads write one word. */
	for (uint32_t i = 0; i < STRESS_ITEMS;) {
		struct stress *mine = &s[i % consumers];
		struct sl_gdma_item it = add_item(&mine->cnt[i % COUNTERS], &mine->one);
		if (sl_gdma_ring_push(&f->r, &it, &t) == 0) {
			assert_int_equal(t, i);
			i++;
		} else {
			sched_yield(); /* the ring is full: let a consumer run */
		}
		sl_gdma_ring_reap(&f->r);
	}
	for (uint32_t k = 0; k < consumers; k++)
		pthread_join(th[k], NULL);
	sl_gdma_ring_reap(&f->r);
	assert_int_equal(sl_gdma_ring_pending(&f->r), 0);
	for (uint32_t k = 0; k < consumers; k++)
		for (int i = 0; i < COUNTERS; i++)
			total[i] += s[k].cnt[i];
	for (int i = 0; i < COUNTERS; i++)
		assert_int_equal(total[i], STRESS_ITEMS / COUNTERS);
	ring_free(f);
	free(s);
}

static void test_two_threads(void **state)
{
	(void)state;
	stress(1);
}

static void test_strided_consumers(void **state)
{
	(void)state;
	stress(2);
}

/* ---- the front end, CPU backend ---- */

static struct sl_gdma *open_cpu(uint32_t slots, uint32_t split)
{
	struct sl_gdma_cfg cfg = { .backend = SL_GDMA_CPU, .slots = slots, .split_bytes = split };
	struct sl_gdma *g;
	char err[256];

	assert_int_equal(sl_gdma_open(&g, &cfg, err, sizeof(err)), 0);
	return g;
}

static void test_frontend_split(void **state)
{
	enum { N = 1000 };
	struct sl_gdma *g = open_cpu(64, 256);
	float a[N], src[N], dst[N], want[N];
	struct sl_gdma_work w = { .dst = dst, .a = a, .src = src, .count = N, .dtype = SL_FLOAT32, .op = SL_AVG,
				  .kind = SL_GDMA_REDUCE, .avg_div = 2 };
	uint32_t t;
	char err[256];

	(void)state;
	fill_values(a, N, SL_FLOAT32);
	fill_values(src, N, SL_FLOAT32);
	sl_reduce(want, a, src, N, SL_FLOAT32, SL_SUM);
	sl_scale_avg(want, N, SL_FLOAT32, 2);
	assert_int_equal(sl_gdma_post(g, &w, &t, err, sizeof(err)), 0);
	assert_int_equal(t, 15); /* 4000 bytes in 256-byte items: tickets 0..15 */
	assert_int_equal(sl_gdma_pending(g), 16);
	assert_false(sl_gdma_done(g, t));
	assert_int_equal(sl_gdma_progress(g, 0), 16);
	assert_true(sl_gdma_done(g, t));
	assert_false(sl_gdma_running(g));
	assert_null(sl_gdma_error(g));
	assert_memory_equal(dst, want, sizeof(want));
	sl_gdma_close(g);
}

static void test_frontend_backpressure(void **state)
{
	struct sl_gdma *g = open_cpu(4, 16);
	int64_t cnt = 0, ones[4] = { 1, 1, 1, 1 };
	struct sl_gdma_work one = { .dst = &cnt, .a = &cnt, .src = ones, .count = 1, .dtype = SL_INT64,
				    .op = SL_SUM, .kind = SL_GDMA_REDUCE };
	struct sl_gdma_work three = one;
	uint32_t t;
	char err[256];

	(void)state;
	three.count = 3; /* 24 bytes in 16-byte items: two slots, overlapping cnt is fine on the CPU */
	for (int i = 0; i < 3; i++)
		assert_int_equal(sl_gdma_post(g, &one, &t, err, sizeof(err)), 0);
	assert_int_equal(sl_gdma_post(g, &three, &t, err, sizeof(err)), -EAGAIN);
	sl_gdma_progress(g, 0);
	assert_int_equal(cnt, 3);
	three.dst = ones; /* a safe place for three elements */
	three.a = ones;
	assert_int_equal(sl_gdma_post(g, &three, &t, err, sizeof(err)), 0);
	sl_gdma_progress(g, 0);
	assert_true(sl_gdma_done(g, t));
	sl_gdma_close(g);
}

static void expect_refusal(struct sl_gdma *g, struct sl_gdma_work w, const char *words)
{
	char err[256] = "";
	uint32_t t;

	assert_int_equal(sl_gdma_post(g, &w, &t, err, sizeof(err)), -EINVAL);
	if (!strstr(err, words))
		fail_msg("refusal \"%s\" does not say \"%s\"", err, words);
}

static void test_frontend_refusals(void **state)
{
	struct sl_gdma *g = open_cpu(4, 16);
	int64_t x[8] = { 0 };
	struct sl_gdma_work ok = { .dst = x, .a = x, .src = x, .count = 1, .dtype = SL_INT64, .op = SL_SUM };
	struct sl_gdma_work w;
	struct sl_gdma_cfg bad = { .backend = SL_GDMA_CPU, .slots = 12 };
	struct sl_gdma *none;
	char err[256] = "";

	(void)state;
	w = ok, w.dtype = SL_DTYPE_COUNT;
	expect_refusal(g, w, "unknown datatype");
	w = ok, w.op = SL_REDOP_COUNT;
	expect_refusal(g, w, "unknown datatype");
	w = ok, w.kind = (enum sl_gdma_kind)7;
	expect_refusal(g, w, "unknown work kind");
	w = ok, w.count = 0;
	expect_refusal(g, w, "zero or too large");
	w = ok, w.src = NULL;
	expect_refusal(g, w, "NULL src");
	expect_refusal(g, (struct sl_gdma_work){ .dst = x, .a = x, .src = x, .count = 10, .dtype = SL_INT64 },
		       "more than the ring's 4 slots");
	sl_gdma_close(g);
	assert_int_equal(sl_gdma_open(&none, &bad, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "power of two"));
	assert_null(none);
	bad = (struct sl_gdma_cfg){ .backend = SL_GDMA_CPU, .split_bytes = 100 };
	assert_int_equal(sl_gdma_open(&none, &bad, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "multiple of 16"));
}

/* post_copy takes its copy at once: the caller's payload may be reused (a
 * packet buffer handed back to the port) before the item is applied. */
static void test_post_copy(void **state)
{
	struct sl_gdma_cfg cfg = { .backend = SL_GDMA_CPU, .slots = 16, .arena_bytes = 4096 };
	struct sl_gdma *g;
	int32_t acc[250] = { 0 }, payload[250], want[250] = { 0 };
	struct sl_gdma_work w = { .dst = acc, .a = acc, .src = payload, .count = 250, .dtype = SL_INT32,
				  .op = SL_SUM, .kind = SL_GDMA_REDUCE };
	uint32_t t, posted = 0, refused = 0;
	char err[256];

	(void)state;
	assert_int_equal(sl_gdma_open(&g, &cfg, err, sizeof(err)), 0);
	/* 1000-byte payloads take 1024 bytes of a 4096-byte arena: 4 at a time,
	 * then it wraps; 300 posts go round it 75 times */
	while (posted < 300) {
		for (int i = 0; i < 250; i++)
			payload[i] = (int32_t)(posted * 1000 + (uint32_t)i);
		int rc = sl_gdma_post_copy(g, &w, &t, err, sizeof(err));
		if (rc == -EAGAIN) {
			refused++;
			sl_gdma_progress(g, 0);
			continue;
		}
		assert_int_equal(rc, 0);
		for (int i = 0; i < 250; i++)
			want[i] += payload[i];
		memset(payload, 0xee, sizeof(payload)); /* the port reuses the buffer */
		posted++;
		if (posted % 7 == 0)
			sl_gdma_progress(g, 0);
	}
	sl_gdma_progress(g, 0);
	assert_true(sl_gdma_done(g, t));
	assert_true(refused > 0); /* the arena did fill up */
	assert_memory_equal(acc, want, sizeof(acc));
	w.count = 2000; /* 8000 bytes: more than the whole arena */
	assert_int_equal(sl_gdma_post_copy(g, &w, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "larger than the landing arena"));
	sl_gdma_close(g);
}

/* Items carry the epoch they were posted in; sl_gdma_restart moves it, so a
 * kernel launched before stops at the first later item (gdma_kernel.cu). */
static void test_restart_epochs(void **state)
{
	struct sl_gdma *g = open_cpu(16, 256);
	uint8_t dst[8], src[8] = { 1 };
	struct sl_gdma_work w = { .dst = dst, .src = src, .count = 8, .dtype = SL_UINT8, .kind = SL_GDMA_COPY };
	uint32_t t0, t1, t2;
	char err[256];

	(void)state;
	assert_int_equal(sl_gdma_post(g, &w, &t0, err, sizeof(err)), 0);
	sl_gdma_restart(g);
	assert_int_equal(sl_gdma_post(g, &w, &t1, err, sizeof(err)), 0);
	sl_gdma_restart(g);
	sl_gdma_restart(g);
	assert_int_equal(sl_gdma_post(g, &w, &t2, err, sizeof(err)), 0);
	assert_int_equal(g->ring.items[t1 & g->ring.mask].epoch, g->ring.items[t0 & g->ring.mask].epoch + 1);
	assert_int_equal(g->ring.items[t2 & g->ring.mask].epoch, g->ring.items[t0 & g->ring.mask].epoch + 3);
	assert_int_equal(sl_gdma_progress(g, 0), 3); /* the CPU consumer has no launches: it applies all */
	sl_gdma_close(g);
}

/* Here the CUDA backend either works (a GPU machine) or says why not. */
static void test_cuda_backend_answers(void **state)
{
	struct sl_gdma_cfg cfg = { .backend = SL_GDMA_CUDA };
	struct sl_gdma *g;
	char err[256] = "";
	int rc = sl_gdma_open(&g, &cfg, err, sizeof(err));

	(void)state;
	if (rc == 0) {
		sl_gdma_close(g);
		return;
	}
	assert_true(rc == -ENODEV || rc == -ENOTSUP);
	assert_non_null(strstr(err, "gpu_dma:"));
	assert_null(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_full_and_empty),
		cmocka_unit_test(test_wrap_past_2_32),
		cmocka_unit_test(test_out_of_order_done),
		cmocka_unit_test(test_stop_word),
		cmocka_unit_test(test_every_type_and_op),
		cmocka_unit_test(test_two_threads),
		cmocka_unit_test(test_strided_consumers),
		cmocka_unit_test(test_frontend_split),
		cmocka_unit_test(test_frontend_backpressure),
		cmocka_unit_test(test_frontend_refusals),
		cmocka_unit_test(test_post_copy),
		cmocka_unit_test(test_restart_epochs),
		cmocka_unit_test(test_cuda_backend_answers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
