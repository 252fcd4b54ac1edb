/*
 * plan.c: the planner.  For each call it picks the algorithm and the
 * pipeline chunk from an alpha-beta-gamma cost model: alpha is one
 * message's latency, beta the time per byte on a link, gamma the time per
 * byte reduced on a core.  Every algorithm has a cost formula, infinite
 * where it cannot run the call (coll/schedule.c's sl_algo_supported and
 * sl_sched_plan_check say the same); the cheapest wins.  Every rank
 * computes the same choice from the same inputs (collective, size, rank
 * count, configuration, and the link figures the communicator's ranks
 * agreed on, link_probe.c); a rank configured differently is caught by the
 * dataplane as a mismatch, since packets carry their algorithm.
 *
 * Configuration (read once per process, checked with a clear error):
 *   SLUICE_ALGO=A[,B...]        the first listed algorithm that runs the call
 *                               (ring, direct, rd, rhd, tree, pairwise)
 *   SLUICE_CHUNK_SIZE=SIZE      force the pipeline chunk (e.g. 64K)
 *   SLUICE_LINK_LATENCY_US=X    alpha, in microseconds   } either one given
 *   SLUICE_LINK_GBPS=X          1/beta, in GB/s per link } skips the probe
 *   SLUICE_LINK_PROBE=0|1       measure the links at communicator creation
 *   SLUICE_CHANNELS=K           split a call over at most K channels
 *
 * Channels: a dataplane started with --channels K runs K engines, each on
 * its own core and links.  A call splits into slices, one per channel,
 * when each slice still holds CHANNEL_MIN_BYTES of a block (of the vector,
 * for all-reduce, broadcast, reduce, send and recv; of each rank's block
 * for all-gather, reduce-scatter, all-to-all, gather and scatter, whose
 * slices are strided: the same elements of every block).  K cores then
 * move K times the bytes, and the algorithm is chosen for the slice.  The communicator's channel count is
 * the fewest any of its ranks' dataplanes has (comm.c), so every rank
 * slices alike.
 *
 * SLUICE_DEBUG=INFO SLUICE_DEBUG_SUBSYS=TUNING logs each choice with the
 * predicted cost of every candidate.  Chunks are priced as the dataplane
 * runs them (sl_chunk_used: whole packets of its payload, from HELLO), so
 * the cost is the shown chunk's.  The payload is thus one of the choice's
 * inputs: sluice-run gives every dataplane the same, and ranks whose
 * dataplanes differ in it may choose differently, which the dataplane
 * reports as a mismatch like any other configuration difference.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sluice/errmsg.h>

#include "internal.h"

/* Measured on the 2-core development machines (memif between dataplanes). */
#define DEFAULT_LATENCY_US 15.0
#define DEFAULT_LINK_GBPS 2.0
#define REDUCE_GBPS 5.7          /* one core, fp32 sum (DESIGN.md) */
#define COPY_GBPS 10.0           /* one core, memcpy: direct reductions hold early packets */
#define CHUNK_MIN 4096.0
#define CHUNK_MAX (256.0 * 1024)
#define CHUNK_LIMIT (16u << 20)  /* SLUICE_CHUNK_SIZE's ceiling */
#define CHUNK_OVERHEAD 0.05      /* a chunk's (or transfer's) cost beyond its bytes, in alphas */
/* A slice smaller than this is not worth a channel: its submission,
 * completion and schedule cost a few microseconds on top of its bytes. */
#define CHANNEL_MIN_BYTES (64.0 * 1024)
#define SLICE_ALIGN 4096         /* slices start on this many bytes: whole packets, aligned copies */
/* GPU buffers pipeline in chunks of this size whatever the algorithm: each
 * chunk is staged device-to-host, sent, then reduced by the GPU's kernel,
 * and these stages overlap only across chunks, while each chunk costs a
 * round of staging and kernel posts that the host model's 4-16 KiB chunks
 * do not pay for.  On nvidia-h200-x2 (2 ranks, 8 channels) the model's
 * choice (rhd, 4-16 KiB chunks) gave 3.4-4.3 GB/s from 1 to 16 MiB, 128 KiB
 * chunks 5.4-8.4, 16 and 32 KiB ones less, 512 KiB (the dataplane's
 * default) 3.8-6.0. */
#define GPU_CHUNK (128u << 10)

static struct {
	pthread_once_t once;
	sluice_result_t status; /* SLUICE_OK, or the configuration error */
	char why[256];
	uint32_t algos[SL_ALGO_ID_COUNT]; /* SLUICE_ALGO, in order of preference */
	unsigned nalgos;        /* 0: the cost model decides */
	uint32_t chunk;         /* forced, or 0 */
	double latency_us, gbps; /* given, or 0 */
	bool probe;             /* SLUICE_LINK_PROBE */
	unsigned channels;      /* SLUICE_CHANNELS, or 0: as many as the communicator has */
	double gamma, delta;    /* us per byte reduced, us per byte copied aside */
} cfg = { .once = PTHREAD_ONCE_INIT };

/* The model's inputs for one call. */
struct model {
	double alpha, beta, gamma, delta;
	double n, p, log2p;     /* ranks; the largest power of two up to n, and its log */
	uint32_t payload;       /* the dataplane's bytes per packet: chunks run as sl_chunk_used's */
	uint32_t forced;        /* the chunk every pipelined algorithm is asked for, or 0: the model's */
};

static const char *const algo_names[SL_ALGO_ID_COUNT] = {
	[SL_ALGO_ID_RING] = "ring", [SL_ALGO_ID_DIRECT] = "direct", [SL_ALGO_ID_RD] = "rd",
	[SL_ALGO_ID_RHD] = "rhd", [SL_ALGO_ID_TREE] = "tree", [SL_ALGO_ID_PAIRWISE] = "pairwise",
};

static bool bad(const char *fmt, const char *name, const char *value)
{
	cfg.status = SLUICE_ERR_INVALID_ARGUMENT;
	sl_errmsg_format(cfg.why, sizeof(cfg.why), fmt, name, value);
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

static uint32_t algo_by_name(const char *s, size_t len)
{
	for (uint32_t a = 1; a < SL_ALGO_ID_COUNT; a++)
		if (strlen(algo_names[a]) == len && !strncasecmp(s, algo_names[a], len))
			return a;
	return 0;
}

/* "rd,tree,direct": a list of names, each at most once. */
static bool parse_algo(void)
{
	const char *s = getenv("SLUICE_ALGO");

	if (!s || !*s)
		return true;
	for (const char *p = s;; p++) {
		size_t len = strcspn(p, ",");
		uint32_t a = algo_by_name(p, len);
		for (unsigned i = 0; a && i < cfg.nalgos; i++)
			a = cfg.algos[i] == a ? 0 : a;
		if (!a)
			return bad("%s=\"%s\" is not valid: expected a comma-separated list of distinct "
				   "algorithms from ring, direct, rd, rhd, tree, pairwise (or unset, for the "
				   "cost model)", "SLUICE_ALGO", s);
		cfg.algos[cfg.nalgos++] = a;
		p += len;
		if (!*p)
			return true;
	}
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

static bool parse_probe(void)
{
	const char *s = getenv("SLUICE_LINK_PROBE");

	cfg.probe = !s || !*s || !strcmp(s, "1");
	if (s && *s && strcmp(s, "0") && strcmp(s, "1"))
		return bad("%s=\"%s\" is not valid: expected 0 (use SLUICE_LINK_LATENCY_US, SLUICE_LINK_GBPS or "
			   "the defaults) or 1 (measure the links when a communicator is created)",
			   "SLUICE_LINK_PROBE", s);
	return true;
}

static bool parse_channels(void)
{
	const char *s = getenv("SLUICE_CHANNELS");
	char *end;
	unsigned long v;

	if (!s || !*s)
		return true;
	errno = 0;
	v = strtoul(s, &end, 10);
	_Static_assert(SL_MAX_CHANNELS == 8, "the message below names SL_MAX_CHANNELS");
	if (end == s || *end || errno || *s == '-' || v == 0 || v > SL_MAX_CHANNELS)
		return bad("%s=\"%s\" is not valid: expected the most channels a call may be split over, from 1 "
			   "(no splitting) to 8", "SLUICE_CHANNELS", s);
	cfg.channels = (unsigned)v;
	return true;
}

static void load(void)
{
	cfg.status = SLUICE_OK;
	if (parse_algo() && parse_chunk() && parse_probe() && parse_channels() &&
	    parse_positive("SLUICE_LINK_LATENCY_US", &cfg.latency_us))
		parse_positive("SLUICE_LINK_GBPS", &cfg.gbps);
	cfg.gamma = 1e-3 / REDUCE_GBPS;
	cfg.delta = 1e-3 / COPY_GBPS;
}

sluice_result_t sl_plan_config(const char *fn)
{
	pthread_once(&cfg.once, load);
	return cfg.status == SLUICE_OK ? SLUICE_OK : sl_fail(cfg.status, "%s: %s", fn, cfg.why);
}

bool sl_plan_wants_probe(void)
{
	pthread_once(&cfg.once, load);
	return cfg.status == SLUICE_OK && cfg.probe && !(cfg.latency_us > 0 && cfg.gbps > 0);
}

static bool is_chain(uint32_t op)
{
	return op == SL_OP_BROADCAST || op == SL_OP_REDUCE;
}

static bool reduces(uint32_t op)
{
	return op == SL_OP_ALLREDUCE || op == SL_OP_REDUCE_SCATTER || op == SL_OP_REDUCE;
}

/* ---- cost formulas: predicted microseconds for op over m->n ranks, b bytes per block ---- */

/* One step; each rank's link carries n-1 blocks.  A reduction takes
 * contributions in rank order: on average half of those not next in line
 * arrive early and are copied aside until their turn. */
static double direct_cost(const struct model *m, uint32_t op, double b, double *chunk)
{
	double k = m->n - 1;

	*chunk = 0;
	if (op == SL_OP_BARRIER)
		return m->alpha;
	if (op == SL_OP_SEND || op == SL_OP_RECV)
		return m->alpha + b * m->beta;
	return m->alpha + k * b * m->beta + (reduces(op) ? k * b * m->gamma + (k - 1) / 2 * b * m->delta : 0);
}

/* Ring (or chain) with chunk c: every step costs a latency; each link
 * carries its bytes once, plus the pipeline's fill (a chunk crossing
 * steps - 1 links before the last step starts) and a small cost per chunk. */
static double ring_at(const struct model *m, uint32_t op, double b, double c)
{
	double n = m->n, k = n - 1, steps = op == SL_OP_ALLREDUCE ? 2 * k : k;
	double link = is_chain(op) ? b : op == SL_OP_ALLREDUCE ? 2 * k / n * b : k * b;
	double reduced = op == SL_OP_ALLREDUCE ? k / n * b : op == SL_OP_REDUCE_SCATTER ? k * b : b;
	double chunks = link > c ? link / c : 1;

	return steps * m->alpha + link * m->beta + (steps - 1) * c * m->beta + chunks * m->alpha * CHUNK_OVERHEAD +
	       (reduces(op) ? reduced * m->gamma : 0);
}

/* Binomial tree with chunk c: depth floor(log2 n) hops, the root's link
 * carries the message once per child (ceil(log2 n) of them), and reduce's
 * root adds that many contributions. */
static double tree_at(const struct model *m, uint32_t op, double b, double c)
{
	double depth = m->log2p, fanout = m->log2p + (m->n != m->p), chunks = b > c ? b / c : 1;

	return depth * m->alpha + fanout * b * m->beta + (depth - 1) * c * m->beta +
	       fanout * chunks * m->alpha * CHUNK_OVERHEAD + (op == SL_OP_REDUCE ? fanout * b * m->gamma : 0);
}

/* The chunk the pipelined formula at() predicts fastest, and its cost.
 * Each chunk asked for (a power of two) is priced as the dataplane runs it,
 * in whole packets of its payload, at most 64: on a 16 KiB payload a 4 KiB
 * chunk runs (and costs) 16 KiB. */
static double pipelined(const struct model *m, uint32_t op, double b, double *chunk,
			double (*at)(const struct model *, uint32_t, double, double))
{
	double best = INFINITY;

	if (m->forced) {
		*chunk = (double)sl_chunk_used(m->forced, m->payload);
		return at(m, op, b, *chunk);
	}
	for (double c = CHUNK_MIN; c <= CHUNK_MAX; c *= 2) {
		double used = (double)sl_chunk_used((uint32_t)c, m->payload);
		double t = at(m, op, b, used);
		if (t < best) {
			best = t;
			*chunk = used;
		}
	}
	return best;
}

static double ring_cost(const struct model *m, uint32_t op, double b, double *chunk)
{
	bool runs = op == SL_OP_ALLREDUCE || op == SL_OP_ALLGATHER || op == SL_OP_REDUCE_SCATTER || is_chain(op);

	return runs ? pipelined(m, op, b, chunk, ring_at) : INFINITY;
}

static double tree_cost(const struct model *m, uint32_t op, double b, double *chunk)
{
	return is_chain(op) ? pipelined(m, op, b, chunk, tree_at) : INFINITY;
}

/* The fold and unfold of a rank count that is not a power of two: two more
 * hops of the whole vector, and one more reduction of it. */
static double fold_cost(const struct model *m, double b)
{
	return m->n == m->p ? 0 : 2 * (m->alpha + b * m->beta) + b * m->gamma;
}

/* log2(p) steps of the whole vector. */
static double rd_cost(const struct model *m, uint32_t op, double b, double *chunk)
{
	*chunk = 0;
	if (op != SL_OP_ALLREDUCE)
		return INFINITY;
	return m->log2p * (m->alpha + b * m->beta + b * m->gamma) + fold_cost(m, b);
}

/* Halving then doubling over p segments with chunk c: the ring's bytes in
 * 2 log2(p) steps, pipelined chunk by chunk as the ring is, with a
 * transfer per segment; reduce-scatter and all-gather are one half each
 * (p = n, the vector is n blocks). */
static double rhd_at(const struct model *m, uint32_t op, double b, double c)
{
	double p = m->p, whole = op == SL_OP_ALLREDUCE ? b : p * b, part = (p - 1) / p * whole;
	double steps = op == SL_OP_ALLREDUCE ? 2 * m->log2p : m->log2p, halves = op == SL_OP_ALLREDUCE ? 2 : 1;
	double chunks = part / c + halves * (p - 1);

	return steps * m->alpha + halves * part * m->beta + (steps - 1) * c * m->beta +
	       chunks * m->alpha * CHUNK_OVERHEAD + (op == SL_OP_ALLGATHER ? 0 : part * m->gamma) +
	       (op == SL_OP_ALLREDUCE ? fold_cost(m, b) : 0);
}

/* All-reduce on any rank count; reduce-scatter and all-gather on powers of two. */
static double rhd_cost(const struct model *m, uint32_t op, double b, double *chunk)
{
	bool runs = op == SL_OP_ALLREDUCE || ((op == SL_OP_REDUCE_SCATTER || op == SL_OP_ALLGATHER) && m->n == m->p);

	return runs ? pipelined(m, op, b, chunk, rhd_at) : INFINITY;
}

/* n-1 paced steps of one block each. */
static double pairwise_cost(const struct model *m, uint32_t op, double b, double *chunk)
{
	*chunk = 0;
	return op == SL_OP_ALLTOALL ? (m->n - 1) * (m->alpha + b * m->beta) : INFINITY;
}

static double (*const costs[SL_ALGO_ID_COUNT])(const struct model *, uint32_t, double, double *) = {
	[SL_ALGO_ID_RING] = ring_cost, [SL_ALGO_ID_DIRECT] = direct_cost, [SL_ALGO_ID_RD] = rd_cost,
	[SL_ALGO_ID_RHD] = rhd_cost, [SL_ALGO_ID_TREE] = tree_cost, [SL_ALGO_ID_PAIRWISE] = pairwise_cost,
};

/* ---- choosing ---- */

static void model_for(const struct sluice_comm *comm, const struct sl_call *call, struct model *m)
{
	double lat = cfg.latency_us > 0 ? cfg.latency_us : comm->link_latency_us > 0 ? comm->link_latency_us
									     : DEFAULT_LATENCY_US;
	double gbps = cfg.gbps > 0 ? cfg.gbps : comm->link_gbps > 0 ? comm->link_gbps : DEFAULT_LINK_GBPS;

	*m = (struct model){ .alpha = lat, .beta = 1e-3 / gbps, /* GB/s is bytes per ns */
			     .gamma = cfg.gamma, .delta = cfg.delta, .n = comm->nranks, .p = 1,
			     .payload = comm->ctx->payload,
			     .forced = cfg.chunk ? cfg.chunk : call->device ? GPU_CHUNK : 0 };
	while (m->p * 2 <= m->n) {
		m->p *= 2;
		m->log2p++;
	}
}

/* "ring 12.3, direct 4.5, rd 5.6" for the algorithms that run the call. */
static void log_choice(const struct sluice_comm *comm, const struct sl_call *call, double b,
		       const double cost[], const struct sl_plan *out, bool forced)
{
	char parts_s[96] = "";

	char costs_s[256] = "", chunk_s[96];
	size_t len = 0;
	/* what the dataplane runs: whole packets of its own, at most 64 */
	uint64_t used = sl_chunk_used(out->chunk_bytes, comm->ctx->payload);
	const char *whose = !out->chunk_bytes ? "the dataplane's default" : cfg.chunk ? "SLUICE_CHUNK_SIZE" : "";

	for (uint32_t a = 1; a < SL_ALGO_ID_COUNT && len < sizeof(costs_s); a++)
		if (isfinite(cost[a]))
			len += (size_t)snprintf(costs_s + len, sizeof(costs_s) - len, "%s%s %.1f", len ? ", " : "",
						algo_names[a], cost[a]);
	if (out->chunk_bytes && out->chunk_bytes != used)
		snprintf(chunk_s, sizeof(chunk_s), "%" PRIu64 " bytes (asked %u%s%s)", used, out->chunk_bytes,
			 *whose ? ", " : "", whose);
	else
		snprintf(chunk_s, sizeof(chunk_s), "%" PRIu64 " bytes%s%s%s", used, *whose ? " (" : "", whose,
			 *whose ? ")" : "");
	if (out->parts > 1)
		snprintf(parts_s, sizeof(parts_s), " in %u slices of %.0f bytes, one per channel,", out->parts, b);
	b *= out->parts;
	sl_log(SL_LOG_INFO, SL_SUB_TUNING, "%s of %.0f bytes per block on %d ranks:%s %s%s, chunk %s (predicted "
	       "us per slice: %s)", call->fn, b, comm->nranks, parts_s, algo_names[out->algo],
	       forced ? " (SLUICE_ALGO)" : "", chunk_s, costs_s);
}

/* The error for SLUICE_ALGO listing no algorithm that runs the call. */
static sluice_result_t none_listed(const struct sluice_comm *comm, const struct sl_call *call, const double cost[])
{
	char runs[128] = "";
	size_t len = 0;

	for (uint32_t a = 1; a < SL_ALGO_ID_COUNT; a++)
		if (isfinite(cost[a]))
			len += (size_t)snprintf(runs + len, sizeof(runs) - len, "%s%s", len ? ", " : "", algo_names[a]);
	return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: SLUICE_ALGO=\"%s\" lists no algorithm that runs this "
		       "collective on %d ranks: it runs with %s; add one of them to the list (for example "
		       "\"%s,direct\")", call->fn, getenv("SLUICE_ALGO"), comm->nranks, runs, getenv("SLUICE_ALGO"));
}

/* Channels the call is split over: 1 unless it slices and each slice is worth a core. */
static unsigned parts_for(const struct sluice_comm *comm, const struct sl_call *call, double b)
{
	unsigned most = comm->channels, parts;

	if (cfg.channels && cfg.channels < most)
		most = cfg.channels;
	if (call->opcode == SL_OP_ALLTOALLV)
		return 1; /* its blocks lie where the caller's displacements say */
	for (parts = most; parts > 1 && b / parts < CHANNEL_MIN_BYTES; parts--)
		;
	return parts ? parts : 1;
}

void sl_plan_slice(const struct sl_call *call, unsigned parts, unsigned p, uint64_t *first, uint64_t *count)
{
	uint64_t unit = SLICE_ALIGN / sluice_datatype_size(call->dtype);
	uint64_t per = (call->count / parts + unit - 1) / unit * unit;

	*first = p * per < call->count ? p * per : call->count;
	*count = p + 1 == parts ? call->count - *first : (call->count - *first < per ? call->count - *first : per);
}

/* Everything a choice depends on besides the configuration, which is read
 * once: equal shapes get equal plans, whatever communicator asks. */
struct shape {
	uint32_t opcode;
	bool device;
	int nranks;
	unsigned channels;
	uint32_t payload;
	double bytes, latency_us, gbps;
};

static bool same_shape(const struct shape *a, const struct shape *b)
{
	return a->opcode == b->opcode && a->device == b->device && a->nranks == b->nranks &&
	       a->channels == b->channels && a->payload == b->payload && a->bytes == b->bytes &&
	       a->latency_us == b->latency_us && a->gbps == b->gbps;
}

/* This thread's last few choices: a run of small calls repeats one shape,
 * or a few in turn (a grouped send and recv, gradient buckets), and the
 * model's costs were 2.5-3% of such a call's time. */
#define PLANS_KEPT 4
static __thread struct {
	unsigned n, next; /* entries filled; the one replaced next */
	struct {
		struct shape shape;
		struct sl_plan plan;
	} e[PLANS_KEPT];
} last;

sluice_result_t sl_plan_pick(const struct sluice_comm *comm, const struct sl_call *call, struct sl_plan *out)
{
	double b = (double)call->count * (double)sluice_datatype_size(call->dtype);
	double cost[SL_ALGO_ID_COUNT], chunk[SL_ALGO_ID_COUNT] = { 0 };
	struct model m;
	sluice_result_t res;
	struct shape shape = { .opcode = call->opcode, .device = call->device, .nranks = comm->nranks,
			       .channels = comm->channels, .payload = comm->ctx->payload, .bytes = b,
			       .latency_us = comm->link_latency_us, .gbps = comm->link_gbps };
	bool logged = sl_log_on(SL_LOG_INFO, SL_SUB_TUNING); /* every choice is logged: none is cached */

	if ((res = sl_plan_config(call->fn)) != SLUICE_OK)
		return res;
	/* sluice's own calls (link_probe.c) name theirs; one rank copies locally, whatever the algorithm */
	if (call->algo || comm->nranks == 1) {
		*out = (struct sl_plan){ .algo = call->algo ? call->algo : SL_ALGO_ID_DIRECT, .parts = 1 };
		return SLUICE_OK;
	}
	for (unsigned i = 0; !logged && i < last.n; i++)
		if (same_shape(&shape, &last.e[i].shape)) {
			*out = last.e[i].plan;
			return SLUICE_OK;
		}
	out->parts = parts_for(comm, call, b);
	b /= out->parts; /* each channel runs one slice */
	model_for(comm, call, &m);
	cost[0] = INFINITY;
	for (uint32_t a = 1; a < SL_ALGO_ID_COUNT; a++)
		cost[a] = costs[a](&m, call->opcode, b, &chunk[a]);
	out->algo = 0;
	for (unsigned i = 0; i < cfg.nalgos && !out->algo; i++)
		if (isfinite(cost[cfg.algos[i]]))
			out->algo = cfg.algos[i];
	if (cfg.nalgos && !out->algo)
		return none_listed(comm, call, cost);
	for (uint32_t a = 1; !cfg.nalgos && a < SL_ALGO_ID_COUNT; a++)
		if (!out->algo || cost[a] < cost[out->algo])
			out->algo = a;
	/* what was asked for: the log shows what it runs as */
	out->chunk_bytes = m.forced ? m.forced : (uint32_t)chunk[out->algo];
	out->cost_us = cost[out->algo];
	if (logged)
		log_choice(comm, call, b, cost, out, cfg.nalgos > 0);
	last.e[last.next].shape = shape;
	last.e[last.next].plan = *out;
	last.next = (last.next + 1) % PLANS_KEPT;
	last.n += last.n < PLANS_KEPT;
	return SLUICE_OK;
}
