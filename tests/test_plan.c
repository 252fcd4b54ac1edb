/*
 * test_plan.c: libsluice's planner (ctl/plan.c): the cost model's choices,
 * SLUICE_ALGO and SLUICE_CHUNK_SIZE overriding it, and bad values refused
 * with a message.  The planner reads its configuration once per process,
 * so each configuration runs in a child of its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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
	uint32_t algo;    /* expected algorithm */
	uint32_t chunk;   /* expected chunk bytes, or UINT32_MAX: any */
};

/* In a child: set the variables, plan each call, exit 0 when all match (1 + index of the first miss). */
static int run_child(const char *algo, const char *chunk, const struct want *w, size_t n)
{
	if (algo)
		setenv("SLUICE_ALGO", algo, 1);
	if (chunk)
		setenv("SLUICE_CHUNK_SIZE", chunk, 1);
	for (size_t i = 0; i < n; i++) {
		struct sluice_comm comm = { .nranks = w[i].nranks };
		struct sl_call call = { .fn = "test", .opcode = w[i].opcode, .count = w[i].count,
					.dtype = SLUICE_FLOAT32 };
		struct sl_plan plan;
		if (sl_plan_pick(&comm, &call, &plan) != SLUICE_OK || plan.algo != w[i].algo ||
		    (w[i].chunk != UINT32_MAX && plan.chunk_bytes != w[i].chunk))
			return 1 + (int)i;
	}
	return 0;
}

static int in_child(const char *algo, const char *chunk, const struct want *w, size_t n)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(run_child(algo, chunk, w, n));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define RING SL_ALGO_ID_RING
#define DIRECT SL_ALGO_ID_DIRECT
#define ANY UINT32_MAX

static void test_cost_model(void **state)
{
	const struct want w[] = {
		{ SL_OP_ALLREDUCE, 2, 2, DIRECT, 0 },           /* one hop beats two */
		{ SL_OP_ALLREDUCE, 3, 2, DIRECT, 0 },
		{ SL_OP_ALLREDUCE, 3, 16 << 20, RING, ANY },    /* 64 MB: bandwidth */
		{ SL_OP_ALLREDUCE, 1, 1000, DIRECT, 0 },        /* one rank: a local copy */
		{ SL_OP_REDUCE_SCATTER, 4, 16 << 20, RING, ANY },
		{ SL_OP_BROADCAST, 4, 16 << 20, RING, ANY },    /* a pipelined chain */
		{ SL_OP_ALLTOALL, 4, 1 << 20, DIRECT, 0 },      /* no ring all-to-all */
		{ SL_OP_BARRIER, 4, 0, DIRECT, 0 },
		{ SL_OP_SEND, 4, 100, DIRECT, 0 },
	};
	(void)state;
	assert_int_equal(in_child(NULL, NULL, w, sizeof(w) / sizeof(w[0])), 0);
}

static void test_overrides(void **state)
{
	const struct want ring[] = {
		{ SL_OP_ALLREDUCE, 2, 2, RING, ANY },
		{ SL_OP_ALLTOALL, 4, 100, DIRECT, 0 },          /* ring does not apply: the model's choice */
	};
	const struct want direct[] = { { SL_OP_ALLREDUCE, 3, 16 << 20, DIRECT, 0 } };
	const struct want chunk[] = {
		{ SL_OP_ALLREDUCE, 3, 16 << 20, RING, 65536 },
		{ SL_OP_BROADCAST, 3, 16 << 20, RING, 65536 },
	};
	(void)state;
	assert_int_equal(in_child("ring", NULL, ring, 2), 0);
	assert_int_equal(in_child("DIRECT", NULL, direct, 1), 0);
	assert_int_equal(in_child(NULL, "64K", chunk, 2), 0);
}

static void test_bad_values(void **state)
{
	const struct want any[] = { { SL_OP_ALLREDUCE, 2, 2, DIRECT, 0 } };
	(void)state;
	assert_int_equal(in_child("tree", NULL, any, 1), 1);
	assert_int_equal(in_child(NULL, "0", any, 1), 1);
	assert_int_equal(in_child(NULL, "17M", any, 1), 1);
	assert_int_equal(in_child(NULL, "64Q", any, 1), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cost_model),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_bad_values),
	};
	unsetenv("SLUICE_ALGO");
	unsetenv("SLUICE_CHUNK_SIZE");
	unsetenv("SLUICE_LINK_LATENCY_US");
	unsetenv("SLUICE_LINK_GBPS");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
