/*
 * link_probe.c: measuring a new communicator's links, so that the
 * planner's alpha and beta are this cluster's rather than defaults.
 *
 * Right after creation every rank runs the same direct collectives over
 * the real dataplane: four 8-byte all-reduces (the fastest of the last
 * three is one message's latency: the first pays for cold caches) and two
 * all-gathers of PROBE_BYTES per rank (the faster one, less the latency,
 * over the bytes each rank's link carried, is the time per byte).  The
 * ranks then take the maximum of both times with one more all-reduce, so
 * every rank plans with the slowest rank's figures, and all plan alike:
 * ranks that chose differently would call different algorithms.  A few
 * milliseconds on this machine's memif links; SLUICE_LINK_PROBE=0, or
 * both SLUICE_LINK_LATENCY_US and SLUICE_LINK_GBPS, skip it.
 */
#include <stdio.h>

#include <sluice/errmsg.h>

#include "internal.h"

#define SMALL_RUNS 4
#define BIG_RUNS 2
#define PROBE_BYTES (128u << 10) /* per rank: long enough to time bytes, not latency */
#define MIN_LATENCY_US 0.1       /* floors: a timer's rounding must not make them 0 */
#define MAX_GBPS 400.0

/* Microseconds one direct call takes, posted to completion. */
static sluice_result_t timed(struct sluice_comm *comm, struct sl_call c, double *us)
{
	int64_t t0 = sl_now_ns();
	sluice_req_t *req;
	sluice_result_t res;

	c.algo = SL_ALGO_ID_DIRECT;
	if ((res = sl_coll_call(comm, c, &req)) == SLUICE_OK)
		res = sluice_wait(req);
	*us = (double)(sl_now_ns() - t0) / 1e3;
	return res;
}

/* The fastest of runs - skip timed calls of c (the first skip are warm-up). */
static sluice_result_t fastest(struct sluice_comm *comm, struct sl_call c, int runs, int skip, double *best)
{
	sluice_result_t res = SLUICE_OK;
	double us;

	for (int i = 0; i < runs && res == SLUICE_OK; i++)
		if ((res = timed(comm, c, &us)) == SLUICE_OK && i >= skip && (i == skip || us < *best))
			*best = us;
	return res;
}

static sluice_result_t measure(struct sluice_comm *comm, uint8_t *buf, double t[2])
{
	struct sl_call small = { .fn = "sluice_comm_init (link probe)", .opcode = SL_OP_ALLREDUCE, .send = buf,
				 .recv = buf + 8, .count = 1, .dtype = SLUICE_FLOAT64, .op = SLUICE_MAX };
	struct sl_call big = { .fn = small.fn, .opcode = SL_OP_ALLGATHER, .send = buf,
			       .recv = buf + PROBE_BYTES, .count = PROBE_BYTES, .dtype = SLUICE_UINT8 };
	struct sl_call agree = small;
	sluice_result_t res;
	double ignored;

	if ((res = fastest(comm, small, SMALL_RUNS, 1, &t[0])) != SLUICE_OK ||
	    (res = fastest(comm, big, BIG_RUNS, 0, &t[1])) != SLUICE_OK)
		return res;
	agree.count = 2;
	agree.send = buf;
	agree.recv = buf + 16;
	((double *)buf)[0] = t[0];
	((double *)buf)[1] = t[1];
	if ((res = timed(comm, agree, &ignored)) != SLUICE_OK)
		return res;
	t[0] = ((double *)buf)[2];
	t[1] = ((double *)buf)[3];
	return SLUICE_OK;
}

sluice_result_t sl_link_probe(struct sluice_comm *comm)
{
	size_t bytes = PROBE_BYTES * ((size_t)comm->nranks + 1);
	int64_t t0 = sl_now_ns();
	uint8_t *buf;
	double t[2];
	sluice_result_t res;

	if ((res = sluice_mem_alloc(comm->ctx, bytes, (void **)&buf)) != SLUICE_OK)
		return res;
	res = measure(comm, buf, t);
	sluice_mem_free(comm->ctx, buf);
	if (res != SLUICE_OK) {
		char why[SL_LAST_ERROR_LEN];
		sl_errmsg_copy(why, sizeof(why), sluice_last_error());
		return sl_fail(res, "sluice_comm_init: measuring the links of communicator %u failed: %s "
			       "(SLUICE_LINK_PROBE=0 skips the measurement)", comm->handle, why);
	}
	double link_bytes = (double)PROBE_BYTES * (comm->nranks - 1), per_byte = (t[1] - t[0]) / link_bytes;
	comm->link_latency_us = t[0] > MIN_LATENCY_US ? t[0] : MIN_LATENCY_US;
	comm->link_gbps = per_byte > 1e-3 / MAX_GBPS ? 1e-3 / per_byte : MAX_GBPS;
	SL_INFO(SL_SUB_TUNING, "communicator %u: links measured: latency %.1f us, %.2f GB/s per link (slowest "
		"rank's 8-byte all-reduce %.1f us, %u-byte all-gather %.1f us; the probe took %.1f ms)",
		comm->handle, comm->link_latency_us, comm->link_gbps, t[0], PROBE_BYTES, t[1],
		(double)(sl_now_ns() - t0) / 1e6);
	return SLUICE_OK;
}
