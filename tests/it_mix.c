/*
 * it_mix.c: a rank of the mixed-call integration test, started by
 * sluice-run once per rank.  Other tests run one call shape at a time; the
 * bugs of session 17 came from calls of different sizes and kinds in turn
 * (own buffers by size class, lingering calls, early packets stashed at a
 * root, the pool's arena), so this one runs a seeded random mixture with
 * many calls in flight.
 *
 * Every rank derives the same sequence of calls from MIX_SEED: every
 * collective, all-to-allv, barrier, and send/recv between random pairs
 * (grouped or not), on two communicators, with sizes near the dataplane's
 * limits (dataplane/dp.h, pool.h, ctl/plan.c), random datatype, op, root,
 * in place or not.  Each rank keeps up to K calls in flight (K redrawn now
 * and then, 1..MIX_FLIGHT) and retires them in its own random order,
 * through sluice_wait, sluice_test spins or sluice_test sweeps, and now
 * and then stops a while before a post, so that ranks drift apart.  Each
 * call's buffers are carved from one registered area, freshly filled,
 * fenced by guard bytes, and checked when it is done: results exactly (the
 * inputs are small integers named by the call) or within it_values.h's
 * tolerance, send buffers unchanged, guards intact; then scribbled over,
 * as the dataplane may still resend a finished call's data from its copy.
 *
 * Environment (rank 0 prints the values in force, to replay a failure):
 *   MIX_SEED       the sequence (default: from the clock)
 *   MIX_CALLS      calls to run (default 200)
 *   MIX_FIRST      skip the calls before this one (they are drawn, not run),
 *                  to shrink a failing sequence from the front
 *   MIX_MAX_BYTES  largest block of one rank in one call (default 1 MiB)
 *   MIX_FLIGHT     most calls in flight (default 16)
 *   MIX_VERBOSE=1  rank 0 prints each call as it posts it
 */
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#define GUARD 64
#define MAX_RANKS 8
#define MAX_FLIGHT 16
#define NCOMMS 2

static int rank, nranks, failures;

#include "it_common.h"
#include "it_shapes.h"
#include "it_values.h"

/* Kinds beyond the collectives of it_shapes.h. */
enum { K_ALLTOALLV = NCOLLS, K_BARRIER, K_P2P, NKINDS };
static const char *const extra_names[] = { "alltoallv", "barrier", "sendrecv" };

/* One call as every rank draws it, and this rank's state of it. */
struct call {
	uint32_t id;
	int kind, comm, root;
	size_t count; /* elements per block (all-to-allv, send/recv: vcount_max) */
	sluice_datatype_t t;
	sluice_redop_t op;
	bool in_place, grouped;
	/* this rank's buffers: [send, send + sbytes) and [recv, recv + rbytes),
	 * one area when in place ([lo, lo + span) with the guards around it) */
	uint8_t *send, *recv, *lo;
	size_t sbytes, rbytes, span;
	size_t off, len; /* its piece of the registered area, guards included */
	uint64_t send_hash;
	size_t vcount_max; /* all-to-allv, send/recv: the largest part */
	sluice_req_t *reqs[2 * MAX_RANKS];
	int nreqs, left;
};

static sluice_ctx_t *ctx;
static sluice_comm_t *comms[NCOMMS];
static uint8_t *area;
static size_t area_bytes, max_bytes;
static uint64_t seed;
static int max_flight = MAX_FLIGHT;
static bool verbose;
static long timeout_s = 30;

/* ---- random numbers: one stream shared by every rank, one of this rank's own ---- */

static uint64_t shared_rng, local_rng;

static uint64_t next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	return mix(*s);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? next(s) % n : 0;
}

static const char *kind_name(int k)
{
	return k < NCOLLS ? coll_names[k] : extra_names[k - NCOLLS];
}

/* ---- values ---- */

/* Element i of rank r's input to call id: small integers (1s and 2s for
 * PROD), as it_colls' are, so that every reduction is exact, and a value
 * left over from another call shows. */
static double input(uint32_t id, int r, size_t i, sluice_datatype_t t, sluice_redop_t op)
{
	uint64_t v = mix(mix((uint64_t)id << 16 ^ (uint64_t)r << 8 ^ (uint64_t)t) + i);

	if (op == SLUICE_PROD)
		return v % 3 == 0 ? 2 : 1;
	return (double)(v % 7) - (is_unsigned(t) ? 0 : 3);
}

static double reduced(uint32_t id, size_t i, sluice_datatype_t t, sluice_redop_t op)
{
	double acc = input(id, 0, i, t, op);

	for (int r = 1; r < nranks; r++)
		acc = reduce_step(op, acc, input(id, r, i, t, op));
	return op == SLUICE_AVG ? acc / nranks : acc;
}

/* Element i of this rank's expected result of collective k. */
static double expected(const struct call *k, size_t i)
{
	size_t count = k->count, blk = count ? i / count : 0, in = count ? i % count : 0;

	switch (k->kind) {
	case ALLGATHER: case GATHER: return input(k->id, (int)blk, in, k->t, k->op);
	case REDUCE_SCATTER: return reduced(k->id, (size_t)rank * count + i, k->t, k->op);
	case BROADCAST: return input(k->id, k->root, i, k->t, k->op);
	case ALLTOALL: return input(k->id, (int)blk, (size_t)rank * count + in, k->t, k->op);
	case SCATTER: return input(k->id, k->root, (size_t)rank * count + i, k->t, k->op);
	default: return reduced(k->id, i, k->t, k->op); /* all-reduce, reduce */
	}
}

/* All-to-allv and send/recv: how many elements rank `from` sends rank `to`
 * in call k (zero for some pairs), and element j of them. */
static size_t part_count(const struct call *k, int from, int to)
{
	uint64_t h = mix((uint64_t)k->id << 20 ^ (uint64_t)from << 10 ^ (uint64_t)to ^ seed);

	if (k->kind == K_P2P && (from == to || h % 3 == 0))
		return 0;
	return h % 5 == 1 ? 0 : (size_t)((h >> 8) % (k->vcount_max + 1));
}

static double part_value(const struct call *k, int from, int to, size_t j)
{
	return input(k->id, from, (size_t)to << 40 | j, k->t, SLUICE_SUM);
}

/* ---- drawing the sequence ---- */

/* Bytes of one block: zero, near one of the limits the code switches at
 * (per block, or per call of 2 or nranks blocks), or anywhere on a log scale. */
static size_t draw_bytes(void)
{
	static const size_t limits[] = {
		1, 8, 4096,                  /* plan.c CHUNK_MIN, SLICE_ALIGN */
		8192, 16384, 24576,          /* packets, pool classes (powers of two and 1.5x) */
		65536,                       /* DP_EAGER_MAX: lingering, eager sends */
		98304, 131072,               /* two channels' CHANNEL_MIN_BYTES */
		262144, 393216,              /* the pool's largest arena class, CHUNK_MAX */
		1u << 20, 4u << 20,          /* DP_LINGER_BYTES, non-temporal stores */
	};
	uint64_t pick = below(&shared_rng, 100);
	size_t b;

	if (pick < 8)
		return 0;
	if (pick < 35) {
		unsigned shift = (unsigned)below(&shared_rng, 64 - (unsigned)__builtin_clzll(max_bytes) + 1);
		b = shift ? (size_t)(1ull << (shift - 1)) + below(&shared_rng, 1ull << (shift - 1)) : 1;
	} else {
		b = limits[below(&shared_rng, sizeof(limits) / sizeof(limits[0]))];
		uint64_t per = below(&shared_rng, 3); /* the limit per block, per 2 blocks, per call */
		b /= per == 0 ? 1 : per == 1 ? 2 : (size_t)nranks;
		b += below(&shared_rng, 33);
		b -= b >= 16 ? 16 : b;
	}
	return b > max_bytes ? max_bytes : b;
}

static bool reduces(int kind)
{
	return kind == ALLREDUCE || kind == REDUCE_SCATTER || kind == REDUCE;
}

static void draw(struct call *k, uint32_t id)
{
	memset(k, 0, sizeof(*k));
	k->id = id;
	k->kind = (int)below(&shared_rng, NKINDS);
	k->comm = (int)below(&shared_rng, NCOMMS);
	k->root = (int)below(&shared_rng, (uint64_t)nranks);
	k->t = (sluice_datatype_t)below(&shared_rng, SLUICE_DATATYPE_COUNT);
	k->op = reduces(k->kind) ? (sluice_redop_t)below(&shared_rng, SLUICE_REDOP_COUNT) : SLUICE_SUM;
	if (k->op == SLUICE_AVG && !is_float(k->t))
		k->op = SLUICE_SUM;
	k->in_place = k->kind < NCOLLS && below(&shared_rng, 2);
	k->grouped = below(&shared_rng, 4) != 0;
	size_t es = sluice_datatype_size(k->t);
	k->count = draw_bytes() / es;
	k->vcount_max = k->count;
	if (k->kind == K_BARRIER)
		k->count = 0;
}

/* ---- this rank's buffers, carved from the registered area ---- */

static struct call flight[MAX_FLIGHT];
static int nflight;

/* First fit among the pieces in flight; false when it does not fit now. */
static bool carve(size_t len, size_t *off)
{
	size_t at = 0;

	for (bool moved = true; moved;) {
		moved = false;
		for (int i = 0; i < nflight; i++)
			if (at < flight[i].off + flight[i].len && flight[i].off < at + len) {
				at = (flight[i].off + flight[i].len + 63) & ~(size_t)63;
				moved = true;
			}
	}
	*off = at;
	return at + len <= area_bytes;
}

static uint8_t guard_byte(size_t at)
{
	return (uint8_t)(0xa5 ^ (at * 29));
}

static void fence(uint8_t *lo, size_t len)
{
	for (size_t g = 0; g < GUARD; g++) {
		lo[-(ptrdiff_t)GUARD + (ptrdiff_t)g] = guard_byte(g);
		lo[len + g] = guard_byte(g + GUARD);
	}
}

static size_t fence_broken(const uint8_t *lo, size_t len)
{
	size_t bad = 0;

	for (size_t g = 0; g < GUARD; g++)
		bad += (lo[-(ptrdiff_t)GUARD + (ptrdiff_t)g] != guard_byte(g)) + (lo[len + g] != guard_byte(g + GUARD));
	return bad;
}

/* Bytes this rank's buffers of k need, whatever the rank: the same on every
 * rank, so that every rank sizes the area alike. */
static size_t call_bytes(const struct call *k)
{
	size_t es = sluice_datatype_size(k->t), n = (size_t)nranks;
	size_t per = k->kind >= NCOLLS ? n * (k->vcount_max + 2) : n * k->count;
	return 2 * (per * es + 3 * GUARD + 64);
}

/* ---- posting ---- */

static void describe(const struct call *k, char *s, size_t len)
{
	snprintf(s, len, "call %" PRIu32 " (%s, comm %d, count %zu, type %d, op %d, root %d%s%s)", k->id,
		 kind_name(k->kind), k->comm, k->count, (int)k->t, (int)k->op, k->root,
		 k->in_place ? ", in place" : "", k->kind == K_P2P && k->grouped ? ", grouped" : "");
}

static void die(const struct call *k, const char *what, sluice_result_t r)
{
	char d[160];

	describe(k, d, sizeof(d));
	fprintf(stderr, "rank %d: seed %" PRIu64 " %s: %s: %s: %s\n", rank, seed, d, what,
		sluice_get_error_string(r), sluice_last_error());
	exit(1);
}

/* Layout of a collective's buffers in [base, ...): in place, one buffer
 * holding both in NCCL's layout; else send, then recv, each fenced. */
static void lay_out(struct call *k, uint8_t *base)
{
	size_t es = sluice_datatype_size(k->t), ns, nr, send_at = 0, recv_at = 0;

	sizes((enum coll)k->kind, k->count, k->root, &ns, &nr);
	k->in_place = k->in_place && in_place_at((enum coll)k->kind, k->count, k->root, &send_at, &recv_at);
	k->sbytes = ns * es;
	k->rbytes = nr * es;
	/* a misaligned start now and then: any element boundary is an address the API takes */
	uint8_t *lo = base + GUARD + es * below(&local_rng, 8);
	if (k->in_place) {
		size_t span = (send_at + ns > recv_at + nr ? send_at + ns : recv_at + nr) * es;
		k->send = lo + send_at * es;
		k->recv = lo + recv_at * es;
		k->lo = lo;
		k->span = span;
		fence(lo, span);
	} else {
		k->send = lo;
		k->recv = lo + k->sbytes + 2 * GUARD + 64;
		fence(k->send, k->sbytes);
		fence(k->recv, k->rbytes);
	}
	for (size_t i = 0; i < ns; i++)
		store(k->send, i, k->t, input(k->id, rank, i, k->t, k->op));
	if (!k->in_place)
		memset(k->recv, 0x5a, k->rbytes);
	k->send_hash = hash_bytes(k->send, k->sbytes);
}

static void post_coll(struct call *k)
{
	sluice_comm_t *c = comms[k->comm];
	sluice_result_t r;

	if (k->kind == K_BARRIER) {
		r = sluice_barrier(c, &k->reqs[0]);
	} else {
		r = post(c, (enum coll)k->kind, k->sbytes ? k->send : NULL, k->rbytes ? k->recv : NULL, k->count, k->t,
			 k->op, k->root, &k->reqs[0]);
	}
	if (r != SLUICE_OK)
		die(k, "post", r);
	k->nreqs = k->left = 1;
}

/* A call of parts (all-to-allv, send/recv): its send area, then its recv
 * area, each fenced by guards, at base; recv filled with a marker. */
static void lay_out_parts(struct call *k, uint8_t *base, size_t sbytes, size_t rbytes)
{
	k->sbytes = sbytes;
	k->rbytes = rbytes;
	k->send = base + GUARD;
	k->recv = k->send + k->sbytes + 2 * GUARD;
	fence(k->send, k->sbytes);
	fence(k->recv, k->rbytes);
	memset(k->recv, 0x5a, k->rbytes);
}

/* All-to-allv: parts back to back with a gap of (peer % 3) elements. */
static void post_alltoallv(struct call *k, uint8_t *base)
{
	size_t sc[MAX_RANKS], sd[MAX_RANKS], rc[MAX_RANKS], rd[MAX_RANKS], so = 0, ro = 0;
	size_t es = sluice_datatype_size(k->t);

	for (int j = 0; j < nranks; j++) {
		sc[j] = part_count(k, rank, j);
		rc[j] = part_count(k, j, rank);
		sd[j] = so;
		rd[j] = ro;
		so += sc[j] + (size_t)j % 3;
		ro += rc[j] + (size_t)j % 3;
	}
	lay_out_parts(k, base, so * es, ro * es);
	memset(k->send, 0x3c, k->sbytes);
	for (int j = 0; j < nranks; j++)
		for (size_t e = 0; e < sc[j]; e++)
			store(k->send, sd[j] + e, k->t, part_value(k, rank, j, e));
	k->send_hash = hash_bytes(k->send, k->sbytes);
	sluice_result_t r = sluice_alltoallv(comms[k->comm], k->send, sc, sd, k->recv, rc, rd, k->t, &k->reqs[0]);
	if (r != SLUICE_OK)
		die(k, "post", r);
	k->nreqs = k->left = 1;
}

/* Send/recv: a part to and from each peer that has one, posted in this
 * rank's own random order, in one group or one by one.  Sends first in the
 * area, then recvs, each part where the running offset puts it. */
static void post_p2p(struct call *k, uint8_t *base)
{
	size_t es = sluice_datatype_size(k->t), so = 0, ro = 0;
	int order[2 * MAX_RANKS], n = 0;

	for (int j = 0; j < nranks; j++) {
		so += part_count(k, rank, j) + 1;
		ro += part_count(k, j, rank) + 1;
	}
	lay_out_parts(k, base, so * es, ro * es);
	for (int j = 0; j < nranks; j++) {
		if (j == rank)
			continue;
		order[n++] = j;           /* send to j */
		order[n++] = j + MAX_RANKS; /* recv from j */
	}
	for (int i = n - 1; i > 0; i--) {
		int s = (int)below(&local_rng, (uint64_t)i + 1), x = order[i];
		order[i] = order[s];
		order[s] = x;
	}
	if (k->grouped && sluice_group_start() != SLUICE_OK)
		die(k, "sluice_group_start", SLUICE_ERR_INTERNAL);
	k->nreqs = 0;
	for (int i = 0; i < n; i++) {
		int j = order[i] % MAX_RANKS;
		bool send = order[i] < MAX_RANKS;
		size_t at = 0, cnt = send ? part_count(k, rank, j) : part_count(k, j, rank);
		for (int p = 0; p < j; p++)
			at += (send ? part_count(k, rank, p) : part_count(k, p, rank)) + 1;
		/* pairs with no part post nothing: both ends know */
		if (!cnt && mix(k->id ^ (uint64_t)(send ? rank : j) << 8 ^ (uint64_t)(send ? j : rank)) % 2)
			continue;
		sluice_result_t r;
		if (send) {
			for (size_t e = 0; e < cnt; e++)
				store(k->send, at + e, k->t, part_value(k, rank, j, e));
			r = sluice_send(comms[k->comm], k->send + at * es, cnt, k->t, j, &k->reqs[k->nreqs]);
		} else {
			r = sluice_recv(comms[k->comm], k->recv + at * es, cnt, k->t, j, &k->reqs[k->nreqs]);
		}
		if (r != SLUICE_OK)
			die(k, send ? "sluice_send" : "sluice_recv", r);
		k->nreqs++;
	}
	if (k->grouped) {
		sluice_result_t r = sluice_group_end();
		if (r != SLUICE_OK)
			die(k, "sluice_group_end", r);
	}
	k->send_hash = hash_bytes(k->send, k->sbytes);
	k->left = k->nreqs;
}

static void post_call(struct call *k)
{
	size_t len = call_bytes(k), off;

	if (!carve(len, &off)) {
		fprintf(stderr, "rank %d: seed %" PRIu64 " call %" PRIu32 ": %zu bytes do not fit the area\n", rank,
			seed, k->id, len);
		exit(1);
	}
	k->off = off;
	k->len = len;
	if (verbose && rank == 0) {
		char d[160];
		describe(k, d, sizeof(d));
		printf("it_mix: %s, %d in flight\n", d, nflight);
	}
	if (k->kind == K_ALLTOALLV)
		post_alltoallv(k, area + off);
	else if (k->kind == K_P2P)
		post_p2p(k, area + off);
	else if (k->kind == K_BARRIER)
		post_coll(k);
	else {
		lay_out(k, area + off);
		post_coll(k);
	}
}

/* ---- checking ---- */

/* Says what is wrong with k (the first 3 of its faults). */
static void wrong(const struct call *k, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void wrong(const struct call *k, size_t *n, const char *fmt, ...)
{
	char d[160];
	va_list ap;

	if ((*n)++ >= 3)
		return;
	describe(k, d, sizeof(d));
	fprintf(stderr, "rank %d: seed %" PRIu64 " %s: ", rank, seed, d);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static size_t check_parts(const struct call *k)
{
	size_t n = 0, at = 0;

	for (int j = 0; j < nranks; j++) {
		size_t cnt = part_count(k, j, rank);
		if (k->kind == K_P2P && j == rank)
			cnt = 0;
		for (size_t e = 0; e < cnt; e++) {
			double got = load(k->recv, at + e, k->t), want = part_value(k, j, rank, e);
			if (got != want && !(got != got && want != want))
				wrong(k, &n, "element %zu of rank %d's part is %g, want %g", e, j, got, want);
		}
		at += cnt + (k->kind == K_P2P ? 1 : (size_t)j % 3);
	}
	return n;
}

static void check(struct call *k)
{
	size_t n = 0, es = sluice_datatype_size(k->t);

	if (k->kind == K_ALLTOALLV || k->kind == K_P2P) {
		n += check_parts(k);
	} else if (k->kind != K_BARRIER) {
		double tol = tolerance(k->t, k->op);
		for (size_t i = 0; i < k->rbytes / es; i++) {
			double got = load(k->recv, i, k->t), want = expected(k, i);
			if (!(fabs(got - want) <= tol * (fabs(want) + 1)))
				wrong(k, &n, "result element %zu is %g, want %g", i, got, want);
		}
	}
	if (k->kind != K_BARRIER && !k->in_place && hash_bytes(k->send, k->sbytes) != k->send_hash)
		wrong(k, &n, "the send buffer changed");
	if (k->kind != K_BARRIER) {
		size_t broken;
		if (k->in_place) {
			broken = fence_broken(k->lo, k->span);
		} else {
			broken = fence_broken(k->send, k->sbytes) + fence_broken(k->recv, k->rbytes);
		}
		if (broken)
			wrong(k, &n, "%zu guard bytes around its buffers overwritten", broken);
	}
	failures += n != 0;
	/* a finished call may still be resending from the dataplane's copy:
	 * what is written now must reach no peer */
	if (k->sbytes)
		memset(k->send, 0x77, k->sbytes);
	if (k->rbytes)
		memset(k->recv, 0x77, k->rbytes);
}

/* ---- retiring calls ---- */

/* Ends request j of k if done (or, with block, waits); true once it is. */
static bool finish_req(struct call *k, int j, int how)
{
	sluice_result_t r;

	if (!k->reqs[j])
		return true;
	if (how == 0) {
		r = sluice_wait(k->reqs[j]);
	} else {
		double t0 = now_s();
		while ((r = sluice_test(k->reqs[j])) == SLUICE_IN_PROGRESS) {
			if (how == 2)
				return false; /* a sweep tests each once */
			if (now_s() - t0 > timeout_s + 10)
				die(k, "sluice_test spun past the timeout", r);
			sched_yield();
		}
	}
	if (r != SLUICE_OK)
		die(k, how == 0 ? "sluice_wait" : "sluice_test", r);
	k->reqs[j] = NULL;
	k->left--;
	return true;
}

static uint64_t calls_done, bytes_done;

static void retire(int i)
{
	check(&flight[i]);
	calls_done++;
	bytes_done += flight[i].sbytes + flight[i].rbytes;
	flight[i] = flight[--nflight];
}

/* Retire at least one call in flight: a random one by sluice_wait or a
 * sluice_test spin, or a sweep that tests every request once. */
static void retire_some(void)
{
	uint64_t how = below(&local_rng, 4);

	if (how == 3) {
		int before = nflight;
		for (int i = nflight - 1; i >= 0; i--) {
			for (int j = 0; j < flight[i].nreqs; j++)
				finish_req(&flight[i], j, 2);
			if (!flight[i].left)
				retire(i);
		}
		if (nflight < before)
			return;
		how = 0;
	}
	int i = (int)below(&local_rng, (uint64_t)nflight);
	for (int j = 0; j < flight[i].nreqs; j++)
		finish_req(&flight[i], j, how == 2 ? 1 : 0);
	retire(i);
}

/* Now and then this rank stops a while before its next post (its own
 * random draw): ranks drift apart, so that some run calls ahead (early
 * packets, held senders, lingering calls) and others catch up. */
static void stall(void)
{
	uint64_t r = below(&local_rng, 512);

	if (r < 16) {
		struct timespec ts = { .tv_nsec = (long)(r < 15 ? below(&local_rng, 2000) : 30000) * 1000 };
		nanosleep(&ts, NULL);
	}
}

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 0) : dflt;
}

int main(int argc, char **argv)
{
	uint32_t ncalls, first;
	uint64_t kinds[NKINDS] = { 0 };

	seed = argc > 1 ? strtoull(argv[1], NULL, 0)
			: (uint64_t)env_long("MIX_SEED", (long)(time(NULL) % 1000000));
	ncalls = (uint32_t)env_long("MIX_CALLS", 200);
	first = (uint32_t)env_long("MIX_FIRST", 0);
	max_bytes = (size_t)env_long("MIX_MAX_BYTES", 1 << 20);
	max_flight = (int)env_long("MIX_FLIGHT", MAX_FLIGHT);
	verbose = env_long("MIX_VERBOSE", 0) != 0;
	timeout_s = env_long("SLUICE_TIMEOUT", 30);
	if (max_flight < 1 || max_flight > MAX_FLIGHT || max_bytes < 1) {
		fprintf(stderr, "it_mix: MIX_FLIGHT wants 1..%d and MIX_MAX_BYTES at least 1\n", MAX_FLIGHT);
		return 2;
	}
	CHECK(sluice_init(&ctx));
	for (int c = 0; c < NCOMMS; c++)
		CHECK(sluice_comm_init_env(ctx, &comms[c]));
	CHECK(sluice_comm_rank(comms[0], &rank));
	CHECK(sluice_comm_size(comms[0], &nranks));
	if (nranks > MAX_RANKS) {
		fprintf(stderr, "it_mix: sized for at most %d ranks, not %d\n", MAX_RANKS, nranks);
		return 2;
	}
	/* room for 4 of the largest calls (every block at max_bytes) and many
	 * small ones: most are small, and a call that does not fit waits for
	 * those in flight to finish */
	struct call big = { .kind = ALLTOALL, .t = SLUICE_INT8, .count = max_bytes, .vcount_max = max_bytes };
	area_bytes = 4 * call_bytes(&big) + (16u << 20);
	CHECK(sluice_mem_alloc(ctx, area_bytes, (void **)&area));
	if (rank == 0)
		printf("it_mix: MIX_SEED=%" PRIu64 " MIX_CALLS=%" PRIu32 " MIX_FIRST=%" PRIu32
		       " MIX_MAX_BYTES=%zu MIX_FLIGHT=%d, %d ranks\n",
		       seed, ncalls, first, max_bytes, max_flight, nranks);
	fflush(stdout);
	shared_rng = mix(seed ^ 0x6d6978ull);
	local_rng = mix(seed ^ (uint64_t)(rank + 1) << 32);
	int k_now = 1 + (int)below(&shared_rng, (uint64_t)max_flight);
	for (uint32_t id = 0; id < first + ncalls; id++) {
		struct call k;
		draw(&k, id);
		if (below(&shared_rng, 16) == 0)
			k_now = 1 + (int)below(&shared_rng, (uint64_t)max_flight);
		if (id < first)
			continue;
		size_t off;
		while (nflight >= k_now || (nflight && !carve(call_bytes(&k), &off)))
			retire_some();
		stall();
		flight[nflight] = k;
		post_call(&flight[nflight++]);
		kinds[k.kind]++;
	}
	while (nflight)
		retire_some();
	for (int c = 0; c < NCOMMS; c++)
		CHECK(sluice_comm_destroy(comms[c]));
	CHECK(sluice_mem_free(ctx, area));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures) {
		printf("it_mix rank %d of %d: seed %" PRIu64 ", %" PRIu64 " calls (", rank, nranks, seed, calls_done);
		for (int i = 0; i < NKINDS; i++)
			printf("%s %s %" PRIu64, i ? "," : "", kind_name(i), kinds[i]);
		printf("), %.1f MiB, %d failures\n", (double)bytes_done / (1 << 20), failures);
	}
	return failures ? 1 : 0;
}
