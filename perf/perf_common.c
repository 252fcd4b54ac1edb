/*
 * perf_common.c: the body of sluice-perf and mpi-allreduce-perf.
 *
 * Flags, sizes, busbw factors and the table follow nccl-tests so that
 * results from sluice, Open MPI and NCCL line up column for column.  Inputs
 * are small integers chosen so that every collective's result is exact in
 * every datatype and every reduction order: a result either matches bit for
 * bit or is wrong.
 */
#include "perf_common.h"
#include "perf_tail.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- datatypes and ops ---- */

struct dtype_info {
	const char *name;  /* nccl-tests' spelling */
	const char *alias; /* another common one, or NULL */
	size_t size;
};

static const struct dtype_info dtypes[SLUICE_DATATYPE_COUNT] = {
	[SLUICE_INT8] = { "int8", "char", 1 },
	[SLUICE_UINT8] = { "uint8", NULL, 1 },
	[SLUICE_INT32] = { "int32", "int", 4 },
	[SLUICE_UINT32] = { "uint32", NULL, 4 },
	[SLUICE_INT64] = { "int64", NULL, 8 },
	[SLUICE_UINT64] = { "uint64", NULL, 8 },
	[SLUICE_FLOAT16] = { "half", "float16", 2 },
	[SLUICE_FLOAT32] = { "float", "float32", 4 },
	[SLUICE_FLOAT64] = { "double", "float64", 8 },
	[SLUICE_BFLOAT16] = { "bfloat16", "bf16", 2 },
	[SLUICE_FLOAT8_E4M3] = { "f8e4m3", "e4m3", 1 },
	[SLUICE_FLOAT8_E5M2] = { "f8e5m2", "e5m2", 1 },
};

static const char *const op_names[SLUICE_REDOP_COUNT] = {
	[SLUICE_SUM] = "sum", [SLUICE_PROD] = "prod", [SLUICE_MAX] = "max",
	[SLUICE_MIN] = "min", [SLUICE_AVG] = "avg",
};

/* nccl-tests' names (its binaries are all_reduce_perf and so on) and busbw factors. */
static const char *const coll_names[PERF_NCOLLS] = {
	[PERF_ALLREDUCE] = "all_reduce", [PERF_ALLGATHER] = "all_gather",
	[PERF_REDUCE_SCATTER] = "reduce_scatter", [PERF_BROADCAST] = "broadcast", [PERF_REDUCE] = "reduce",
	[PERF_ALLTOALL] = "alltoall", [PERF_GATHER] = "gather", [PERF_SCATTER] = "scatter",
	[PERF_SENDRECV] = "sendrecv", [PERF_ALLTOALLV] = "alltoallv", [PERF_BARRIER] = "barrier",
};

const char *perf_coll_name(enum perf_coll c)
{
	return coll_names[c];
}

int perf_parse_coll(const char *s)
{
	for (int c = 0; c < PERF_NCOLLS; c++)
		if (!strcmp(s, coll_names[c]))
			return c;
	return -1;
}

static bool coll_reduces(enum perf_coll c)
{
	return c == PERF_ALLREDUCE || c == PERF_REDUCE_SCATTER || c == PERF_REDUCE;
}

static bool coll_rooted(enum perf_coll c)
{
	return c == PERF_BROADCAST || c == PERF_REDUCE || c == PERF_GATHER || c == PERF_SCATTER;
}

/* The whole buffer is split in blocks of one per rank (nccl-tests' sizes). */
static bool coll_blocked(enum perf_coll c)
{
	return c == PERF_ALLGATHER || c == PERF_REDUCE_SCATTER || c == PERF_ALLTOALL || c == PERF_ALLTOALLV ||
	       c == PERF_GATHER || c == PERF_SCATTER;
}

/* Collectives without NCCL's in-place form: their in-place phase is not run,
 * and its columns say N/A (a second out-of-place run under an in-place
 * heading would read as an in-place figure).  sendrecv's send would read
 * what its recv overwrites; sluice refuses an in-place all-to-allv; a
 * barrier has no buffers. */
static bool coll_in_place(enum perf_coll c)
{
	return c != PERF_SENDRECV && c != PERF_ALLTOALLV && c != PERF_BARRIER;
}

/* nccl-tests' factors: every collective of one block per rank (gather and
 * scatter too: the root's link carries the n-1 other blocks) x (n-1)/n. */
static double busbw_factor(enum perf_coll c, int n)
{
	if (c == PERF_ALLREDUCE)
		return 2.0 * (n - 1) / n;
	return coll_blocked(c) ? (double)(n - 1) / n : 1.0;
}

static int parse_dtype(const char *s)
{
	for (int t = 0; t < SLUICE_DATATYPE_COUNT; t++)
		if (!strcmp(s, dtypes[t].name) || (dtypes[t].alias && !strcmp(s, dtypes[t].alias)))
			return t;
	return -1;
}

static int parse_op(const char *s)
{
	for (int op = 0; op < SLUICE_REDOP_COUNT; op++)
		if (!strcmp(s, op_names[op]))
			return op;
	return -1;
}

/* ---- flags ---- */

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [flags]   (collective benchmark, nccl-tests columns)\n"
		"  -C COLL   all_reduce (default) all_gather reduce_scatter broadcast reduce\n"
		"            alltoall gather scatter sendrecv alltoallv barrier (one row: no bytes)\n"
		"  -r ROOT   root of broadcast, reduce, gather, scatter (default 0)\n"
		"  -b SIZE   smallest message in bytes (8, 1K, 64M, 1G; default 8)\n"
		"  -e SIZE   largest message in bytes (default 64M)\n"
		"  -f N      multiply the size by N per row (default 2)\n"
		"  -n N      timed iterations per size (default 20)\n"
		"  -w N      warmup iterations per size (default 5)\n"
		"  -B SIZE   cap each size's iterations at SIZE bytes reduced (default 0: no cap)\n"
		"  -c 0|1    check every element of one extra run (default 1)\n"
		"  -z 0|1    1 (default): wait for each call before the next; 0: keep up to 16 calls\n"
		"            in flight (nccl-tests' default), each call's time then from the previous\n"
		"            call's end to its own\n"
		"  -S        start each phase's timed calls on every rank together (a barrier after\n"
		"            the warmup); without it a rank times its calls from its own warmup's end\n"
		"  -G        buffers in GPU memory, GPU = local rank (sluice-perf built with CUDA)\n"
		"  -d TYPE   int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
		"            f8e4m3 f8e5m2\n"
		"            (default float), or all: each in turn, a table each\n"
		"  -o OP     sum prod max min avg (default sum; reducing collectives only), or all:\n"
		"            each in turn, a table each (avg on an integer type is skipped: an error)\n"
		"  -J FILE   also write one JSON object per size to FILE (rank 0), with each rank's\n"
		"            own average call as oop_rank_us and ip_rank_us (lists by rank)\n"
		"  -T FILE   each rank writes its timed calls to FILE.RANK, a line a phase: bytes,\n"
		"            out or in (place), the first call's start (CLOCK_MONOTONIC s, to line\n"
		"            up with other traces), then each call's us in order\n"
		"  -g 1, -t 1  accepted for nccl-tests command lines: one rank per process\n"
		"  -h        this help\n"
		"  Each row ends with rank 0's own call times, out of place then in place: the median,\n"
		"  p99 (nearest rank: the max below 100 calls) and max of the -n timed calls, in us;\n"
		"  time is the average call over all ranks.  -J has them as oop_median_us, oop_p99_us,\n"
		"  oop_max_us, ip_...  sendrecv, alltoallv and barrier have no in-place form (NCCL's\n"
		"  layout): their in-place columns say N/A, and -J's ip_ fields are null\n",
		prog);
}

/* "64M" -> 67108864; K, M, G are powers of 1024 as in nccl-tests. */
int perf_parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;

	if (end == s || errno || *s == '-')
		return -1;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	default: break;
	}
	if (*end || v > (SIZE_MAX >> shift))
		return -1;
	*out = (size_t)v << shift;
	return 0;
}

static unsigned parse_uint(const char *s, const char *prog, char flag)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);

	if (end == s || *end || errno || *s == '-' || v > 1000000000ul) {
		fprintf(stderr, "%s: -%c wants a whole number, not '%s'\n", prog, flag, s);
		exit(2);
	}
	return (unsigned)v;
}

static void need_size(const char *s, size_t *out, const char *prog, char flag)
{
	if (perf_parse_size(s, out) < 0) {
		fprintf(stderr, "%s: -%c wants a size like 8, 1K or 64M, not '%s'\n", prog, flag, s);
		exit(2);
	}
}

static void set_choice(int v, int *out, const char *what, const char *s, const char *prog)
{
	if (v < 0) {
		fprintf(stderr, "%s: unknown %s '%s' (see -h)\n", prog, what, s);
		exit(2);
	}
	*out = v;
}

/* -d and -o: "all" (true: each in turn) or one choice, set_choice's. */
static bool choice_or_all(int v, int *out, const char *what, const char *s, const char *prog)
{
	if (!strcmp(s, "all"))
		return true;
	set_choice(v, out, what, s, prog);
	return false;
}

/* SUM's per-element spread (1 + i % spread) in the table being run: 5, but
 * 1 for the fp8 types, whose 2 or 3 mantissa bits hold the partial sums of
 * 1..5 per rank exactly only for very few ranks; with 1 they stay small
 * integers (exact up to 8 in e5m2, 16 in e4m3). */
static int sum_spread = 5;

/* Checks that need every flag parsed first. */
static void validate(const struct perf_opts *o, const char *prog)
{
	const char *why = NULL;

	if (o->min_bytes == 0 || o->min_bytes > o->max_bytes)
		why = "-b must be at least 1 and no larger than -e";
	else if (o->factor < 2 && o->min_bytes != o->max_bytes)
		why = "-f must be at least 2 (or give -b equal to -e)";
	else if (o->iters == 0)
		why = "-n must be at least 1";
	if (why) {
		fprintf(stderr, "%s: %s\n", prog, why);
		exit(2);
	}
}

void perf_parse(int argc, char **argv, struct perf_opts *o)
{
	const char *prog = argv[0];
	int opt, v;

	*o = (struct perf_opts){ .coll = PERF_ALLREDUCE, .min_bytes = 8, .max_bytes = 64u << 20, .factor = 2, .iters = 20,
				 .warmup = 5, .check = true, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };
	while ((opt = getopt(argc, argv, "C:r:b:e:f:n:w:B:c:z:d:o:J:T:g:t:GSh")) != -1) {
		switch (opt) {
		case 'C': set_choice(perf_parse_coll(optarg), &v, "collective", optarg, prog); o->coll = v; break;
		case 'r': o->root = (int)parse_uint(optarg, prog, 'r'); break;
		case 'b': need_size(optarg, &o->min_bytes, prog, 'b'); break;
		case 'e': need_size(optarg, &o->max_bytes, prog, 'e'); break;
		case 'B': need_size(optarg, &o->budget, prog, 'B'); break;
		case 'f': o->factor = parse_uint(optarg, prog, 'f'); break;
		case 'n': o->iters = parse_uint(optarg, prog, 'n'); break;
		case 'w': o->warmup = parse_uint(optarg, prog, 'w'); break;
		case 'c': o->check = parse_uint(optarg, prog, 'c') != 0; break;
		case 'z': o->in_flight = parse_uint(optarg, prog, 'z') == 0; break;
		case 'd':
			v = (int)o->dtype;
			o->all_dtypes = choice_or_all(parse_dtype(optarg), &v, "datatype", optarg, prog);
			o->dtype = v;
			break;
		case 'o':
			v = (int)o->op;
			o->all_ops = choice_or_all(parse_op(optarg), &v, "op", optarg, prog);
			o->op = v;
			break;
		case 'J': o->json = optarg; break;
		case 'T': o->calls = optarg; break;
		case 'G': o->gpu = true; break;
		case 'S': o->sync = true; break;
		case 'g':
		case 't':
			if (parse_uint(optarg, prog, (char)opt) != 1) {
				fprintf(stderr, "%s: -%c: one rank per process, so only 1\n", prog, opt);
				exit(2);
			}
			break;
		case 'h': usage(stdout, prog); exit(0);
		default: usage(stderr, prog); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		exit(2);
	}
	validate(o, prog);
}

/* ---- the data pattern ---- */


/* Rank r's input element i as a small integer.  For SUM and AVG the ranks'
 * offsets cancel (+1, -1, ..., and 0 for an odd last rank), so the sum is
 * n * (1 + i % 5) and AVG is exact; PROD multiplies 1s and 2s (powers of two
 * stay exact); MAX and MIN pick among 1..7. */
static int64_t input_value(int op, int r, int n, size_t i)
{
	switch (op) {
	case SLUICE_PROD:
		return 1 + (((size_t)r + i) % 3 == 0);
	case SLUICE_MAX:
	case SLUICE_MIN:
		return 1 + ((size_t)r * 3 + i) % 7;
	default: {
		int offset = (n % 2 && r == n - 1) ? 0 : (r % 2 ? -1 : 1);
		return 1 + (int64_t)(i % (size_t)sum_spread) + offset;
	}
	}
}

/* The exact all-reduce of element i, wrapping like the integer types do. */
static int64_t expected_value(int op, int n, size_t i)
{
	uint64_t acc = (uint64_t)input_value(op, 0, n, i);

	for (int r = 1; r < n; r++) {
		int64_t v = input_value(op, r, n, i);
		switch (op) {
		case SLUICE_PROD: acc *= (uint64_t)v; break;
		case SLUICE_MAX: acc = (int64_t)acc > v ? acc : (uint64_t)v; break;
		case SLUICE_MIN: acc = (int64_t)acc < v ? acc : (uint64_t)v; break;
		default: acc += (uint64_t)v;
		}
	}
	return op == SLUICE_AVG ? (int64_t)acc / n : (int64_t)acc;
}

/* Float to half for values the pattern makes: integers, normal in half
 * (or too large, giving Inf), so no rounding is ever needed. */
static uint16_t half_of_int(int64_t v)
{
	float f = (float)v;
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if (v == 0)
		return 0;
	uint32_t sign = (u >> 16) & 0x8000u, e = ((u >> 23) & 0xffu) - 127u + 15u;
	return (uint16_t)(sign | (e >= 31 ? 0x7c00u : (e << 10) | ((u >> 13) & 0x3ffu)));
}

/* bfloat16 is float32's top half: exact for the pattern's values. */
static uint16_t bf16_of_int(int64_t v)
{
	float f = (float)v;
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);
}

/* fp8 of the pattern's integers: exact in both formats while they fit the
 * mantissa (see sum_spread); beyond the largest finite value they saturate,
 * as sluice's reductions do. */
static uint8_t fp8_of_int(int64_t v, unsigned mant_bits, unsigned bias, uint8_t max)
{
	float f = (float)v;
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if (v == 0)
		return 0;
	uint32_t sign = (u >> 24) & 0x80u, e = ((u >> 23) & 0xffu) - 127u + bias;
	uint32_t bits = (e << mant_bits) | ((u & 0x7fffffu) >> (23 - mant_bits));
	return (uint8_t)(sign | (bits > max ? max : bits));
}

/* Write v as element i of buf in dtype t (integers wrap to their width). */
static void store(void *buf, size_t i, sluice_datatype_t t, int64_t v)
{
	switch (t) {
	case SLUICE_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)v; break;
	case SLUICE_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case SLUICE_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)v; break;
	case SLUICE_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case SLUICE_INT64: ((int64_t *)buf)[i] = v; break;
	case SLUICE_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case SLUICE_FLOAT16: ((uint16_t *)buf)[i] = half_of_int(v); break;
	case SLUICE_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case SLUICE_FLOAT64: ((double *)buf)[i] = (double)v; break;
	case SLUICE_BFLOAT16: ((uint16_t *)buf)[i] = bf16_of_int(v); break;
	case SLUICE_FLOAT8_E4M3: ((uint8_t *)buf)[i] = fp8_of_int(v, 3, 7, 0x7e); break;
	case SLUICE_FLOAT8_E5M2: ((uint8_t *)buf)[i] = fp8_of_int(v, 2, 15, 0x7b); break;
	default: break;
	}
}

/* The pattern op: copies carry MAX's pattern (1..7), exact in every type. */
static int pattern_op(const struct perf_opts *o)
{
	return coll_reduces(o->coll) ? (int)o->op : SLUICE_MAX;
}

/* Where one call's buffers sit and how many elements each holds. */
struct layout {
	const void *send;
	void *recv;
	size_t block;      /* the call's count: elements per block */
	size_t nsend, nrecv;
};

/* Element i of rank r's send buffer. */
static int64_t send_value(const struct perf_opts *o, int r, int n, size_t i)
{
	return input_value(pattern_op(o), r, n, i);
}

/* Element i of rank r's expected recv buffer; false where it holds nothing to check. */
static bool recv_value(const struct perf_opts *o, int r, int n, size_t block, size_t i, int64_t *v)
{
	int op = pattern_op(o);
	size_t blk = block ? i / block : 0, in = block ? i % block : 0;

	switch (o->coll) {
	case PERF_ALLREDUCE: *v = expected_value(op, n, i); return true;
	case PERF_ALLGATHER: *v = input_value(op, (int)blk, n, in); return true;
	case PERF_REDUCE_SCATTER: *v = expected_value(op, n, (size_t)r * block + i); return true;
	case PERF_BROADCAST: *v = input_value(op, o->root, n, i); return true;
	case PERF_REDUCE: *v = expected_value(op, n, i); return r == o->root;
	case PERF_ALLTOALL: case PERF_ALLTOALLV: *v = input_value(op, (int)blk, n, (size_t)r * block + in); return true;
	case PERF_GATHER: *v = input_value(op, (int)blk, n, in); return r == o->root;
	case PERF_SCATTER: *v = input_value(op, o->root, n, (size_t)r * block + i); return true;
	default: *v = input_value(op, (r + n - 1) % n, n, i); return true; /* sendrecv: from rank - 1 */
	}
}

/* Block size and buffer lengths of a row of `count` elements (nccl-tests' size). */
static void layout_of(const struct perf_opts *o, const struct perf_backend *b, size_t count, struct layout *l)
{
	size_t n = (size_t)b->nranks, blk = coll_blocked(o->coll) ? count / n : count;
	bool root = b->rank == o->root;

	l->block = blk;
	switch (o->coll) {
	case PERF_ALLGATHER: l->nsend = blk; l->nrecv = n * blk; break;
	case PERF_REDUCE_SCATTER: l->nsend = n * blk; l->nrecv = blk; break;
	case PERF_ALLTOALL: case PERF_ALLTOALLV: l->nsend = l->nrecv = n * blk; break;
	case PERF_BARRIER: l->nsend = l->nrecv = 0; break;
	case PERF_BROADCAST: l->nsend = root ? blk : 0; l->nrecv = blk; break;
	case PERF_REDUCE: l->nsend = blk; l->nrecv = root ? blk : 0; break;
	case PERF_GATHER: l->nsend = blk; l->nrecv = root ? n * blk : 0; break;
	case PERF_SCATTER: l->nsend = root ? n * blk : 0; l->nrecv = blk; break;
	default: l->nsend = l->nrecv = blk; break;
	}
}

/* The buffers of one phase: out of place, or NCCL's in-place layout. */
static void place(const struct perf_opts *o, const struct perf_backend *b, void *send, void *recv,
		  bool in_place, struct layout *l)
{
	size_t es = dtypes[o->dtype].size, mine = (size_t)b->rank * l->block * es;

	l->send = send;
	l->recv = recv;
	if (!in_place)
		return;
	switch (o->coll) {
	case PERF_ALLGATHER: case PERF_GATHER: l->send = (char *)recv + mine; break;
	case PERF_REDUCE_SCATTER: case PERF_SCATTER: l->send = recv; l->recv = (char *)recv + mine; break;
	default: l->send = recv; break;
	}
}

/* Where the host copy of a layout lives (itself, for host buffers). */
static struct layout host_side(const struct perf_backend *b, const void *send,
				void *recv, bool in_place, const struct layout *l)
{
	const struct perf_mirror *m = b->mirror;
	struct layout h = *l;

	if (!m)
		return h;
	if (in_place) /* place() put send inside recv */
		h.send = (const char *)m->recv_host + ((const char *)l->send - (const char *)recv);
	else
		h.send = (const char *)m->send_host + ((const char *)l->send - (const char *)send);
	h.recv = (char *)m->recv_host + ((char *)l->recv - (char *)recv);
	return h;
}

static int fill_input(const struct perf_opts *o, const struct perf_backend *b, const struct layout *l,
		      const struct layout *h)
{
	for (size_t i = 0; i < h->nsend; i++)
		store((void *)h->send, i, o->dtype, send_value(o, b->rank, b->nranks, i));
	return b->mirror ? b->mirror->copy((void *)l->send, h->send, l->nsend * dtypes[o->dtype].size, true) : 0;
}

/* Elements of the result that differ (bitwise) from the exact one. */
static long count_wrong(const struct perf_opts *o, const struct perf_backend *b, const struct layout *l,
			const struct layout *h)
{
	size_t es = dtypes[o->dtype].size, wrong = 0;
	_Alignas(8) unsigned char want[8];
	int64_t v;

	if (b->mirror && b->mirror->copy(h->recv, l->recv, l->nrecv * es, false) < 0)
		return -1;
	for (size_t i = 0; i < h->nrecv; i++) {
		if (!recv_value(o, b->rank, b->nranks, h->block, i, &v))
			break;
		store(want, 0, o->dtype, v);
		wrong += memcmp(want, (const char *)h->recv + i * es, es) != 0;
	}
	return (long)wrong;
}

/* ---- running one size ---- */

struct phase {
	double time_us;       /* average per iteration, averaged over ranks */
	double wrong;         /* summed over ranks; -1 when not checked */
	struct perf_tail tail; /* this rank's own call times (rank 0's are printed) */
	double *rank_us;      /* each rank's own average call, by rank (run_size fills it) */
	bool ran;             /* false: the collective has no such phase (coll_in_place) */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Iterations for a message of `bytes`: -n (or -w), capped by -B. */
static unsigned scaled(unsigned n, size_t bytes, size_t budget)
{
	if (budget == 0 || n == 0 || bytes == 0)
		return n;
	size_t fit = budget / bytes;
	return fit < 1 ? 1 : fit < n ? (unsigned)fit : n;
}

/* -z 0: `times` calls, up to PERF_WINDOW in flight, finished in posting
 * order; with us, each call's time from the previous one's end (or the
 * start) to its own end. */
static int repeat_in_flight(const struct perf_backend *b, const struct perf_opts *o, const struct layout *l,
			    unsigned times, double *us)
{
	double t = us ? now_s() : 0;
	unsigned posted = 0, done = 0;

	while (done < times) {
		if (posted < times && posted - done < PERF_WINDOW) {
			if (b->post(b->ctx, posted % PERF_WINDOW, o->coll, l->nsend ? l->send : NULL,
				    l->nrecv ? l->recv : NULL, l->block, o->dtype, o->op, o->root) < 0)
				return -1;
			posted++;
			continue;
		}
		if (b->wait(b->ctx, done % PERF_WINDOW) < 0)
			return -1;
		if (us) {
			double end = now_s();
			us[done] = (end - t) * 1e6;
			t = end;
		}
		done++;
	}
	return 0;
}

/* `times` calls; with us, each call's time in us into us[k]. */
static int repeat(const struct perf_backend *b, const struct perf_opts *o, const struct layout *l,
		  unsigned times, double *us)
{
	double t = us ? now_s() : 0;

	if (o->in_flight)
		return repeat_in_flight(b, o, l, times, us);
	for (unsigned k = 0; k < times; k++) {
		if (b->run(b->ctx, o->coll, l->nsend ? l->send : NULL, l->nrecv ? l->recv : NULL, l->block,
			   o->dtype, o->op, o->root) < 0)
			return -1;
		if (us) {
			double done = now_s();
			us[k] = (done - t) * 1e6;
			t = done;
		}
	}
	return 0;
}

/* -T: this rank's file, or NULL.  A file's static like sum_spread: the
 * phases that write it are far down perf_run's calls. */
static FILE *calls_out;

/* One phase's line of -T's file: which calls (bytes, place), when they began, each one's time. */
static void write_calls(size_t bytes, bool in_place, double t0, const double *us, unsigned n)
{
	fprintf(calls_out, "%zu %s %.6f", bytes, in_place ? "in" : "out", t0);
	for (unsigned k = 0; k < n; k++)
		fprintf(calls_out, " %.1f", us[k]);
	fputc('\n', calls_out);
}

/* The timed calls of a phase: their average and their tail. */
static int timed(const struct perf_backend *b, const struct perf_opts *o, const struct layout *l,
		 unsigned iters, size_t bytes, bool in_place, struct phase *ph)
{
	double *us = malloc(iters * sizeof(*us));

	if (!us) {
		fprintf(stderr, "%s: no memory for %u call times (lower -n)\n", b->name, iters);
		return -1;
	}
	/* -S: a barrier, so no rank's timed calls overlap another's warmup.
	 * Without it the ranks' phases may not overlap at all: Open MPI's
	 * receivers of a size's first 43 KiB message over TCP waited 10-70 ms
	 * in the warmup, after which a 3-rank scatter root ran all its timed
	 * calls before its leaves began theirs (perf/ALGORITHMS.md, ahead). */
	double none = 0;
	if (o->sync && b->sum_doubles(b->ctx, &none, 1) < 0) {
		free(us);
		return -1;
	}
	double t0 = now_s();
	int rc = repeat(b, o, l, iters, us);
	ph->time_us = (now_s() - t0) * 1e6 / iters;
	if (rc == 0 && calls_out)
		write_calls(bytes, in_place, t0, us, iters);
	if (rc == 0)
		perf_tail_of(us, iters, &ph->tail);
	free(us);
	return rc;
}

/* Time one phase, then check one fresh run into a poisoned buffer, so a
 * call that writes nothing cannot pass. */
static int run_phase(const struct perf_opts *o, const struct perf_backend *b, void *send, void *recv,
		     size_t count, bool in_place, struct phase *ph)
{
	size_t bytes = count * dtypes[o->dtype].size;
	unsigned iters = scaled(o->iters, bytes, o->budget);
	struct layout l, h;
	long wrong;

	layout_of(o, b, count, &l);
	place(o, b, send, recv, in_place, &l);
	h = host_side(b, send, recv, in_place, &l);
	if (fill_input(o, b, &l, &h) < 0 || repeat(b, o, &l, scaled(o->warmup, bytes, o->budget), NULL) < 0 ||
	    timed(b, o, &l, iters, bytes, in_place, ph) < 0)
		return -1;
	ph->wrong = -1;
	if (!o->check)
		return 0;
	if (fill_input(o, b, &l, &h) < 0)
		return -1;
	if (l.send == send && l.recv == recv) { /* out of place: recv holds nothing of the input */
		memset(h.recv, 0xa5, l.nrecv * dtypes[o->dtype].size);
		if (b->mirror && b->mirror->copy(l.recv, h.recv, l.nrecv * dtypes[o->dtype].size, true) < 0)
			return -1;
	}
	if (repeat(b, o, &l, 1, NULL) < 0 || (wrong = count_wrong(o, b, &l, &h)) < 0)
		return -1;
	ph->wrong = (double)wrong;
	return 0;
}

/* ---- the table ---- */

static void print_header(const struct perf_opts *o, const struct perf_backend *b)
{
	printf("# %s %s perf: %d ranks, one per process\n", b->name, coll_names[o->coll], b->nranks);
	printf("# minBytes %zu maxBytes %zu step: %u(factor) warmup iters: %u iters: %u "
	       "byte budget: %zu validation: %d blocking: %d\n#\n",
	       o->min_bytes, o->max_bytes, o->factor, o->warmup, o->iters, o->budget, o->check, !o->in_flight);
	printf("# %58s %28s %27s %26s\n", "out-of-place", "in-place", "out-of-place rank 0",
	       "in-place rank 0");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %7s\n",
	       "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
	       "busbw", "#wrong", "median", "p99", "max", "median", "p99", "max");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %7s\n",
	       "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
	       "(us)", "(us)", "(us)", "(us)", "(us)", "(us)");
	fflush(stdout);
}

/* Time in 7 columns, with as many decimals as fit. */
static void print_time(double us)
{
	printf("  %7.*f", us < 1e4 ? 2 : us < 1e5 ? 1 : 0, us);
}

static void print_phase(double time_us, double algbw, double busbw, double wrong)
{
	if (time_us < 0) { /* not run */
		printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
		return;
	}
	print_time(time_us);
	printf("  %6.2f  %6.2f", algbw, busbw);
	if (wrong < 0)
		printf("  %6s", "N/A");
	else
		printf("  %6.0f", wrong);
}

static double busbw_of(const struct perf_opts *o, double algbw, int n)
{
	return algbw * busbw_factor(o->coll, n);
}

static void write_json(FILE *f, const struct perf_opts *o, const struct perf_backend *b,
		       size_t bytes, size_t count, const struct phase ph[2])
{
	static const char *const tag[2] = { "oop", "ip" };

	fprintf(f, "{\"tool\":\"%s\",\"coll\":\"%s\",\"nranks\":%d,\"size\":%zu,\"count\":%zu,"
		"\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,\"iters\":%u,\"synced\":%s,\"blocking\":%s",
		b->name, coll_names[o->coll], b->nranks, bytes, count, dtypes[o->dtype].name,
		coll_reduces(o->coll) ? op_names[o->op] : "none",
		coll_rooted(o->coll) ? o->root : -1, scaled(o->iters, bytes, o->budget), o->sync ? "true" : "false",
		o->in_flight ? "false" : "true");
	for (int k = 0; k < 2; k++) {
		double alg = (double)bytes / ph[k].time_us * 1e-3;
		if (!ph[k].ran) { /* every field of the phase there, none with a number */
			fprintf(f, ",\"%s_time_us\":null,\"%s_algbw\":null,\"%s_busbw\":null,\"%s_wrong\":null,"
				"\"%s_median_us\":null,\"%s_p99_us\":null,\"%s_max_us\":null,\"%s_rank_us\":null",
				tag[k], tag[k], tag[k], tag[k], tag[k], tag[k], tag[k], tag[k]);
			continue;
		}
		fprintf(f, ",\"%s_time_us\":%.6g,\"%s_algbw\":%.6g,\"%s_busbw\":%.6g", tag[k],
			ph[k].time_us, tag[k], alg, tag[k], busbw_of(o, alg, b->nranks));
		if (ph[k].wrong < 0)
			fprintf(f, ",\"%s_wrong\":null", tag[k]);
		else
			fprintf(f, ",\"%s_wrong\":%.0f", tag[k], ph[k].wrong);
		fprintf(f, ",\"%s_median_us\":%.6g,\"%s_p99_us\":%.6g,\"%s_max_us\":%.6g", tag[k],
			ph[k].tail.median_us, tag[k], ph[k].tail.p99_us, tag[k], ph[k].tail.max_us);
		fprintf(f, ",\"%s_rank_us\":[", tag[k]);
		for (int r = 0; r < b->nranks; r++)
			fprintf(f, "%s%.6g", r ? "," : "", ph[k].rank_us[r]);
		fprintf(f, "]");
	}
	fprintf(f, "}\n");
	fflush(f);
}

/* Print one row; returns the row's summed busbw (the phases run). */
static double print_row(const struct perf_opts *o, const struct perf_backend *b, size_t bytes,
			size_t count, const struct phase ph[2])
{
	double sum = 0;

	printf("  %10zu  %12zu  %8s  %6s  %6d", bytes, count, dtypes[o->dtype].name,
	       coll_reduces(o->coll) ? op_names[o->op] : "none", coll_rooted(o->coll) ? o->root : -1);
	for (int k = 0; k < 2; k++) {
		double alg = (double)bytes / ph[k].time_us * 1e-3; /* B/us -> GB/s */
		print_phase(ph[k].ran ? ph[k].time_us : -1, alg, busbw_of(o, alg, b->nranks), ph[k].wrong);
		sum += ph[k].ran ? busbw_of(o, alg, b->nranks) : 0;
	}
	for (int k = 0; k < 2; k++) {
		if (!ph[k].ran) {
			printf("  %7s  %7s  %7s", "N/A", "N/A", "N/A");
			continue;
		}
		print_time(ph[k].tail.median_us);
		print_time(ph[k].tail.p99_us);
		print_time(ph[k].tail.max_us);
	}
	printf("\n");
	fflush(stdout);
	return sum;
}

/* ---- the run ---- */

/* Both phases of one size, then times and #wrong combined over ranks.
 * sums holds PERF_SUM_MAX(nranks) doubles: each rank's average call of
 * each phase goes in its own slot, so that rank 0 can say which rank's
 * calls make the average (a rank sharing a core with another waits for
 * it); ph[k].rank_us points into sums. */
static int run_size(const struct perf_opts *o, const struct perf_backend *b, void *send,
		    void *recv, size_t count, struct phase ph[2], double *sums)
{
	int n = b->nranks;

	ph[0].ran = true;
	ph[1].ran = coll_in_place(o->coll);
	ph[1].time_us = ph[1].wrong = 0;
	if (run_phase(o, b, send, recv, count, false, &ph[0]) < 0 ||
	    (ph[1].ran && run_phase(o, b, send, recv, count, true, &ph[1]) < 0))
		return -1;
	memset(sums, 0, PERF_SUM_MAX(n) * sizeof(*sums));
	for (int k = 0; k < 2; k++) {
		sums[k * n + b->rank] = ph[k].time_us;
		sums[2 * n + k] = ph[k].wrong;
	}
	if (b->sum_doubles(b->ctx, sums, PERF_SUM_MAX(n)) < 0)
		return -1;
	for (int k = 0; k < 2; k++) {
		ph[k].rank_us = sums + k * n;
		ph[k].time_us = 0;
		for (int r = 0; r < n; r++)
			ph[k].time_us += ph[k].rank_us[r];
		ph[k].time_us /= n;
		ph[k].wrong = o->check ? sums[2 * n + k] : -1;
	}
	return 0;
}

/* Rank 0's JSON file; *failed when it cannot be written.  The run goes on
 * regardless: stopping one rank alone would leave the others waiting. */
static FILE *open_json(const struct perf_opts *o, const struct perf_backend *b, bool *failed)
{
	*failed = false;
	if (!o->json || b->rank != 0)
		return NULL;
	FILE *f = fopen(o->json, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s: %s\n", b->name, o->json, strerror(errno));
		*failed = true;
	}
	return f;
}

/* -T: this rank's FILE.RANK; *failed when it cannot be written (the run goes on, as with -J). */
static FILE *open_calls(const struct perf_opts *o, const struct perf_backend *b, bool *failed)
{
	char path[4096];

	*failed = false;
	if (!o->calls)
		return NULL;
	snprintf(path, sizeof(path), "%s.%d", o->calls, b->rank);
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: rank %d cannot write %s: %s\n", b->name, b->rank, path, strerror(errno));
		*failed = true;
	}
	return f;
}

static void print_footer(double wrong, double busbw_sum, unsigned nphases, bool check)
{
	if (check)
		printf("# Out of bounds values : %.0f %s\n", wrong, wrong > 0 ? "FAILED" : "OK");
	printf("# Avg bus bandwidth    : %g \n#\n", nphases ? busbw_sum / nphases : 0.0);
}

/* Elements of a row: at least one per block, and whole blocks (a barrier's: none). */
static size_t rounded_count(const struct perf_opts *o, const struct perf_backend *b, size_t count)
{
	size_t n = coll_blocked(o->coll) ? (size_t)b->nranks : 1;

	if (o->coll == PERF_BARRIER)
		return 0;

	return count / n ? count / n * n : n;
}

/* One table: every size of o's datatype and op.  0, 1 when an element
 * was wrong, -1 when a call failed. */
static int run_table(const struct perf_opts *o, const struct perf_backend *b, void *send, void *recv,
		     double *sums, FILE *json)
{
	size_t es = dtypes[o->dtype].size;
	double wrong = 0, busbw_sum = 0;
	unsigned nphases = 0;

	sum_spread = o->dtype == SLUICE_FLOAT8_E4M3 || o->dtype == SLUICE_FLOAT8_E5M2 ? 1 : 5;
	if (b->rank == 0)
		print_header(o, b);
	for (size_t size = o->min_bytes; size <= o->max_bytes; size *= o->factor) {
		size_t count = rounded_count(o, b, size / es);
		struct phase ph[2];
		if (run_size(o, b, send, recv, count, ph, sums) < 0)
			return -1;
		wrong += (ph[0].wrong > 0 ? ph[0].wrong : 0) + (ph[1].wrong > 0 ? ph[1].wrong : 0);
		if (b->rank == 0) {
			busbw_sum += print_row(o, b, count * es, count, ph);
			nphases += 1 + ph[1].ran;
			if (json)
				write_json(json, o, b, count * es, count, ph);
		}
		if (o->factor < 2 || size > SIZE_MAX / o->factor || o->coll == PERF_BARRIER)
			break;
	}
	if (b->rank == 0)
		print_footer(wrong, busbw_sum, nphases, o->check);
	return wrong > 0;
}

/* Why -d all or -o all skips the table of o's datatype and op, or NULL. */
static const char *skipped(const struct perf_opts *o, const struct perf_backend *b)
{
	bool reduces = coll_reduces(o->coll);

	if (reduces && o->op == SLUICE_AVG && o->dtype <= SLUICE_UINT64)
		return "avg on an integer type is an error (as in NCCL)";
	return b->lacks ? b->lacks(o->dtype, o->op, reduces) : NULL;
}

int perf_run(const struct perf_opts *o, const struct perf_backend *b, void *send, void *recv)
{
	bool reduces = coll_reduces(o->coll), all_ops = o->all_ops && reduces; /* one table where no op matters */
	int t0 = o->all_dtypes ? 0 : (int)o->dtype, t1 = o->all_dtypes ? SLUICE_DATATYPE_COUNT - 1 : t0;
	int op0 = all_ops ? 0 : (int)o->op, op1 = all_ops ? SLUICE_REDOP_COUNT - 1 : op0;
	int rc = 0, tables = 0;
	const char *why;
	bool json_failed, calls_failed;

	if (o->root >= b->nranks) {
		if (b->rank == 0)
			fprintf(stderr, "%s: -r %d is not a rank: the run has %d ranks\n", b->name, o->root, b->nranks);
		return 2;
	}
	if (o->in_flight && !b->post) {
		if (b->rank == 0)
			fprintf(stderr, "%s: -z 0 (calls in flight together) is not supported by this tool: use -z 1\n",
				b->name);
		return 2;
	}
	if (o->coll == PERF_SENDRECV && b->nranks < 2) {
		if (b->rank == 0)
			fprintf(stderr, "%s: sendrecv needs at least 2 ranks\n", b->name);
		return 2;
	}
	/* a datatype and op named: refused where the tool lacks them (sluice refuses avg on integers itself) */
	if (!o->all_dtypes && !all_ops && b->lacks && (why = b->lacks(o->dtype, o->op, reduces))) {
		if (b->rank == 0)
			fprintf(stderr, "%s: -d %s -o %s: %s\n", b->name, dtypes[o->dtype].name, op_names[o->op], why);
		return 2;
	}
	double *sums = malloc(PERF_SUM_MAX(b->nranks) * sizeof(*sums));
	if (!sums) {
		fprintf(stderr, "%s: no memory for %d ranks' call times\n", b->name, b->nranks);
		return 1;
	}
	FILE *json = open_json(o, b, &json_failed);
	calls_out = open_calls(o, b, &calls_failed);
	for (int t = t0; t <= t1; t++) {
		for (int op = op0; op <= op1; op++) {
			struct perf_opts one = *o;
			one.dtype = (sluice_datatype_t)t;
			one.op = (sluice_redop_t)op;
			if ((o->all_dtypes || all_ops) && (why = skipped(&one, b))) {
				if (b->rank == 0)
					printf("# skipped %s %s: %s\n#\n", dtypes[t].name, reduces ? op_names[op] : "none",
					       why);
				continue;
			}
			int r = run_table(&one, b, send, recv, sums, json);
			tables++;
			if (r < 0) {
				rc = 1;
				goto out; /* a failed call may have broken the communicator */
			}
			rc |= r;
		}
	}
	if (tables == 0) {
		if (b->rank == 0)
			fprintf(stderr, "%s: this tool runs none of the datatypes and ops -d and -o name (see the notes)\n",
				b->name);
		rc = 2;
	}
out:
	if (json)
		fclose(json);
	if (calls_out)
		fclose(calls_out);
	calls_out = NULL;
	free(sums);
	return rc ? rc : json_failed || calls_failed;
}
