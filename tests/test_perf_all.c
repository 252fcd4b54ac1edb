/*
 * test_perf_all.c: sluice-perf's -d all and -o all (perf/perf_common.c):
 * a table for every datatype and op in turn, skipping avg on the integer
 * types (an error, as in NCCL) and what the tool lacks (Open MPI's half,
 * bfloat16, fp8 and avg), each table's -J rows naming its datatype and op;
 * a collective that does not reduce runs one table per datatype.  One rank
 * of a fake backend that counts its calls by datatype and op.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "perf_common.h"
#include "perf_json.h"

static const char *const type_names[SLUICE_DATATYPE_COUNT] = {
	"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2",
};
static const char *const op_names[SLUICE_REDOP_COUNT] = { "sum", "prod", "max", "min", "avg" };

static unsigned calls[SLUICE_DATATYPE_COUNT][SLUICE_REDOP_COUNT];

static int counting_run(void *ctx, enum perf_coll coll, const void *send, void *recv, size_t count,
			sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	(void)ctx, (void)coll, (void)send, (void)recv, (void)count, (void)root;
	calls[dtype][op]++;
	return 0;
}

static int one_rank_sum(void *ctx, double *vals, int n)
{
	(void)ctx, (void)vals, (void)n; /* one rank: the sum is the value */
	return 0;
}

/* Open MPI's gaps, as mpi_perf.c has them. */
static const char *mpi_like_lacks(sluice_datatype_t t, sluice_redop_t op, bool reduces)
{
	if (t == SLUICE_FLOAT16 || t >= SLUICE_BFLOAT16)
		return "no such type";
	return reduces && op == SLUICE_AVG ? "no avg" : NULL;
}

static bool integer(int t)
{
	return t <= SLUICE_UINT64;
}

/* One 64-byte size, one timed call a phase, unchecked: the tables run in
 * order, datatype then op; perf_run's status, and the -J lines in want. */
static int run_all(enum perf_coll coll, bool all_dtypes, bool all_ops, sluice_redop_t op, bool mpi_like,
		   char want[][64], unsigned *nlines)
{
	static float send[64], recv[64];
	char line[2048];
	int rc;
	struct perf_opts o = { .coll = coll, .min_bytes = 64, .max_bytes = 64, .factor = 2, .iters = 1, .warmup = 0,
			       .dtype = SLUICE_FLOAT32, .op = op, .all_dtypes = all_dtypes, .all_ops = all_ops };
	struct perf_backend b = { .name = "fake", .rank = 0, .nranks = 1, .run = counting_run,
				  .sum_doubles = one_rank_sum, .lacks = mpi_like ? mpi_like_lacks : NULL };

	memset(calls, 0, sizeof(calls));
	FILE *f = perf_run_json_file(&o, &b, send, recv, &rc);
	for (*nlines = 0; fgets(line, sizeof(line), f); (*nlines)++) {
		const char *type = strstr(line, "\"type\":\""), *redop = strstr(line, "\"redop\":\"");
		assert_true(*nlines < SLUICE_DATATYPE_COUNT * SLUICE_REDOP_COUNT);
		assert_non_null(type);
		assert_non_null(redop);
		snprintf(want[*nlines], 64, "%.*s %.*s", (int)strcspn(type + 8, "\""), type + 8,
			 (int)strcspn(redop + 9, "\""), redop + 9);
	}
	fclose(f);
	return rc;
}

static void test_every_datatype_and_op(void **state)
{
	char seen[SLUICE_DATATYPE_COUNT * SLUICE_REDOP_COUNT][64], want[64];
	unsigned n, k = 0;
	(void)state;

	assert_int_equal(run_all(PERF_ALLREDUCE, true, true, SLUICE_SUM, false, seen, &n), 0);
	for (int t = 0; t < SLUICE_DATATYPE_COUNT; t++)
		for (int op = 0; op < SLUICE_REDOP_COUNT; op++) {
			bool runs = !(integer(t) && op == SLUICE_AVG);
			if ((calls[t][op] != 0) != runs)
				fail_msg("%s %s: %u calls, want %s", type_names[t], op_names[op], calls[t][op],
					 runs ? "some" : "none (avg on integers is skipped)");
			if (!runs)
				continue;
			snprintf(want, sizeof(want), "%s %s", type_names[t], op_names[op]);
			if (k >= n || strcmp(seen[k], want))
				fail_msg("-J line %u names \"%s\", want \"%s\"", k, k < n ? seen[k] : "(no line)", want);
			k++;
		}
	assert_int_equal(n, 12 * 5 - 6);
}

static void test_a_copy_runs_once_per_datatype(void **state)
{
	char seen[SLUICE_DATATYPE_COUNT * SLUICE_REDOP_COUNT][64], want[64];
	unsigned n;
	(void)state;

	assert_int_equal(run_all(PERF_ALLGATHER, true, true, SLUICE_SUM, false, seen, &n), 0);
	assert_int_equal(n, SLUICE_DATATYPE_COUNT);
	for (int t = 0; t < SLUICE_DATATYPE_COUNT; t++) {
		for (int op = 1; op < SLUICE_REDOP_COUNT; op++)
			assert_int_equal(calls[t][op], 0);
		assert_true(calls[t][SLUICE_SUM] > 0);
		snprintf(want, sizeof(want), "%s none", type_names[t]);
		assert_string_equal(seen[t], want);
	}
}

static void test_what_the_tool_lacks_is_skipped(void **state)
{
	char seen[SLUICE_DATATYPE_COUNT * SLUICE_REDOP_COUNT][64];
	unsigned n, tables = 0;
	(void)state;

	assert_int_equal(run_all(PERF_ALLREDUCE, true, true, SLUICE_SUM, true, seen, &n), 0);
	for (int t = 0; t < SLUICE_DATATYPE_COUNT; t++)
		for (int op = 0; op < SLUICE_REDOP_COUNT; op++) {
			bool runs = !mpi_like_lacks((sluice_datatype_t)t, (sluice_redop_t)op, true);
			assert_int_equal(calls[t][op] != 0, runs);
			tables += runs;
		}
	assert_int_equal(tables, 8 * 4);
	assert_int_equal(n, tables);
	/* named, float avg is refused before any call */
	assert_int_equal(run_all(PERF_ALLREDUCE, false, false, SLUICE_AVG, true, seen, &n), 2);
	assert_int_equal(calls[SLUICE_FLOAT32][SLUICE_AVG], 0);
	/* -d all -o avg: every table skipped, nothing to run */
	assert_int_equal(run_all(PERF_ALLREDUCE, true, false, SLUICE_AVG, true, seen, &n), 2);
	assert_int_equal(n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_datatype_and_op),
		cmocka_unit_test(test_a_copy_runs_once_per_datatype),
		cmocka_unit_test(test_what_the_tool_lacks_is_skipped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
