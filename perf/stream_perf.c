/*
 * stream_perf.c: sluice-stream, one job's all-reduce throughput over a
 * wall-clock window that other jobs on the same machine can be given too,
 * so that their rates are measured over the same interval (perf/fairness.sh
 * runs two jobs through one bottleneck and compares them).  sluice-perf
 * times a fixed number of calls instead: a job that finishes first leaves
 * the link to the other, which then looks faster than it was.
 *
 * Every rank calls all-reduce back to back.  The last element carries the
 * stop: rank 0 adds 1 once its clock passes the window's end, so every rank
 * sees the same sum and leaves after the same call, with no extra message.
 * The rate is taken between the first and the last call that ended inside
 * the window, on rank 0's clock (CLOCK_REALTIME, one clock for every job on
 * a machine).
 * usage: sluice-stream -s SIZE -F FROM -T TO   (FROM, TO: seconds since the epoch)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int fail(const char *what, sluice_result_t r)
{
	fprintf(stderr, "sluice-stream: %s: %s: %s\n", what, sluice_get_error_string(r), sluice_last_error());
	return 1;
}

/* One all-reduce of count floats; 0 or the failed call's result. */
static sluice_result_t allreduce(sluice_comm_t *comm, const float *send, float *recv, size_t count)
{
	sluice_req_t *req;
	sluice_result_t r = sluice_allreduce(comm, send, recv, count, SLUICE_FLOAT32, SLUICE_SUM, &req);

	return r != SLUICE_OK ? r : sluice_wait(req);
}

static int stream(sluice_comm_t *comm, int rank, int nranks, float *send, float *recv, size_t count,
		  double from, double to)
{
	double first = 0, last = 0;
	unsigned long calls = 0; /* ended after first, up to last */
	sluice_result_t r;

	for (;;) {
		send[count - 1] = rank == 0 && now_s() >= to ? 1.0f : 0.0f;
		if ((r = allreduce(comm, send, recv, count)) != SLUICE_OK)
			return fail("sluice_allreduce", r);
		double t = now_s();
		if (recv[count - 1] > 0)
			break;
		if (t < from || t > to)
			continue;
		if (first == 0)
			first = t;
		else
			calls++, last = t;
	}
	if (rank != 0)
		return 0;
	if (calls == 0) {
		fprintf(stderr, "sluice-stream: no call ended inside the window: widen it\n");
		return 1;
	}
	double bytes = (double)(count * sizeof(float)), secs = last - first;
	double busbw = bytes * calls / secs * 2 * (nranks - 1) / nranks;
	printf("# sluice-stream: all_reduce %.0f B, %d ranks, %lu calls in %.3f s of the window\n", bytes, nranks,
	       calls, secs);
	printf("busbw_mbit %.1f\n", busbw * 8 / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	size_t bytes = 1 << 20;
	double from = 0, to = 0;
	int opt, rank, nranks, rc = 1;

	while ((opt = getopt(argc, argv, "s:F:T:")) != -1) {
		switch (opt) {
		case 's': bytes = strtoul(optarg, NULL, 0); break;
		case 'F': from = atof(optarg); break;
		case 'T': to = atof(optarg); break;
		default: goto usage;
		}
	}
	if (bytes < 2 * sizeof(float) || from <= 0 || to <= from)
		goto usage;

	sluice_ctx_t *ctx;
	sluice_comm_t *comm = NULL;
	sluice_result_t r;
	void *send = NULL, *recv = NULL; /* zeroed: the dataplane maps them fresh */
	if ((r = sluice_init(&ctx)) != SLUICE_OK)
		return fail("sluice_init", r);
	if ((r = sluice_comm_init_env(ctx, &comm)) != SLUICE_OK) {
		rc = fail("sluice_comm_init_env", r);
		goto out;
	}
	sluice_comm_rank(comm, &rank);
	sluice_comm_size(comm, &nranks);
	if ((r = sluice_mem_alloc(ctx, bytes, &send)) != SLUICE_OK ||
	    (r = sluice_mem_alloc(ctx, bytes, &recv)) != SLUICE_OK) {
		rc = fail("sluice_mem_alloc", r);
		goto out;
	}
	rc = stream(comm, rank, nranks, send, recv, bytes / sizeof(float), from, to);
out:
	if (comm)
		sluice_comm_destroy(comm);
	if (send)
		sluice_mem_free(ctx, send);
	if (recv)
		sluice_mem_free(ctx, recv);
	sluice_finalize(ctx);
	return rc;
usage:
	fprintf(stderr, "usage: sluice-stream -s SIZE -F FROM -T TO   (FROM < TO: seconds since the epoch)\n");
	return 2;
}
