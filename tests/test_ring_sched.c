/*
 * test_ring_sched.c: the ring all-reduce schedule (coll/ring) run in memory.
 *
 * n ranks, no network: every ready send is cut into packets that sit in one
 * pool, and packets are delivered to the next rank in a seeded random order.
 * A packet's bytes are read from its sender's buffer only when it is
 * delivered, which also checks that the schedule never lets a rank
 * overwrite a range that is still on its way.  The test keeps its own record
 * of what arrived, so the pipeline rule (chunk c of step t+1 leaves only once
 * chunk c of step t is complete) is checked independently of the schedule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reduce.h"
#include "ring.h"

#define MAX_RANKS 7

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

/* ---- the test's own view of the plan ---- */

/* Segment k in bytes, computed here independently of ring.c. */
static void seg_range(const struct sl_ring_plan *p, uint32_t k, uint64_t *off, uint64_t *len)
{
	uint64_t e0 = 0;

	for (uint32_t j = 0; j < k; j++)
		e0 += p->count / p->nranks + (j < p->count % p->nranks);
	*off = e0 * p->esize;
	*len = (p->count / p->nranks + (k < p->count % p->nranks)) * p->esize;
}

static uint32_t mod(int64_t x, uint32_t n)
{
	return (uint32_t)(((x % n) + n) % n);
}

static uint64_t nchunks(const struct sl_ring_plan *p, uint64_t seglen)
{
	return seglen ? (seglen + p->chunk_bytes - 1) / p->chunk_bytes : 1;
}

/* ---- the simulated cluster ---- */

struct packet {
	uint32_t from, step;
	uint64_t off, len;
	bool from_send;
};

struct rank {
	struct sl_ring_sched s;
	float *send, *recv;
	uint64_t *got_bytes;   /* [step][chunk]: bytes the test saw arrive */
	uint64_t packets_sent;
};

struct cluster {
	struct sl_ring_plan plan; /* rank field unused */
	struct rank r[MAX_RANKS];
	struct packet *pool;
	size_t npool, cap;
	bool in_place;
	uint32_t max_chunks;
};

static void pool_add(struct cluster *c, struct packet pk)
{
	if (c->npool == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->pool = realloc(c->pool, c->cap * sizeof(*c->pool));
		assert_non_null(c->pool);
	}
	c->pool[c->npool++] = pk;
}

static uint64_t chunk_len_of(const struct sl_ring_plan *p, uint64_t seglen, uint32_t chunk)
{
	if (seglen == 0)
		return 0;
	uint64_t rest = seglen - (uint64_t)chunk * p->chunk_bytes;
	return rest < p->chunk_bytes ? rest : p->chunk_bytes;
}

/* Check one popped send against the plan and the arrivals so far, then cut
 * it into packets (at least one, possibly empty). */
static void take_send(struct cluster *c, uint32_t rk, const struct sl_ring_send *snd)
{
	struct rank *r = &c->r[rk];
	struct sl_ring_plan p = c->plan;
	uint64_t soff, slen;

	p.rank = rk;
	seg_range(&p, mod((int64_t)rk - snd->step, p.nranks), &soff, &slen);
	assert_true(snd->chunk < nchunks(&p, slen));
	assert_int_equal(snd->off, soff + (uint64_t)snd->chunk * p.chunk_bytes);
	assert_int_equal(snd->len, chunk_len_of(&p, slen, snd->chunk));
	assert_int_equal(snd->from_send, snd->step == 0);
	if (snd->step > 0) /* the pipeline rule: previous step's chunk complete */
		assert_int_equal(r->got_bytes[(snd->step - 1) * c->max_chunks + snd->chunk],
				 snd->len);
	uint64_t o = 0;
	do {
		uint64_t len = snd->len - o < p.payload ? snd->len - o : p.payload;
		pool_add(c, (struct packet){ rk, snd->step, snd->off + o, len, snd->from_send });
		r->packets_sent++;
		o += len;
	} while (o < snd->len);
}

static void drain_sends(struct cluster *c, uint32_t rk)
{
	struct sl_ring_send snd;

	while (sl_ring_next_send(&c->r[rk].s, &snd))
		take_send(c, rk, &snd);
}

/* Record in the test's own table that pk arrived at rank `to`. */
static void note_arrival(struct cluster *c, uint32_t to, const struct packet *pk)
{
	uint64_t soff, slen;

	seg_range(&c->plan, mod((int64_t)to - pk->step - 1, c->plan.nranks), &soff, &slen);
	uint32_t chunk = (uint32_t)((pk->off - soff) / c->plan.chunk_bytes);
	c->r[to].got_bytes[pk->step * c->max_chunks + chunk] += pk->len;
}

/* Deliver pk to the sender's right neighbour and apply it as told; now and
 * then deliver it a second time, which must be refused. */
static void deliver(struct cluster *c, const struct packet *pk)
{
	uint32_t to = (pk->from + 1) % c->plan.nranks;
	struct rank *src = &c->r[pk->from], *dst = &c->r[to];
	const char *data = (const char *)(pk->from_send ? src->send : src->recv) + pk->off;
	enum sl_ring_apply apply;
	char wire[64 * 64];

	assert_true(pk->len <= sizeof(wire));
	memcpy(wire, data, pk->len); /* the sender's bytes at delivery time */
	assert_int_equal(sl_ring_on_packet(&dst->s, pk->step, pk->off, pk->len, &apply), SL_RING_OK);
	assert_int_equal(apply, pk->step < c->plan.nranks - 1 ? SL_APPLY_REDUCE : SL_APPLY_COPY);
	char *out = (char *)dst->recv + pk->off;
	if (apply == SL_APPLY_REDUCE)
		sl_reduce(out, (const char *)dst->send + pk->off, wire, pk->len / sizeof(float),
			  SL_FLOAT32, SL_SUM);
	else
		memcpy(out, wire, pk->len);
	note_arrival(c, to, pk);
	if (rng() % 8 == 0)
		assert_int_equal(sl_ring_on_packet(&dst->s, pk->step, pk->off, pk->len, &apply),
				 SL_RING_DUPLICATE);
	drain_sends(c, to);
}

static void cluster_init(struct cluster *c, const struct sl_ring_plan *plan, bool in_place,
			 const float *const *inputs)
{
	size_t bytes = plan->count * sizeof(float) + 1; /* +1: never malloc(0) */

	memset(c, 0, sizeof(*c));
	c->plan = *plan;
	c->in_place = in_place;
	for (uint32_t k = 0; k < plan->nranks; k++) {
		struct rank *r = &c->r[k];
		struct sl_ring_plan p = *plan;
		p.rank = k;
		assert_int_equal(sl_ring_init(&r->s, &p), 0);
		c->max_chunks = r->s.max_chunks;
		r->got_bytes = calloc((size_t)r->s.nsteps * r->s.max_chunks + 1, sizeof(uint64_t));
		r->recv = malloc(bytes);
		r->send = in_place ? r->recv : malloc(bytes);
		assert_non_null(r->got_bytes && r->recv && r->send);
		memcpy(r->send, inputs[k], plan->count * sizeof(float));
	}
}

static void cluster_fini(struct cluster *c)
{
	for (uint32_t k = 0; k < c->plan.nranks; k++) {
		sl_ring_fini(&c->r[k].s);
		free(c->r[k].got_bytes);
		if (!c->in_place)
			free(c->r[k].send);
		free(c->r[k].recv);
	}
	free(c->pool);
}

/* Packets each rank must send: one per payload of each chunk of the segment
 * it sends at each step, and one for every empty chunk. */
static uint64_t expected_packets(const struct sl_ring_plan *p, uint32_t rk)
{
	uint64_t total = 0, soff, slen;

	for (uint32_t t = 0; t + 1 < 2 * p->nranks - 1; t++) {
		seg_range(p, mod((int64_t)rk - t, p->nranks), &soff, &slen);
		for (uint32_t ch = 0; ch < nchunks(p, slen); ch++) {
			uint64_t len = chunk_len_of(p, slen, ch);
			total += len ? (len + p->payload - 1) / p->payload : 1;
		}
	}
	return total;
}

/* Run the whole schedule; leaves every rank's result in its recv. */
static void run_cluster(struct cluster *c)
{
	for (uint32_t k = 0; k < c->plan.nranks; k++)
		drain_sends(c, k);
	while (c->npool) {
		size_t i = rng() % c->npool;
		struct packet pk = c->pool[i];
		c->pool[i] = c->pool[--c->npool];
		deliver(c, &pk);
	}
	for (uint32_t k = 0; k < c->plan.nranks; k++) {
		struct rank *r = &c->r[k];
		assert_true(sl_ring_recv_done(&r->s));
		assert_int_equal(r->packets_sent, expected_packets(&c->plan, k));
		if (c->plan.nranks == 1 && !c->in_place) /* the engine's job for one rank */
			memcpy(r->recv, r->send, c->plan.count * sizeof(float));
	}
}

/* ---- inputs and references ---- */

/* Small integers: every partial sum is exact, whatever the order. */
static float exact_value(uint32_t rk, uint64_t i)
{
	return (float)((int)((rk * 7 + i * 13) % 41) - 20);
}

/* Arbitrary floats: the sum rounds, so only a fixed order reproduces it. */
static float rough_value(void)
{
	return (float)((double)(rng() >> 11) * 0x1p-53 - 0.5) * (float)(1u << (rng() % 20));
}

/* The ring's own order for element i of segment s: start at rank s, then
 * each next rank computes its own + incoming. */
static float ring_order_sum(const struct sl_ring_plan *p, const float *const *in, uint64_t i)
{
	uint64_t soff, slen;
	uint32_t s = 0;

	for (uint32_t k = 0; k < p->nranks; k++) {
		seg_range(p, k, &soff, &slen);
		if (i * sizeof(float) >= soff && i * sizeof(float) < soff + slen)
			s = k;
	}
	float acc = in[s][i];
	for (uint32_t j = 1; j < p->nranks; j++)
		acc = in[(s + j) % p->nranks][i] + acc;
	return acc;
}

static float **make_inputs(const struct sl_ring_plan *p, bool exact)
{
	float **in = calloc(p->nranks, sizeof(*in));

	assert_non_null(in);
	for (uint32_t k = 0; k < p->nranks; k++) {
		in[k] = malloc(p->count * sizeof(float) + 1);
		assert_non_null(in[k]);
		for (uint64_t i = 0; i < p->count; i++)
			in[k][i] = exact ? exact_value(k, i) : rough_value();
	}
	return in;
}

static void free_inputs(const struct sl_ring_plan *p, float **in)
{
	for (uint32_t k = 0; k < p->nranks; k++)
		free(in[k]);
	free(in);
}

/* One plan: exact inputs against the plain sum; rough inputs against the
 * ring-order sum, bit for bit, on every rank, for several delivery orders,
 * out of place and in place. */
static void check_plan(const struct sl_ring_plan *plan)
{
	for (int exact = 0; exact < 2; exact++) {
		float **in = make_inputs(plan, exact);
		for (uint64_t seed = 1; seed <= 3; seed++) {
			struct cluster c;
			rng_state = seed * 0x9e3779b97f4a7c15u;
			cluster_init(&c, plan, seed == 2, (const float *const *)in);
			run_cluster(&c);
			for (uint32_t k = 0; k < plan->nranks; k++)
				for (uint64_t i = 0; i < plan->count; i++) {
					float want = ring_order_sum(plan, (const float *const *)in, i);
					if (memcmp(&c.r[k].recv[i], &want, sizeof(float)) != 0)
						fail_msg("n=%u count=%llu payload=%u chunk=%llu seed=%llu: "
							 "rank %u element %llu is %a, want %a", plan->nranks,
							 (unsigned long long)plan->count, plan->payload,
							 (unsigned long long)plan->chunk_bytes,
							 (unsigned long long)seed, k, (unsigned long long)i,
							 c.r[k].recv[i], want);
					if (exact) {
						float sum = 0;
						for (uint32_t j = 0; j < plan->nranks; j++)
							sum += in[j][i];
						assert_true(c.r[k].recv[i] == sum);
					}
				}
			cluster_fini(&c);
		}
		free_inputs(plan, in);
	}
}

/* ---- tests ---- */

static void test_allreduce_sim(void **state)
{
	static const struct { uint32_t payload, chunk; } shapes[] = {
		{ 16, 16 }, { 16, 48 }, { 32, 32 * 64 }, { 64, 192 },
	};
	(void)state;

	for (uint32_t n = 1; n <= MAX_RANKS; n++) {
		const uint64_t counts[] = { 0, 1, n - 1, n, 2, 13, 97, 1009, 1000 };
		for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
			for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
				struct sl_ring_plan p = {
					.nranks = n, .count = counts[ci], .esize = sizeof(float),
					.payload = shapes[si].payload, .chunk_bytes = shapes[si].chunk,
				};
				assert_null(sl_ring_plan_check(&p));
				check_plan(&p);
			}
	}
}

static void test_plan_check(void **state)
{
	const struct sl_ring_plan good = { .nranks = 4, .rank = 3, .count = 100, .esize = 4,
					   .payload = 64, .chunk_bytes = 64 * 64 };
	struct sl_ring_plan p;
	struct sl_ring_sched s;
	(void)state;

	assert_null(sl_ring_plan_check(&good));
#define BAD(field, value)                                     \
	do {                                                  \
		p = good;                                     \
		p.field = value;                              \
		assert_non_null(sl_ring_plan_check(&p));      \
		assert_int_equal(sl_ring_init(&s, &p), -1);   \
	} while (0)
	BAD(nranks, 0);
	BAD(rank, 4);
	BAD(esize, 0);
	BAD(payload, 0);
	BAD(payload, 40);
	BAD(esize, 3); /* 64-byte packets would split 3-byte elements */
	BAD(chunk_bytes, 0);
	BAD(chunk_bytes, 100);
	BAD(chunk_bytes, 65 * 64);
	BAD(count, UINT64_MAX / 2);
#undef BAD
}

/* A 3-rank schedule of 100 floats (segments of 136, 132, 132 bytes),
 * 16-byte packets, 48-byte chunks: malformed packets are refused. */
static void test_bad_packets(void **state)
{
	const struct sl_ring_plan p = { .nranks = 3, .rank = 0, .count = 100, .esize = 4,
					.payload = 16, .chunk_bytes = 48 };
	struct sl_ring_sched s;
	enum sl_ring_apply apply;
	(void)state;

	assert_int_equal(sl_ring_init(&s, &p), 0);
	assert_int_equal(s.nsteps, 4);
	/* step 0: rank 0 receives segment 2, bytes [268, 400) */
	assert_int_equal(sl_ring_recv_segment(&p, 0), 2);
	assert_int_equal(sl_ring_on_packet(&s, 4, 268, 16, &apply), SL_RING_BAD_STEP);
	assert_int_equal(sl_ring_on_packet(&s, UINT32_MAX, 268, 16, &apply), SL_RING_BAD_STEP);
	assert_int_equal(sl_ring_on_packet(&s, 0, 252, 16, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 400, 16, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 0, UINT64_MAX - 8, 16, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 272, 16, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 268, 8, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 268, 32, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 268, 0, &apply), SL_RING_BAD_RANGE);
	/* segment 2's chunks start at 268, 316 and 364; the last is 36 bytes:
	 * packets at 364 (16), 380 (16) and 396 (4) */
	assert_int_equal(sl_ring_on_packet(&s, 0, 396, 16, &apply), SL_RING_BAD_RANGE);
	uint32_t left = s.chunks_left;
	assert_int_equal(sl_ring_on_packet(&s, 0, 396, 4, &apply), SL_RING_OK);
	assert_int_equal(apply, SL_APPLY_REDUCE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 396, 4, &apply), SL_RING_DUPLICATE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 364, 16, &apply), SL_RING_OK);
	struct sl_ring_send snd;
	while (sl_ring_next_send(&s, &snd))
		assert_int_equal(snd.step, 0); /* step 0's own sends only: chunk incomplete */
	assert_int_equal(sl_ring_on_packet(&s, 0, 380, 16, &apply), SL_RING_OK);
	assert_int_equal(s.chunks_left, left - 1);
	assert_true(sl_ring_next_send(&s, &snd));
	assert_int_equal(snd.step, 1);
	assert_int_equal(snd.chunk, 2);
	assert_int_equal(snd.off, 364);
	assert_int_equal(snd.len, 36);
	assert_false(snd.from_send);
	assert_false(sl_ring_next_send(&s, &snd));
	assert_int_equal(sl_ring_on_packet(&s, 0, 380, 16, &apply), SL_RING_DUPLICATE);
	assert_int_equal(s.chunks_left, left - 1);
	/* steps 2 and 3 copy: step 2 receives segment 0, [0, 136) */
	assert_int_equal(sl_ring_on_packet(&s, 2, 0, 16, &apply), SL_RING_OK);
	assert_int_equal(apply, SL_APPLY_COPY);
	sl_ring_fini(&s);
}

/* Empty segments still carry one empty packet per step, at their offset. */
static void test_empty_segments(void **state)
{
	const struct sl_ring_plan p = { .nranks = 3, .rank = 1, .count = 1, .esize = 4,
					.payload = 16, .chunk_bytes = 16 };
	struct sl_ring_sched s;
	struct sl_ring_send snd;
	enum sl_ring_apply apply;
	(void)state;

	assert_int_equal(sl_ring_init(&s, &p), 0);
	/* segments: 0 = [0, 4), 1 and 2 empty at offset 4 */
	assert_true(sl_ring_next_send(&s, &snd));
	assert_int_equal(snd.off, 4);
	assert_int_equal(snd.len, 0);
	assert_true(snd.from_send);
	assert_false(sl_ring_next_send(&s, &snd));
	/* step 0: rank 1 receives segment 0, one 4-byte packet */
	assert_int_equal(sl_ring_on_packet(&s, 0, 0, 0, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 0, 0, 4, &apply), SL_RING_OK);
	/* step 1: receives segment 2, empty */
	assert_int_equal(sl_ring_on_packet(&s, 1, 4, 4, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 1, 0, 0, &apply), SL_RING_BAD_RANGE);
	assert_int_equal(sl_ring_on_packet(&s, 1, 4, 0, &apply), SL_RING_OK);
	assert_int_equal(sl_ring_on_packet(&s, 1, 4, 0, &apply), SL_RING_DUPLICATE);
	sl_ring_fini(&s);
}

static void test_one_rank(void **state)
{
	const struct sl_ring_plan p = { .nranks = 1, .rank = 0, .count = 10, .esize = 4,
					.payload = 16, .chunk_bytes = 16 };
	struct sl_ring_sched s;
	struct sl_ring_send snd;
	enum sl_ring_apply apply;
	(void)state;

	assert_int_equal(sl_ring_init(&s, &p), 0);
	assert_int_equal(s.nsteps, 0);
	assert_true(sl_ring_recv_done(&s));
	assert_false(sl_ring_next_send(&s, &snd));
	assert_int_equal(sl_ring_on_packet(&s, 0, 0, 16, &apply), SL_RING_BAD_STEP);
	sl_ring_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_check),
		cmocka_unit_test(test_bad_packets),
		cmocka_unit_test(test_empty_segments),
		cmocka_unit_test(test_one_rank),
		cmocka_unit_test(test_allreduce_sim),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
