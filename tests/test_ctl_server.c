/*
 * test_ctl_server.c: the dataplane's side of the attach socket.  What a
 * daemon maps of a client (its page, its registered memory) is touched
 * when it is registered, so that a call faults in none of it; a
 * registration whose client hangs up stops touching.  A client's slot is
 * taken again only once every engine let go of the client that left it.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl_server.h"
#include "faults.h"
#include "raw_client.h"

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

/* ---- a client's slot and the engines that may still hold its client ---- */

#define SLOT_TIMEOUT_NS (300ull * 1000000)

/* A server of two channels, whose engines the test polls itself; one that
 * is frozen takes no pass, as a stuck engine. */
static struct {
	struct dp_engine e[2], *ep[2];
	_Atomic bool frozen[2], stop, ready, polling;
	pthread_t server, poller;
	char dir[64], path[128];
} srv;

static void *run_server(void *arg)
{
	struct dp_server_cfg cfg = { .socket_path = srv.path, .stop = &srv.stop };
	char err[256];
	(void)arg;

	if (dp_server_run(srv.ep, 2, &cfg, &srv.ready, err, sizeof(err)) != 0)
		fprintf(stderr, "the server did not start: %s\n", err);
	return NULL;
}

static void *poll_engines(void *arg)
{
	(void)arg;
	while (atomic_load(&srv.polling)) {
		for (unsigned ch = 0; ch < 2; ch++)
			if (!atomic_load(&srv.frozen[ch]))
				dp_engine_poll(&srv.e[ch]);
		usleep(100);
	}
	return NULL;
}

static void name_server(void)
{
	memset(&srv, 0, sizeof(srv));
	strcpy(srv.dir, "/tmp/sluice-ctl-server.XXXXXX");
	assert_non_null(mkdtemp(srv.dir));
	snprintf(srv.path, sizeof(srv.path), "%s/sock", srv.dir);
}

static void launch_server(void)
{
	char err[256];

	for (unsigned ch = 0; ch < 2; ch++) {
		struct dp_engine_cfg cfg = { .node = 0, .channel = ch, .max_frame = 2048, .timeout_ns = SLOT_TIMEOUT_NS };
		assert_int_equal(dp_engine_init(&srv.e[ch], &cfg, err, sizeof(err)), 0);
		srv.ep[ch] = &srv.e[ch];
	}
	atomic_store(&srv.polling, true);
	assert_int_equal(pthread_create(&srv.poller, NULL, poll_engines, NULL), 0);
	assert_int_equal(pthread_create(&srv.server, NULL, run_server, NULL), 0);
	while (!atomic_load(&srv.ready))
		usleep(1000);
}

static void start_server(void)
{
	name_server();
	launch_server();
}

static void stop_server(void)
{
	atomic_store(&srv.frozen[0], false);
	atomic_store(&srv.frozen[1], false);
	atomic_store(&srv.stop, true);
	pthread_join(srv.server, NULL);
	atomic_store(&srv.polling, false);
	pthread_join(srv.poller, NULL);
	for (unsigned ch = 0; ch < 2; ch++) {
		dp_engine_poll(&srv.e[ch]); /* answers left to the engine (the sanitizer build counts leaks) */
		dp_engine_fini(&srv.e[ch]);
	}
	rmdir(srv.dir);
}

static uint64_t now_ms(void)
{
	return dp_now_ns(NULL) / 1000000;
}

/*
 * A client leaves while channel 1's engine (the first asked to let go of it,
 * the owner of its memory last) takes no pass.  Its slot is not given to
 * the next client while that engine may still hold it; once the engine
 * comes round and applies the removal (in order, as it applies
 * everything), the slot is free again: it was never reused before.
 */
static void slot_free_once_every_engine_let_go(void **state)
{
	struct raw_client a, b, c;
	struct sl_ctl_reply r;
	uint64_t deadline;
	(void)state;

	start_server();
	r = raw_hello(&a, srv.path);
	assert_int_equal(r.status, SLUICE_OK);
	assert_int_equal(r.value, 0);
	atomic_store(&srv.frozen[1], true);
	close(a.fd);
	usleep(3 * SLOT_TIMEOUT_NS / 1000); /* the removal gave up on channel 1's timeout by now */

	r = raw_hello(&b, srv.path); /* channel 1 does not answer this one either */
	if (r.value == 0)
		fail_msg("a client attached while channel 1's engine still held the one that left got its slot 0 "
			 "(its reply: \"%s\")", r.msg);
	close(b.fd);

	atomic_store(&srv.frozen[1], false);
	for (deadline = now_ms() + 5000;; usleep(10000)) {
		r = raw_hello(&c, srv.path);
		close(c.fd);
		if (r.value == 0)
			break;
		if (now_ms() > deadline)
			fail_msg("5 s after channel 1's engine came round (and could let go of the client that left), "
				 "slot 0 was still not free: new clients got slot %u", r.value);
	}
	assert_int_equal(r.status, SLUICE_OK);
	stop_server();
}

/* ---- the socket's path and the listen behind it ---- */

/* Linked with --wrap=listen: the server's listen, held back while the test
 * watches the path, so that the window between bind and listen is wide. */
int __real_listen(int fd, int backlog);
static _Atomic bool slow_listen;

int __wrap_listen(int fd, int backlog)
{
	if (atomic_load(&slow_listen))
		usleep(200 * 1000);
	return __real_listen(fd, backlog);
}

static _Atomic int watcher_errno = -1;

/* What sluice-run and the tests do: wait for the path, connect at once. */
static void *connect_when_path_appears(void *arg)
{
	const char *path = arg;
	struct stat st;
	uint64_t deadline = dp_now_ns(NULL) + 10ull * 1000000000;

	while (stat(path, &st) != 0) {
		if (dp_now_ns(NULL) > deadline) {
			atomic_store(&watcher_errno, ETIMEDOUT);
			return NULL;
		}
		usleep(100);
	}
	int fd = raw_connect(path);
	atomic_store(&watcher_errno, fd >= 0 ? 0 : errno);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void path_appears_once_listening(void **state)
{
	pthread_t watcher;
	(void)state;

	name_server();
	assert_int_equal(pthread_create(&watcher, NULL, connect_when_path_appears, srv.path), 0);
	atomic_store(&slow_listen, true);
	launch_server();
	pthread_join(watcher, NULL);
	atomic_store(&slow_listen, false);
	stop_server();
	int err = atomic_load(&watcher_errno);
	if (err)
		fail_msg("a client that connected as soon as the socket's path appeared failed: %s (the path must "
			 "appear only once the socket listens: bind under a temporary name, listen, then rename)",
			 strerror(err));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(registered_memory_faults_nothing_in),
		cmocka_unit_test(touch_stops_when_abandoned),
		cmocka_unit_test(slot_free_once_every_engine_let_go),
		cmocka_unit_test(path_appears_once_listening),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
