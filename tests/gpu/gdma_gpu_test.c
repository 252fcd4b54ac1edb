/*
 * gdma_gpu_test.c: gpu_dma on a real GPU (meson test --suite gpu).  A host
 * thread plays the engine: it copies each "packet" of a peer's data into a
 * pinned staging slot (where a NIC would have put it), posts it to the
 * persistent kernel, and recycles the slot once its ticket is done.  Results
 * are checked bit for bit against coll/'s CPU reduction and, within each
 * type's rounding, against a float64 (or exact integer) reference.
 *
 * Cases with payload skew 0 go through sl_gdma_post_copy's landing arena
 * instead of the test's own staging (the 1 GiB float sum among them).
 *
 * Usage: gdma_gpu_test reduce|large|lifecycle|mem|stage [quick]
 * On a machine without a usable GPU it prints why and exits 77 (skipped).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gdma.h"

#define SKIP 77

static int failures;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);      \
			fprintf(stderr, __VA_ARGS__);                             \
			fputc('\n', stderr);                                      \
			failures++;                                               \
		}                                                                 \
	} while (0)

#define CUDA_OK(call)                                                                            \
	do {                                                                                     \
		cudaError_t e_ = (call);                                                         \
		if (e_ != cudaSuccess) {                                                         \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
				cudaGetErrorString(e_));                                         \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- random data ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Floats: finite, signed, fractional, small enough that a product stays
 * finite in float16.  Integers: all bits random, so sums and products wrap. */
static void fill_values(void *p, size_t count, enum sl_dtype t)
{
	for (size_t i = 0; i < count; i++) {
		uint64_t r = rnd();
		float v = (float)((int)(r % 20001) - 10000) / 397.0f;
		switch (t) {
		case SL_FLOAT16: ((uint16_t *)p)[i] = sl_float_to_half(v); break;
		case SL_BFLOAT16: ((uint16_t *)p)[i] = sl_float_to_bf16(v); break;
		case SL_FLOAT32: ((float *)p)[i] = v; break;
		case SL_FLOAT64: ((double *)p)[i] = (double)v + (double)(r >> 40) * 1e-12; break;
		/* |v| <= 25: products reach past e4m3's 448, so saturation is tested too */
		case SL_FLOAT8_E4M3: ((uint8_t *)p)[i] = sl_float_to_e4m3(v); break;
		case SL_FLOAT8_E5M2: ((uint8_t *)p)[i] = sl_float_to_e5m2(v); break;
		default: memcpy((uint8_t *)p + i * sl_dtype_size(t), &r, sl_dtype_size(t)); break;
		}
	}
}

/* ---- the engine's side: staging and posting ---- */

struct feeder {
	struct sl_gdma *g;
	uint8_t *staging;     /* pinned, mapped: the "mempool" */
	uint32_t nslots;
	uint64_t slot_bytes;
	uint32_t *ticket;     /* per staging slot: the ticket still reading it */
	bool *busy;
};

static void feeder_init(struct feeder *f, struct sl_gdma *g, uint32_t nslots, uint64_t slot_bytes)
{
	f->g = g;
	f->nslots = nslots;
	f->slot_bytes = slot_bytes;
	CUDA_OK(cudaHostAlloc((void **)&f->staging, (size_t)nslots * slot_bytes,
			      cudaHostAllocMapped | cudaHostAllocPortable));
	f->ticket = calloc(nslots, sizeof(*f->ticket));
	f->busy = calloc(nslots, sizeof(*f->busy));
}

static void feeder_fini(struct feeder *f)
{
	cudaFreeHost(f->staging);
	free(f->ticket);
	free(f->busy);
}

/* Drive the reducer until ticket t is done; false after 30 s. */
static bool wait_ticket(struct sl_gdma *g, uint32_t t)
{
	uint64_t start = now_ns();

	while (!sl_gdma_done(g, t)) {
		sl_gdma_progress(g, now_ns());
		if (sl_gdma_error(g) || now_ns() - start > 30000000000ull) {
			fprintf(stderr, "FAIL: ticket %u not done: %s\n", t,
				sl_gdma_error(g) ? sl_gdma_error(g) : "timed out after 30 s");
			return false;
		}
	}
	return true;
}

static void post_or_wait(struct sl_gdma *g, const struct sl_gdma_work *w, uint32_t *t)
{
	char err[256];
	int rc;

	while ((rc = sl_gdma_post(g, w, t, err, sizeof(err))) == -EAGAIN)
		sl_gdma_progress(g, now_ns());
	if (rc) {
		fprintf(stderr, "FAIL: post: %s\n", err);
		exit(1);
	}
}

/* Post one packet through the reducer's own landing arena: the payload's
 * memory is the "port's" and is overwritten as soon as the post returns. */
static uint32_t post_via_arena(struct feeder *f, struct sl_gdma_work *w, uint8_t *scratch, const uint8_t *payload,
			       size_t bytes)
{
	char err[256];
	uint32_t t;
	int rc;

	memcpy(scratch, payload, bytes);
	w->src = scratch;
	while ((rc = sl_gdma_post_copy(f->g, w, &t, err, sizeof(err))) == -EAGAIN)
		sl_gdma_progress(f->g, now_ns());
	if (rc) {
		fprintf(stderr, "FAIL: post_copy: %s\n", err);
		exit(1);
	}
	memset(scratch, 0xee, bytes);
	return t;
}

/* Reduce peer[] (host memory) into dst (device) packet by packet, with
 * a = local operand (device).  Each payload either sits `skew` bytes into a
 * staging slot of the test's own (as a payload sits behind its headers in
 * a frame, the slot kept until its ticket is done), or, with skew 0, goes
 * through sl_gdma_post_copy's landing arena. */
static bool feed(struct feeder *f, void *dst, const void *a, const uint8_t *peer, uint64_t count,
		 enum sl_dtype t, enum sl_redop op, enum sl_gdma_kind kind, uint32_t avg_div, uint64_t packet,
		 uint32_t skew)
{
	size_t es = sl_dtype_size(t);
	uint64_t per = packet / es, last = 0, k = 0;
	uint8_t *scratch = malloc(packet);

	for (uint64_t i = 0; i < count; i += per, k++) {
		uint32_t s = (uint32_t)(k % f->nslots);
		uint64_t n = count - i < per ? count - i : per;
		uint8_t *slot = f->staging + s * f->slot_bytes + skew;
		struct sl_gdma_work w = { .dst = (uint8_t *)dst + i * es, .a = (const uint8_t *)a + i * es,
					  .src = slot, .count = n, .dtype = t, .op = op, .kind = kind,
					  .avg_div = avg_div };
		uint32_t tk;
		if (skew == 0) {
			last = post_via_arena(f, &w, scratch, peer + i * es, n * es);
			continue;
		}
		if (f->busy[s] && !wait_ticket(f->g, f->ticket[s]))
			return false;
		memcpy(slot, peer + i * es, n * es); /* the "NIC" writes the payload */
		post_or_wait(f->g, &w, &tk);
		f->ticket[s] = tk;
		f->busy[s] = true;
		last = tk;
	}
	free(scratch);
	return wait_ticket(f->g, (uint32_t)last);
}

/* ---- checking ---- */

static double widen(const void *p, size_t i, enum sl_dtype t)
{
	switch (t) {
	case SL_FLOAT16: return sl_half_to_float(((const uint16_t *)p)[i]);
	case SL_BFLOAT16: return sl_bf16_to_float(((const uint16_t *)p)[i]);
	case SL_FLOAT32: return ((const float *)p)[i];
	case SL_FLOAT8_E4M3: return sl_e4m3_to_float(((const uint8_t *)p)[i]);
	case SL_FLOAT8_E5M2: return sl_e5m2_to_float(((const uint8_t *)p)[i]);
	default: return ((const double *)p)[i];
	}
}

/* fp8 saturates at its largest finite value (reduce.h); the others go to Inf. */
static double saturate(double v, enum sl_dtype t)
{
	double max = t == SL_FLOAT8_E4M3 ? 448 : t == SL_FLOAT8_E5M2 ? 57344 : INFINITY;

	return v > max ? max : v < -max ? -max : v;
}

static double ref_op(double x, double y, enum sl_redop op)
{
	switch (op) {
	case SL_SUM: return x + y;
	case SL_PROD: return x * y;
	case SL_MAX: return x > y ? x : y;
	default: return x < y ? x : y;
	}
}

/* Relative error one rounding (two with AVG) may leave in each type. */
static double tolerance(enum sl_dtype t)
{
	switch (t) {
	case SL_FLOAT16: return 0x1p-10;
	case SL_BFLOAT16: return 0x1p-7;
	case SL_FLOAT8_E4M3: return 0x1p-3;
	case SL_FLOAT8_E5M2: return 0x1p-2;
	case SL_FLOAT32: return 0x1p-22;
	default: return 0x1p-51;
	}
}

/* Products of small values land among the subnormals, whose spacing
 * (2^-24 in float16, 2^-9 in e4m3, 2^-16 in e5m2) bounds the error there. */
static double abs_tolerance(enum sl_dtype t)
{
	switch (t) {
	case SL_FLOAT16: return 0x1p-23;
	case SL_FLOAT8_E4M3: return 0x1p-8;
	case SL_FLOAT8_E5M2: return 0x1p-15;
	default: return 0;
	}
}

static bool is_float(enum sl_dtype t)
{
	return t == SL_FLOAT16 || t == SL_BFLOAT16 || t == SL_FLOAT32 || t == SL_FLOAT64 ||
	       t == SL_FLOAT8_E4M3 || t == SL_FLOAT8_E5M2;
}

/* Integers, exactly: wrap to the type's width, as the reduction must. */
static int64_t int_at(const void *p, size_t i, enum sl_dtype t)
{
	switch (t) {
	case SL_INT8: return ((const int8_t *)p)[i];
	case SL_UINT8: return ((const uint8_t *)p)[i];
	case SL_INT32: return ((const int32_t *)p)[i];
	case SL_UINT32: return ((const uint32_t *)p)[i];
	default: return ((const int64_t *)p)[i];
	}
}

static bool is_signed_int(enum sl_dtype t)
{
	return t == SL_INT8 || t == SL_INT32 || t == SL_INT64;
}

static uint64_t wrap(uint64_t v, enum sl_dtype t)
{
	size_t bits = sl_dtype_size(t) * 8;

	return bits == 64 ? v : v & ((1ull << bits) - 1);
}

static uint64_t int_ref(const void *a, const void *b, size_t i, enum sl_dtype t, enum sl_redop op, uint32_t div)
{
	int64_t x = int_at(a, i, t), y = int_at(b, i, t);
	uint64_t ux = wrap((uint64_t)x, t), uy = wrap((uint64_t)y, t), r;
	bool sgn = is_signed_int(t);

	switch (op) {
	case SL_SUM: r = ux + uy; break;
	case SL_PROD: r = ux * uy; break;
	case SL_MAX: r = sgn ? (uint64_t)(x > y ? x : y) : (ux > uy ? ux : uy); break;
	default: r = sgn ? (uint64_t)(x < y ? x : y) : (ux < uy ? ux : uy); break;
	}
	r = wrap(r, t);
	if (div) {
		int shift = 64 - (int)sl_dtype_size(t) * 8;
		int64_t sr = shift ? (int64_t)(r << shift) >> shift : (int64_t)r; /* sign-extend */
		r = wrap(sgn ? (uint64_t)(sr / (int64_t)div) : r / div, t);
	}
	return r;
}

/* got against the float64 / exact reference of a op b; returns mismatches. */
static uint64_t check_ref(const void *got, const void *a, const void *b, uint64_t count, enum sl_dtype t,
			  enum sl_redop op, uint32_t div)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < count; i++) {
		if (is_float(t)) {
			double want = ref_op(widen(a, i, t), widen(b, i, t), op), g = widen(got, i, t);
			if (div)
				want /= div;
			want = saturate(want, t);
			if (!(fabs(g - want) <= tolerance(t) * fabs(want) + abs_tolerance(t)) && bad++ < 3)
				fprintf(stderr, "  [%" PRIu64 "] %s %s: got %.17g, float64 reference %.17g\n", i,
					sl_dtype_name(t), sl_redop_name(op), g, want);
		} else {
			uint64_t want = int_ref(a, b, i, t, op, div), g = wrap((uint64_t)int_at(got, i, t), t);
			if (g != want && bad++ < 3)
				fprintf(stderr, "  [%" PRIu64 "] %s %s: got %" PRIu64 ", reference %" PRIu64 "\n", i,
					sl_dtype_name(t), sl_redop_name(op), g, want);
		}
	}
	return bad;
}

/* ---- reduce: every type x op x size ---- */

struct buffers {
	uint8_t *a, *peer, *got, *want; /* host */
	void *d_dst, *d_a;              /* device */
};

static void buffers_alloc(struct buffers *b, uint64_t bytes)
{
	b->a = malloc(bytes);
	b->peer = malloc(bytes);
	b->got = malloc(bytes);
	b->want = malloc(bytes);
	CHECK(b->a && b->peer && b->got && b->want, "out of host memory for %" PRIu64 " bytes", bytes);
	CUDA_OK(cudaMalloc(&b->d_dst, bytes));
	CUDA_OK(cudaMalloc(&b->d_a, bytes));
}

static void buffers_free(struct buffers *b)
{
	free(b->a), free(b->peer), free(b->got), free(b->want);
	cudaFree(b->d_dst), cudaFree(b->d_a);
}

/* One case: recv (= a, or a separate send buffer) op the peer's payload. */
static void run_case(struct feeder *f, struct buffers *b, uint64_t count, enum sl_dtype t, enum sl_redop op,
		     enum sl_gdma_kind kind, bool in_place, uint32_t skew, uint64_t packet)
{
	size_t es = sl_dtype_size(t), bytes = count * es;
	uint32_t div = op == SL_AVG ? 3 : 0;
	void *d_a = in_place ? b->d_dst : b->d_a;
	uint64_t bad;

	fill_values(b->a, count, t);
	fill_values(b->peer, count, t);
	CUDA_OK(cudaMemcpy(d_a, b->a, bytes, cudaMemcpyHostToDevice));
	if (!in_place)
		CUDA_OK(cudaMemset(b->d_dst, 0xa5, bytes)); /* poison: every element must be written */
	/* Both calls return before their work is done (device memset, pageable
	 * copy), and the reducer runs on a stream of its own: wait for them, or
	 * the poison lands on results (seen on an H200). */
	CUDA_OK(cudaStreamSynchronize(0));
	if (!feed(f, b->d_dst, d_a, b->peer, count, t, op, kind, div, packet, skew)) {
		failures++;
		return;
	}
	CUDA_OK(cudaMemcpy(b->got, b->d_dst, bytes, cudaMemcpyDeviceToHost));
	if (kind == SL_GDMA_COPY) {
		CHECK(memcmp(b->got, b->peer, bytes) == 0, "copy of %" PRIu64 " %s differs", count, sl_dtype_name(t));
		return;
	}
	sl_reduce(b->want, b->a, b->peer, count, t, op == SL_AVG ? SL_SUM : op);
	if (div)
		sl_scale_avg(b->want, count, t, div);
	CHECK(memcmp(b->got, b->want, bytes) == 0, "%s %s x %" PRIu64 " (%s, skew %u): differs from coll/'s "
	      "sl_reduce", sl_dtype_name(t), sl_redop_name(op), count, in_place ? "in place" : "out of place", skew);
	bad = check_ref(b->got, b->a, b->peer, count, t, op == SL_AVG ? SL_SUM : op, div);
	CHECK(bad == 0, "%s %s x %" PRIu64 ": %" PRIu64 " elements off the reference", sl_dtype_name(t),
	      sl_redop_name(op), count, bad);
}

static struct sl_gdma *open_cuda(uint32_t blocks, uint64_t idle_ns)
{
	struct sl_gdma_cfg cfg = { .backend = SL_GDMA_CUDA, .blocks = blocks, .idle_ns = idle_ns };
	struct sl_gdma *g;
	char err[256];

	if (sl_gdma_open(&g, &cfg, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		exit(1);
	}
	return g;
}

static int test_reduce(bool quick)
{
	static const uint64_t sizes[] = { 1, 3, 1000, 4099, (1u << 20) + 5 };
	size_t nsizes = quick ? 3 : sizeof(sizes) / sizeof(sizes[0]);
	struct sl_gdma *g = open_cuda(0, 0);
	struct feeder f;
	struct buffers b;
	int cases = 0;

	feeder_init(&f, g, 64, 8192 + 64);
	buffers_alloc(&b, sizes[nsizes - 1] * 8);
	for (int t = 0; t < SL_DTYPE_COUNT; t++) {
		for (int op = 0; op < SL_REDOP_COUNT; op++) {
			for (size_t s = 0; s < nsizes; s++) {
				/* alternate in place / separate, aligned / skewed payloads */
				bool in_place = (s + (size_t)op) % 2;
				uint32_t skew = (s % 3 == 1) ? 0 : (s % 3 == 2 ? 42 : 2);
				run_case(&f, &b, sizes[s], (enum sl_dtype)t, (enum sl_redop)op, SL_GDMA_REDUCE,
					 in_place, skew, 8192);
				cases++;
			}
		}
		run_case(&f, &b, sizes[nsizes - 1] < 4099 ? sizes[nsizes - 1] : 4099, (enum sl_dtype)t, SL_SUM,
			 SL_GDMA_COPY, false, 2, 8192);
		cases++;
	}
	printf("reduce: %d cases (12 types x 5 ops x %zu sizes, copies), %d failures\n", cases, nsizes, failures);
	sl_gdma_close(g); /* first: cudaFree waits for every kernel on the device */
	buffers_free(&b);
	feeder_fini(&f);
	return failures ? 1 : 0;
}

/* ---- large: 1 GiB in 64 KiB chunks ---- */

static int test_large(bool quick)
{
	uint64_t bytes = quick ? (64ull << 20) : (1ull << 30);
	static const struct { enum sl_dtype t; enum sl_redop op; } cases[] = {
		{ SL_FLOAT32, SL_SUM }, { SL_BFLOAT16, SL_AVG }, { SL_INT64, SL_PROD },
	};
	struct sl_gdma *g = open_cuda(0, 0);
	struct feeder f;
	struct buffers b;
	size_t free_b = 0, total_b = 0;

	cudaMemGetInfo(&free_b, &total_b);
	if (free_b < 3 * bytes) {
		bytes = 64ull << 20;
		printf("large: only %zu MiB free on the GPU: using %" PRIu64 " MiB\n", free_b >> 20, bytes >> 20);
	}
	feeder_init(&f, g, 256, (64 << 10) + 64);
	buffers_alloc(&b, bytes);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t t0 = now_ns(), count = bytes / sl_dtype_size(cases[i].t);
		run_case(&f, &b, count, cases[i].t, cases[i].op, SL_GDMA_REDUCE, i % 2 == 0, 0, 64 << 10);
		printf("large: %s %s x %" PRIu64 " (%" PRIu64 " MiB) checked in %.1f s\n", sl_dtype_name(cases[i].t),
		       sl_redop_name(cases[i].op), count, bytes >> 20, (double)(now_ns() - t0) / 1e9);
	}
	sl_gdma_close(g);
	buffers_free(&b);
	feeder_fini(&f);
	return failures ? 1 : 0;
}

/* ---- lifecycle: stop and restart, synchronize, exit ---- */

/* Items that each add one to their own counters: stopped halfway and
 * restarted, every counter must still read exactly one. */
static void stop_restart(void)
{
	enum { ITEMS = 4000, PER = 64 };
	struct sl_gdma *g = open_cuda(4, 0);
	int64_t *d_cnt, *ones, *cnt = calloc(ITEMS * PER, sizeof(int64_t));
	uint32_t t = 0;
	int stops = 0;

	CUDA_OK(cudaMalloc((void **)&d_cnt, ITEMS * PER * sizeof(int64_t)));
	CUDA_OK(cudaMemset(d_cnt, 0, ITEMS * PER * sizeof(int64_t)));
	CUDA_OK(cudaStreamSynchronize(0)); /* done before the reducer's stream touches d_cnt */
	CUDA_OK(cudaHostAlloc((void **)&ones, PER * sizeof(int64_t), cudaHostAllocMapped));
	for (int i = 0; i < PER; i++)
		ones[i] = 1;
	for (int i = 0; i < ITEMS; i++) {
		struct sl_gdma_work w = { .dst = d_cnt + i * PER, .a = d_cnt + i * PER, .src = ones, .count = PER,
					  .dtype = SL_INT64, .op = SL_SUM, .kind = SL_GDMA_REDUCE };
		post_or_wait(g, &w, &t);
		if (i % 1000 == 500) {
			CHECK(sl_gdma_stop(g) == 0, "stop: %s", sl_gdma_error(g));
			CHECK(!sl_gdma_running(g), "the kernel still runs after stop");
			stops++;
		}
	}
	wait_ticket(g, t);
	CUDA_OK(cudaMemcpy(cnt, d_cnt, ITEMS * PER * sizeof(int64_t), cudaMemcpyDeviceToHost));
	for (int i = 0; i < ITEMS * PER; i++)
		if (cnt[i] != 1) {
			CHECK(false, "counter %d reads %" PRId64 " after %d stops and restarts: applied %s", i, cnt[i],
			      stops, cnt[i] ? "twice" : "never");
			break;
		}
	printf("lifecycle: %d items across %d stops and restarts, each applied once\n", ITEMS, stops);
	sl_gdma_close(g);
	cudaFree(d_cnt);
	cudaFreeHost(ones);
	free(cnt);
}

/* The application's cudaDeviceSynchronize, on a thread of its own. */
struct sync_state {
	cudaError_t rc;
	bool done;
};

static void *synchronize_thread(void *arg)
{
	struct sync_state *s = arg;

	s->rc = cudaDeviceSynchronize();
	__atomic_store_n(&s->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Post *d += *ones (one int64) and return its ticket in *t. */
static void add_one(struct sl_gdma *g, int64_t *d, int64_t *ones, uint32_t *t)
{
	post_or_wait(g, &(struct sl_gdma_work){ .dst = d, .a = d, .src = ones, .count = 1, .dtype = SL_INT64,
						.op = SL_SUM }, t);
}

/* With the kernel running, the application's cudaDeviceSynchronize returns
 * once the engine has let the idle kernel exit; meanwhile work on the legacy
 * default stream is not held up by it. */
static void synchronize_returns(void)
{
	struct sl_gdma *g = open_cuda(0, 2000000);
	int64_t *d, *ones, host = 0;
	uint32_t t;
	pthread_t th;
	struct sync_state sync = { cudaErrorUnknown, false };
	uint64_t t0;

	CUDA_OK(cudaMalloc((void **)&d, 64));
	CUDA_OK(cudaHostAlloc((void **)&ones, 64, cudaHostAllocMapped));
	ones[0] = 1;
	CUDA_OK(cudaMemset(d, 0, 64));
	add_one(g, d, ones, &t);
	wait_ticket(g, t);
	CHECK(sl_gdma_running(g), "the kernel should linger between bursts of work");
	/* legacy default stream work while the kernel runs */
	CUDA_OK(cudaMemcpy(&host, d, sizeof(host), cudaMemcpyDeviceToHost));
	CHECK(host == 1, "read back %" PRId64 ", want 1", host);
	t0 = now_ns();
	pthread_create(&th, NULL, synchronize_thread, &sync);
	while (sl_gdma_running(g) && now_ns() - t0 < 5000000000ull)
		sl_gdma_progress(g, now_ns()); /* the engine's loop */
	pthread_join(th, NULL);
	CHECK(sync.rc == cudaSuccess, "cudaDeviceSynchronize: %s", cudaGetErrorString(sync.rc));
	printf("lifecycle: cudaDeviceSynchronize returned %.2f ms after the engine went idle (idle_ns 2 ms)\n",
	       (double)(now_ns() - t0) / 1e6);
	/* and the next post starts it again */
	add_one(g, d, ones, &t);
	CHECK(wait_ticket(g, t), "no completion after a restart");
	CUDA_OK(cudaMemcpy(&host, d, sizeof(host), cudaMemcpyDeviceToHost));
	CHECK(host == 2, "read back %" PRId64 " after the restart, want 2", host);
	sl_gdma_close(g);
	cudaFree(d);
	cudaFreeHost(ones);
}

/* An engine that cannot tell its kernel to stop (blocked in another CUDA
 * call) does not keep it alive: its blocks exit after their own idle limit
 * (10 ms here), so the application's cudaDeviceSynchronize returns with no
 * progress call at all, and work posted after that is relaunched. */
static void exits_unattended(void)
{
	struct sl_gdma *g = open_cuda(0, 1000000);
	int64_t *d, *ones, host = 0;
	uint32_t t;
	pthread_t th;
	struct sync_state sync = { cudaErrorUnknown, false };
	uint64_t t0;
	bool returned;

	CUDA_OK(cudaMalloc((void **)&d, 64));
	CUDA_OK(cudaHostAlloc((void **)&ones, 64, cudaHostAllocMapped));
	ones[0] = 1;
	CUDA_OK(cudaMemset(d, 0, 64));
	CUDA_OK(cudaStreamSynchronize(0));
	add_one(g, d, ones, &t);
	wait_ticket(g, t);
	CHECK(sl_gdma_running(g), "the kernel should run right after its work");
	t0 = now_ns();
	pthread_create(&th, NULL, synchronize_thread, &sync);
	while (!__atomic_load_n(&sync.done, __ATOMIC_ACQUIRE) && now_ns() - t0 < 5000000000ull)
		usleep(1000); /* no sl_gdma_progress: the engine is away */
	returned = __atomic_load_n(&sync.done, __ATOMIC_ACQUIRE);
	CHECK(returned, "cudaDeviceSynchronize still waits 5 s after the last work with no progress call: the "
			"kernel did not exit on its own");
	if (returned)
		printf("lifecycle: with no progress calls the kernel exited on its own: cudaDeviceSynchronize "
		       "returned after %.2f ms (self exit after 10 ms idle)\n", (double)(now_ns() - t0) / 1e6);
	add_one(g, d, ones, &t);
	CHECK(wait_ticket(g, t), "work posted after the kernel exited on its own was not applied");
	CUDA_OK(cudaMemcpy(&host, d, sizeof(host), cudaMemcpyDeviceToHost));
	CHECK(host == 2, "read back %" PRId64 " after the relaunch, want 2", host);
	sl_gdma_close(g); /* stops a kernel that did not exit, so the thread returns */
	pthread_join(th, NULL);
	CHECK(sync.rc == cudaSuccess, "cudaDeviceSynchronize: %s", cudaGetErrorString(sync.rc));
	cudaFree(d);
	cudaFreeHost(ones);
}

/* After sl_gdma_restart the running kernel leaves new work alone: only the
 * kernel that progress launches once the old one has exited applies it. */
static void restart_leaves_new_work(void)
{
	struct sl_gdma *g = open_cuda(0, 60000000000ull);
	int64_t *d, *ones, host = 0;
	uint32_t t;
	struct sl_gdma_work w = { .count = 1, .dtype = SL_INT64, .op = SL_SUM };

	CUDA_OK(cudaMalloc((void **)&d, 64));
	CUDA_OK(cudaHostAlloc((void **)&ones, 64, cudaHostAllocMapped));
	ones[0] = 1;
	CUDA_OK(cudaMemset(d, 0, 64));
	CUDA_OK(cudaStreamSynchronize(0));
	w.dst = d;
	w.a = d;
	w.src = ones;
	post_or_wait(g, &w, &t);
	wait_ticket(g, t);
	CHECK(sl_gdma_running(g), "the kernel should still run (idle_ns 60 s)");
	sl_gdma_restart(g);
	post_or_wait(g, &w, &t);
	usleep(20000); /* no progress: nothing relaunches */
	CUDA_OK(cudaMemcpy(&host, d, sizeof(host), cudaMemcpyDeviceToHost));
	CHECK(host == 1, "read back %" PRId64 " before the relaunch, want 1: the old kernel took new work", host);
	CHECK(wait_ticket(g, t), "no completion after sl_gdma_restart");
	CUDA_OK(cudaMemcpy(&host, d, sizeof(host), cudaMemcpyDeviceToHost));
	CHECK(host == 2, "read back %" PRId64 " after the relaunch, want 2", host);
	printf("lifecycle: after a restart the old kernel left new work to the next\n");
	sl_gdma_close(g);
	cudaFree(d);
	cudaFreeHost(ones);
}

/* A process that exits (without closing) while its kernel runs. */
static int child_exit_running(void)
{
	struct sl_gdma *g = open_cuda(0, 60000000000ull);
	int64_t *d, *ones;
	uint32_t t;

	CUDA_OK(cudaMalloc((void **)&d, 64));
	CUDA_OK(cudaHostAlloc((void **)&ones, 64, cudaHostAllocMapped));
	ones[0] = 1;
	add_one(g, d, ones, &t);
	wait_ticket(g, t);
	return sl_gdma_running(g) ? 0 : 3; /* exit() with the kernel alive */
}

/* Run this program again with args; its exit status, or -1 after 30 s. */
static int run_self(const char *self, const char *a1, const char *a2)
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		execl(self, self, a1, a2, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static int test_lifecycle(const char *self)
{
	int rc;

	stop_restart();
	synchronize_returns();
	exits_unattended();
	restart_leaves_new_work();
	rc = run_self(self, "exit-running", NULL);
	CHECK(rc == 0, "a process exiting with its kernel running %s (status %d)",
	      rc < 0 ? "hung for 30 s" : "failed", rc);
	if (rc == 0)
		printf("lifecycle: a process exiting with its kernel running ends cleanly\n");
	return failures ? 1 : 0;
}

/* ---- mem: kinds, refusals, IPC across processes ---- */

static void check_kinds(void)
{
	struct sl_gdma_mem_info info;
	uint8_t *d, *pinned, *managed, *pageable = malloc(4096);
	char err[256] = "";

	CUDA_OK(cudaMalloc((void **)&d, 1 << 20));
	CUDA_OK(cudaHostAlloc((void **)&pinned, 4096, cudaHostAllocMapped));
	CUDA_OK(cudaMallocManaged((void **)&managed, 1 << 20, cudaMemAttachGlobal));
	CHECK(sl_gdma_mem_query(d + 4096, 8192, &info, err, sizeof(err)) == 0, "query: %s", err);
	CHECK(info.kind == SL_GDMA_MEM_DEVICE && info.base == d && info.size >= (1 << 20) && info.device == 0,
	      "device memory seen as kind %d base %p size %" PRIu64, info.kind, info.base, info.size);
	CHECK(sl_gdma_mem_check(d + 4096, 8192, 0, err, sizeof(err)) == 0, "check: %s", err);
	CHECK(sl_gdma_mem_query(d + 4096, 2 << 20, &info, err, sizeof(err)) == -EFAULT && strstr(err, "past the end"),
	      "a range past its allocation: \"%s\"", err);
	CHECK(sl_gdma_mem_check(pinned, 4096, 0, err, sizeof(err)) == 0, "pinned: %s", err);
	CHECK(sl_gdma_mem_check(pageable, 4096, 0, err, sizeof(err)) == -EFAULT && strstr(err, "ordinary host memory"),
	      "pageable memory: \"%s\"", err);
	CHECK(sl_gdma_mem_check(managed, 4096, 0, err, sizeof(err)) == -EFAULT && strstr(err, "managed"),
	      "managed memory: \"%s\"", err);
	CHECK(sl_gdma_mem_check(d, 64, 1, err, sizeof(err)) == -EFAULT && strstr(err, "memory of GPU 0"),
	      "another GPU's memory: \"%s\"", err);
	printf("mem: device, pinned, pageable, managed and out-of-range buffers classified; refusals say why\n");
	printf("mem: e.g. \"%s\"\n", err);
	cudaFree(d);
	cudaFreeHost(pinned);
	cudaFree(managed);
	free(pageable);
}

static void to_hex(const void *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const uint8_t *)p)[i]);
}

static void from_hex(const char *s, void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sscanf(s + 2 * i, "%2hhx", (uint8_t *)p + i);
}

/* The importing side: read the exporter's pattern, write our own. */
static int child_ipc(const char *hex)
{
	struct sl_gdma_ipc h;
	uint8_t buf[4096];
	void *base, *p;
	char err[256];

	from_hex(hex, &h, sizeof(h));
	if (sl_gdma_ipc_import(&h, &base, &p, err, sizeof(err))) {
		fprintf(stderr, "child: %s\n", err);
		return 2;
	}
	CUDA_OK(cudaMemcpy(buf, p, sizeof(buf), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < sizeof(buf); i++)
		if (buf[i] != (uint8_t)(i * 7))
			return 3;
	memset(buf, 0x5a, sizeof(buf));
	CUDA_OK(cudaMemcpy(p, buf, sizeof(buf), cudaMemcpyHostToDevice));
	return sl_gdma_ipc_close(base, err, sizeof(err)) ? 4 : 0;
}

static void check_ipc(const char *self)
{
	uint8_t *d, buf[4096];
	struct sl_gdma_ipc h;
	char err[256], hex[2 * sizeof(h) + 1];
	int rc;

	CUDA_OK(cudaMalloc((void **)&d, 1 << 20));
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	CUDA_OK(cudaMemcpy(d + 65536, buf, sizeof(buf), cudaMemcpyHostToDevice));
	CHECK(sl_gdma_ipc_export(d + 65536, 4096, &h, err, sizeof(err)) == 0, "export: %s", err);
	CHECK(h.offset == 65536 && h.size == 4096, "exported offset %" PRIu64 " size %" PRIu64, h.offset, h.size);
	to_hex(&h, sizeof(h), hex);
	rc = run_self(self, "ipc-child", hex);
	CHECK(rc == 0, "the importing process failed (status %d)", rc);
	CUDA_OK(cudaMemcpy(buf, d + 65536, sizeof(buf), cudaMemcpyDeviceToHost));
	CHECK(buf[0] == 0x5a && buf[4095] == 0x5a, "the importer's writes did not reach the exporter's buffer");
	if (rc == 0)
		printf("mem: a device buffer exported as %zu bytes, opened and written by another process\n",
		       sizeof(h));
	cudaFree(d);
}

static int test_mem(const char *self)
{
	check_kinds();
	check_ipc(self);
	return failures ? 1 : 0;
}

/* ---- stage: device -> pinned chunks, pipelined ---- */

static int test_stage(void)
{
	enum { CHUNK = 1 << 20, NBUF = 4 };
	uint64_t bytes = 64ull << 20, nchunks = bytes / CHUNK - 1, next = 0, landed = 0;
	uint8_t *host = malloc(bytes), *d;
	struct sl_gdma_stager *s;
	uint32_t bufs[NBUF], chunk_of[NBUF];
	uint32_t inflight = 0, head = 0;
	char err[256];

	fill_values(host, bytes, SL_UINT8);
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	CUDA_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
	CUDA_OK(cudaStreamSynchronize(0)); /* a pageable copy returns before its DMA lands */
	CHECK(sl_gdma_stager_open(&s, 0, NBUF, CHUNK, err, sizeof(err)) == 0, "stager: %s", err);
	CHECK(sl_gdma_stage(s, d, CHUNK + 1, &bufs[0], err, sizeof(err)) == -EINVAL, "an oversize chunk was taken");
	/* last chunk short, and offset by 3 bytes: chunks need not be aligned */
	while (landed < nchunks + 1) {
		while (next <= nchunks && inflight < NBUF) {
			uint64_t off = next * CHUNK + (next == nchunks ? 3 : 0);
			uint64_t n = next == nchunks ? CHUNK - 3 : CHUNK;
			uint32_t slot = (head + inflight) % NBUF;
			CHECK(sl_gdma_stage(s, d + off, n, &bufs[slot], err, sizeof(err)) == 0, "stage: %s", err);
			chunk_of[slot] = (uint32_t)next++;
			inflight++;
		}
		int r = sl_gdma_stage_ready(s, bufs[head]);
		CHECK(r >= 0, "a staged copy failed");
		if (r == 1) {
			uint64_t c = chunk_of[head], off = c * CHUNK + (c == nchunks ? 3 : 0);
			uint64_t n = c == nchunks ? CHUNK - 3 : CHUNK;
			CHECK(memcmp(sl_gdma_stage_buf(s, bufs[head]), host + off, n) == 0, "chunk %" PRIu64
			      " staged wrong", c);
			sl_gdma_stage_release(s, bufs[head]);
			head = (head + 1) % NBUF;
			inflight--;
			landed++;
		}
	}
	printf("stage: %" PRIu64 " chunks of 1 MiB staged through %d pinned buffers, all intact\n", landed, NBUF);
	/* a released buffer is taken again before an untouched one: the buffers in use stay few and cached */
	uint32_t first, second, again;
	CHECK(sl_gdma_stage(s, d, CHUNK, &first, err, sizeof(err)) == 0, "stage: %s", err);
	CHECK(sl_gdma_stage(s, d, CHUNK, &second, err, sizeof(err)) == 0, "stage: %s", err);
	sl_gdma_stage_release(s, first);
	CHECK(sl_gdma_stage(s, d, CHUNK, &again, err, sizeof(err)) == 0, "stage: %s", err);
	CHECK(again == first && first < second, "after buffer %u was released the stager took buffer %u (%u busy)",
	      first, again, second);
	CUDA_OK(cudaDeviceSynchronize());
	sl_gdma_stage_release(s, second);
	sl_gdma_stage_release(s, again);
	sl_gdma_stager_close(s);
	cudaFree(d);
	free(host);
	return failures ? 1 : 0;
}

/* ---- main ---- */

/* A hang (a kernel that never finishes, a synchronize that never returns)
 * fails the test in bounded time, saying so. */
static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: gdma_gpu_test hung for 240 s\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static bool have_gpu(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n == 0) {
		printf("SKIP: no usable CUDA device here (%s); these tests run on a GPU machine\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices");
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	bool quick = argc > 2 && strcmp(argv[2], "quick") == 0;

	if (strcmp(what, "ipc-child") == 0 && argc > 2)
		return child_ipc(argv[2]);
	if (strcmp(what, "exit-running") == 0)
		return child_exit_running();
	if (!have_gpu())
		return SKIP;
	signal(SIGALRM, on_alarm);
	alarm(240);
	if (strcmp(what, "reduce") == 0)
		return test_reduce(quick);
	if (strcmp(what, "large") == 0)
		return test_large(quick);
	if (strcmp(what, "lifecycle") == 0)
		return test_lifecycle(argv[0]);
	if (strcmp(what, "mem") == 0)
		return test_mem(argv[0]);
	if (strcmp(what, "stage") == 0)
		return test_stage();
	fprintf(stderr, "usage: %s reduce|large|lifecycle|mem|stage [quick]\n", argv[0]);
	return 2;
}
