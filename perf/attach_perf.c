/*
 * attach_perf.c: sluice-attach, what a rank waits for before its first call:
 * sluice_init (the client page made and handed to the dataplane, which maps
 * and touches it) and the first communicator's creation (bootstrap barrier
 * and the dataplane's tables; SLUICE_LINK_PROBE=0 leaves out the link
 * measurement, which is calls, not attach).  One line per rank:
 *   attach rank R init_us I comm_us C
 * Run under sluice-run, once per sample: a process attaches once.
 */
#include <stdio.h>
#include <time.h>

#include <sluice/sluice.h>

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int fail(const char *what, sluice_result_t r)
{
	fprintf(stderr, "sluice-attach: %s: %s: %s\n", what, sluice_get_error_string(r), sluice_last_error());
	return 1;
}

int main(void)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_result_t r;
	int rank;
	double t0 = now_us(), t1, t2;

	if ((r = sluice_init(&ctx)) != SLUICE_OK)
		return fail("sluice_init", r);
	t1 = now_us();
	if ((r = sluice_comm_init_env(ctx, &comm)) != SLUICE_OK)
		return fail("sluice_comm_init_env", r);
	t2 = now_us();
	if ((r = sluice_comm_rank(comm, &rank)) != SLUICE_OK)
		return fail("sluice_comm_rank", r);
	printf("attach rank %d init_us %.0f comm_us %.0f\n", rank, t1 - t0, t2 - t1);
	if ((r = sluice_comm_destroy(comm)) != SLUICE_OK)
		return fail("sluice_comm_destroy", r);
	if ((r = sluice_finalize(ctx)) != SLUICE_OK)
		return fail("sluice_finalize", r);
	return 0;
}
