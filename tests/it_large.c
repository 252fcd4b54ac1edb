/*
 * it_large.c: a rank of the large-count test, started by sluice-run once per
 * rank: counts whose element count passes INT32_MAX and whose byte sizes
 * pass 2^31 and 2^32, where any 32-bit narrowing of a size, an offset or a
 * chunk index in libsluice or the dataplane would misplace or drop data.
 *
 * Cases (all by default; or those named on the command line):
 *   allreduce_int8    out of place, count 2^31 + 257
 *   allgather_int8    count 2^31 + 257 a rank: recv passes 2^32 bytes
 *   broadcast_int8    in place, root nranks - 1, count 2^32 + 257
 *   sendrecv_int8     rank 0 to the last rank, count 2^32 + 257
 *   allreduce_f32     in place, count 2^30 + 257: 4 GiB + 1028 bytes
 * Element i's value is a hash of i / 65536 plus i, kept small: a block
 * placed 2^31 or 2^32 bytes off, or never written, has other values.
 * Each rank needs about 3 x 2^31 bytes of memory; the test runs only with
 * -Dslow_tests=true (README: the slow tests).
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

static const struct {
	const char *name;
	void (*run)(uint8_t *buf);
} cases[] = {
	{ "allreduce_int8", allreduce_int8 }, { "allgather_int8", allgather_int8 },
	{ "broadcast_int8", broadcast_int8 }, { "sendrecv_int8", sendrecv_int8 },
	{ "allreduce_f32", allreduce_f32 },
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
	uint8_t *buf;

	for (int a = 1; a < argc; a++) {
		size_t c = 0;
		while (c < NCASES && strcmp(argv[a], cases[c].name))
			c++;
		if (c == NCASES) {
			fprintf(stderr, "it_large: no case '%s' (allreduce_int8, allgather_int8, broadcast_int8, "
				"sendrecv_int8, allreduce_f32)\n", argv[a]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* each case's time as it ends, into a log too */
	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	/* the largest case: all-gather's send and nranks blocks; the others fit in it */
	uint64_t bytes = BIG8 * (uint64_t)(nranks + 1);
	if (bytes < HUGE8)
		bytes = HUGE8;
	CHECK(sluice_mem_alloc(ctx, bytes, (void **)&buf));
	for (size_t c = 0; c < NCASES; c++)
		if (wanted(argc, argv, cases[c].name))
			cases[c].run(buf);
	CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_comm_destroy(comm));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_large rank %d of %d: %d failures\n", rank, nranks, failures);
	return failures ? 1 : 0;
}
