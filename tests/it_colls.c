/*
 * it_colls.c: a rank of the collectives integration test, started by
 * sluice-run once per rank over real dataplanes (with SLUICE_ALGO set, or
 * the planner's choice).
 *
 * 1. Every collective against a reference each rank computes itself: every
 *    datatype and op for the reducing ones, counts 0, 1 and primes, in
 *    place and not, every root; exact (inputs are small integers), except
 *    AVG, which is within a tolerance of the float64 reference.  Then the
 *    reducing ones at odd byte addresses (unaligned()), every type and op.
 * 2. Send/recv: every rank sends several messages to every other, posted
 *    in a seeded random order, inside a group and not; all-to-allv with
 *    zero-length parts, its count arrays scribbled over once it is posted;
 *    its counts take no registered memory (the first call works with every
 *    region taken), and a context holds as many calls' counts as the client
 *    page's area has room for, the rest refused, and gives them back.
 * 3. Determinism: a rounding float32 all-reduce and reduce-scatter twice,
 *    the same bits each time (and on every rank for all-reduce); two
 *    communicators with calls in flight together; calls refused locally.
 * 4. Mismatches, from 2 ranks up: rank 1 calls something else (op, count,
 *    root, datatype, collective, a recv or all-to-allv count of another size): every rank
 *    gets SLUICE_ERR_MISMATCH, quickly (where only a pair disagrees, or a
 *    rank's part of a small rooted call was complete first, on its next call
 *    or its destroy); rank 0 alone makes one more call: every destroy says so.
 *    With IT_COLLS_HOLD=S, every rank waits S seconds after its result in the
 *    op, count and recv-size cases before it calls or destroys anything: a
 *    rank that did not find the mismatch itself (blocked in the call, or in
 *    its next one) must hear it from the finder's notice within S/2, not from
 *    the finder's closing words at its destroy.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sluice/abi.h>
#include <sluice/sluice.h>

#define MAX_COUNT 65537
#define GUARD 64

static int rank, nranks, failures;

#include "it_common.h"
#include "it_values.h"
#include "it_shapes.h"

static sluice_ctx_t *ctx;
static sluice_comm_t *comm;
static uint8_t *bufa, *bufb;

/* Element i of rank r's input: small integers, exact in every type, whose
 * sums, products (of 1s and 2s) and extremes are exact too. */
static double input(int r, size_t i, sluice_datatype_t t, sluice_redop_t op)
{
	uint64_t v = mix((uint64_t)r << 40 ^ i ^ (uint64_t)t << 56);

	if (op == SLUICE_PROD)
		return v % 3 == 0 ? 2 : 1;
	return (double)(v % 7) - (is_unsigned(t) ? 0 : 3);
}

/* ---- the reference ---- */

static double reduced(size_t i, sluice_datatype_t t, sluice_redop_t op)
{
	double acc = input(0, i, t, op);

	for (int r = 1; r < nranks; r++)
		acc = reduce_step(op, acc, input(r, i, t, op));
	return op == SLUICE_AVG ? acc / nranks : acc;
}

/* Element i of this rank's expected result; false where recv holds nothing. */
static bool expected(enum coll c, size_t i, size_t count, int root, sluice_datatype_t t, sluice_redop_t op,
		     double *v)
{
	size_t blk = count ? i / count : 0, in = count ? i % count : 0;

	switch (c) {
	case ALLREDUCE: *v = reduced(i, t, op); return true;
	case ALLGATHER: *v = input((int)blk, in, t, op); return true;
	case REDUCE_SCATTER: *v = reduced((size_t)rank * count + i, t, op); return true;
	case BROADCAST: *v = input(root, i, t, op); return true;
	case REDUCE: *v = reduced(i, t, op); return rank == root;
	case ALLTOALL: *v = input((int)blk, (size_t)rank * count + in, t, op); return true;
	case GATHER: *v = input((int)blk, in, t, op); return rank == root;
	case SCATTER: *v = input(root, (size_t)rank * count + i, t, op); return true;
	default: return false;
	}
}

/* ---- 1: every collective against the reference ---- */

/* skew: bytes the buffers start past bufa and bufb (recv 3 x skew past
 * bufb), any number, so elements sit at odd addresses. */
static void run_case(enum coll c, size_t count, sluice_datatype_t t, sluice_redop_t op, int root, bool in_place,
		     size_t skew)
{
	size_t es = sluice_datatype_size(t), ns, nr, send_at, recv_at, wrong = 0;
	uint8_t *send, *recv;
	sluice_req_t *req;
	double tol = tolerance(t, op);

	sizes(c, count, root, &ns, &nr);
	in_place = in_place && in_place_at(c, count, root, &send_at, &recv_at);
	if (in_place) {
		send = bufa + skew + send_at * es;
		recv = bufa + skew + recv_at * es;
	} else {
		send = bufa + skew;
		recv = bufb + 3 * skew;
	}
	memset(bufb, 0xa5, 3 * skew + nr * es + GUARD);
	for (size_t i = 0; i < ns; i++)
		store(send, i, t, input(rank, i, t, op));
	if (!in_place) /* nothing may be written past the result (in place, the input follows it) */
		memset(recv + nr * es, 0x5a, GUARD);
	CHECK(post(comm, c, ns ? send : NULL, nr ? recv : NULL, count, t, op, root, &req));
	CHECK(sluice_wait(req));
	for (size_t i = 0; i < nr; i++) {
		double want, got = load(recv, i, t);
		if (!expected(c, i, count, root, t, op, &want))
			break;
		want = wrapped(t, want);
		if (fabs(got - want) > tol * (fabs(want) + 1) && wrong++ < 3)
			fprintf(stderr, "rank %d: %s count %zu type %d op %d root %d%s: element %zu is %g, want %g\n",
				rank, coll_names[c], count, t, op, root, in_place ? " in place" : "", i, got, want);
	}
	for (int g = 0; g < GUARD && !in_place; g++)
		wrong += recv[nr * es + g] != 0x5a;
	failures += wrong != 0;
	/* a call reported done may still be resending lost packets (from the
	 * dataplane's copy): what the application writes now must reach no peer */
	memset(send, 0x77, ns * es);
	memset(recv, 0x77, nr * es);
}

static bool reduces(enum coll c)
{
	return c == ALLREDUCE || c == REDUCE_SCATTER || c == REDUCE;
}

static void every_collective(void)
{
	static const size_t counts[] = { 0, 1, 2, 7, 1021, 65537 };
	int cases = 0;

	for (enum coll c = 0; c < NCOLLS; c++) {
		for (sluice_datatype_t t = 0; t < SLUICE_DATATYPE_COUNT; t++) {
			for (sluice_redop_t op = 0; op < SLUICE_REDOP_COUNT; op++) {
				if ((!reduces(c) && op != SLUICE_SUM) || (op == SLUICE_AVG && !is_float(t)))
					continue;
				/* one count and root per (type, op), rotating; all of them for float32 sum */
				for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
					size_t pick = (t * 5 + op) % (sizeof(counts) / sizeof(counts[0]));
					if (!(t == SLUICE_FLOAT32 && op == SLUICE_SUM) && k != pick)
						continue;
					int root = (int)((k + t) % (size_t)nranks);
					run_case(c, counts[k], t, op, root, (k + t + op) % 2, 0);
					cases++;
				}
			}
		}
	}
	/* the largest in place too (above, it runs apart): with two channels
	 * each block is sliced, strided, in NCCL's in-place layouts */
	for (enum coll c = 0; c < NCOLLS; c++, cases++)
		run_case(c, MAX_COUNT, SLUICE_FLOAT32, SLUICE_SUM, (int)c % nranks, true, 0);
	if (rank == 0)
		printf("it_colls: %d collective cases\n", cases);
}

/* Buffers at odd byte addresses (the API takes any address): every
 * reducing collective, datatype and op, counts that are no multiple of any
 * vector width, in place and not, each result exact against the reference
 * (and under the sanitizers, no misaligned access reported). */
static void unaligned(void)
{
	static const size_t counts[] = { 1, 37, 4099 };
	int cases = 0;

	for (enum coll c = 0; c < NCOLLS; c++) {
		if (!reduces(c))
			continue;
		for (sluice_datatype_t t = 0; t < SLUICE_DATATYPE_COUNT; t++) {
			for (sluice_redop_t op = 0; op < SLUICE_REDOP_COUNT; op++) {
				if (op == SLUICE_AVG && !is_float(t))
					continue;
				size_t k = (t + op + c) % 3, skew = 1 + (t + op) % 7;
				run_case(c, counts[k], t, op, (int)(t + op) % nranks, (t + op) % 2, skew);
				cases++;
			}
		}
	}
	if (rank == 0)
		printf("it_colls: %d unaligned cases\n", cases);
}

/* ---- 2: send/recv in adversarial orders ---- */

#define P2P_MSGS 3
#define P2P_COUNT 3001

static double p2p_value(int from, int to, int m, size_t i)
{
	return (double)(mix((uint64_t)from << 48 ^ (uint64_t)to << 32 ^ (uint64_t)m << 24 ^ i) % 1000);
}

static void shuffle(int *v, int n, uint64_t seed)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(mix(seed + (uint64_t)i) % (uint64_t)(i + 1)), x = v[i];
		v[i] = v[j];
		v[j] = x;
	}
}

/* Every rank sends P2P_MSGS messages to every other and receives as many;
 * calls are posted in a random order (recvs before sends on some ranks,
 * peers interleaved), grouped or not.  The k-th send to a peer pairs with
 * the peer's k-th recv from us, so message k's data names k. */
static void send_recv(bool grouped, uint64_t seed)
{
	int nops = 2 * (nranks - 1) * P2P_MSGS, order[2 * 255 * P2P_MSGS];
	int sent[256] = { 0 }, got[256] = { 0 };
	sluice_req_t *reqs[2 * 255 * P2P_MSGS];
	float *out = (float *)bufa, *in = (float *)bufb;
	size_t wrong = 0;

	for (int i = 0; i < nops; i++)
		order[i] = i;
	shuffle(order, nops, seed * 1000 + (uint64_t)rank);
	if (grouped)
		CHECK(sluice_group_start());
	for (int i = 0; i < nops; i++) {
		int o = order[i], p = o / (2 * P2P_MSGS), peer = p >= rank ? p + 1 : p;
		if (o % 2) {
			int m = sent[p]++;
			float *buf = out + ((size_t)p * P2P_MSGS + (size_t)m) * P2P_COUNT;
			for (size_t e = 0; e < P2P_COUNT; e++)
				buf[e] = (float)p2p_value(rank, peer, m, e);
			CHECK(sluice_send(comm, buf, P2P_COUNT, SLUICE_FLOAT32, peer, &reqs[i]));
		} else {
			int m = got[p]++;
			float *buf = in + ((size_t)p * P2P_MSGS + (size_t)m) * P2P_COUNT;
			CHECK(sluice_recv(comm, buf, P2P_COUNT, SLUICE_FLOAT32, peer, &reqs[i]));
		}
	}
	if (grouped)
		CHECK(sluice_group_end());
	/* wait in yet another order: the reverse */
	for (int i = nops - 1; i >= 0; i--)
		CHECK(sluice_wait(reqs[i]));
	for (int p = 0; p < nranks - 1; p++) {
		int peer = p >= rank ? p + 1 : p;
		for (int m = 0; m < P2P_MSGS; m++)
			for (size_t e = 0; e < P2P_COUNT; e++)
				wrong += in[((size_t)p * P2P_MSGS + (size_t)m) * P2P_COUNT + e] !=
					 (float)p2p_value(peer, rank, m, e);
	}
	if (wrong) {
		fprintf(stderr, "rank %d: send/recv%s: %zu elements wrong\n", rank, grouped ? " (grouped)" : "", wrong);
		failures++;
	}
}

/* All-to-allv with zero-length parts: rank i sends rank j vcount(i, j)
 * elements, its blocks separated by gaps; receivers place them with gaps too. */
static size_t vcount(int i, int j)
{
	return (size_t)((i + 2 * j) % 3) * 1001;
}

static size_t vsend_displ(int i, int j)
{
	size_t d = 0;
	for (int k = 0; k < j; k++)
		d += vcount(i, k) + 3;
	return d;
}

static void alltoallv(void)
{
	size_t sc[256], sd[256], rc[256], rd[256], ro = 0, wrong = 0;
	int32_t *in = (int32_t *)bufa, *out = (int32_t *)bufb;
	sluice_req_t *req;

	for (int j = 0; j < nranks; j++) {
		sc[j] = vcount(rank, j);
		sd[j] = vsend_displ(rank, j);
		rc[j] = vcount(j, rank);
		rd[j] = ro;
		ro += rc[j] + 5;
	}
	for (size_t k = 0; k < vsend_displ(rank, nranks); k++)
		in[k] = rank * 1000000 + (int32_t)k;
	memset(out, 0xa5, ro * 4);
	CHECK(sluice_alltoallv(comm, in, sc, sd, out, rc, rd, SLUICE_INT32, &req));
	/* the call took its counts when posted: the arrays are the caller's again */
	memset(sc, 0x5a, sizeof(sc));
	memset(sd, 0x5a, sizeof(sd));
	memset(rc, 0x5a, sizeof(rc));
	memset(rd, 0x5a, sizeof(rd));
	CHECK(sluice_wait(req));
	ro = 0;
	for (int i = 0; i < nranks; i++) {
		for (size_t k = 0; k < vcount(i, rank); k++)
			wrong += out[ro + k] != i * 1000000 + (int32_t)(vsend_displ(i, rank) + k);
		ro += vcount(i, rank) + 5;
	}
	if (wrong) {
		fprintf(stderr, "rank %d: alltoallv: %zu elements wrong\n", rank, wrong);
		failures++;
	}
}

/* Every region of the context taken, a first all-to-allv still runs: its
 * counts travel in the client page (they took a registered area of 512
 * KiB at the first call, 3-4 ms of it). */
static void alltoallv_no_region(void)
{
	size_t c[256], d[256];
	void *held[SL_MAX_REGIONS];
	unsigned n = 0;
	sluice_req_t *req;
	sluice_result_t res = SLUICE_OK;

	for (int r = 0; r < nranks; r++)
		c[r] = 3, d[r] = 4 * (size_t)r;
	while (n < SL_MAX_REGIONS && (res = sluice_mem_alloc(ctx, 4096, &held[n])) == SLUICE_OK)
		n++;
	if (res != SLUICE_ERR_NO_MEMORY) {
		fprintf(stderr, "rank %d: filling the regions: %s\n", rank, sluice_last_error());
		failures++;
	}
	res = sluice_alltoallv(comm, bufa, c, d, bufb, c, d, SLUICE_INT32, &req);
	if (res == SLUICE_OK)
		res = sluice_wait(req);
	if (res != SLUICE_OK) {
		fprintf(stderr, "rank %d: a first all-to-allv with every region taken: %s\n", rank,
			sluice_last_error());
		failures++;
	}
	while (n > 0)
		CHECK(sluice_mem_free(ctx, held[--n]));
}

/* Counts of as many calls as the page's area holds (SL_VMETA_UNIT pieces
 * each), posted in a group so that none completes meanwhile: one more is
 * refused, clearly, then every one runs, and their room comes back. */
static void alltoallv_counts_room(void)
{
	size_t c[256] = { 0 }, d[256] = { 0 };
	unsigned per = (unsigned)((sl_vmeta_len((uint32_t)nranks) + SL_VMETA_UNIT - 1) / SL_VMETA_UNIT);
	unsigned room = SL_VMETA_BYTES / SL_VMETA_UNIT / per, n = 0;
	sluice_req_t **reqs = calloc(room, sizeof(*reqs)), *req;
	sluice_result_t res;

	if (!reqs) {
		fprintf(stderr, "rank %d: no memory for %u requests\n", rank, room);
		failures++;
		return;
	}
	CHECK(sluice_group_start());
	while (n < room && (res = sluice_alltoallv(comm, bufa, c, d, bufb, c, d, SLUICE_INT32, &reqs[n])) == SLUICE_OK)
		n++;
	res = sluice_alltoallv(comm, bufa, c, d, bufb, c, d, SLUICE_INT32, &req);
	if (n != room || res != SLUICE_ERR_NO_MEMORY || !strstr(sluice_last_error(), "counts")) {
		fprintf(stderr, "rank %d: %u all-to-allv calls held (want %u), then %s: %s\n", rank, n, room,
			sluice_get_error_string(res), sluice_last_error());
		failures++;
	}
	CHECK(sluice_group_end());
	for (unsigned i = 0; i < n; i++)
		CHECK(sluice_wait(reqs[i]));
	free(reqs);
	res = sluice_alltoallv(comm, bufa, c, d, bufb, c, d, SLUICE_INT32, &req);
	if (res == SLUICE_OK)
		res = sluice_wait(req);
	if (res != SLUICE_OK) {
		fprintf(stderr, "rank %d: an all-to-allv after %u finished: %s\n", rank, n, sluice_last_error());
		failures++;
	}
}

/* ---- 3: determinism ---- */

/* Rounding float32 inputs: an all-reduce and a reduce-scatter twice give
 * the same bits; the all-reduce's are the same on every rank. */
static void deterministic(void)
{
	size_t count = 30011;
	float *in = (float *)bufa, *out = (float *)bufb;
	uint64_t first[2] = { 0, 0 }, *h = (uint64_t *)(bufa + (((size_t)nranks * count * 4 + 7) & ~(size_t)7));
	sluice_req_t *req;

	for (int run = 0; run < 2; run++) {
		for (size_t i = 0; i < (size_t)nranks * count; i++)
			in[i] = (float)((double)(mix((uint64_t)rank << 32 ^ i) >> 11) * 0x1p-53 - 0.5) *
				(float)(1u << (i % 13));
		CHECK(sluice_allreduce(comm, in, out, count, SLUICE_FLOAT32, SLUICE_SUM, &req));
		CHECK(sluice_wait(req));
		uint64_t a = hash_bytes(out, count * 4);
		CHECK(sluice_reduce_scatter(comm, in, out, count / (size_t)nranks, SLUICE_FLOAT32, SLUICE_SUM, &req));
		CHECK(sluice_wait(req));
		uint64_t b = hash_bytes(out, count / (size_t)nranks * 4);
		if (run == 1 && (a != first[0] || b != first[1])) {
			fprintf(stderr, "rank %d: float32 results differ between two identical runs\n", rank);
			failures++;
		}
		first[0] = a;
		first[1] = b;
	}
	/* max of +0 and -0 (equal, different bits) picks by operand order: rank r
	 * gives -0 where bit r of the index is set, so that every pair of ranks
	 * meets both ways round, and every rank must end with the same bits */
	for (size_t i = 0; i < count; i++)
		in[i] = (i >> rank) & 1 ? -0.0f : 0.0f;
	CHECK(sluice_allreduce(comm, in, out, count, SLUICE_FLOAT32, SLUICE_MAX, &req));
	CHECK(sluice_wait(req));
	first[0] ^= hash_bytes(out, count * 4);
	/* every rank holds the same all-reduce bits: MAX and MIN of the hash agree */
	h[0] = first[0];
	CHECK(sluice_allreduce(comm, h, h + 1, 1, SLUICE_UINT64, SLUICE_MAX, &req));
	CHECK(sluice_wait(req));
	CHECK(sluice_allreduce(comm, h, h + 2, 1, SLUICE_UINT64, SLUICE_MIN, &req));
	CHECK(sluice_wait(req));
	if (h[1] != first[0] || h[2] != first[0]) {
		fprintf(stderr, "rank %d: all-reduce results differ across ranks\n", rank);
		failures++;
	}
}

/* Two communicators at once: calls on both in flight together, posted in
 * opposite orders on even and odd ranks. */
static void two_communicators(void)
{
	sluice_comm_t *other;
	sluice_req_t *ra, *rb;
	int32_t *a = (int32_t *)bufa, *b = (int32_t *)bufb, *gathered = (int32_t *)bufb + 1000;

	CHECK(sluice_comm_init_env(ctx, &other));
	for (int i = 0; i < 1000; i++)
		a[i] = rank + i;
	b[0] = rank;
	if (rank % 2) {
		CHECK(sluice_allgather(other, b, gathered, 1, SLUICE_INT32, &rb));
		CHECK(sluice_allreduce(comm, a, a, 1000, SLUICE_INT32, SLUICE_SUM, &ra));
	} else {
		CHECK(sluice_allreduce(comm, a, a, 1000, SLUICE_INT32, SLUICE_SUM, &ra));
		CHECK(sluice_allgather(other, b, gathered, 1, SLUICE_INT32, &rb));
	}
	CHECK(sluice_wait(rb));
	CHECK(sluice_wait(ra));
	for (int i = 0; i < 1000; i++)
		if (a[i] != nranks * i + nranks * (nranks - 1) / 2) {
			fprintf(stderr, "rank %d: two communicators: allreduce element %d is %d\n", rank, i, a[i]);
			failures++;
			break;
		}
	for (int r = 0; r < nranks; r++)
		if (gathered[r] != r) {
			fprintf(stderr, "rank %d: two communicators: allgather block %d is %d\n", rank, r, gathered[r]);
			failures++;
			break;
		}
	CHECK(sluice_comm_destroy(other));
}

/* A call that must be refused before anything is sent, with a message that says why. */
static void expect_refused(sluice_result_t got, sluice_result_t want, const char *needle, const char *what)
{
	if (got != want || !strstr(sluice_last_error(), needle)) {
		fprintf(stderr, "rank %d: %s: got %s (%s), want %s mentioning \"%s\"\n", rank, what,
			sluice_get_error_string(got), sluice_last_error(), sluice_get_error_string(want), needle);
		failures++;
	}
}

static void refused(void)
{
	size_t counts[256] = { 0 };
	sluice_req_t *req, *grouped;
	const sluice_result_t bad = SLUICE_ERR_INVALID_ARGUMENT;

	expect_refused(sluice_broadcast(comm, bufa, bufb, 4, SLUICE_INT32, nranks, &req), bad, "root",
		       "a root that is not a rank");
	expect_refused(sluice_send(comm, bufa, 4, SLUICE_INT32, rank, &req), bad, "itself", "a send to itself");
	expect_refused(sluice_recv(comm, bufb, 4, SLUICE_INT32, -1, &req), bad, "peer", "a negative peer");
	expect_refused(sluice_alltoallv(comm, bufa, counts, NULL, bufb, counts, counts, SLUICE_INT32, &req), bad,
		       "NULL", "all-to-allv without displacements");
	expect_refused(sluice_alltoallv(comm, bufa, counts, counts, bufa, counts, counts, SLUICE_INT32, &req), bad,
		       "in place", "all-to-allv in place");
	expect_refused(sluice_allgather(comm, bufa + 4, bufa, 4, SLUICE_INT32, &req), bad, "overlap",
		       "all-gather buffers that overlap other than NCCL's way");
	expect_refused(sluice_reduce(comm, bufa, bufb, 4, SLUICE_INT32, SLUICE_AVG, 0, &req), bad, "AVG",
		       "avg on integers");
	expect_refused(sluice_group_end(), SLUICE_ERR_INVALID_USAGE, "no group", "a group end without a start");
	/* a request made in an open group cannot be waited on yet */
	CHECK(sluice_group_start());
	CHECK(sluice_barrier(comm, &grouped));
	if (sluice_wait(grouped) != SLUICE_ERR_INVALID_USAGE || !strstr(sluice_last_error(), "sluice_group_end")) {
		fprintf(stderr, "rank %d: waiting inside a group: %s\n", rank, sluice_last_error());
		failures++;
	}
	CHECK(sluice_group_end());
	CHECK(sluice_wait(grouped));
}

/* ---- 4: mismatches ---- */

enum mismatch { M_OP, M_COUNT, M_ROOT, M_DTYPE, M_COLL, M_P2P, M_VCOUNT, NMISMATCH };
static const char *const mismatch_names[NMISMATCH] = { "op", "count", "root", "datatype", "collective",
						       "recv size", "alltoallv count" };

/* Rank 1 alone calls something else; everyone must hear SLUICE_ERR_MISMATCH. */
static void mismatch(enum mismatch m)
{
	bool odd = rank == 1;
	sluice_req_t *req;
	sluice_result_t res;
	const char *limit = getenv("SLUICE_TIMEOUT"), *hold = getenv("IT_COLLS_HOLD");
	double timeout_s = limit ? atof(limit) : 30;
	unsigned hold_s = hold && (m == M_OP || m == M_COUNT || m == M_P2P) ? (unsigned)atoi(hold) : 0;

	CHECK(sluice_comm_init_env(ctx, &comm));
	double t0 = now_s();
	switch (m) {
	case M_OP: res = sluice_allreduce(comm, bufa, bufb, 100, SLUICE_INT32, odd ? SLUICE_MAX : SLUICE_SUM, &req); break;
	case M_COUNT: res = sluice_broadcast(comm, bufa, bufb, odd ? 101 : 100, SLUICE_INT32, 0, &req); break;
	case M_ROOT: res = sluice_reduce(comm, bufa, bufb, 100, SLUICE_INT32, SLUICE_SUM, odd ? 1 : 0, &req); break;
	case M_DTYPE: res = sluice_allgather(comm, bufa, bufb, 100, odd ? SLUICE_FLOAT32 : SLUICE_INT32, &req); break;
	case M_COLL:
		res = odd ? sluice_alltoall(comm, bufa, bufb, 10, SLUICE_INT32, &req)
			  : sluice_allgather(comm, bufa, bufb, 10, SLUICE_INT32, &req);
		break;
	case M_VCOUNT: { /* rank 1 expects one element more from rank 0 than rank 0 sends it */
		size_t c[256], d[256], rc[256];
		for (int r = 0; r < nranks; r++)
			c[r] = rc[r] = 10, d[r] = 16 * (size_t)r;
		rc[0] += odd;
		res = sluice_alltoallv(comm, bufa, c, d, bufb, rc, d, SLUICE_INT32, &req);
		break;
	}
	default: /* rank 0 sends 100 to rank 1, which expects 99; the others only hear of it */
		res = rank == 0 ? sluice_send(comm, bufa, 100, SLUICE_INT32, 1, &req)
		      : rank == 1 ? sluice_recv(comm, bufb, 99, SLUICE_INT32, 0, &req)
				  : sluice_barrier(comm, &req);
		break;
	}
	CHECK(res);
	res = sluice_wait(req);
	/* a pair's disagreement reaches the ranks not in it (or a sender whose
	 * data was taken, or a rooted call's rank whose data was complete) after
	 * their own part may have finished: their next call fails, and so does
	 * sluice_comm_destroy when it comes first (tried on the reduce) */
	bool late = m == M_P2P || m == M_VCOUNT || m == M_COUNT || m == M_ROOT, destroyed = false;
	if (late && res == SLUICE_OK && m == M_ROOT) {
		res = sluice_comm_destroy(comm);
		destroyed = true;
	} else if (late && res == SLUICE_OK) {
		CHECK(sluice_barrier(comm, &req));
		res = sluice_wait(req);
	}
	if (res != SLUICE_ERR_MISMATCH || !strstr(sluice_last_error(), "differs across ranks")) {
		fprintf(stderr, "rank %d: %s differs on rank 1: got %s (%s), want a mismatch\n", rank,
			mismatch_names[m], sluice_get_error_string(res), sluice_last_error());
		failures++;
	}
	/* the message names each side's call as it was made: rank 1's recv, not a send */
	if (m == M_P2P && !strstr(sluice_last_error(), "rank 1 called recv(count=99")) {
		fprintf(stderr, "rank %d: the recv size mismatch: the message does not name rank 1's recv: %s\n", rank,
			sluice_last_error());
		failures++;
	}
	/* reported as a mismatch, not left to the timeout (the machine may be
	 * slow, so only the timeout bounds it), nor, held, to the finder's destroy */
	double took = now_s() - t0, bound = hold_s > 0 ? hold_s / 2.0 : timeout_s;
	if (took >= bound) {
		fprintf(stderr, "rank %d: the %s mismatch took %.1f s to report (bound %.1f s: %s)\n", rank,
			mismatch_names[m], took, bound, hold_s > 0 ? "the ranks hold for twice that" : "the timeout");
		failures++;
	}
	sleep(hold_s);
	/* a failure reported already is not reported again */
	if (!destroyed)
		CHECK(sluice_comm_destroy(comm));
}

/* Rank 0 alone makes one more call, a broadcast that needs nothing from the
 * others: it ends on rank 0, and every rank's destroy reports that the
 * ranks made different calls (the closing words carry their number). */
static void extra_call(void)
{
	sluice_req_t *req;
	sluice_result_t res;

	CHECK(sluice_comm_init_env(ctx, &comm));
	if (rank == 0) {
		CHECK(sluice_broadcast(comm, bufa, bufb, 100, SLUICE_INT32, 0, &req));
		CHECK(sluice_wait(req));
	}
	res = sluice_comm_destroy(comm);
	if (res != SLUICE_ERR_MISMATCH || !strstr(sluice_last_error(), "collective calls")) {
		fprintf(stderr, "rank %d: rank 0 made one call more: destroy got %s (%s), want a mismatch\n", rank,
			sluice_get_error_string(res), sluice_last_error());
		failures++;
	}
}

int main(void)
{
	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	/* nranks blocks of float64 (never less than the 4 ranks' room it always had),
	 * and room for unaligned()'s skews */
	size_t bytes = 8 * (size_t)MAX_COUNT * (size_t)(nranks > 4 ? nranks : 4) + GUARD + 3 * 8;
	CHECK(sluice_mem_alloc(ctx, bytes, (void **)&bufa));
	CHECK(sluice_mem_alloc(ctx, bytes, (void **)&bufb));
	every_collective();
	unaligned();
	alltoallv_no_region();
	alltoallv();
	alltoallv_counts_room();
	if (nranks > 1) {
		send_recv(false, 1);
		send_recv(true, 2);
	}
	deterministic();
	two_communicators();
	refused();
	CHECK(sluice_comm_destroy(comm));
	for (enum mismatch m = 0; nranks > 1 && m < NMISMATCH; m++)
		mismatch(m);
	if (nranks > 1)
		extra_call();
	CHECK(sluice_mem_free(ctx, bufa));
	CHECK(sluice_mem_free(ctx, bufb));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_colls rank %d of %d: %d failures\n", rank, nranks, failures);
	return failures ? 1 : 0;
}
