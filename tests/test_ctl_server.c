/*
 * test_ctl_server.c: the dataplane's side of the attach socket.  What a
 * daemon maps of a client (its page, its registered memory) is touched
 * when it is registered, so that a call faults in none of it; a
 * registration whose client hangs up stops touching.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl_server.h"
#include "faults.h"

#define REGION (8u << 20)

static const char *never(void *arg)
{
	(void)arg;
	return NULL;
}

/* The second piece's look says the client hung up. */
static const char *at_second_piece(void *looks)
{
	return ++*(int *)looks == 2 ? "the client hung up" : NULL;
}

/* A client's registered memory, written whole by the client, then read and
 * written whole by the dataplane as calls would: no page faults in.  Not
 * touched when mapped, each page's first access came in a call (10-14 us
 * on the PVM guests sluice runs on: a 3-rank 128 KiB scatter's first call
 * on fresh buffers 550-700 us against 110). */
static void registered_memory_faults_nothing_in(void **state)
{
	(void)state;
	int fd = memfd_create("sluice-test-region", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, REGION), 0);
	uint8_t *client = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(client != MAP_FAILED);
	memset(client, 7, REGION);

	uint8_t *dp = dp_map_client_file(fd, REGION, 0);
	assert_true(dp != MAP_FAILED);
	assert_null(dp_touch_client_memory(dp, REGION, never, NULL));
	long before = page_faults(RUSAGE_THREAD);
	uint64_t sum = 0;
	for (size_t i = 0; i < REGION; i += 64) {
		sum += dp[i];
		dp[i] = 1;
	}
	long faults = page_faults(RUSAGE_THREAD) - before;
	assert_int_equal(sum, (uint64_t)7 * (REGION / 64));
	if (faults > 2)
		fail_msg("reading and writing %u MiB of registered memory faulted %ld pages in (want at most 2): "
			 "the dataplane did not touch it when it mapped it", REGION >> 20, faults);
	munmap(dp, REGION);
	munmap(client, REGION);
	close(fd);
}

/* A registration abandoned between two pieces touches no further: a 6 GiB
 * one took 25 s here, for a client gone. */
static void touch_stops_when_abandoned(void **state)
{
	const uint64_t len = 4 * DP_TOUCH_PIECE;
	int looks = 0, fd = memfd_create("sluice-test-abandoned", MFD_CLOEXEC);
	(void)state;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	uint8_t *dp = dp_map_client_file(fd, len, 0);
	assert_true(dp != MAP_FAILED);
	const char *why = dp_touch_client_memory(dp, len, at_second_piece, &looks);
	size_t touched = resident_pages(dp, len) * (size_t)sysconf(_SC_PAGESIZE);
	if (!why || strcmp(why, "the client hung up") != 0 || touched != DP_TOUCH_PIECE)
		fail_msg("abandoned at its second piece, the touch said \"%s\" and touched %zu MiB (want the reason, "
			 "and the first piece only: %llu MiB)", why ? why : "(done)", touched >> 20, DP_TOUCH_PIECE >> 20);
	munmap(dp, len);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(registered_memory_faults_nothing_in),
		cmocka_unit_test(touch_stops_when_abandoned),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
