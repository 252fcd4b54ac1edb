/*
 * it_errors.c: a rank of the bad-input integration test, started by
 * sluice-run over real dataplanes.
 *
 * First the calls libsluice must refuse before anything is sent (memory
 * that was not allocated by sluice, a buffer too small for the count, a
 * count whose byte size overflows, an unknown datatype, AVG on integers),
 * each with a clear message, after which the communicator still works.
 * Ranks that disagree with each other are it_mismatch.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

static int rank = -1, nranks;
static sluice_ctx_t *ctx;

#define CHECK(call)                                                                              \
	do {                                                                                     \
		sluice_result_t r_ = (call);                                                     \
		if (r_ != SLUICE_OK) {                                                           \
			fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, sluice_last_error()); \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

static int failures;

static void expect(sluice_result_t got, sluice_result_t want, const char *needle, const char *what)
{
	const char *msg = sluice_last_error();
	if (got != want || (needle && !strstr(msg, needle))) {
		fprintf(stderr, "rank %d: %s: got %s (\"%s\"), want %s with \"%s\"\n", rank, what,
			sluice_get_error_string(got), msg, sluice_get_error_string(want), needle ? needle : "");
		failures++;
	}
}

static void refused_locally(sluice_comm_t *comm, float *buf)
{
	sluice_req_t *req = NULL;
	float *heap = malloc(64 * sizeof(float));

	expect(sluice_allreduce(comm, heap, heap, 64, SLUICE_FLOAT32, SLUICE_SUM, &req),
	       SLUICE_ERR_INVALID_ARGUMENT, "sluice_mem_alloc", "unregistered buffer");
	expect(sluice_allreduce(comm, buf, buf, 1 << 20, SLUICE_FLOAT32, SLUICE_SUM, &req),
	       SLUICE_ERR_INVALID_ARGUMENT, "sluice_mem_alloc", "buffer too small for the count");
	expect(sluice_allreduce(comm, buf, buf, SIZE_MAX / 2, SLUICE_FLOAT32, SLUICE_SUM, &req),
	       SLUICE_ERR_INVALID_ARGUMENT, "overflow", "count overflows");
	expect(sluice_allreduce(comm, buf, buf, 4, (sluice_datatype_t)99, SLUICE_SUM, &req),
	       SLUICE_ERR_INVALID_ARGUMENT, "datatype", "unknown datatype");
	expect(sluice_allreduce(comm, buf, buf, 4, SLUICE_INT32, SLUICE_AVG, &req),
	       SLUICE_ERR_INVALID_ARGUMENT, "avg", "avg on integers");
	/* only GPU memory is registered; host buffers come from sluice_mem_alloc */
	expect(sluice_mem_register(ctx, heap, 64 * sizeof(float)), SLUICE_ERR_INVALID_ARGUMENT,
	       "host memory", "registering host memory as a GPU buffer");
	expect(sluice_mem_register(ctx, buf, 64 * sizeof(float)), SLUICE_ERR_INVALID_ARGUMENT,
	       "sluice_mem_alloc", "registering sluice_mem_alloc memory again");
	expect(sluice_mem_deregister(ctx, heap), SLUICE_ERR_INVALID_ARGUMENT,
	       "sluice_mem_register", "deregistering what was never registered");
	free(heap);
}

/* After refusals, a good call on the same communicator still works. */
static void still_works(sluice_comm_t *comm, float *buf)
{
	sluice_req_t *req;
	for (int i = 0; i < 100; i++)
		buf[i] = (float)(rank + i);
	CHECK(sluice_allreduce(comm, buf, buf, 100, SLUICE_FLOAT32, SLUICE_SUM, &req));
	CHECK(sluice_wait(req));
	for (int i = 0; i < 100; i++) {
		float want = (float)(nranks * i + nranks * (nranks - 1) / 2);
		if (buf[i] != want) {
			fprintf(stderr, "rank %d: element %d is %g, want %g\n", rank, i, buf[i], want);
			failures++;
			return;
		}
	}
}

int main(void)
{
	sluice_comm_t *comm;
	float *buf;

	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	CHECK(sluice_mem_alloc(ctx, 4096 * sizeof(float), (void **)&buf));
	refused_locally(comm, buf);
	still_works(comm, buf);
	CHECK(sluice_comm_destroy(comm));
	CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_errors rank %d: %d failures\n", rank, failures);
	return failures ? 1 : 0;
}
