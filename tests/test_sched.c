/*
 * test_sched.c: every collective's schedule (coll/schedule.h, the ring and
 * direct builders) run in memory by simulated ranks, no network.
 *
 * Ready sends are cut into packets that sit in one pool and are delivered
 * in a seeded random order; a packet's bytes are read from its sender's
 * buffer only when it is delivered, which also checks that no schedule lets
 * a rank overwrite bytes still on their way.  Transfers to the rank itself
 * are applied at once, and packets the schedule defers are kept and offered
 * again, as the engine does.  Results are compared with a reference the
 * test computes itself, for every collective, algorithm, several datatypes
 * and ops, 1 to 6 ranks, counts 0/1/primes, in place and not, every root;
 * and floating-point results are checked to be the same bits whatever the
 * delivery order (and, for all-reduce, on every rank).  All-to-allv runs
 * with random counts (zeros among them) and gaps between blocks.  An
 * in-place all-to-all also runs on its input, as the engine runs a large
 * one: a packet lands only once every packet of the send that reads its
 * bytes was delivered (acknowledged), as dataplane/coll_run.c's offer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/abi.h>

#include "reduce.h"
#include "schedule.h"

#define MAX_RANKS 6

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

/* ---- the simulated cluster ---- */

struct packet {
	uint32_t from, to, step;
	uint8_t buf;        /* sender's buffer */
	uint64_t off, xoff; /* sender's byte offset, offset within the transfer */
	uint64_t len;
};

struct held {          /* a deferred packet: its bytes as they were sent */
	struct packet pk;
	uint8_t data[64];
};

struct rank {
	struct sl_sched s;
	uint8_t *mem, *send, *recv, *scratch, *snap;
	uint8_t *before;      /* recv as it was before the run */
	uint64_t recv_bytes;  /* the whole call's recv buffer */
	uint8_t *buf[SL_NBUFS];
	struct held held[4096];
	size_t nheld;
	/* Running on its input (cluster.on_input): per reception chunk, the
	 * packets of the send chunk that reads its bytes still on their way,
	 * and whether they all arrived, so that it may land. */
	uint32_t *unacked;
	uint8_t *src_free;
	uint8_t *gate_held; /* and how many of its packets wait there (sl_sched_chunk_arrived) */
};

struct cluster {
	struct sl_sched_plan plan; /* rank unused; the whole call */
	bool sliced;               /* the ranks run one channel's slice of it: */
	uint64_t first, k;         /* elements [first, first + k) of each block */
	enum sl_dtype dtype;
	enum sl_redop op;
	struct rank r[MAX_RANKS];
	struct packet *pool;
	size_t npool, cap;
	bool keep;                 /* teardown keeps the schedules, for the next case to reuse */
	bool on_input;             /* in place, schedules that may run on their input do */
	bool reused;               /* every rank of the case that ended reused its schedule */
};

static struct cluster cl;

static void pool_add(struct packet pk)
{
	if (cl.npool == cl.cap) {
		cl.cap = cl.cap ? 2 * cl.cap : 256;
		cl.pool = realloc(cl.pool, cl.cap * sizeof(*cl.pool));
		assert_non_null(cl.pool);
	}
	cl.pool[cl.npool++] = pk;
}

/* What the engine does with an accepted packet. */
static void apply(uint32_t to, const struct sl_action *a, const uint8_t *data, uint64_t len)
{
	struct rank *r = &cl.r[to];
	uint8_t *dst = r->buf[a->buf] + a->off;
	size_t n = len / cl.plan.esize;

	if (a->apply == SL_APPLY_COPY) {
		memmove(dst, data, len);
		return;
	}
	const uint8_t *opnd = r->buf[a->opnd_buf] + a->opnd_off;

	sl_reduce(dst, a->payload_first ? data : opnd, a->payload_first ? opnd : data, n, cl.dtype,
		  cl.op == SL_AVG ? SL_SUM : cl.op);
	if (cl.op == SL_AVG && a->finishes)
		sl_scale_avg(dst, n, cl.dtype, cl.plan.nranks);
}

static void drain(uint32_t rk);

/* Offer a packet to rank `to`'s schedule; on its input, one whose bytes a
 * send still reads is deferred, as the engine's offer does: the first of a
 * chunk to wait so makes that send ready, and once a chunk's every packet
 * waits, the sends that pace on it go (first: the packet's first offer). */
static enum sl_sched_result offer_sched(uint32_t to, const struct packet *pk, bool first, struct sl_action *a)
{
	struct rank *r = &cl.r[to];
	struct sl_recv_at at;

	if (!r->src_free || !sl_sched_recv_at(&r->s, pk->from, pk->step, pk->xoff, &at))
		return sl_sched_on_packet(&r->s, pk->from, pk->step, pk->xoff, pk->len, a);
	if (!r->src_free[at.index]) {
		if (first && r->gate_held[at.index] == 0)
			sl_sched_gate_pull(&r->s, &at);
		if (first && ++r->gate_held[at.index] == sl_sched_chunk_packets(&r->s, &at))
			sl_sched_chunk_arrived(&r->s, &at);
		return SL_SCHED_DEFER;
	}
	return sl_sched_on_packet_at(&r->s, &at, pk->xoff, pk->len, a);
}

/* Offer the held packets again until none fits. */
static void retry_held(uint32_t rk)
{
	struct rank *r = &cl.r[rk];
	bool again = true;

	while (again) {
		again = false;
		for (size_t i = 0; i < r->nheld; i++) {
			struct held *h = &r->held[i];
			struct sl_action a;
			enum sl_sched_result res = offer_sched(rk, &h->pk, false, &a);
			if (res == SL_SCHED_DEFER)
				continue;
			assert_int_equal(res, SL_SCHED_OK);
			apply(rk, &a, h->data, h->pk.len);
			r->held[i--] = r->held[--r->nheld];
			again = true;
		}
	}
}

/* Deliver pk with bytes data; a deferred packet is held.  True when accepted. */
static void offer(const struct packet *pk, const uint8_t *data)
{
	struct rank *r = &cl.r[pk->to];
	struct sl_action a;
	enum sl_sched_result res = offer_sched(pk->to, pk, true, &a);

	if (res == SL_SCHED_DEFER) {
		assert_true(r->nheld < sizeof(r->held) / sizeof(r->held[0]));
		r->held[r->nheld].pk = *pk;
		memcpy(r->held[r->nheld++].data, data, pk->len);
		return;
	}
	if (res != SL_SCHED_OK)
		fail_msg("%s by %s, n=%u: rank %u refused a packet from %u (step %u, offset %llu, len %llu): %d",
			 sl_coll_name(cl.plan.coll), sl_algo_name(cl.plan.algo), cl.plan.nranks, pk->to, pk->from,
			 pk->step, (unsigned long long)pk->xoff, (unsigned long long)pk->len, res);
	apply(pk->to, &a, data, pk->len);
	if (a.chunk_done)
		retry_held(pk->to);
	/* now and then the same packet again: refused */
	if (pk->from != pk->to && rng() % 8 == 0)
		assert_int_equal(sl_sched_on_packet(&r->s, pk->from, pk->step, pk->xoff, pk->len, &a),
				 SL_SCHED_DUPLICATE);
}

/* Cut rank rk's ready sends into packets: its own applied at once, others pooled. */
static void drain(uint32_t rk)
{
	struct rank *r = &cl.r[rk];
	struct sl_send snd;

	while (sl_sched_next_send(&r->s, &snd)) {
		uint64_t o = 0;
		if (r->unacked && snd.peer != rk)
			r->unacked[sl_sched_recv_chunk(&r->s, snd.peer, snd.step, snd.xoff)] +=
				snd.len ? (uint32_t)((snd.len + cl.plan.payload - 1) / cl.plan.payload) : 1;
		do {
			uint64_t len = snd.len - o < cl.plan.payload ? snd.len - o : cl.plan.payload;
			struct packet pk = { rk, snd.peer, snd.step, snd.buf, snd.off + o, snd.xoff + o, len };
			if (snd.peer == rk)
				offer(&pk, r->buf[snd.buf] + snd.off + o);
			else
				pool_add(pk);
			o += len;
		} while (o < snd.len);
	}
}

/* pk reached its receiver, and no retransmission reads its bytes again:
 * on its input, the sender's chunk that lands there may once all of its
 * send chunk's packets have (dp_msg_acked, per message). */
static void acked(const struct packet *pk)
{
	struct rank *r = &cl.r[pk->from];
	int64_t k;

	if (!r->unacked)
		return;
	k = sl_sched_recv_chunk(&r->s, pk->to, pk->step, pk->xoff);
	assert_true(k >= 0 && r->unacked[k] > 0);
	if (--r->unacked[k] == 0) {
		r->src_free[k] = 1;
		retry_held(pk->from);
	}
}

static void deliver(const struct packet *pk)
{
	uint8_t wire[64];

	assert_true(pk->len <= sizeof(wire));
	memcpy(wire, cl.r[pk->from].buf[pk->buf] + pk->off, pk->len); /* the sender's bytes now */
	offer(pk, wire);
	acked(pk);
	drain(pk->to);
	drain(pk->from);
}

static void run(uint64_t seed)
{
	rng_state = seed * 0x9e3779b97f4a7c15u + 1;
	for (uint32_t k = 0; k < cl.plan.nranks; k++)
		drain(k);
	while (cl.npool) {
		size_t i = rng() % cl.npool;
		struct packet pk = cl.pool[i];
		cl.pool[i] = cl.pool[--cl.npool];
		deliver(&pk);
	}
	for (uint32_t k = 0; k < cl.plan.nranks; k++) {
		if (!sl_sched_recv_done(&cl.r[k].s))
			fail_msg("%s by %s, n=%u count=%llu: rank %u never completed (waiting on %d)",
				 sl_coll_name(cl.plan.coll), sl_algo_name(cl.plan.algo), cl.plan.nranks,
				 (unsigned long long)cl.plan.count, k, sl_sched_waiting_on(&cl.r[k].s));
		assert_int_equal(cl.r[k].nheld, 0);
	}
}

/* ---- inputs and the reference ---- */

/* Element i of rank k's input: small integers, exact in every type and
 * every order; or (rough) floats whose sums round. */
static double input(uint32_t k, uint64_t i, bool rough)
{
	uint64_t v = (k + 1) * 0x9e3779b97f4a7c15u ^ (i + 1) * 0xbf58476d1ce4e5b9u;
	v ^= v >> 29;
	if (rough)
		return (double)(float)((double)(v >> 11) * 0x1p-53 * (double)(1u << (v % 16)) - 0.5);
	if (cl.op == SL_PROD)
		return v % 3 == 0 ? 2 : 1;
	return (double)(int)(v % 7) - (cl.dtype == SL_UINT8 ? 0 : 3); /* unsigned: no negatives */
}

static void store(uint8_t *buf, uint64_t i, double v)
{
	switch (cl.dtype) {
	case SL_INT8: ((int8_t *)buf)[i] = (int8_t)(int64_t)v; break;
	case SL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v; break;
	case SL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case SL_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case SL_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case SL_FLOAT64: ((double *)buf)[i] = v; break;
	case SL_FLOAT16: ((uint16_t *)buf)[i] = sl_float_to_half((float)v); break;
	default: fail_msg("no store for dtype %d", cl.dtype);
	}
}

/* op over ranks of input element i (in float64: exact for the small integers). */
static double reduced(uint64_t i)
{
	double acc = input(0, i, false);

	for (uint32_t k = 1; k < cl.plan.nranks; k++) {
		double x = input(k, i, false);
		switch (cl.op) {
		case SL_PROD: acc *= x; break;
		case SL_MAX: acc = x > acc ? x : acc; break;
		case SL_MIN: acc = x < acc ? x : acc; break;
		default: acc += x; break;
		}
	}
	return cl.op == SL_AVG ? acc / cl.plan.nranks : acc;
}

/* Element i of rank rk's expected recv buffer; false when it holds nothing. */
static bool expected(uint32_t rk, uint64_t i, double *v)
{
	uint64_t c = cl.plan.count, blk = c ? i / c : 0, in = c ? i % c : 0;
	uint32_t root = cl.plan.root;

	switch (cl.plan.coll) {
	case SL_COLL_ALLREDUCE: *v = reduced(i); return true;
	case SL_COLL_ALLGATHER: *v = input((uint32_t)blk, in, false); return true;
	case SL_COLL_REDUCE_SCATTER: *v = reduced(rk * c + i); return true;
	case SL_COLL_BROADCAST: *v = input(root, i, false); return true;
	case SL_COLL_REDUCE: *v = reduced(i); return rk == root;
	case SL_COLL_ALLTOALL: *v = input((uint32_t)blk, rk * c + in, false); return true;
	case SL_COLL_GATHER: *v = input((uint32_t)blk, in, false); return rk == root;
	case SL_COLL_SCATTER: *v = input(root, rk * c + i, false); return true;
	default: return false;
	}
}

/* ---- one case ---- */

/* In place, NCCL's way: where the send buffer sits inside recv (or recv in send). */
static bool place_in(uint32_t rk, uint64_t b, uint64_t *send_at, uint64_t *recv_at)
{
	uint32_t root = cl.plan.root;

	*send_at = *recv_at = 0;
	switch (cl.plan.coll) {
	case SL_COLL_ALLGATHER: *send_at = rk * b; return true;
	case SL_COLL_REDUCE_SCATTER: *recv_at = rk * b; return true;
	case SL_COLL_GATHER: *send_at = rk * b; return rk == root;
	case SL_COLL_SCATTER: *recv_at = rk * b; return rk == root;
	case SL_COLL_BROADCAST: case SL_COLL_REDUCE: return rk == root;
	case SL_COLL_ALLREDUCE: case SL_COLL_ALLTOALL: return true;
	default: return false;
	}
}

static void setup_rank(uint32_t rk, bool in_place, bool rough)
{
	struct rank *r = &cl.r[rk];
	struct sl_sched_plan p = cl.plan;
	uint64_t b = p.count * p.esize, send_at, recv_at;

	p.rank = rk;
	assert_true(sl_cmd_bytes(p.coll, p.count, p.esize, p.nranks, rk, p.root, p.stride, &p.send_bytes, &p.recv_bytes));
	in_place = in_place && place_in(rk, b, &send_at, &recv_at);
	if (in_place) {
		uint64_t size = p.send_bytes > p.recv_bytes ? p.send_bytes : p.recv_bytes;
		r->mem = malloc(size + 1);
		r->send = r->mem + send_at;
		r->recv = r->mem + recv_at;
	} else {
		r->mem = malloc(p.send_bytes + p.recv_bytes + 1);
		r->send = r->mem;
		r->recv = r->mem + p.send_bytes;
		memset(r->recv, 0xa5, p.recv_bytes);
	}
	assert_non_null(r->mem);
	for (uint64_t i = 0; i < p.send_bytes / p.esize; i++)
		store(r->send, i, input(rk, i, rough));
	r->recv_bytes = p.recv_bytes;
	r->before = malloc(p.recv_bytes + 1);
	memcpy(r->before, r->recv, p.recv_bytes);
	p.in_place = in_place;
	if (cl.sliced) { /* what libsluice's split() hands a channel */
		p.stride = b;
		p.count = cl.k;
		assert_true(sl_cmd_bytes(p.coll, p.count, p.esize, p.nranks, rk, p.root, p.stride, &p.send_bytes,
					 &p.recv_bytes));
		r->send += cl.first * p.esize;
		r->recv += cl.first * p.esize;
	}
	/* r->s is zeroed, or kept from the last case (cl.keep) */
	if (sl_sched_reinit(&r->s, &p) != 0)
		fail_msg("%s by %s, n=%u rank %u count %llu: sl_sched_reinit failed", sl_coll_name(p.coll),
			 sl_algo_name(p.algo), p.nranks, rk, (unsigned long long)p.count);
	r->scratch = malloc(r->s.bytes[SL_BUF_SCRATCH] + 1);
	if (cl.on_input && sl_sched_input_gate_ok(&r->s)) {
		r->unacked = calloc(r->s.chunks_built + 1, sizeof(*r->unacked));
		r->src_free = calloc(r->s.chunks_built + 1, 1);
		r->gate_held = calloc(r->s.chunks_built + 1, 1);
		assert_true(r->unacked && r->src_free && r->gate_held);
	}
	r->snap = r->s.snapshot_send && !r->src_free ? malloc(r->s.bytes[SL_BUF_SEND] + 1) : NULL;
	r->buf[SL_BUF_SEND] = r->send;
	r->buf[SL_BUF_RECV] = r->recv;
	r->buf[SL_BUF_SCRATCH] = r->scratch;
	if (r->snap) { /* as the engine copies it */
		uint64_t n, len, stride, skip;
		sl_sched_snapshot(&r->s, &n, &len, &stride, &skip);
		memset(r->snap, 0xa5, r->s.bytes[SL_BUF_SEND]); /* the piece left out, should a transfer read it */
		for (uint64_t j = 0; j < n; j++)
			if (j != skip)
				memcpy(r->snap + j * len, r->send + j * stride, len);
		r->buf[SL_BUF_SEND] = r->snap;
	}
}

static void teardown(void)
{
	cl.reused = true;
	for (uint32_t k = 0; k < cl.plan.nranks; k++) {
		struct sl_sched kept = cl.r[k].s;
		cl.reused = cl.reused && kept.reused;
		if (!cl.keep)
			sl_sched_fini(&kept);
		free(cl.r[k].mem);
		free(cl.r[k].scratch);
		free(cl.r[k].snap);
		free(cl.r[k].before);
		free(cl.r[k].unacked);
		free(cl.r[k].src_free);
		free(cl.r[k].gate_held);
		memset(&cl.r[k], 0, sizeof(cl.r[k]));
		if (cl.keep)
			cl.r[k].s = kept;
	}
	free(cl.pool);
	cl.pool = NULL;
	cl.npool = cl.cap = 0;
}

/* Whether element i of a recv buffer belongs to the slice that ran. */
static bool in_slice(uint64_t i)
{
	enum sl_coll c = cl.plan.coll;
	bool blocks = c == SL_COLL_ALLGATHER || c == SL_COLL_ALLTOALL || c == SL_COLL_GATHER;
	uint64_t in = blocks && cl.plan.count ? i % cl.plan.count : i;

	return !cl.sliced || (in >= cl.first && in < cl.first + cl.k);
}

/* Every element of the slice that ran is right; every other is untouched. */
static void check_results(bool in_place, uint64_t seed)
{
	for (uint32_t k = 0; k < cl.plan.nranks; k++) {
		const struct rank *r = &cl.r[k];
		uint8_t *recv = r->recv - (cl.sliced ? cl.first * cl.plan.esize : 0);
		for (uint64_t i = 0; i < r->recv_bytes / cl.plan.esize; i++) {
			double want;
			uint8_t w[8];
			if (!expected(k, i, &want))
				break;
			store(w, 0, want);
			const uint8_t *ok = in_slice(i) ? w : r->before + i * cl.plan.esize;
			if (memcmp(ok, recv + i * cl.plan.esize, cl.plan.esize) != 0)
				fail_msg("%s by %s (%s %s), n=%u root %u count %llu%s seed %llu, slice of %llu from "
					 "%llu: rank %u element %llu is wrong (%s %g)", sl_coll_name(cl.plan.coll),
					 sl_algo_name(cl.plan.algo), sl_dtype_name(cl.dtype), sl_redop_name(cl.op),
					 cl.plan.nranks, cl.plan.root, (unsigned long long)cl.plan.count,
					 in_place ? " in place" : "", (unsigned long long)seed,
					 (unsigned long long)(cl.sliced ? cl.k : cl.plan.count),
					 (unsigned long long)cl.first, k, (unsigned long long)i,
					 in_slice(i) ? "want" : "outside the slice, so untouched; result", want);
		}
	}
}

static void run_case(const struct sl_sched_plan *plan, enum sl_dtype t, enum sl_redop op, bool in_place,
		     uint64_t seed)
{
	cl.plan = *plan;
	cl.plan.esize = (uint32_t)sl_dtype_size(t);
	cl.dtype = t;
	cl.op = op;
	for (uint32_t k = 0; k < plan->nranks; k++)
		setup_rank(k, in_place, false);
	run(seed);
	check_results(in_place, seed);
	teardown();
}

/* ---- tests ---- */

/* Whether algorithm a runs collective c on n ranks. */
static bool serves(enum sl_coll c, enum sl_algo a, uint32_t n)
{
	struct sl_sched_plan p = { .coll = c, .algo = a, .nranks = n, .esize = 4, .payload = 16, .chunk_bytes = 16 };

	return sl_sched_plan_check(&p) == NULL;
}

static const enum sl_coll all_colls[] = {
	SL_COLL_ALLREDUCE, SL_COLL_ALLGATHER, SL_COLL_REDUCE_SCATTER, SL_COLL_BROADCAST, SL_COLL_REDUCE,
	SL_COLL_ALLTOALL, SL_COLL_BARRIER, SL_COLL_GATHER, SL_COLL_SCATTER,
};

/* Every collective of all_colls with every algorithm that serves it, on 1
 * to max_n ranks: `for (struct served it = { 0 }; next_served(&it, N);)`
 * visits (it.n, all_colls[it.c], it.a). */
struct served {
	uint32_t n;
	size_t c;
	enum sl_algo a;
};

static bool next_served(struct served *it, uint32_t max_n)
{
	bool first = it->n == 0;

	if (first)
		*it = (struct served){ .n = 1, .c = 0, .a = SL_ALGO_RING };
	for (;; first = false) {
		if (!first && ++it->a == SL_ALGO_COUNT) {
			it->a = SL_ALGO_RING;
			if (++it->c == sizeof(all_colls) / sizeof(all_colls[0])) {
				it->c = 0;
				if (++it->n > max_n)
					return false;
			}
		}
		if (serves(all_colls[it->c], it->a, it->n))
			return true;
	}
}

static void test_every_collective(void **state)
{
	static const struct { enum sl_dtype t; enum sl_redop op; } types[] = {
		{ SL_FLOAT32, SL_SUM }, { SL_INT32, SL_MAX }, { SL_INT8, SL_PROD }, { SL_FLOAT64, SL_AVG },
		{ SL_FLOAT16, SL_MIN }, { SL_INT64, SL_SUM },
	};
	static const uint64_t counts[] = { 0, 1, 2, 7, 13, 61 };
	(void)state;

	for (struct served it = { 0 }; next_served(&it, MAX_RANKS);)
		for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
			struct sl_sched_plan p = { .coll = all_colls[it.c], .algo = it.a, .nranks = it.n,
						   .count = counts[ci], .root = (uint32_t)(ci % it.n), .payload = 16,
						   .chunk_bytes = 16 * (1 + ci % 3) };
			size_t ti = (it.n + it.c + ci) % (sizeof(types) / sizeof(types[0]));
			run_case(&p, types[ti].t, types[ti].op, ci % 2, it.n * 100 + ci);
		}
}

/* In place, a direct schedule runs on a copy of its input only where a
 * reception overwrites input that is still to be read: a reduce's root 0
 * takes its own contribution first, where it lies, and needs none (the copy
 * made an in-place 1 MiB reduce at 2 ranks 1.2-1.3x slower: issue 3).  Each
 * case also runs, its results checked. */
static void test_in_place_copies_only_what_it_must(void **state)
{
	static const struct { enum sl_coll c; uint32_t n, root; bool copy; } cases[] = {
		{ SL_COLL_REDUCE, 2, 0, false }, { SL_COLL_REDUCE, 3, 0, false }, { SL_COLL_REDUCE, 2, 1, true },
		{ SL_COLL_REDUCE, 3, 2, true },  { SL_COLL_ALLREDUCE, 2, 0, true }, { SL_COLL_ALLREDUCE, 1, 0, false },
		{ SL_COLL_REDUCE_SCATTER, 2, 0, true }, { SL_COLL_ALLTOALL, 2, 0, true },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sl_sched_plan p = { .coll = cases[i].c, .algo = SL_ALGO_DIRECT, .nranks = cases[i].n,
					   .root = cases[i].root, .count = 13, .payload = 16, .chunk_bytes = 32 };
		cl.plan = p;
		cl.plan.esize = 4;
		cl.dtype = SL_FLOAT32;
		cl.op = SL_SUM;
		for (uint32_t k = 0; k < p.nranks; k++)
			setup_rank(k, true, false);
		bool copies = cl.r[p.root].s.snapshot_send;
		if (copies != cases[i].copy)
			fail_msg("%s, n=%u, rank %u in place: %s its input", sl_coll_name(p.coll), p.nranks, p.root,
				 copies ? "copies" : "does not copy");
		run(i);
		check_results(true, i);
		teardown();
	}
}

/* In-place all-to-all: a rank's own block already lies where it lands, so
 * it has no transfer and the snapshot leaves it out (setup_rank fills
 * that piece with 0xa5: a transfer reading it would spoil the results);
 * every other block is in the snapshot, which the receptions into it need. */
static void test_in_place_all_to_all_leaves_its_own_block(void **state)
{
	(void)state;

	for (uint32_t n = 1; n <= 4; n++)
		for (enum sl_algo a = SL_ALGO_RING; a < SL_ALGO_COUNT; a++) {
			if (!serves(SL_COLL_ALLTOALL, a, n))
				continue;
			cl.plan = (struct sl_sched_plan){ .coll = SL_COLL_ALLTOALL, .algo = a, .nranks = n,
							  .count = 13, .esize = 4, .payload = 16, .chunk_bytes = 32 };
			cl.dtype = SL_FLOAT32;
			cl.op = SL_SUM;
			for (uint32_t k = 0; k < n; k++)
				setup_rank(k, true, false);
			for (uint32_t k = 0; k < n; k++) {
				const struct sl_sched *s = &cl.r[k].s;
				uint64_t pieces, len, stride, skip;
				sl_sched_snapshot(s, &pieces, &len, &stride, &skip);
				if (s->snapshot_send != (n > 1) || (n > 1 && (pieces != n || skip != k)))
					fail_msg("all-to-all by %s, n=%u, rank %u in place: snapshot %s, %llu pieces, "
						 "piece %llu left out (want %s, %u pieces, piece %u left out)",
						 sl_algo_name(a), n, k, s->snapshot_send ? "taken" : "not taken",
						 (unsigned long long)pieces, (unsigned long long)skip,
						 n > 1 ? "taken" : "not taken", n, k);
				for (uint32_t i = 0; i < s->nx; i++)
					if (s->x[i].peer == k && s->x[i].len)
						fail_msg("all-to-all by %s, n=%u, rank %u in place: copies its own "
							 "block onto itself (transfer %u)", sl_algo_name(a), n, k, i);
			}
			run(n * 10 + a);
			check_results(true, n * 10 + a);
			teardown();
		}
}

/* In place is each rank's own choice (its buffers), not the call's: an
 * all-to-all whose ranks differ in it still pairs every send with its
 * reception, by every algorithm (pairwise's steps are one order for all). */
static void test_all_to_all_in_place_on_some_ranks(void **state)
{
	static const enum sl_algo algos[] = { SL_ALGO_DIRECT, SL_ALGO_PAIRWISE };
	(void)state;

	for (uint32_t n = 2; n <= MAX_RANKS; n++)
		for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
			for (uint32_t odd = 0; odd < 2; odd++) {
				cl.plan = (struct sl_sched_plan){ .coll = SL_COLL_ALLTOALL, .algo = algos[a], .nranks = n,
								  .count = 13, .esize = 4, .payload = 16, .chunk_bytes = 32 };
				cl.dtype = SL_INT32;
				cl.op = SL_SUM;
				for (uint32_t k = 0; k < n; k++)
					setup_rank(k, k % 2 == odd, false);
				run(n * 10 + a * 2 + odd);
				check_results(true, n * 10 + a * 2 + odd);
				teardown();
			}
}

/* An in-place all-to-all on its input, as the engine runs a large one
 * (coll_run.c runs_on_input): with no copy of the blocks still to be sent,
 * each reception waits for the send that reads its bytes; direct and
 * pairwise at every rank count complete in any delivery order, every block
 * right. */
static void test_in_place_all_to_all_on_its_input(void **state)
{
	static const enum sl_algo algos[] = { SL_ALGO_DIRECT, SL_ALGO_PAIRWISE };
	static const uint64_t counts[] = { 0, 1, 13, 61 };
	(void)state;

	cl.on_input = true;
	for (uint32_t n = 2; n <= MAX_RANKS; n++) /* one rank moves nothing: no copy to spare */
		for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
			for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
				for (uint64_t seed = 0; seed < 4; seed++) {
					cl.plan = (struct sl_sched_plan){ .coll = SL_COLL_ALLTOALL, .algo = algos[a],
									  .nranks = n, .count = counts[ci], .esize = 4,
									  .payload = 16, .chunk_bytes = 16 << (seed % 3) };
					cl.dtype = SL_INT32;
					cl.op = SL_SUM;
					for (uint32_t k = 0; k < n; k++) {
						setup_rank(k, true, false);
						if (!cl.r[k].src_free)
							fail_msg("all-to-all by %s, n=%u, rank %u in place: runs on a "
								 "copy of its input, want on the input",
								 sl_algo_name(algos[a]), n, k);
					}
					run(seed * 100 + n * 10 + ci);
					check_results(true, seed * 100 + n * 10 + ci);
					teardown();
				}
	cl.on_input = false;
}

/* Every (datatype, op) through the reducing collectives on 3 ranks. */
static void test_every_type_and_op(void **state)
{
	static const enum sl_dtype types[] = { SL_INT8, SL_UINT8, SL_INT32, SL_INT64, SL_FLOAT16, SL_FLOAT32,
					       SL_FLOAT64 };
	static const enum sl_coll colls[] = { SL_COLL_ALLREDUCE, SL_COLL_REDUCE_SCATTER, SL_COLL_REDUCE };
	(void)state;

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (enum sl_redop op = SL_SUM; op < SL_REDOP_COUNT; op++) {
			bool is_float = types[t] == SL_FLOAT16 || types[t] == SL_FLOAT32 || types[t] == SL_FLOAT64;
			if (op == SL_AVG && !is_float)
				continue;
			for (size_t c = 0; c < sizeof(colls) / sizeof(colls[0]); c++)
				for (enum sl_algo a = SL_ALGO_RING; a < SL_ALGO_COUNT; a++) {
					if (!serves(colls[c], a, 3))
						continue;
					struct sl_sched_plan p = { .coll = colls[c], .algo = a, .nranks = 3, .root = 2,
								   .count = 37, .payload = 16, .chunk_bytes = 32 };
					run_case(&p, types[t], op, t % 2, t * 7 + op);
				}
		}
}

/* A call split over channels (libsluice's split()): every rank runs the
 * slice of elements [first, first + k) of each block, its blocks a whole
 * block apart, alone on buffers holding the whole call.  The slice's
 * elements must come out right and every other element stay as it was. */
static void test_strided_slices(void **state)
{
	static const enum sl_coll colls[] = { SL_COLL_ALLGATHER, SL_COLL_REDUCE_SCATTER, SL_COLL_ALLTOALL,
					      SL_COLL_GATHER, SL_COLL_SCATTER };
	static const struct { uint64_t first, k; } slices[] = { { 0, 4 }, { 4, 4 }, { 8, 3 }, { 5, 1 } };
	(void)state;

	for (uint32_t n = 1; n <= 5; n++)
		for (size_t c = 0; c < sizeof(colls) / sizeof(colls[0]); c++)
			for (enum sl_algo a = SL_ALGO_RING; a < SL_ALGO_COUNT; a++)
				for (size_t sl = 0; serves(colls[c], a, n) && sl < sizeof(slices) / sizeof(slices[0]);
				     sl++) {
					struct sl_sched_plan p = { .coll = colls[c], .algo = a, .nranks = n,
								   .root = (uint32_t)(sl % n), .count = 11,
								   .payload = 16, .chunk_bytes = 16 * (1 + sl % 2) };
					cl.sliced = true;
					cl.first = slices[sl].first;
					cl.k = slices[sl].k;
					run_case(&p, sl % 2 ? SL_FLOAT32 : SL_INT8, SL_SUM, (n + sl) % 2, n * 10 + sl);
				}
	cl.sliced = false;
}

/* Rounding float32 sums: the same bits whatever the delivery order, and
 * (all-reduce) on every rank. */
static void test_deterministic(void **state)
{
	static const enum sl_coll colls[] = { SL_COLL_ALLREDUCE, SL_COLL_REDUCE_SCATTER, SL_COLL_REDUCE };
	(void)state;

	for (uint32_t n = 2; n <= MAX_RANKS; n++)
		for (size_t c = 0; c < sizeof(colls) / sizeof(colls[0]); c++)
			for (enum sl_algo a = SL_ALGO_RING; a < SL_ALGO_COUNT; a++) {
				if (!serves(colls[c], a, n))
					continue;
				struct sl_sched_plan p = { .coll = colls[c], .algo = a, .nranks = n, .root = n - 1,
							   .count = 97, .esize = 4, .payload = 16, .chunk_bytes = 48 };
				uint8_t first[MAX_RANKS][97 * 4];
				cl.dtype = SL_FLOAT32;
				cl.op = SL_SUM;
				for (uint64_t seed = 1; seed <= 4; seed++) {
					cl.plan = p;
					for (uint32_t k = 0; k < n; k++)
						setup_rank(k, seed % 2, true);
					run(seed);
					for (uint32_t k = 0; k < n; k++) {
						uint64_t rb = cl.r[k].s.p.recv_bytes;
						if (seed == 1)
							memcpy(first[k], cl.r[k].recv, rb);
						else if (memcmp(first[k], cl.r[k].recv, rb) != 0)
							fail_msg("%s by %s, n=%u: rank %u's result depends on the "
								 "delivery order", sl_coll_name(p.coll), sl_algo_name(a),
								 n, k);
						if (p.coll == SL_COLL_ALLREDUCE)
							assert_memory_equal(cl.r[k].recv, cl.r[0].recv, rb);
					}
					teardown();
				}
			}
}

/* Max and min of +0 and -0 (and NaNs with different payloads) are not
 * commutative in their bits: every rank of an all-reduce must still get
 * the same bits, so partners must combine in one agreed order. */
static void test_same_bits_everywhere(void **state)
{
	static const uint32_t nan_a = 0x7fc00001, nan_b = 0x7fc00002;
	(void)state;

	for (uint32_t n = 2; n <= MAX_RANKS; n++)
		for (enum sl_algo a = SL_ALGO_RING; a < SL_ALGO_COUNT; a++)
			for (enum sl_redop op = SL_MAX; op <= SL_MIN && serves(SL_COLL_ALLREDUCE, a, n); op++) {
				cl.plan = (struct sl_sched_plan){ .coll = SL_COLL_ALLREDUCE, .algo = a, .nranks = n,
								  .count = 24, .esize = 4, .payload = 16,
								  .chunk_bytes = 32 };
				cl.dtype = SL_FLOAT32;
				cl.op = op;
				for (uint32_t k = 0; k < n; k++) {
					setup_rank(k, false, false);
					for (uint32_t i = 0; i < 24; i++) {
						uint32_t bits = i % 3 == 0 ? (k % 2 ? nan_a : nan_b)
								: (i + k) % 2 ? 0x80000000u : 0;
						memcpy(cl.r[k].send + 4 * i, &bits, 4);
					}
				}
				run(n);
				for (uint32_t k = 1; k < n; k++)
					if (memcmp(cl.r[k].recv, cl.r[0].recv, 24 * 4) != 0)
						fail_msg("allreduce %s by %s, n=%u: ranks 0 and %u hold different bits",
							 sl_redop_name(op), sl_algo_name(a), n, k);
				teardown();
			}
}

/* All-to-allv: rank i sends c[i][j] elements to j (often 0), from a
 * displacement with gaps; j places them at its own displacements. */
static void test_alltoallv(void **state)
{
	static uint64_t c[MAX_RANKS][MAX_RANKS], sd[MAX_RANKS][MAX_RANKS], rd[MAX_RANKS][MAX_RANKS],
		rc[MAX_RANKS][MAX_RANKS];
	(void)state;

	for (uint32_t n = 1; n <= MAX_RANKS; n++) {
		for (uint64_t seed = 1; seed <= 3; seed++) {
			rng_state = seed * 977 + n;
			for (uint32_t i = 0; i < n; i++)
				for (uint32_t j = 0; j < n; j++)
					c[i][j] = rng() % 3 == 0 ? 0 : rng() % 40;
			cl = (struct cluster){ .plan = { .coll = SL_COLL_ALLTOALLV, .algo = SL_ALGO_DIRECT, .nranks = n,
							 .esize = 4, .payload = 16, .chunk_bytes = 32 },
					       .dtype = SL_INT32, .op = SL_SUM };
			for (uint32_t i = 0; i < n; i++) {
				uint64_t so = 0, ro = 0;
				for (uint32_t j = 0; j < n; j++) {
					sd[i][j] = so, so += c[i][j] + rng() % 3; /* gaps between blocks */
					if (j == n - 1 && c[i][j] == 0)
						sd[i][j] = so + 7; /* an empty block may point past the end */
					rc[i][j] = c[j][i];
					rd[i][j] = ro, ro += c[j][i] + rng() % 3;
				}
				struct rank *r = &cl.r[i];
				struct sl_sched_plan p = cl.plan;
				p.rank = i;
				p.send_count = c[i], p.send_displ = sd[i], p.recv_count = rc[i], p.recv_displ = rd[i];
				p.send_bytes = so * 4, p.recv_bytes = ro * 4;
				r->mem = malloc(p.send_bytes + p.recv_bytes + 1);
				r->buf[SL_BUF_SEND] = r->send = r->mem;
				r->buf[SL_BUF_RECV] = r->recv = r->mem + p.send_bytes;
				for (uint64_t k = 0; k < so; k++)
					((int32_t *)r->send)[k] = (int32_t)(i * 100000 + k);
				assert_int_equal(sl_sched_init(&r->s, &p), 0);
			}
			run(seed);
			for (uint32_t j = 0; j < n; j++)
				for (uint32_t i = 0; i < n; i++)
					for (uint64_t k = 0; k < c[i][j]; k++)
						assert_int_equal(((int32_t *)cl.r[j].recv)[rd[j][i] + k],
								 (int32_t)(i * 100000 + sd[i][j] + k));
			teardown();
		}
	}
}

/* A send and the matching recv are two halves: one rank each. */
static void test_send_recv(void **state)
{
	static const uint64_t counts[] = { 0, 1, 100 };
	(void)state;

	for (size_t ci = 0; ci < 3; ci++) {
		struct sl_sched_plan p = { .nranks = 4, .count = counts[ci], .esize = 4, .payload = 16,
					   .chunk_bytes = 32, .algo = SL_ALGO_DIRECT };
		struct sl_sched s[2];
		struct sl_send snd;
		struct sl_action a;
		p.coll = SL_COLL_SEND, p.rank = 1, p.root = 3, p.send_bytes = counts[ci] * 4;
		assert_int_equal(sl_sched_init(&s[0], &p), 0);
		p.coll = SL_COLL_RECV, p.rank = 3, p.root = 1, p.send_bytes = 0, p.recv_bytes = counts[ci] * 4;
		assert_int_equal(sl_sched_init(&s[1], &p), 0);
		assert_false(sl_sched_recv_done(&s[1]));
		while (sl_sched_next_send(&s[0], &snd)) {
			assert_int_equal(snd.peer, 3);
			for (uint64_t o = 0; o == 0 || o < snd.len; o += 16) {
				uint64_t len = snd.len - o < 16 ? snd.len - o : 16;
				assert_int_equal(sl_sched_on_packet(&s[1], 1, snd.step, snd.xoff + o, len, &a),
						 SL_SCHED_OK);
				assert_int_equal(a.apply, SL_APPLY_COPY);
				assert_int_equal(a.off, snd.xoff + o);
			}
		}
		assert_true(sl_sched_recv_done(&s[1]));
		assert_true(sl_sched_recv_done(&s[0]));
		sl_sched_fini(&s[0]);
		sl_sched_fini(&s[1]);
	}
}

static void assert_same_sched(const struct sl_sched *a, const struct sl_sched *b)
{
	assert_int_equal(a->nx, b->nx);
	for (uint32_t i = 0; i < a->nx; i++) {
		const struct sl_xfer *x = &a->x[i], *y = &b->x[i];
		assert_true(x->peer == y->peer && x->step == y->step && x->is_send == y->is_send &&
			    x->buf == y->buf && x->apply == y->apply && x->off == y->off && x->len == y->len &&
			    x->after == y->after && x->chunk0 == y->chunk0 && x->nchunks == y->nchunks &&
			    x->first_dep == y->first_dep && x->next_dep == y->next_dep && x->gate_send == y->gate_send);
	}
	assert_memory_equal(a->bytes, b->bytes, sizeof(a->bytes));
	assert_int_equal(a->snapshot_send, b->snapshot_send);
	assert_int_equal(a->nrecv, b->nrecv);
	assert_memory_equal(a->recvs, b->recvs, a->nrecv * sizeof(*a->recvs));
	assert_int_equal(a->chunks_left, b->chunks_left);
	assert_int_equal(a->lazy, b->lazy);
	assert_memory_equal(a->arrived, b->arrived, a->chunks_left * sizeof(*a->arrived));
	assert_memory_equal(a->applied, b->applied, a->chunks_left * sizeof(*a->applied));
	assert_int_equal(a->ready_head, b->ready_head);
	assert_int_equal(a->ready_tail, b->ready_tail);
	assert_int_equal(a->ready_cap, b->ready_cap);
	for (uint32_t i = 0; i < a->ready_tail; i++) {
		const struct sl_send *x = &a->ready[i], *y = &b->ready[i];
		assert_true(x->peer == y->peer && x->step == y->step && x->buf == y->buf && x->off == y->off &&
			    x->len == y->len && x->xoff == y->xoff);
	}
}

/* A schedule rebuilt on a used one (the engine reuses a finished
 * collective's) is the one built new: nothing of the last call's arrivals,
 * sends or transfers is left, and its memory is reused when it fits. */
static void test_reinit_resets(void **state)
{
	struct sl_sched_plan p = { .coll = SL_COLL_ALLREDUCE, .algo = SL_ALGO_RING, .nranks = 3, .rank = 1,
				   .count = 96, .esize = 4, .payload = 16, .chunk_bytes = 32,
				   .send_bytes = 384, .recv_bytes = 384 };
	struct sl_sched used, fresh;
	struct sl_send snd;
	struct sl_action a;
	void *tab;
	(void)state;

	assert_int_equal(sl_sched_init(&used, &p), 0);
	/* run part of it: every packet of its first reception arrives, sends leave */
	for (uint64_t off = 0; off < used.x[used.recvs[0]].len; off += 16)
		assert_int_equal(sl_sched_on_packet(&used, used.x[used.recvs[0]].peer, used.x[used.recvs[0]].step,
						    off, 16, &a), SL_SCHED_OK);
	assert_true(sl_sched_next_send(&used, &snd));
	tab = used.tab;

	for (int round = 0; round < 2; round++) {
		/* smaller (the tables fit: no allocation), then larger than the first */
		p.count = round == 0 ? 30 : 300;
		p.send_bytes = p.recv_bytes = p.count * 4;
		assert_int_equal(sl_sched_reinit(&used, &p), 0);
		if (round == 0)
			assert_ptr_equal(used.tab, tab);
		assert_int_equal(sl_sched_init(&fresh, &p), 0);
		assert_same_sched(&used, &fresh);
		sl_sched_fini(&fresh);
		/* and it runs like a new one: its first reception is accepted again */
		assert_int_equal(sl_sched_on_packet(&used, used.x[used.recvs[0]].peer, used.x[used.recvs[0]].step,
						    0, 16, &a), SL_SCHED_OK);
	}
	sl_sched_fini(&used);
}

/*
 * A loop repeating a call reuses its schedules (sl_sched_reinit only resets
 * them), and a call that differs in anything the schedule is built from
 * never does: every collective and algorithm on 1-4 ranks, counts 0, 1 and
 * 13, in place and not, run on the schedules the case before it left: the
 * same call again, then with another root, count, datatype size,
 * placement, chunk or algorithm, then the first call again.  A stale
 * schedule sends from the wrong root, too few elements or to the wrong
 * places, and the results or the run say so.
 */
static void test_reuse_every_collective(void **state)
{
	static const uint64_t counts[] = { 0, 1, 13 };
	static const enum sl_dtype other_size[] = { [SL_FLOAT32] = SL_FLOAT64, [SL_FLOAT64] = SL_INT8,
						    [SL_INT8] = SL_FLOAT32 };
	(void)state;

	cl.keep = true;
	for (struct served it = { 0 }; next_served(&it, 4);)
		for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
			uint32_t n = it.n;
			enum sl_algo a = it.a;
			struct sl_sched_plan p = { .coll = all_colls[it.c], .algo = a, .nranks = n,
						   .count = counts[ci], .root = (uint32_t)(ci % n),
						   .payload = 16, .chunk_bytes = 16 };
			enum sl_dtype t = ci == 1 ? SL_FLOAT64 : ci == 2 ? SL_INT8 : SL_FLOAT32;
			bool ip = (n + ci) % 2;
			uint64_t seed = n * 1000 + it.c * 100 + (uint64_t)a * 10 + ci;
			struct sl_sched_plan v;

			run_case(&p, t, SL_SUM, ip, seed);
			run_case(&p, t, SL_SUM, ip, seed + 1);
			if (!cl.reused)
				fail_msg("%s by %s, n=%u count %llu: the same call again built its "
					 "schedule again", sl_coll_name(p.coll), sl_algo_name(a), n,
					 (unsigned long long)p.count);
			v = p;
			v.root = (p.root + 1) % n;
			run_case(&v, t, SL_SUM, ip, seed + 2);
			v = p;
			v.count = p.count + 1;
			run_case(&v, t, SL_SUM, ip, seed + 3);
			run_case(&p, other_size[t], SL_SUM, ip, seed + 4);
			run_case(&p, t, SL_SUM, !ip, seed + 5);
			v = p;
			v.chunk_bytes = 32;
			run_case(&v, t, SL_SUM, ip, seed + 6);
			for (enum sl_algo b = SL_ALGO_RING; b < SL_ALGO_COUNT; b++) {
				v = p;
				v.algo = b;
				if (b != a && serves(v.coll, b, n))
					run_case(&v, t, SL_SUM, ip, seed + 7);
			}
			run_case(&p, t, SL_SUM, ip, seed + 8);
		}
	cl.keep = false;
	for (uint32_t k = 0; k < MAX_RANKS; k++)
		sl_sched_fini(&cl.r[k].s);
}

/* Fills in a plan's buffer sizes, as the engine does from the call. */
static void plan_bytes(struct sl_sched_plan *p)
{
	assert_true(sl_cmd_bytes(p->coll, p->count, p->esize, p->nranks, p->rank, p->root, p->stride,
				 &p->send_bytes, &p->recv_bytes));
}

/* Part of a run: the first reception's packets, the lazy checks, every
 * ready send. */
static void run_some(struct sl_sched *s)
{
	struct sl_action a;
	struct sl_send snd;

	if (s->nrecv) {
		const struct sl_xfer *x = &s->x[s->recvs[0]];
		for (uint64_t off = 0; off < x->len; off += s->p.payload)
			sl_sched_on_packet(s, x->peer, x->step, off,
					   x->len - off < s->p.payload ? x->len - off : s->p.payload, &a);
	}
	sl_sched_release_lazy(s);
	while (sl_sched_next_send(s, &snd))
		;
}

/* Which in-place all-to-alls may run on their input, each reception chunk
 * gated on the send chunk that reads its bytes (sl_sched_input_gate_ok):
 * direct and pairwise at any rank count; not strided slices or out of
 * place.  sl_sched_recv_chunk names, for a send's chunk, the reception
 * chunk that lands on its bytes.  And a schedule whose send waits on a
 * reception of its own step or a later one is refused: that reception,
 * gated on the send, could wait on itself (no builder makes one: a
 * pairwise schedule is changed here). */
static void gate_refuses_waits_on_later_steps(void)
{
	struct sl_sched s;
	struct sl_sched_plan p = { .coll = SL_COLL_ALLTOALL, .algo = SL_ALGO_PAIRWISE, .nranks = 5, .rank = 1,
				   .count = 13, .esize = 4, .payload = 16, .chunk_bytes = 32, .in_place = true };
	uint32_t last = 0;

	plan_bytes(&p);
	assert_int_equal(sl_sched_init(&s, &p), 0);
	assert_true(sl_sched_input_gate_ok(&s));
	for (uint32_t i = 0; i < s.nx; i++)
		if (s.x[i].is_send)
			last = i;
	for (uint32_t y = 0; y < s.nx; y++) {
		int32_t was = s.x[last].after;
		bool ok = s.x[y].step < s.x[last].step;
		if (s.x[y].is_send)
			continue;
		s.x[last].after = (int32_t)y;
		if (sl_sched_input_gate_ok(&s) != ok)
			fail_msg("pairwise all-to-all, 5 ranks in place, rank 1: its step-%u send made to wait on "
				 "its step-%u reception: input gate %s, want %s", s.x[last].step, s.x[y].step,
				 ok ? "refused" : "allowed", ok ? "allowed" : "refused");
		s.x[last].after = was;
	}
	sl_sched_fini(&s);
}

static void test_input_gate(void **state)
{
	struct {
		enum sl_algo a;
		uint32_t n;
		uint64_t stride;
		bool in_place, ok;
	} cases[] = {
		{ SL_ALGO_DIRECT, 2, 0, true, true },    { SL_ALGO_DIRECT, 4, 0, true, true },
		{ SL_ALGO_PAIRWISE, 2, 0, true, true },  { SL_ALGO_PAIRWISE, 3, 0, true, true },
		{ SL_ALGO_PAIRWISE, 4, 0, true, true },  { SL_ALGO_PAIRWISE, 5, 0, true, true },
		{ SL_ALGO_PAIRWISE, 3, 0, false, false },
		{ SL_ALGO_DIRECT, 2, 13 * 4 * 2, true, false }, { SL_ALGO_DIRECT, 2, 13 * 4, true, true },
		{ SL_ALGO_DIRECT, 3, 0, false, false },
	};
	(void)state;

	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		for (uint32_t r = 0; r < cases[c].n; r++) {
			struct sl_sched s;
			struct sl_sched_plan p = { .coll = SL_COLL_ALLTOALL, .algo = cases[c].a, .nranks = cases[c].n,
						   .rank = r, .count = 13, .esize = 4, .payload = 16, .chunk_bytes = 32,
						   .stride = cases[c].stride, .in_place = cases[c].in_place };
			plan_bytes(&p);
			assert_int_equal(sl_sched_init(&s, &p), 0);
			if (sl_sched_input_gate_ok(&s) != cases[c].ok)
				fail_msg("%s all-to-all, %u ranks, stride %llu, %s, rank %u: input gate %s, want %s",
					 sl_algo_name(cases[c].a), cases[c].n, (unsigned long long)cases[c].stride,
					 cases[c].in_place ? "in place" : "out of place", r,
					 cases[c].ok ? "refused" : "allowed", cases[c].ok ? "allowed" : "refused");
			for (uint32_t i = 0; cases[c].ok && i < s.nx; i++) {
				const struct sl_xfer *x = &s.x[i];
				for (uint64_t off = 0; x->is_send && off < x->len; off += p.chunk_bytes) {
					int64_t k = sl_sched_recv_chunk(&s, x->peer, x->step, off);
					const struct sl_xfer *rx = NULL;
					for (uint32_t j = 0; j < s.nx; j++)
						if (!s.x[j].is_send && s.x[j].peer == x->peer && s.x[j].step == x->step)
							rx = &s.x[j];
					assert_non_null(rx);
					/* the reception lands where the send reads: same block, same chunk */
					assert_int_equal(rx->off, x->off);
					assert_int_equal(k, rx->chunk0 + off / p.chunk_bytes);
				}
			}
			assert_int_equal(sl_sched_recv_chunk(&s, r, 7, 0), -1);
			sl_sched_fini(&s);
		}
	}
	gate_refuses_waits_on_later_steps();
}

/* Pairwise in place on its input, 3 ranks, rank 1: step 0 with rank 2,
 * step 1 with rank 0, whose send waits, chunk by chunk, on step 0's
 * reception.  A chunk of that reception whose every packet arrived but
 * waits at the input gate releases its dependent send at once
 * (sl_sched_chunk_arrived), and landing later releases nothing again; a
 * chunk that lands without waiting releases it as before. */
static void test_chunk_arrived_releases_paced_sends(void **state)
{
	struct sl_sched s;
	struct sl_sched_plan p = { .coll = SL_COLL_ALLTOALL, .algo = SL_ALGO_PAIRWISE, .nranks = 3, .rank = 1,
				   .count = 24, .esize = 4, .payload = 16, .chunk_bytes = 32, .in_place = true };
	struct sl_send snd;
	struct sl_action a;
	struct sl_recv_at at;
	uint32_t step0 = 0;
	(void)state;

	plan_bytes(&p);
	assert_int_equal(sl_sched_init(&s, &p), 0);
	assert_true(sl_sched_input_gate_ok(&s));
	while (sl_sched_next_send(&s, &snd)) {
		assert_int_equal(snd.peer, 2);
		assert_int_equal(snd.step, 0);
		step0++;
	}
	assert_int_equal(step0, 3); /* 96 bytes in chunks of 32 */
	assert_true(sl_sched_recv_at(&s, 2, 0, 0, &at));
	assert_int_equal(sl_sched_chunk_packets(&s, &at), 2);
	assert_int_equal(sl_sched_chunk_arrived(&s, &at), 1); /* what it says it made ready */
	assert_int_equal(sl_sched_chunk_arrived(&s, &at), 0);
	if (!sl_sched_next_send(&s, &snd))
		fail_msg("pairwise, 3 ranks in place, rank 1: step 0's reception chunk 0 arrived whole at the "
			 "gate, and step 1's send chunk 0 is still not ready");
	assert_int_equal(snd.peer, 0);
	assert_int_equal(snd.step, 1);
	assert_int_equal(snd.xoff, 0);
	assert_false(sl_sched_next_send(&s, &snd));
	/* now it lands: complete, and nothing sent twice */
	for (uint64_t off = 0; off < 32; off += 16)
		assert_int_equal(sl_sched_on_packet_at(&s, &at, off, 16, &a), SL_SCHED_OK);
	assert_true(a.chunk_done);
	if (sl_sched_next_send(&s, &snd))
		fail_msg("pairwise, 3 ranks in place, rank 1: step 0's reception chunk 0 landed after it "
			 "arrived at the gate, and released step %u's send chunk at %llu again", snd.step,
			 (unsigned long long)snd.xoff);
	/* chunk 1 lands without waiting: its send goes as it always did */
	for (uint64_t off = 32; off < 64; off += 16)
		assert_int_equal(sl_sched_on_packet(&s, 2, 0, off, 16, &a), SL_SCHED_OK);
	assert_true(sl_sched_next_send(&s, &snd));
	assert_int_equal(snd.step, 1);
	assert_int_equal(snd.xoff, 32);
	assert_int_equal(s.chunks_left, 2 * 3 - 2);
	sl_sched_fini(&s);
}

/* Pairwise in place on its input, 3 ranks, rank 1 (step 0 with rank 2,
 * step 1 with rank 0): rank 0's step-1 packet comes while rank 1's step-1
 * send still waits on step 0's reception.  It waits at the gate for that
 * very send, so the send goes at once (sl_sched_gate_pull), once: neither
 * a second pull nor step 0's chunk arriving or landing makes it ready
 * again.  A step-0 reception's send waits on nothing: nothing to pull. */
static void test_gate_pulls_the_send_it_waits_for(void **state)
{
	struct sl_sched s;
	struct sl_sched_plan p = { .coll = SL_COLL_ALLTOALL, .algo = SL_ALGO_PAIRWISE, .nranks = 3, .rank = 1,
				   .count = 24, .esize = 4, .payload = 16, .chunk_bytes = 32, .in_place = true };
	struct sl_send snd;
	struct sl_action a;
	struct sl_recv_at at, at0;
	(void)state;

	plan_bytes(&p);
	assert_int_equal(sl_sched_init(&s, &p), 0);
	assert_true(sl_sched_input_gate_ok(&s));
	while (sl_sched_next_send(&s, &snd))
		assert_int_equal(snd.step, 0);
	assert_true(sl_sched_recv_at(&s, 2, 0, 0, &at0));
	assert_int_equal(sl_sched_gate_pull(&s, &at0), 0);
	assert_true(sl_sched_recv_at(&s, 0, 1, 32, &at));
	if (sl_sched_gate_pull(&s, &at) != 1 || !sl_sched_next_send(&s, &snd))
		fail_msg("pairwise, 3 ranks in place, rank 1: rank 0's step-1 packet at 32 waits at the gate for "
			 "rank 1's step-1 send chunk at 32, and that send is still not ready");
	assert_int_equal(snd.peer, 0);
	assert_int_equal(snd.step, 1);
	assert_int_equal(snd.xoff, 32);
	assert_int_equal(sl_sched_gate_pull(&s, &at), 0);
	/* step 0's chunk 1, which it paced on, arrives and lands: nothing sent twice */
	assert_true(sl_sched_recv_at(&s, 2, 0, 32, &at0));
	assert_int_equal(sl_sched_chunk_arrived(&s, &at0), 0);
	for (uint64_t off = 32; off < 64; off += 16)
		assert_int_equal(sl_sched_on_packet_at(&s, &at0, off, 16, &a), SL_SCHED_OK);
	if (sl_sched_next_send(&s, &snd))
		fail_msg("pairwise, 3 ranks in place, rank 1: step %u's send chunk at %llu made ready again",
			 snd.step, (unsigned long long)snd.xoff);
	sl_sched_fini(&s);
}

/* One field of the plan at a time: reinit on a used schedule rebuilds it
 * (the result is the one built new), the same plan only resets it (the
 * same again).  A 3-rank direct broadcast's rank 1 (a lazy check) and a
 * ring all-reduce's (all-to-allv's counts: test_alltoallv_reuse_by_counts). */
static void test_reuse_needs_same_plan(void **state)
{
	static const char *const fields[] = { "root", "count", "element size", "payload", "chunk", "algorithm",
					      "rank", "ranks", "stride", "placement", "gating", "collective",
					      "send bytes" };
	struct sl_sched_plan bases[2] = {
		{ .coll = SL_COLL_BROADCAST, .algo = SL_ALGO_DIRECT, .nranks = 3, .rank = 1, .count = 24,
		  .esize = 4, .payload = 16, .chunk_bytes = 32 },
		{ .coll = SL_COLL_ALLREDUCE, .algo = SL_ALGO_RING, .nranks = 3, .rank = 1, .count = 24,
		  .esize = 4, .payload = 16, .chunk_bytes = 32 },
	};
	struct sl_sched used = { 0 }, fresh;
	(void)state;

	for (size_t b = 0; b < 2; b++) {
		struct sl_sched_plan base = bases[b];
		plan_bytes(&base);
		for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
			struct sl_sched_plan v = base;
			switch (f) {
			case 0: v.root = 2; break;
			case 1: v.count++; break;
			case 2: v.esize = 8; break;
			case 3: v.payload = 32; break;
			case 4: v.chunk_bytes = 16; break;
			case 5: v.algo = base.algo == SL_ALGO_DIRECT ? SL_ALGO_RING : SL_ALGO_DIRECT; break;
			case 6: v.rank = 2; break;
			case 7: v.nranks = 4; break;
			case 8: v.stride = 2 * v.count * v.esize; break;
			case 9: v.in_place = true; break;
			case 10: v.gated = true; break;
			case 11: v.coll = base.coll == SL_COLL_BROADCAST ? SL_COLL_REDUCE : SL_COLL_REDUCE_SCATTER; break;
			}
			if (f != 12)
				plan_bytes(&v);
			else
				v.send_bytes += 16;
			/* the base, used, then the variant on it */
			assert_int_equal(sl_sched_reinit(&used, &base), 0);
			run_some(&used);
			assert_int_equal(sl_sched_reinit(&used, &v), 0);
			if (used.reused)
				fail_msg("%s by %s: a call with another %s reused the last call's schedule",
					 sl_coll_name(base.coll), sl_algo_name(base.algo), fields[f]);
			assert_int_equal(sl_sched_init(&fresh, &v), 0);
			assert_same_sched(&used, &fresh);
			sl_sched_fini(&fresh);
			/* the variant used, then itself again: reset to the one built new */
			run_some(&used);
			assert_int_equal(sl_sched_reinit(&used, &v), 0);
			if (!used.reused)
				fail_msg("%s by %s: the same call (%s changed before) built its schedule again",
					 sl_coll_name(v.coll), sl_algo_name(v.algo), fields[f]);
			assert_int_equal(sl_sched_init(&fresh, &v), 0);
			assert_same_sched(&used, &fresh);
			sl_sched_fini(&fresh);
		}
	}
	sl_sched_fini(&used);
}

/* A 3-rank all-to-allv (rank 1) on the counts v, or changed in array a at rank k when a < 4. */
static struct sl_sched_plan vplan(uint64_t v[4][3], const uint64_t from[4][3], int a, uint32_t k)
{
	memcpy(v, from, 4 * sizeof(v[0]));
	if (a < 4)
		v[a][k] += a % 2 ? 2 : 1; /* a count one more, a displacement two: both still fit */
	return (struct sl_sched_plan){ .coll = SL_COLL_ALLTOALLV, .algo = SL_ALGO_DIRECT, .nranks = 3, .rank = 1,
				       .esize = 4, .payload = 16, .chunk_bytes = 16, .send_bytes = 64,
				       .recv_bytes = 64, .send_count = v[0], .send_displ = v[1],
				       .recv_count = v[2], .recv_displ = v[3] };
}

/* The sends ready at start: every one to a peer before any to the rank
 * itself.  The engine applies local transfers (an own block's copy) a
 * budget a pass; queued first, the copy held the first network sends back
 * by all of it (6-25 ms at 64 MiB blocks, perf/ALGORITHMS.md local30).  Every
 * collective, algorithm, rank and root out of place, and an all-to-allv. */
static void first_sends_wait_on_no_copy(struct sl_sched_plan *p, const char *what)
{
	struct sl_sched s;
	struct sl_send snd;
	bool local = false;

	assert_int_equal(sl_sched_init(&s, p), 0);
	while (sl_sched_next_send(&s, &snd)) {
		if (local && snd.peer != p->rank)
			fail_msg("%s on %u ranks (%s), rank %u: its send to rank %u (step %u, at %llu) is ready "
				 "at start but queued behind the rank's local copy", what, p->nranks,
				 sl_algo_name(p->algo), p->rank, snd.peer, snd.step, (unsigned long long)snd.xoff);
		local |= snd.peer == p->rank;
	}
	sl_sched_fini(&s);
}

static void test_network_sends_before_local_copies(void **state)
{
	static const uint64_t counts[4][3] = { { 3, 2, 1 }, { 0, 3, 5 }, { 1, 2, 3 }, { 0, 1, 3 } };
	uint64_t v[4][3];
	(void)state;

	for (struct served it = { 0 }; next_served(&it, MAX_RANKS);)
		for (uint32_t r = 0; r < it.n; r++) {
			struct sl_sched_plan p = { .coll = all_colls[it.c], .algo = it.a, .nranks = it.n, .rank = r,
						   .root = it.n - 1 - r % it.n, .count = 5, .esize = 4, .payload = 16,
						   .chunk_bytes = 16 };
			plan_bytes(&p);
			first_sends_wait_on_no_copy(&p, sl_coll_name(p.coll));
		}
	struct sl_sched_plan p = vplan(v, counts, 4, 0);
	first_sends_wait_on_no_copy(&p, "all-to-allv");
}

/* All-to-allv's counts are compared by value, against the schedule's own
 * copy: the same counts in other arrays, after the first call's were
 * scribbled over (the caller's, gone with its call), only reset it; a
 * change to any entry of any array (zero-length parts among them) builds
 * it anew.  Each time the schedule is the one built new; one copied from
 * another collective's keeps the counts too. */
static void test_alltoallv_reuse_by_counts(void **state)
{
	static const uint64_t base[4][3] = { { 2, 0, 3 }, { 0, 5, 6 }, { 1, 4, 0 }, { 0, 3, 9 } };
	uint64_t first[4][3], again[4][3], other[4][3];
	struct sl_sched used = { 0 }, copy = { 0 }, fresh;
	struct sl_sched_plan p;
	(void)state;

	for (int a = 0; a < 4; a++) {
		for (uint32_t k = 0; k < 3; k++) {
			p = vplan(first, base, 4, 0);
			assert_int_equal(sl_sched_reinit(&used, &p), 0);
			run_some(&used);
			memset(first, 0x5a, sizeof(first));
			p = vplan(again, base, 4, 0);
			assert_int_equal(sl_sched_reinit(&used, &p), 0);
			if (!used.reused)
				fail_msg("all-to-allv: the same counts built the schedule again");
			assert_int_equal(sl_sched_init(&fresh, &p), 0);
			assert_same_sched(&used, &fresh);
			sl_sched_fini(&fresh);
			run_some(&used);
			p = vplan(other, base, a, k);
			assert_int_equal(sl_sched_reinit(&used, &p), 0);
			if (used.reused)
				fail_msg("all-to-allv: array %d, rank %u changed, and the last call's schedule was reused", a, k);
			assert_int_equal(sl_sched_init(&fresh, &p), 0);
			assert_same_sched(&used, &fresh);
			sl_sched_fini(&fresh);
		}
	}
	assert_int_equal(sl_sched_reinit_from(&copy, &used), 0);
	memset(used.counts, 0x5a, 12 * sizeof(*used.counts));
	p = vplan(again, base, 3, 2);
	assert_true(sl_sched_holds(&copy, &p));
	sl_sched_fini(&used);
	sl_sched_fini(&copy);
}

/* A schedule copied from another collective's that holds its plan, mid-run
 * (the engine copies a lingering call's for a leaf that runs far ahead), is
 * the one built new, runs as it does, and resets as it does, on memory that
 * held another plan's; every served collective, rank and placement. */
static void test_copied_schedule_is_the_built_one(void **state)
{
	struct sl_sched from = { 0 }, copy = { 0 }, fresh;
	struct sl_sched_plan other = { .coll = SL_COLL_ALLREDUCE, .algo = SL_ALGO_RING, .nranks = 2,
				       .count = 1, .esize = 4, .payload = 16, .chunk_bytes = 16 };
	(void)state;

	plan_bytes(&other);
	for (struct served it = { 0 }; next_served(&it, 4);)
		for (uint32_t r = 0; r < it.n; r++) {
			struct sl_sched_plan p = { .coll = all_colls[it.c], .algo = it.a, .nranks = it.n, .rank = r,
						   .root = 1 % it.n, .count = 13, .esize = 4, .payload = 16,
						   .chunk_bytes = 16, .in_place = (it.n + r) % 2 };
			plan_bytes(&p);
			assert_int_equal(sl_sched_reinit(&from, &p), 0);
			run_some(&from);
			assert_int_equal(sl_sched_reinit(&copy, &other), 0);
			assert_int_equal(sl_sched_reinit_from(&copy, &from), 0);
			assert_int_equal(sl_sched_init(&fresh, &p), 0);
			assert_same_sched(&copy, &fresh);
			run_some(&copy);
			run_some(&fresh);
			assert_same_sched(&copy, &fresh);
			assert_int_equal(sl_sched_reinit(&copy, &p), 0);
			assert_true(copy.reused);
			sl_sched_fini(&fresh);
			assert_int_equal(sl_sched_init(&fresh, &p), 0);
			assert_same_sched(&copy, &fresh);
			sl_sched_fini(&fresh);
		}
	errno = 0;
	assert_int_equal(sl_sched_reinit_from(&copy, &copy), -1);
	assert_int_equal(errno, EINVAL);
	sl_sched_fini(&from);
	sl_sched_fini(&copy);
}

/* A 3-rank direct broadcast from rank 0: the only call check is a lazy one
 * from a receiver to its sender, held until released; the two receivers,
 * which exchange no data, send each other none (each waited for the
 * other's on every call). */
static void test_call_checks(void **state)
{
	struct sl_sched_plan p = { .coll = SL_COLL_BROADCAST, .algo = SL_ALGO_DIRECT, .nranks = 3, .count = 4,
				   .esize = 4, .payload = 16, .chunk_bytes = 16, .send_bytes = 16, .recv_bytes = 16 };
	struct sl_sched s;
	struct sl_send snd;
	struct sl_action a;
	(void)state;

	/* the root: data to 1 and 2, so no check to them, nor from them */
	assert_int_equal(sl_sched_init(&s, &p), 0);
	assert_int_equal(sl_sched_release_lazy(&s), 0);
	assert_false(sl_sched_recv_done(&s)); /* its own copy into the recv buffer */
	while (sl_sched_next_send(&s, &snd))
		assert_int_not_equal(snd.step, SL_SCHED_CHECK_STEP);
	assert_int_equal(sl_sched_on_packet(&s, 0, 0, 0, 16, &a), SL_SCHED_OK);
	assert_true(sl_sched_recv_done(&s));
	sl_sched_fini(&s);

	/* rank 1: data from 0 (a lazy check to it), nothing with 2 */
	p.rank = 1;
	assert_int_equal(sl_sched_init(&s, &p), 0);
	assert_false(sl_sched_next_send(&s, &snd));
	assert_int_equal(sl_sched_release_lazy(&s), 1);
	assert_true(sl_sched_next_send(&s, &snd));
	assert_int_equal(snd.peer, 0);
	assert_int_equal(snd.step, SL_SCHED_CHECK_STEP);
	assert_false(sl_sched_next_send(&s, &snd));
	assert_int_equal(sl_sched_release_lazy(&s), 0); /* once */
	assert_int_equal(sl_sched_on_packet(&s, 0, SL_SCHED_CHECK_STEP, 0, 0, &a), SL_SCHED_BAD_STEP);
	assert_int_equal(sl_sched_on_packet(&s, 2, SL_SCHED_CHECK_STEP, 0, 0, &a), SL_SCHED_BAD_STEP);
	assert_false(sl_sched_recv_done(&s));
	assert_int_equal(sl_sched_on_packet(&s, 0, 0, 0, 16, &a), SL_SCHED_OK);
	assert_true(sl_sched_recv_done(&s)); /* its data alone: no check from 2 to wait for */
	sl_sched_fini(&s);

	/* a reduce's rank 2 sends rank 0 its data: no check at all */
	p.coll = SL_COLL_REDUCE;
	p.rank = 2;
	p.recv_bytes = 0;
	assert_int_equal(sl_sched_init(&s, &p), 0);
	assert_true(sl_sched_recv_done(&s));
	assert_int_equal(sl_sched_release_lazy(&s), 0);
	assert_true(sl_sched_next_send(&s, &snd));
	assert_int_equal(snd.peer, 0);
	assert_int_not_equal(snd.step, SL_SCHED_CHECK_STEP);
	assert_false(sl_sched_next_send(&s, &snd));
	sl_sched_fini(&s);
}

/* A 3-rank ring all-reduce of 100 floats (segments of 136, 132, 132
 * bytes), 16-byte packets, 48-byte chunks: malformed packets are refused. */
static void test_bad_packets(void **state)
{
	struct sl_sched_plan p = { .coll = SL_COLL_ALLREDUCE, .algo = SL_ALGO_RING, .nranks = 3, .rank = 0,
				   .count = 100, .esize = 4, .payload = 16, .chunk_bytes = 48,
				   .send_bytes = 400, .recv_bytes = 400 };
	struct sl_sched s;
	struct sl_action a;
	struct sl_send snd;
	(void)state;

	assert_int_equal(sl_sched_init(&s, &p), 0);
	/* step 0: rank 0 receives segment 2 ([268, 400), 132 bytes) from rank 2 */
	assert_int_equal(sl_sched_on_packet(&s, 2, 4, 0, 16, &a), SL_SCHED_BAD_STEP);
	assert_int_equal(sl_sched_on_packet(&s, 1, 0, 0, 16, &a), SL_SCHED_BAD_STEP);
	assert_int_equal(sl_sched_on_packet(&s, 2, UINT32_MAX, 0, 16, &a), SL_SCHED_BAD_STEP);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 8, 16, &a), SL_SCHED_BAD_RANGE);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 132, 16, &a), SL_SCHED_BAD_RANGE);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, UINT64_MAX - 8, 16, &a), SL_SCHED_BAD_RANGE);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 0, 8, &a), SL_SCHED_BAD_RANGE);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 0, 0, &a), SL_SCHED_BAD_RANGE);
	/* chunks at 0, 48, 96; the last is 36 bytes: packets at 96, 112 and 128 (4 bytes) */
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 128, 16, &a), SL_SCHED_BAD_RANGE);
	uint32_t left = s.chunks_left;
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 128, 4, &a), SL_SCHED_OK);
	assert_int_equal(a.apply, SL_APPLY_REDUCE);
	assert_int_equal(a.off, 396);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 128, 4, &a), SL_SCHED_DUPLICATE);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 96, 16, &a), SL_SCHED_OK);
	while (sl_sched_next_send(&s, &snd))
		assert_int_equal(snd.step, 0); /* step 0's own sends only: chunk incomplete */
	assert_false(a.chunk_done);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 112, 16, &a), SL_SCHED_OK);
	assert_true(a.chunk_done);
	assert_int_equal(s.chunks_left, left - 1);
	assert_true(sl_sched_next_send(&s, &snd));
	assert_int_equal(snd.step, 1);
	assert_int_equal(snd.peer, 1);
	assert_int_equal(snd.off, 364);
	assert_int_equal(snd.xoff, 96);
	assert_int_equal(snd.len, 36);
	assert_int_equal(snd.buf, SL_BUF_RECV);
	assert_false(sl_sched_next_send(&s, &snd));
	sl_sched_fini(&s);
}

/* Gated (a GPU reducer applies packets later): a chunk whose packets were
 * all accepted releases nothing until the engine reports it applied.  In
 * the ring (the same as above) its forward waits; in a direct all-reduce of
 * 3 ranks the next contribution in the reduction order (rank 1's, after
 * rank 0's own) stays deferred until then. */
static void test_gated(void **state)
{
	struct sl_sched_plan p = { .coll = SL_COLL_ALLREDUCE, .algo = SL_ALGO_RING, .nranks = 3, .rank = 0,
				   .count = 100, .esize = 4, .payload = 16, .chunk_bytes = 48,
				   .send_bytes = 400, .recv_bytes = 400, .gated = true };
	struct sl_sched s;
	struct sl_action a;
	struct sl_send snd;
	uint32_t left;
	(void)state;

	assert_int_equal(sl_sched_init(&s, &p), 0);
	while (sl_sched_next_send(&s, &snd))
		assert_int_equal(snd.step, 0);
	left = s.chunks_left;
	/* step 0's last chunk from rank 2: [96, 132) in three packets */
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 96, 16, &a), SL_SCHED_OK);
	assert_false(a.chunk_full);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 112, 16, &a), SL_SCHED_OK);
	assert_int_equal(sl_sched_on_packet(&s, 2, 0, 128, 4, &a), SL_SCHED_OK);
	assert_true(a.chunk_full);
	assert_false(a.chunk_done);
	assert_int_equal(s.chunks_left, left);
	assert_false(sl_sched_next_send(&s, &snd)); /* the forward waits for the reducer */
	sl_sched_chunk_applied(&s, a.recv, a.chunk);
	assert_int_equal(s.chunks_left, left - 1);
	sl_sched_chunk_applied(&s, a.recv, a.chunk); /* twice is once */
	assert_int_equal(s.chunks_left, left - 1);
	assert_true(sl_sched_next_send(&s, &snd));
	assert_int_equal(snd.step, 1);
	assert_int_equal(snd.xoff, 96);
	sl_sched_fini(&s);

	p.algo = SL_ALGO_DIRECT;
	p.count = 4;
	p.send_bytes = p.recv_bytes = p.chunk_bytes = 16;
	assert_int_equal(sl_sched_init(&s, &p), 0);
	assert_int_equal(sl_sched_on_packet(&s, 1, 0, 0, 16, &a), SL_SCHED_DEFER);
	assert_int_equal(sl_sched_on_packet(&s, 0, 0, 0, 16, &a), SL_SCHED_OK); /* the own block */
	assert_true(a.chunk_full);
	assert_int_equal(sl_sched_on_packet(&s, 1, 0, 0, 16, &a), SL_SCHED_DEFER);
	sl_sched_chunk_applied(&s, a.recv, a.chunk);
	assert_int_equal(sl_sched_on_packet(&s, 1, 0, 0, 16, &a), SL_SCHED_OK);
	assert_int_equal(a.apply, SL_APPLY_REDUCE);
	sl_sched_fini(&s);
}

static void test_plan_check(void **state)
{
	const struct sl_sched_plan good = { .coll = SL_COLL_ALLREDUCE, .algo = SL_ALGO_RING, .nranks = 4,
					    .rank = 3, .count = 100, .esize = 4, .payload = 64,
					    .chunk_bytes = 64 * 64, .send_bytes = 400, .recv_bytes = 400 };
	struct sl_sched_plan p;
	struct sl_sched s;
	(void)state;

	assert_null(sl_sched_plan_check(&good));
#define BAD(field, value)                                   \
	do {                                                \
		p = good;                                   \
		p.field = value;                            \
		assert_non_null(sl_sched_plan_check(&p));   \
		assert_int_equal(sl_sched_init(&s, &p), -1); \
	} while (0)
	BAD(nranks, 0);
	BAD(rank, 4);
	BAD(root, 4);
	BAD(esize, 0);
	BAD(payload, 40);
	BAD(esize, 3);
	BAD(chunk_bytes, 100);
	BAD(chunk_bytes, 65 * 64);
	BAD(count, UINT64_MAX / 2);
	BAD(algo, 0);
	BAD(coll, SL_COLL_COUNT);
#undef BAD
	p = good;
	p.coll = SL_COLL_ALLTOALL; /* no ring all-to-all */
	assert_non_null(sl_sched_plan_check(&p));
	/* a buffer smaller than the collective needs: the builder's transfers do not fit */
	p = good;
	p.recv_bytes = 396;
	assert_int_equal(sl_sched_init(&s, &p), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_check),
		cmocka_unit_test(test_call_checks),
		cmocka_unit_test(test_bad_packets),
		cmocka_unit_test(test_gated),
		cmocka_unit_test(test_send_recv),
		cmocka_unit_test(test_alltoallv),
		cmocka_unit_test(test_alltoallv_reuse_by_counts),
		cmocka_unit_test(test_every_collective),
		cmocka_unit_test(test_in_place_copies_only_what_it_must),
		cmocka_unit_test(test_in_place_all_to_all_leaves_its_own_block),
		cmocka_unit_test(test_input_gate),
		cmocka_unit_test(test_all_to_all_in_place_on_some_ranks),
		cmocka_unit_test(test_in_place_all_to_all_on_its_input),
		cmocka_unit_test(test_chunk_arrived_releases_paced_sends),
		cmocka_unit_test(test_gate_pulls_the_send_it_waits_for),
		cmocka_unit_test(test_network_sends_before_local_copies),
		cmocka_unit_test(test_reinit_resets),
		cmocka_unit_test(test_reuse_needs_same_plan),
		cmocka_unit_test(test_copied_schedule_is_the_built_one),
		cmocka_unit_test(test_reuse_every_collective),
		cmocka_unit_test(test_every_type_and_op),
		cmocka_unit_test(test_strided_slices),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_same_bits_everywhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
