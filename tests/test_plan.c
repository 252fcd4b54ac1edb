/*
 * test_plan.c: libsluice's planner (ctl/plan.c): the cost model's choices,
 * the measured link figures and SLUICE_ALGO and SLUICE_CHUNK_SIZE
 * overriding it, when to probe the links, and bad values refused
 * with a message.  The planner reads its configuration once per process,
 * so each configuration runs in a child of its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

struct want {
	uint32_t opcode;
	int nranks;
	size_t count;     /* float32 elements per block */
	uint32_t algo;    /* expected algorithm, 0: the call is refused, or UINT32_MAX: any */
	uint32_t chunk;   /* expected chunk bytes, or UINT32_MAX: any */
	double link_us, link_gbps; /* the communicator's measured links, 0: none */
};

/* What a call is split into (test_channels); the other tests take one channel. */
struct split {
	unsigned channels; /* the communicator's */
	unsigned parts;    /* expected slices */
	bool device;       /* GPU buffers */
};

/* The dataplane's bytes per packet in these tests: every chunk the model
 * asks for (4 to 256 KiB, powers of two) runs as asked, in whole packets,
 * at most 64 (test_chunk_as_run takes others). */
#define PAYLOAD_AS_ASKED 4096

/* In a child: set the variables ("NAME=value", NULL-terminated), plan each
 * call, exit 0 when all match (1 + index of the first miss). */
static int run_child(char *const env[], const struct want *w, const struct split *sp, size_t n)
{
	for (size_t i = 0; env && env[i]; i++)
		putenv(env[i]);
	for (size_t i = 0; i < n; i++) {
		struct split one = { 1, 1, false }, x = sp ? sp[i] : one;
		struct sluice_ctx ctx = { .payload = PAYLOAD_AS_ASKED };
		struct sluice_comm comm = { .ctx = &ctx, .nranks = w[i].nranks, .link_latency_us = w[i].link_us,
					    .link_gbps = w[i].link_gbps, .channels = x.channels };
		struct sl_call call = { .fn = "test", .opcode = w[i].opcode, .count = w[i].count,
					.dtype = SLUICE_FLOAT32, .device = x.device };
		struct sl_plan plan;
		sluice_result_t res = sl_plan_pick(&comm, &call, &plan);
		if (!w[i].algo ? res != SLUICE_ERR_INVALID_ARGUMENT || !strstr(sluice_last_error(), "SLUICE_")
			       : res != SLUICE_OK || (w[i].algo != UINT32_MAX && plan.algo != w[i].algo) ||
				 (w[i].chunk != UINT32_MAX && plan.chunk_bytes != w[i].chunk) ||
				 plan.parts != x.parts)
			return 1 + (int)i;
	}
	return 0;
}

static int in_child_split(char *const env[], const struct want *w, const struct split *sp, size_t n)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(run_child(env, w, sp, n));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int in_child(char *const env[], const struct want *w, size_t n)
{
	return in_child_split(env, w, NULL, n);
}

#define RING SL_ALGO_ID_RING
#define DIRECT SL_ALGO_ID_DIRECT
#define RD SL_ALGO_ID_RD
#define RHD SL_ALGO_ID_RHD
#define TREE SL_ALGO_ID_TREE
#define PAIRWISE SL_ALGO_ID_PAIRWISE
#define REFUSED 0
#define ANY UINT32_MAX
#define N(w) (sizeof(w) / sizeof((w)[0]))

static void test_cost_model(void **state)
{
	const struct want w[] = {
		{ SL_OP_ALLREDUCE, 2, 2, DIRECT, 0, 0, 0 },           /* one hop beats two */
		{ SL_OP_ALLREDUCE, 3, 2, DIRECT, 0, 0, 0 },
		{ SL_OP_ALLREDUCE, 3, 16 << 20, RING, ANY, 0, 0 },    /* 64 MB: bandwidth */
		{ SL_OP_ALLREDUCE, 1, 1000, DIRECT, 0, 0, 0 },        /* one rank: a local copy */
		{ SL_OP_ALLREDUCE, 64, 1024, RD, 0, 0, 0 },           /* 4 KB on 64: 6 hops of 4 KB beat 63 blocks */
		{ SL_OP_ALLREDUCE, 4, 64 << 10, RHD, ANY, 0, 0 },     /* 256 KB: the ring's bytes in fewer steps */
		{ SL_OP_ALLREDUCE, 64, 256 << 10, RHD, ANY, 0, 0 },
		{ SL_OP_REDUCE_SCATTER, 3, 16 << 20, RING, ANY, 0, 0 },
		{ SL_OP_REDUCE_SCATTER, 64, 256 << 10, RHD, ANY, 0, 0 }, /* direct holds 31 MB aside on average */
		{ SL_OP_REDUCE_SCATTER, 48, 16 << 10, DIRECT, 0, 0, 0 }, /* halving needs a power of two */
		{ SL_OP_ALLGATHER, 16, 16 << 10, DIRECT, 0, 0, 0 },   /* doubling: the same bytes in more steps */
		{ SL_OP_BROADCAST, 4, 16 << 20, RING, ANY, 0, 0 },    /* a pipelined chain */
		{ SL_OP_BROADCAST, 16, 16 << 10, TREE, ANY, 0, 0 },   /* 4 hops, the root's link 4 times */
		{ SL_OP_REDUCE, 16, 16 << 10, TREE, ANY, 0, 0 },
		{ SL_OP_ALLTOALL, 4, 1 << 20, DIRECT, 0, 0, 0 },      /* pairwise costs n-1 latencies more */
		{ SL_OP_BARRIER, 4, 0, DIRECT, 0, 0, 0 },
		{ SL_OP_SEND, 4, 100, DIRECT, 0, 0, 0 },
	};
	(void)state;
	assert_int_equal(in_child(NULL, w, N(w)), 0);
}

/* The communicator's measured links move the choice; the variables override them. */
static void test_link_figures(void **state)
{
	const struct want measured[] = {
		{ SL_OP_ALLREDUCE, 4, 64 << 10, RHD, ANY, 0, 0 },
		{ SL_OP_ALLREDUCE, 4, 64 << 10, DIRECT, 0, 1000, 2 }, /* 1 ms a hop: fewest hops */
		{ SL_OP_ALLREDUCE, 3, 16 << 10, DIRECT, 0, 0, 0 },
		{ SL_OP_ALLREDUCE, 3, 16 << 10, RING, ANY, 0.1, 2 },  /* no latency: fewest bytes */
	};
	const struct want given[] = { { SL_OP_ALLREDUCE, 3, 16 << 10, DIRECT, 0, 0.1, 2 } };
	char *env[] = { "SLUICE_LINK_LATENCY_US=15", NULL };
	(void)state;
	assert_int_equal(in_child(NULL, measured, N(measured)), 0);
	assert_int_equal(in_child(env, given, N(given)), 0);
}

static void test_overrides(void **state)
{
	const struct want ring[] = {
		{ SL_OP_ALLREDUCE, 2, 2, RING, ANY, 0, 0 },
		{ SL_OP_ALLTOALL, 4, 100, REFUSED, 0, 0, 0 },            /* ring does not run it: said so */
		{ SL_OP_BARRIER, 4, 0, REFUSED, 0, 0, 0 },
		{ SL_OP_BROADCAST, 1, 100, DIRECT, 0, 0, 0 },         /* one rank: a local copy, whatever is asked */
	};
	const struct want direct[] = { { SL_OP_ALLREDUCE, 3, 16 << 20, DIRECT, 0, 0, 0 } };
	const struct want chunk[] = {
		{ SL_OP_ALLREDUCE, 3, 16 << 20, RING, 65536, 0, 0 },
		{ SL_OP_BROADCAST, 3, 16 << 20, RING, 65536, 0, 0 },
	};
	/* the first listed that runs the call */
	const struct want list[] = {
		{ SL_OP_ALLREDUCE, 3, 1 << 20, RD, 0, 0, 0 },
		{ SL_OP_REDUCE_SCATTER, 4, 100, RHD, ANY, 0, 0 },
		{ SL_OP_REDUCE_SCATTER, 3, 100, DIRECT, 0, 0, 0 },    /* rhd: not on 3 ranks */
		{ SL_OP_ALLGATHER, 2, 100, RHD, ANY, 0, 0 },
		{ SL_OP_BROADCAST, 3, 100, TREE, ANY, 0, 0 },
		{ SL_OP_REDUCE, 5, 100, TREE, ANY, 0, 0 },
		{ SL_OP_ALLTOALL, 3, 100, PAIRWISE, 0, 0, 0 },
		{ SL_OP_GATHER, 3, 100, DIRECT, 0, 0, 0 },
	};
	const struct want only_rhd[] = {
		{ SL_OP_ALLREDUCE, 3, 100, RHD, ANY, 0, 0 },
		{ SL_OP_REDUCE_SCATTER, 3, 100, REFUSED, 0, 0, 0 },
		{ SL_OP_BROADCAST, 4, 100, REFUSED, 0, 0, 0 },
	};
	char *env_ring[] = { "SLUICE_ALGO=ring", NULL }, *env_direct[] = { "SLUICE_ALGO=DIRECT", NULL };
	char *env_chunk[] = { "SLUICE_CHUNK_SIZE=64K", NULL };
	char *env_list[] = { "SLUICE_ALGO=rd,rhd,tree,pairwise,direct", NULL }, *env_rhd[] = { "SLUICE_ALGO=rhd", NULL };
	(void)state;
	assert_int_equal(in_child(env_ring, ring, N(ring)), 0);
	assert_int_equal(in_child(env_direct, direct, N(direct)), 0);
	assert_int_equal(in_child(env_chunk, chunk, N(chunk)), 0);
	assert_int_equal(in_child(env_list, list, N(list)), 0);
	assert_int_equal(in_child(env_rhd, only_rhd, N(only_rhd)), 0);
}

/* Splitting over channels: only calls that slice, only while a slice keeps
 * 64 KiB, never over more than the communicator has or SLUICE_CHANNELS
 * allows; GPU buffers pipeline in 128 KiB chunks whatever the algorithm. */
static void test_channels(void **state)
{
	const struct want w[] = {
		{ SL_OP_ALLREDUCE, 2, 1 << 18, DIRECT, 0, 0, 0 },          /* 1 MiB */
		{ SL_OP_ALLREDUCE, 2, 50 << 10, DIRECT, 0, 0, 0 },         /* 200 KiB */
		{ SL_OP_ALLREDUCE, 2, 16 << 10, DIRECT, 0, 0, 0 },         /* 64 KiB */
		{ SL_OP_BROADCAST, 3, 1 << 18, ANY, ANY, 0, 0 },
		{ SL_OP_REDUCE, 3, 1 << 18, ANY, ANY, 0, 0 },
		{ SL_OP_SEND, 2, 1 << 18, DIRECT, 0, 0, 0 },
		{ SL_OP_ALLGATHER, 2, 1 << 18, ANY, ANY, 0, 0 },           /* 1 MiB per rank's block */
		{ SL_OP_REDUCE_SCATTER, 3, 50 << 10, ANY, ANY, 0, 0 },     /* 200 KiB per block */
		{ SL_OP_ALLTOALL, 2, 1 << 18, ANY, ANY, 0, 0 },
		{ SL_OP_GATHER, 4, 32 << 10, ANY, ANY, 0, 0 },             /* 128 KiB per block */
		{ SL_OP_SCATTER, 3, 16 << 10, ANY, ANY, 0, 0 },            /* 64 KiB per block */
		{ SL_OP_ALLTOALLV, 2, 1 << 18, ANY, ANY, 0, 0 },
		{ SL_OP_ALLREDUCE, 2, 1 << 18, DIRECT, 128 << 10, 0, 0 },  /* 1 MiB of GPU memory */
		{ SL_OP_ALLREDUCE, 3, 16 << 20, RING, 128 << 10, 0, 0 },   /* 64 MiB of it, on 3 */
	};
	const struct split sp[N(w)] = {
		{ 4, 4, false }, /* four slices of 256 KiB */
		{ 4, 3, false }, /* three of 66 */
		{ 4, 1, false }, /* not worth a second */
		{ 8, 8, false }, { 2, 2, false }, { 4, 4, false },
		/* blocks per rank: strided slices, 64 KiB of each block at least */
		{ 4, 4, false }, { 4, 3, false }, { 4, 4, false }, { 4, 2, false }, { 4, 1, false },
		{ 4, 1, false }, /* all-to-allv: the caller's displacements place its blocks */
		{ 4, 4, true },  /* 128 KiB chunks in each 256 KiB slice */
		{ 1, 1, true },  /* the same chunks, whatever the model would pick for the ring */
	};
	const struct want capped[] = { { SL_OP_ALLREDUCE, 2, 1 << 18, ANY, ANY, 0, 0 } };
	const struct split capped_sp[] = { { 8, 2, false } };
	char *env_cap[] = { "SLUICE_CHANNELS=2", NULL };
	struct sl_call call = { .count = 1000003, .dtype = SLUICE_FLOAT64 };
	uint64_t next = 0, first, count;

	(void)state;
	assert_int_equal(in_child_split(NULL, w, sp, N(w)), 0);
	assert_int_equal(in_child_split(env_cap, capped, capped_sp, N(capped)), 0);
	/* slices tile the buffer, each but the last starting on 4 KiB */
	for (unsigned p = 0; p < 3; p++) {
		sl_plan_slice(&call, 3, p, &first, &count);
		assert_int_equal(first, next);
		assert_int_equal(first * 8 % 4096, 0);
		assert_true(count > 0);
		next = first + count;
	}
	assert_int_equal(next, call.count);
}

/* The planner keeps its last choices for repeated shapes: each pair below
 * differs in one thing the choice depends on (size, collective, ranks,
 * link figures, GPU memory, channels), asked A, A, B, B, A, B, A (the
 * last three with both kept). */
static void test_repeated_shapes(void **state)
{
	const struct want pairs[][2] = {
		{ { SL_OP_ALLREDUCE, 3, 2, DIRECT, 0, 0, 0 }, { SL_OP_ALLREDUCE, 3, 16 << 20, RING, ANY, 0, 0 } },
		{ { SL_OP_BROADCAST, 16, 16 << 10, TREE, ANY, 0, 0 }, { SL_OP_ALLGATHER, 16, 16 << 10, DIRECT, 0, 0, 0 } },
		{ { SL_OP_ALLREDUCE, 64, 1024, RD, 0, 0, 0 }, { SL_OP_ALLREDUCE, 2, 1024, DIRECT, 0, 0, 0 } },
		{ { SL_OP_ALLREDUCE, 4, 64 << 10, RHD, ANY, 15, 2 }, { SL_OP_ALLREDUCE, 4, 64 << 10, DIRECT, 0, 1000, 2 } },
		{ { SL_OP_ALLREDUCE, 3, 16 << 10, DIRECT, 0, 15, 2 }, { SL_OP_ALLREDUCE, 3, 16 << 10, RING, ANY, 15, 0.01 } },
		{ { SL_OP_ALLREDUCE, 2, 1 << 18, DIRECT, 0, 0, 0 }, { SL_OP_ALLREDUCE, 2, 1 << 18, DIRECT, 128 << 10, 0, 0 } },
		{ { SL_OP_ALLREDUCE, 2, 1 << 18, DIRECT, 0, 0, 0 }, { SL_OP_ALLREDUCE, 2, 1 << 18, ANY, ANY, 0, 0 } },
	};
	const struct split sp[][2] = {
		{ { 1, 1, false }, { 1, 1, false } }, { { 1, 1, false }, { 1, 1, false } },
		{ { 1, 1, false }, { 1, 1, false } }, { { 1, 1, false }, { 1, 1, false } },
		{ { 1, 1, false }, { 1, 1, false } },
		{ { 4, 4, false }, { 4, 4, true } }, /* GPU memory: 128 KiB chunks */
		{ { 4, 4, false }, { 1, 1, false } }, /* channels: slices */
	};
	static const unsigned order[] = { 0, 0, 1, 1, 0, 1, 0 };
	struct want w[N(order)];
	struct split x[N(order)];
	(void)state;

	for (size_t i = 0; i < N(pairs); i++) {
		for (size_t k = 0; k < N(order); k++) {
			w[k] = pairs[i][order[k]];
			x[k] = sp[i][order[k]];
		}
		int miss = in_child_split(NULL, w, x, N(order));
		if (miss != 0)
			fail_msg("pair %zu, call %d: a repeated shape got another's plan", i, miss - 1);
	}
}

/* One call planned on a dataplane of payload bytes per packet. */
static struct sl_plan plan_on(uint32_t payload, uint32_t opcode, int nranks, size_t count)
{
	struct sluice_ctx ctx = { .payload = payload };
	struct sluice_comm comm = { .ctx = &ctx, .nranks = nranks, .channels = 1 };
	struct sl_call call = { .fn = "test", .opcode = opcode, .count = count, .dtype = SLUICE_FLOAT32 };
	struct sl_plan plan = { 0 };

	return sl_plan_pick(&comm, &call, &plan) == SLUICE_OK ? plan : (struct sl_plan){ 0 };
}

/* test_chunk_as_run's checks, in a child: 0, or the line of the first miss. */
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "test_plan.c:%d: missed\n", __LINE__); return 1; } } while (0)
static int chunk_as_run_child(void)
{
	/* 128 KiB all-reduce on 4 ranks: halving/doubling in 8 KiB chunks where
	 * they run as asked; in 16 KiB ones it costs more than rd */
	struct sl_plan asked = plan_on(PAYLOAD_AS_ASKED, SL_OP_ALLREDUCE, 4, 32 << 10);
	struct sl_plan shm = plan_on(16384, SL_OP_ALLREDUCE, 4, 32 << 10);
	CHECK(asked.algo == RHD && asked.chunk_bytes == 8192);
	CHECK(shm.algo == RD);
	/* 64 KiB broadcast on 7 ranks: a chain in 4 KiB chunks, else a tree */
	asked = plan_on(PAYLOAD_AS_ASKED, SL_OP_BROADCAST, 7, 16 << 10);
	shm = plan_on(16384, SL_OP_BROADCAST, 7, 16 << 10);
	CHECK(asked.algo == RING && asked.chunk_bytes == 4096);
	CHECK(shm.algo == TREE && shm.chunk_bytes == 16384);
	/* the same choice on 5 ranks, priced at the chunk that runs: more */
	asked = plan_on(PAYLOAD_AS_ASKED, SL_OP_BROADCAST, 5, 16 << 10);
	shm = plan_on(16384, SL_OP_BROADCAST, 5, 16 << 10);
	CHECK(asked.algo == RING && asked.chunk_bytes == 4096);
	CHECK(shm.algo == RING && shm.chunk_bytes == 16384);
	CHECK(shm.cost_us > asked.cost_us);
	/* whole packets of an odd payload, at most 64 of them */
	shm = plan_on(1408, SL_OP_ALLREDUCE, 3, 16 << 20);
	CHECK(shm.algo == RING && shm.chunk_bytes % 1408 == 0 && shm.chunk_bytes <= 64 * 1408);
	return 0;
}

/* The model prices the chunk the dataplane runs, whole packets of its
 * payload (at most 64), not the one it would ask for: on shm's 16 KiB
 * packets a 4 KiB chunk runs, and costs, 16 KiB. */
static void test_chunk_as_run(void **state)
{
	int status;
	pid_t pid = fork();

	(void)state;
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(chunk_as_run_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("the planner priced another chunk than the one that runs (the child says where)");
}

static void test_bad_values(void **state)
{
	const struct want any[] = { { SL_OP_ALLREDUCE, 2, 2, DIRECT, 0, 0, 0 } };
	static char *bad[][2] = {
		{ "SLUICE_ALGO=trees" }, { "SLUICE_ALGO=rd,rd" }, { "SLUICE_ALGO=rd," }, { "SLUICE_ALGO=,rd" },
		{ "SLUICE_CHUNK_SIZE=0" }, { "SLUICE_CHUNK_SIZE=17M" }, { "SLUICE_CHUNK_SIZE=64Q" },
		{ "SLUICE_LINK_PROBE=yes" }, { "SLUICE_LINK_GBPS=-1" }, { "SLUICE_CHANNELS=0" }, { "SLUICE_CHANNELS=9" },
	};
	(void)state;
	for (size_t i = 0; i < N(bad); i++)
		if (in_child(bad[i], any, 1) != 1)
			fail_msg("%s was accepted", bad[i][0]);
}

/* In a child: exit 0 when sl_plan_wants_probe() says want. */
static int probe_child(char *const env[], bool want)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		for (size_t i = 0; env[i]; i++)
			putenv(env[i]);
		_exit(sl_plan_wants_probe() != want);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_probe_wanted(void **state)
{
	char *none[] = { NULL }, *off[] = { "SLUICE_LINK_PROBE=0", NULL }, *on[] = { "SLUICE_LINK_PROBE=1", NULL };
	char *one[] = { "SLUICE_LINK_GBPS=3", NULL };
	char *both[] = { "SLUICE_LINK_GBPS=3", "SLUICE_LINK_LATENCY_US=20", NULL };
	(void)state;
	assert_int_equal(probe_child(none, true), 0);
	assert_int_equal(probe_child(on, true), 0);
	assert_int_equal(probe_child(off, false), 0);
	assert_int_equal(probe_child(one, true), 0);   /* the other figure is still unknown */
	assert_int_equal(probe_child(both, false), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cost_model),
		cmocka_unit_test(test_link_figures),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_channels),
		cmocka_unit_test(test_repeated_shapes),
		cmocka_unit_test(test_chunk_as_run),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_probe_wanted),
	};
	unsetenv("SLUICE_ALGO");
	unsetenv("SLUICE_CHUNK_SIZE");
	unsetenv("SLUICE_LINK_LATENCY_US");
	unsetenv("SLUICE_LINK_GBPS");
	unsetenv("SLUICE_LINK_PROBE");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
