/*
 * it_large.c: a rank of the large-count test, started by sluice-run once per
 * rank: counts whose element count passes INT32_MAX and whose byte sizes
 * pass 2^31 and 2^32, where any 32-bit narrowing of a size, an offset or a
 * chunk index in libsluice or the dataplane would misplace or drop data.
 *
 * Cases (all by default; or those named on the command line):
 *   allreduce_int8      out of place, count 2^31 + 257
 *   allgather_int8      count 2^31 + 257 a rank: recv passes 2^32 bytes
 *   reduce_scatter_int8 out of place, count 2^31 + 257 a rank: send passes 2^32 bytes
 *   broadcast_int8      in place, root nranks - 1, count 2^32 + 257
 *   sendrecv_int8       rank 0 to the last rank, count 2^32 + 257
 *   allreduce_f32       in place, count 2^30 + 257: 4 GiB + 1028 bytes
 *   reduce_int8         in place, root 0, count 2^32 + 257
 *   alltoall_int8       in place, count 2^31 + 257 to each rank
 *   alltoallv_int8      rank 0 sends the last rank 2^32 + 257, the rest
 *                       small blocks; each rank's own block (sent and
 *                       received) sits past its other blocks, on rank 0's
 *                       send and the last rank's recv side 2^32 + 457 in
 *   gather_int8         in place, root 0, count 2^31 + 257 a rank
 *   scatter_int8        in place, root 0, count 2^31 + 257 a rank
 * Element i's value is a hash of i / 65536 plus i, kept small: a block
 * placed 2^31 or 2^32 bytes off, or never written, has other values.
 * Each rank needs about 3 x 2^31 bytes of memory (the all-gather's region;
 * the in-place all-to-all runs on its 2 x 2^31 bytes without a copy of its
 * input since session 27); the test runs only with -Dslow_tests=true
 * (README: the slow tests), with --embedded and --daemons.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

static int rank, nranks;

#include "it_common.h"

#define BIG8 ((UINT64_C(1) << 31) + 257)  /* elements: past INT32_MAX */
#define HUGE8 ((UINT64_C(1) << 32) + 257) /* elements and bytes: past UINT32_MAX */
#define BIG32 ((UINT64_C(1) << 30) + 257) /* float32 elements: bytes past 2^32 */
#define BLOCK 65536

static sluice_ctx_t *ctx;
static sluice_comm_t *comm;
static int failures;

/* Rank r's element i, 0..32 + r: sums over 256 ranks stay exact in int8's
 * wrap-around and in float32. */
static unsigned value(int r, uint64_t i)
{
	return (unsigned)((mix(i / BLOCK) + i) & 31) + (unsigned)r;
}

/* What every rank's value sums to at i. */
static unsigned summed(uint64_t i)
{
	return (unsigned)nranks * value(0, i) + (unsigned)(nranks * (nranks - 1) / 2);
}

static void fill8(uint8_t *p, uint64_t n, int r)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = (uint8_t)value(r, i);
}

static void fill32(float *p, uint64_t n, int r)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = (float)value(r, i);
}

/* Counts the elements of got that differ from want(i) and names the first few. */
#define VERIFY(what, n, got_i, want_i)                                                                    \
	do {                                                                                               \
		uint64_t wrong_ = 0;                                                                       \
		for (uint64_t i = 0; i < (n); i++) {                                                       \
			if ((got_i) == (want_i))                                                           \
				continue;                                                                  \
			if (wrong_++ < 3)                                                                  \
				fprintf(stderr, "rank %d: %s: element %" PRIu64 " (0x%" PRIx64 ") is %g, want %g\n", \
					rank, what, i, i, (double)(got_i), (double)(want_i));              \
		}                                                                                          \
		if (wrong_)                                                                                \
			fprintf(stderr, "rank %d: %s: %" PRIu64 " of %" PRIu64 " elements wrong\n", rank,  \
				what, wrong_, (uint64_t)(n));                                              \
		failures += wrong_ != 0;                                                                   \
	} while (0)

/* Every rank has filled its buffers: filling gigabytes takes some ranks
 * minutes longer than others on a loaded machine, and a call's wait counts
 * SLUICE_TIMEOUT from its post. */
static void filled(void)
{
	sluice_req_t *req;

	CHECK(sluice_barrier(comm, &req));
	CHECK(sluice_wait(req));
}

/* req is read after the call that sets it (an argument's order of evaluation is not). */
static void run(const char *what, sluice_result_t posted, sluice_req_t *const *req)
{
	double t0 = now_s();

	CHECK(posted);
	CHECK(sluice_wait(*req));
	if (rank == 0)
		printf("it_large: %s: %.1f s\n", what, now_s() - t0);
}

static void allreduce_int8(uint8_t *buf)
{
	uint8_t *send = buf, *recv = buf + BIG8;
	sluice_req_t *req;

	fill8(send, BIG8, rank);
	memset(recv, 0xee, BIG8);
	filled();
	run("allreduce_int8", sluice_allreduce(comm, send, recv, BIG8, SLUICE_INT8, SLUICE_SUM, &req), &req);
	VERIFY("allreduce_int8", BIG8, recv[i], (uint8_t)summed(i));
}

static void allgather_int8(uint8_t *buf)
{
	uint8_t *send = buf, *recv = buf + BIG8;
	sluice_req_t *req;

	fill8(send, BIG8, rank);
	memset(recv, 0xee, BIG8 * (uint64_t)nranks);
	filled();
	run("allgather_int8", sluice_allgather(comm, send, recv, BIG8, SLUICE_INT8, &req), &req);
	VERIFY("allgather_int8", BIG8 * (uint64_t)nranks, recv[i], (uint8_t)value((int)(i / BIG8), i % BIG8));
}

static void broadcast_int8(uint8_t *buf)
{
	int root = nranks - 1;
	sluice_req_t *req;

	if (rank == root)
		fill8(buf, HUGE8, rank);
	else
		memset(buf, 0xee, HUGE8);
	filled();
	run("broadcast_int8", sluice_broadcast(comm, buf, buf, HUGE8, SLUICE_INT8, root, &req), &req);
	VERIFY("broadcast_int8", HUGE8, buf[i], (uint8_t)value(root, i));
}

static void sendrecv_int8(uint8_t *buf)
{
	int last = nranks - 1;
	sluice_req_t *req;

	if (nranks == 1)
		return;
	if (rank == 0)
		fill8(buf, HUGE8, rank);
	else if (rank == last)
		memset(buf, 0xee, HUGE8);
	filled();
	if (rank == 0) {
		run("sendrecv_int8", sluice_send(comm, buf, HUGE8, SLUICE_INT8, last, &req), &req);
	} else if (rank == last) {
		run("sendrecv_int8", sluice_recv(comm, buf, HUGE8, SLUICE_INT8, 0, &req), &req);
		VERIFY("sendrecv_int8", HUGE8, buf[i], (uint8_t)value(0, i));
	}
}

static void allreduce_f32(uint8_t *buf)
{
	float *p = (float *)buf;
	sluice_req_t *req;

	fill32(p, BIG32, rank);
	filled();
	run("allreduce_f32", sluice_allreduce(comm, p, p, BIG32, SLUICE_FLOAT32, SLUICE_SUM, &req), &req);
	VERIFY("allreduce_f32", BIG32, p[i], (float)summed(i));
}

/* Out of place: rank r's input block k is value(r, i) + k, so each block differs. */
static void reduce_scatter_int8(uint8_t *buf)
{
	uint8_t *send = buf, *recv = buf + BIG8 * (uint64_t)nranks;
	sluice_req_t *req;

	for (int k = 0; k < nranks; k++)
		for (uint64_t i = 0; i < BIG8; i++)
			send[k * BIG8 + i] = (uint8_t)(value(rank, i) + (unsigned)k);
	memset(recv, 0xee, BIG8);
	filled();
	run("reduce_scatter_int8", sluice_reduce_scatter(comm, send, recv, BIG8, SLUICE_INT8, SLUICE_SUM, &req), &req);
	VERIFY("reduce_scatter_int8", BIG8, recv[i], (uint8_t)(summed(i) + (unsigned)(nranks * rank)));
}

static void reduce_int8(uint8_t *buf)
{
	sluice_req_t *req;

	fill8(buf, HUGE8, rank);
	filled();
	run("reduce_int8", sluice_reduce(comm, buf, buf, HUGE8, SLUICE_INT8, SLUICE_SUM, 0, &req), &req);
	if (rank == 0)
		VERIFY("reduce_int8", HUGE8, buf[i], (uint8_t)summed(i));
}

/* In place: block k of rank r holds value(r, i) + k before, rank k's block r after. */
static void alltoall_int8(uint8_t *buf)
{
	uint64_t n = BIG8 * (uint64_t)nranks;
	sluice_req_t *req;

	for (uint64_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(value(rank, i % BIG8) + (unsigned)(i / BIG8));
	filled();
	run("alltoall_int8", sluice_alltoall(comm, buf, buf, BIG8, SLUICE_INT8, &req), &req);
	VERIFY("alltoall_int8", n, buf[i], (uint8_t)(value((int)(i / BIG8), i % BIG8) + (unsigned)rank));
}

/* All-to-allv's layout on this rank: elements rank `from` sends rank `to`,
 * and each block's displacement on one side (send: to's block, recv:
 * from's), the own block last, every block after a gap of VGAP. */
#define VGAP 100
#define VSMALL 4099

static uint64_t vcount(int from, int to)
{
	return from == 0 && to == nranks - 1 && nranks > 1 ? HUGE8 : VSMALL + 13 * (uint64_t)from + 7 * (uint64_t)to;
}

/* Displacements of the blocks this rank sends (recv: receives), and the span they cover. */
static uint64_t vlayout(bool recv, size_t *displ)
{
	uint64_t at = 0;

	for (int k = 0; k <= nranks; k++) {
		int peer = k == nranks ? rank : k;
		if (peer == rank && k < nranks)
			continue;
		at += VGAP;
		displ[peer] = at;
		at += recv ? vcount(peer, rank) : vcount(rank, peer);
	}
	return at;
}

static uint8_t vvalue(int from, int to, uint64_t i)
{
	return (uint8_t)(value(from, i) + 3 * (unsigned)to);
}

static void alltoallv_int8(uint8_t *buf)
{
	size_t *sc = calloc(4 * (size_t)nranks, sizeof(size_t)), *sd = sc + nranks, *rc = sd + nranks, *rd = rc + nranks;
	uint64_t sspan, rspan;
	uint8_t *send = buf, *recv;
	sluice_req_t *req;

	if (!sc)
		exit(1);
	sspan = vlayout(false, sd);
	rspan = vlayout(true, rd);
	recv = buf + (sspan + 63) / 64 * 64;

	for (int p = 0; p < nranks; p++) {
		sc[p] = vcount(rank, p);
		rc[p] = vcount(p, rank);
		for (uint64_t i = 0; i < sc[p]; i++)
			send[sd[p] + i] = vvalue(rank, p, i);
	}
	memset(recv, 0xee, rspan);
	filled();
	run("alltoallv_int8", sluice_alltoallv(comm, send, sc, sd, recv, rc, rd, SLUICE_INT8, &req), &req);
	for (int p = 0; p < nranks; p++) {
		const uint8_t *got = recv + rd[p], *gap = got - VGAP;
		char what[64];
		snprintf(what, sizeof(what), "alltoallv_int8 from rank %d", p);
		VERIFY(what, rc[p], got[i], vvalue(p, rank, i));
		VERIFY("alltoallv_int8 (the gap before a block)", VGAP, gap[i], 0xee);
	}
	free(sc);
}

/* In place: the root's block r lands where rank r's input was. */
static void gather_int8(uint8_t *buf)
{
	uint64_t n = BIG8 * (uint64_t)nranks;
	sluice_req_t *req;

	if (rank == 0)
		memset(buf + BIG8, 0xee, n - BIG8);
	fill8(buf, BIG8, rank);
	filled();
	run("gather_int8", sluice_gather(comm, buf, buf, BIG8, SLUICE_INT8, 0, &req), &req);
	if (rank == 0)
		VERIFY("gather_int8", n, buf[i], (uint8_t)value((int)(i / BIG8), i % BIG8));
}

/* In place: rank r's block of the root's send buffer is value(r, i) + 1. */
static void scatter_int8(uint8_t *buf)
{
	uint64_t n = BIG8 * (uint64_t)nranks;
	sluice_req_t *req;

	if (rank == 0)
		for (uint64_t i = 0; i < n; i++)
			buf[i] = (uint8_t)(value((int)(i / BIG8), i % BIG8) + 1);
	else
		memset(buf, 0xee, BIG8);
	filled();
	run("scatter_int8", sluice_scatter(comm, buf, buf, BIG8, SLUICE_INT8, 0, &req), &req);
	VERIFY("scatter_int8", BIG8, buf[i], (uint8_t)(value(rank, i) + 1));
}

/* The region a case runs in: nranks + 1 blocks of BIG8 (out of place,
 * blocked), or nranks blocks, HUGE8 and all-to-allv's small blocks (until
 * session 27 this left room for the dataplane's copy of the in-place
 * all-to-all's input, nranks - 1 blocks, within about what the first
 * takes). */
enum region { BLOCKS_AND_ONE, BLOCKS };

static uint64_t region_bytes(enum region r)
{
	uint64_t blocks = BIG8 * (uint64_t)nranks;

	if (r == BLOCKS_AND_ONE)
		return blocks + BIG8;
	return (blocks > HUGE8 ? blocks : HUGE8) + (1u << 20);
}

/* In the order they run: those of one region together, so that it is registered once. */
static const struct {
	const char *name;
	void (*run)(uint8_t *buf);
	enum region region;
} cases[] = {
	{ "allgather_int8", allgather_int8, BLOCKS_AND_ONE },
	{ "reduce_scatter_int8", reduce_scatter_int8, BLOCKS_AND_ONE },
	{ "allreduce_int8", allreduce_int8, BLOCKS }, { "broadcast_int8", broadcast_int8, BLOCKS },
	{ "sendrecv_int8", sendrecv_int8, BLOCKS }, { "allreduce_f32", allreduce_f32, BLOCKS },
	{ "reduce_int8", reduce_int8, BLOCKS }, { "alltoall_int8", alltoall_int8, BLOCKS },
	{ "alltoallv_int8", alltoallv_int8, BLOCKS }, { "gather_int8", gather_int8, BLOCKS },
	{ "scatter_int8", scatter_int8, BLOCKS },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static bool wanted(int argc, char **argv, const char *name)
{
	for (int a = 1; a < argc; a++)
		if (!strcmp(argv[a], name))
			return true;
	return argc == 1;
}

int main(int argc, char **argv)
{
	uint8_t *buf = NULL;
	uint64_t have = 0;

	for (int a = 1; a < argc; a++) {
		size_t c = 0;
		while (c < NCASES && strcmp(argv[a], cases[c].name))
			c++;
		if (c == NCASES) {
			fprintf(stderr, "it_large: no case '%s'; the cases:", argv[a]);
			for (c = 0; c < NCASES; c++)
				fprintf(stderr, " %s", cases[c].name);
			fprintf(stderr, "\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* each case's time as it ends, into a log too */
	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	for (size_t c = 0; c < NCASES; c++) {
		uint64_t bytes = region_bytes(cases[c].region);
		if (!wanted(argc, argv, cases[c].name))
			continue;
		if (bytes != have) { /* one region at a time: never both resident */
			if (buf)
				CHECK(sluice_mem_free(ctx, buf));
			CHECK(sluice_mem_alloc(ctx, bytes, (void **)&buf));
			have = bytes;
		}
		cases[c].run(buf);
	}
	if (buf)
		CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_comm_destroy(comm));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_large rank %d of %d: %d failures\n", rank, nranks, failures);
	return failures ? 1 : 0;
}
