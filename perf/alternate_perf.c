/*
 * alternate_perf.c: sluice-alternate, in-place calls of different sizes or
 * collectives in turn, as a DDP job's gradient buckets or two overlapping
 * communicators' calls come: each round makes every call named once, in
 * order, each on a buffer of its own, and rank 0 prints each call's time
 * (its own mean, median, p99, max, and the mean over ranks).  A rank's
 * in-place calls snapshot their input into memory the engine keeps between
 * calls (perf/ALGORITHMS.md, spare (session 17)); sluiced -v counts what
 * it had to allocate anew.
 *
 *   sluice-run -n 2 -- sluice-alternate -n 500 all_reduce:40K all_reduce:128K
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

#include "perf_common.h"
#include "perf_tail.h"

struct call {
	enum perf_coll coll; /* all_reduce, all_gather, reduce_scatter or alltoall */
	size_t bytes;        /* nccl-tests' size: all-to-all's whole buffer and so on */
	void *buf;
	double *us;          /* each timed round's time of this call */
	sluice_req_t *req;
};

struct run {
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	int rank, nranks;
};

static int fail(const char *what, sluice_result_t r)
{
	fprintf(stderr, "sluice-alternate: %s: %s: %s\n", what, sluice_get_error_string(r), sluice_last_error());
	return -1;
}

/* Post one in-place call, NCCL's layout (sluice.h), float32 sums. */
static int post(const struct run *s, const struct call *c, sluice_req_t **req)
{
	size_t whole = c->bytes / sizeof(float), block = whole / (size_t)s->nranks;
	float *b = c->buf, *mine = b + (size_t)s->rank * block;
	sluice_result_t r;

	switch (c->coll) {
	case PERF_ALLREDUCE: r = sluice_allreduce(s->comm, b, b, whole, SLUICE_FLOAT32, SLUICE_SUM, req); break;
	case PERF_ALLGATHER: r = sluice_allgather(s->comm, mine, b, block, SLUICE_FLOAT32, req); break;
	case PERF_REDUCE_SCATTER:
		r = sluice_reduce_scatter(s->comm, b, mine, block, SLUICE_FLOAT32, SLUICE_SUM, req);
		break;
	default: r = sluice_alltoall(s->comm, b, b, block, SLUICE_FLOAT32, req); break;
	}
	return r == SLUICE_OK ? 0 : fail(perf_coll_name(c->coll), r);
}

static int wait_for(sluice_req_t *req)
{
	sluice_result_t r = sluice_wait(req);

	return r == SLUICE_OK ? 0 : fail("sluice_wait", r);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* rounds rounds of every call in turn, each waited for before the next
 * (overlap: all posted, then waited for in order, as DDP's buckets are);
 * with timed, each call's time from its post (overlap: the round's start)
 * to its wait's return. */
static int rounds_of(const struct run *s, struct call *calls, int ncalls, unsigned rounds, bool overlap,
		     bool timed)
{
	for (unsigned k = 0; k < rounds; k++) {
		double t = now_us();
		for (int i = 0; i < ncalls; i++) {
			if (post(s, &calls[i], &calls[i].req) < 0)
				return -1;
			if (overlap)
				continue;
			if (wait_for(calls[i].req) < 0)
				return -1;
			if (timed)
				calls[i].us[k] = now_us() - t;
			t = now_us();
		}
		for (int i = 0; overlap && i < ncalls; i++) {
			if (wait_for(calls[i].req) < 0)
				return -1;
			if (timed)
				calls[i].us[k] = now_us() - t;
		}
	}
	return 0;
}

/* Pages this process (an embedded rank's engine threads too) faulted in. */
static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* "alltoall:256K" -> a call; exits 2 on anything else. */
static void parse_call(const char *arg, struct call *c)
{
	char name[32];
	const char *colon = strchr(arg, ':');
	int coll = -1;

	if (colon && (size_t)(colon - arg) < sizeof(name)) {
		memcpy(name, arg, (size_t)(colon - arg));
		name[colon - arg] = '\0';
		coll = perf_parse_coll(name);
	}
	if (coll != PERF_ALLREDUCE && coll != PERF_ALLGATHER && coll != PERF_REDUCE_SCATTER && coll != PERF_ALLTOALL) {
		fprintf(stderr, "sluice-alternate: '%s': want all_reduce, all_gather, reduce_scatter or alltoall:SIZE\n", arg);
		exit(2);
	}
	if (perf_parse_size(colon + 1, &c->bytes) < 0 || c->bytes < sizeof(float)) {
		fprintf(stderr, "sluice-alternate: '%s': want a size like 8, 40K or 1M after the colon\n", arg);
		exit(2);
	}
	c->coll = (enum perf_coll)coll;
}

static void usage(void)
{
	fprintf(stderr, "usage: sluice-alternate [-n ROUNDS] [-w WARMUP] [-S] [-o] COLL:SIZE...\n"
			"  each round makes every COLL:SIZE call once, in place, in order (float32 sums)\n"
			"  -n  timed rounds (500)   -w  untimed rounds first (20)\n"
			"  -o  post every call of a round, then wait for each (calls overlap)\n"
			"  -S  an 8-byte in-place all-reduce (a barrier) between the warmup and the timed rounds\n");
	exit(2);
}

/* Rank 0 prints each call's tail and its mean, own and over ranks. */
static int report(const struct run *s, struct call *calls, int ncalls, unsigned rounds, float *barrier)
{
	for (int i = 0; i < ncalls; i++) {
		double sum = 0;
		struct perf_tail t;
		sluice_req_t *req;
		sluice_result_t r;

		for (unsigned k = 0; k < rounds; k++)
			sum += calls[i].us[k];
		barrier[0] = (float)(sum / rounds);
		if ((r = sluice_allreduce(s->comm, barrier, barrier, 1, SLUICE_FLOAT32, SLUICE_SUM, &req)) != SLUICE_OK ||
		    (r = sluice_wait(req)) != SLUICE_OK)
			return fail("the mean over ranks", r);
		perf_tail_of(calls[i].us, rounds, &t);
		if (s->rank == 0)
			printf("%-14s %9zu  mean %9.1f  ranks' mean %9.1f  median %9.1f  p99 %9.1f  max %9.1f us\n",
			       perf_coll_name(calls[i].coll), calls[i].bytes, sum / rounds, barrier[0] / s->nranks,
			       t.median_us, t.p99_us, t.max_us);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct run s = { 0 };
	unsigned rounds = 500, warmup = 20;
	bool sync = false, overlap = false;
	int opt, ncalls, rc = 1;
	float *barrier = NULL;
	sluice_result_t r;

	while ((opt = getopt(argc, argv, "n:w:Soh")) != -1) {
		switch (opt) {
		case 'n': rounds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'w': warmup = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'S': sync = true; break;
		case 'o': overlap = true; break;
		default: usage();
		}
	}
	ncalls = argc - optind;
	if (ncalls < 1 || rounds < 1)
		usage();
	struct call *calls = calloc((size_t)ncalls, sizeof(*calls));
	if (!calls)
		return 1;
	for (int i = 0; i < ncalls; i++)
		parse_call(argv[optind + i], &calls[i]);
	if ((r = sluice_init(&s.ctx)) != SLUICE_OK || (r = sluice_comm_init_env(s.ctx, &s.comm)) != SLUICE_OK ||
	    (r = sluice_comm_rank(s.comm, &s.rank)) != SLUICE_OK || (r = sluice_comm_size(s.comm, &s.nranks)) != SLUICE_OK) {
		fail("joining the job (run under sluice-run)", r);
		goto out;
	}
	if ((r = sluice_mem_alloc(s.ctx, sizeof(float), (void **)&barrier)) != SLUICE_OK) {
		fail("sluice_mem_alloc", r);
		goto out;
	}
	for (int i = 0; i < ncalls; i++) {
		if ((r = sluice_mem_alloc(s.ctx, calls[i].bytes, &calls[i].buf)) != SLUICE_OK) {
			fail("sluice_mem_alloc", r);
			goto out;
		}
		memset(calls[i].buf, 0, calls[i].bytes);
		if (!(calls[i].us = malloc(rounds * sizeof(double)))) {
			fprintf(stderr, "sluice-alternate: no memory for %u call times (lower -n)\n", rounds);
			goto out;
		}
	}
	struct call bar = { .coll = PERF_ALLREDUCE, .bytes = sizeof(float), .buf = barrier };
	if (rounds_of(&s, calls, ncalls, warmup, overlap, false) < 0 ||
	    (sync && rounds_of(&s, &bar, 1, 1, false, false) < 0))
		goto out;
	long faults = minor_faults();
	if (rounds_of(&s, calls, ncalls, rounds, overlap, true) < 0)
		goto out;
	faults = minor_faults() - faults;
	if (report(&s, calls, ncalls, rounds, barrier) < 0)
		goto out;
	if (s.rank == 0)
		printf("# %d ranks, %u rounds after %u%s%s; rank 0's process faulted %.2f pages a round\n", s.nranks,
		       rounds, warmup, sync ? ", synced" : "", overlap ? ", calls overlapping" : "", (double)faults / rounds);
	rc = 0;
out:
	for (int i = 0; i < ncalls; i++) {
		if (calls[i].buf)
			sluice_mem_free(s.ctx, calls[i].buf);
		free(calls[i].us);
	}
	free(calls);
	if (barrier)
		sluice_mem_free(s.ctx, barrier);
	if (s.comm)
		sluice_comm_destroy(s.comm);
	if (s.ctx)
		sluice_finalize(s.ctx);
	return rc;
}
