/*
 * plan.c: the planner.  For each call it picks the algorithm (ring or
 * direct) and the pipeline chunk from an alpha-beta-gamma cost model: alpha
 * is one message's latency, beta the time per byte on a link, gamma the
 * time per byte reduced on a core.  Every rank computes the same choice
 * from the same inputs (collective, size, rank count, configuration); a
 * rank configured differently is caught by the dataplane as a mismatch,
 * since packets carry their algorithm.
 *
 * Configuration (read once per process, checked with a clear error):
 *   SLUICE_ALGO=ring|direct     force an algorithm where it applies
 *   SLUICE_CHUNK_SIZE=SIZE      force the pipeline chunk (e.g. 64K)
 *   SLUICE_LINK_LATENCY_US=X    alpha, in microseconds
 *   SLUICE_LINK_GBPS=X          1/beta, in GB/s per link
 * SLUICE_DEBUG=INFO SLUICE_DEBUG_SUBSYS=TUNING logs each choice with the
 * predicted cost of every candidate.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* Measured on the 2-core development machines (memif between dataplanes). */
#define DEFAULT_LATENCY_US 15.0
#define DEFAULT_LINK_GBPS 2.0
#define REDUCE_GBPS 5.7          /* one core, fp32 sum (DESIGN.md) */
#define COPY_GBPS 10.0           /* one core, memcpy: direct reductions hold early packets */
#define CHUNK_MIN 4096.0
#define CHUNK_MAX (256.0 * 1024)
#define CHUNK_LIMIT (16u << 20)  /* SLUICE_CHUNK_SIZE's ceiling */
#define CHUNK_OVERHEAD 0.05      /* a chunk's cost beyond its bytes, in alphas (pipelined) */

static struct {
	pthread_once_t once;
	sluice_result_t status; /* SLUICE_OK, or the configuration error */
	char why[256];
	uint32_t algo;          /* forced, or 0 */
	uint32_t chunk;         /* forced, or 0 */
	double alpha, beta, gamma; /* us, us per byte, us per byte */
	double delta;           /* us per byte copied aside */
} cfg = { .once = PTHREAD_ONCE_INIT };

static bool bad(const char *fmt, const char *name, const char *value)
{
	cfg.status = SLUICE_ERR_INVALID_ARGUMENT;
	snprintf(cfg.why, sizeof(cfg.why), fmt, name, value);
	return false;
}

static bool parse_positive(const char *name, double *out)
{
	const char *s = getenv(name);
	char *end;

	if (!s)
		return true;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !(v > 0) || !isfinite(v))
		return bad("%s=\"%s\" is not valid: expected a positive number", name, s);
	*out = v;
	return true;
}

static bool parse_algo(void)
{
	const char *s = getenv("SLUICE_ALGO");

	if (!s || !*s)
		return true;
	if (!strcasecmp(s, "ring"))
		cfg.algo = SL_ALGO_ID_RING;
	else if (!strcasecmp(s, "direct"))
		cfg.algo = SL_ALGO_ID_DIRECT;
	else
		return bad("%s=\"%s\" is not valid: expected ring or direct (or unset, for the cost model)",
			   "SLUICE_ALGO", s);
	return true;
}

/* "64K" -> 65536, powers of 1024. */
static bool parse_chunk(void)
{
	const char *s = getenv("SLUICE_CHUNK_SIZE");
	char *end;

	if (!s || !*s)
		return true;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : 0;
	end += shift != 0;
	if (end == s || *end || errno || *s == '-' || v == 0 || v > (CHUNK_LIMIT >> shift))
		return bad("%s=\"%s\" is not valid: expected bytes from 1 to 16M (K and M allowed); the "
			   "dataplane rounds it to whole packets, at most 64", "SLUICE_CHUNK_SIZE", s);
	cfg.chunk = (uint32_t)(v << shift);
	return true;
}

static void load(void)
{
	double lat = DEFAULT_LATENCY_US, gbps = DEFAULT_LINK_GBPS;

	cfg.status = SLUICE_OK;
	if (parse_algo() && parse_chunk() && parse_positive("SLUICE_LINK_LATENCY_US", &lat))
		parse_positive("SLUICE_LINK_GBPS", &gbps);
	cfg.alpha = lat;
	cfg.beta = 1e-3 / gbps; /* GB/s = bytes per ns: us per byte is 1e-3 / that */
	cfg.gamma = 1e-3 / REDUCE_GBPS;
	cfg.delta = 1e-3 / COPY_GBPS;
}

static bool is_chain(uint32_t op)
{
	return op == SL_OP_BROADCAST || op == SL_OP_REDUCE;
}

static bool reduces(uint32_t op)
{
	return op == SL_OP_ALLREDUCE || op == SL_OP_REDUCE_SCATTER || op == SL_OP_REDUCE;
}

/* Predicted microseconds for op done directly over n ranks, b bytes per block. */
static double direct_cost(uint32_t op, double n, double b)
{
	double k = n - 1;

	if (op == SL_OP_BARRIER)
		return cfg.alpha;
	if (op == SL_OP_SEND || op == SL_OP_RECV)
		return cfg.alpha + b * cfg.beta;
	/* One step; each rank's link carries n-1 blocks.  A reduction takes
	 * contributions in rank order: on average half of those not next in
	 * line arrive early and are copied aside until their turn. */
	return cfg.alpha + k * b * cfg.beta + (reduces(op) ? k * b * cfg.gamma + (k - 1) / 2 * b * cfg.delta : 0);
}

/* Predicted microseconds for op by ring (or chain) with chunk c.  Every
 * step costs a latency; each link carries its bytes once, plus the
 * pipeline's fill (a chunk crossing steps - 1 links before the last step
 * starts) and a small cost per chunk. */
static double ring_cost(uint32_t op, double n, double b, double c)
{
	double k = n - 1, steps = op == SL_OP_ALLREDUCE ? 2 * k : k;
	double link = is_chain(op) ? b : op == SL_OP_ALLREDUCE ? 2 * k / n * b : k * b;
	double reduced = op == SL_OP_ALLREDUCE ? k / n * b : op == SL_OP_REDUCE_SCATTER ? k * b : b;
	double chunks = link > c ? link / c : 1;

	return steps * cfg.alpha + link * cfg.beta + (steps - 1) * c * cfg.beta + chunks * cfg.alpha * CHUNK_OVERHEAD +
	       (reduces(op) ? reduced * cfg.gamma : 0);
}

/* The ring's chunk: the power of two the model predicts fastest. */
static double ring_chunk(uint32_t op, double n, double b)
{
	double best = CHUNK_MIN, best_cost = INFINITY;

	for (double c = CHUNK_MIN; c <= CHUNK_MAX; c *= 2) {
		double t = ring_cost(op, n, b, c);
		if (t < best_cost) {
			best = c;
			best_cost = t;
		}
	}
	return best;
}

static const char *algo_name(uint32_t algo)
{
	return algo == SL_ALGO_ID_RING ? "ring" : "direct";
}

/* The ring exists for the collectives with a neighbour pipeline (coll/). */
static bool ring_applies(uint32_t op)
{
	return op == SL_OP_ALLREDUCE || op == SL_OP_ALLGATHER || op == SL_OP_REDUCE_SCATTER || is_chain(op);
}

sluice_result_t sl_plan_pick(const struct sluice_comm *comm, const struct sl_call *call, struct sl_plan *out)
{
	double n = comm->nranks, b = (double)call->count * (double)sluice_datatype_size(call->dtype);
	double chunk = 0, ring = INFINITY, direct;
	bool forced;

	pthread_once(&cfg.once, load);
	if (cfg.status != SLUICE_OK)
		return sl_fail(cfg.status, "%s: %s", call->fn, cfg.why);
	direct = direct_cost(call->opcode, n, b);
	if (ring_applies(call->opcode) && comm->nranks > 1) {
		chunk = ring_chunk(call->opcode, n, b);
		ring = ring_cost(call->opcode, n, b, chunk);
	}
	forced = cfg.algo && (cfg.algo == SL_ALGO_ID_DIRECT || ring_applies(call->opcode));
	out->algo = forced ? cfg.algo : ring < direct ? SL_ALGO_ID_RING : SL_ALGO_ID_DIRECT;
	/* direct sends whole blocks: its chunk only sizes the arrival masks, the dataplane's default */
	out->chunk_bytes = cfg.chunk ? cfg.chunk : out->algo == SL_ALGO_ID_RING ? (uint32_t)chunk : 0;
	if (sl_log_on(SL_LOG_INFO, SL_SUB_TUNING)) {
		char chunk_s[48] = "the dataplane's default";
		if (out->chunk_bytes)
			snprintf(chunk_s, sizeof(chunk_s), "%u bytes%s", out->chunk_bytes,
				 cfg.chunk ? " (SLUICE_CHUNK_SIZE)" : "");
		sl_log(SL_LOG_INFO, SL_SUB_TUNING, "%s of %.0f bytes per block on %d ranks: %s%s, chunk %s "
		       "(predicted us: ring %.1f, direct %.1f)", call->fn, b, comm->nranks, algo_name(out->algo),
		       forced ? " (SLUICE_ALGO)" : "", chunk_s, ring, direct);
	}
	return SLUICE_OK;
}
