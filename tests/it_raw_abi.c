/*
 * it_raw_abi.c: a hostile client against a real sluiced.
 *
 * libsluice checks its caller's arguments, but the dataplane must not trust
 * libsluice: any process of the user can write any descriptor into its
 * ring.  This test starts a one-node sluiced and speaks abi.h directly:
 * descriptors naming unregistered regions, ranges past a region's end,
 * another client's region or communicator, overflowing counts, all-to-allv
 * counts past the client page's counts area, a wrong ABI version, and a
 * connection from another uid.  Each must be refused with a
 * reason, and a valid descriptor must still work afterwards.  A
 * registration large enough to take seconds shows that one client's slow
 * request holds up no other client's.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <sluice/abi.h>
#include <sluice/sluice.h>

#include "faults.h"
#include "raw_client.h"

static char dir[64];
static char sock_path[256];
static pid_t sluiced_pid;

static int connect_socket(void)
{
	return raw_connect(sock_path);
}

static int memfd_of(size_t size, void **map)
{
	return named_memfd("raw", size, map);
}

static void hello(struct raw_client *c)
{
	struct sl_ctl_reply r = raw_hello(c, sock_path);

	assert_int_equal(r.status, SLUICE_OK);
	c->channels = r.channels;
}

static uint32_t reg(struct raw_client *c, size_t size, void **map)
{
	struct sl_ctl_msg m = { .type = SL_CTL_REG, .version = SL_ABI_VERSION, .a.size = size };
	struct sl_ctl_reply r;
	int fd = memfd_of(size, map);

	assert_int_equal(ctl_call(c->fd, &m, fd, &r), 0);
	assert_int_equal(r.status, SLUICE_OK);
	close(fd);
	return r.value;
}

static uint32_t comm1(struct raw_client *c, uint64_t key)
{
	struct sl_ctl_msg m = { .type = SL_CTL_COMM_CREATE, .version = SL_ABI_VERSION };
	struct sl_ctl_reply r;

	m.c.key = key;
	m.c.rank = 0;
	m.c.nranks = 1;
	m.c.node[0] = 0;
	assert_int_equal(ctl_call(c->fd, &m, -1, &r), 0);
	assert_int_equal(r.status, SLUICE_OK);
	return r.value;
}

/* Submit one descriptor and wait (bounded) for its completion. */
static struct sl_cpl submit(struct raw_client *c, struct sl_cmd cmd)
{
	static uint64_t tag = 100;
	struct sl_cpl cpl;
	struct timespec ts = { 0, 1000000 };

	cmd.req = ++tag;
	assert_true(sl_spsc_enqueue(&c->submit, &cmd));
	for (int i = 0; i < 10000; i++) {
		if (sl_spsc_dequeue(&c->complete, &cpl)) {
			assert_int_equal(cpl.req, tag);
			return cpl;
		}
		nanosleep(&ts, NULL);
	}
	fail_msg("no completion within 10 s");
	return cpl;
}

static struct sl_cmd allreduce(uint32_t comm, uint32_t region, uint64_t off, uint64_t count)
{
	return (struct sl_cmd){ .opcode = SL_OP_ALLREDUCE, .comm = comm, .count = count,
				.dtype = SLUICE_FLOAT32, .redop = SLUICE_SUM, .send_region = region,
				.recv_region = region, .send_off = off, .recv_off = off };
}

static void expect_refused(struct raw_client *c, struct sl_cmd cmd, const char *needle)
{
	struct sl_cpl cpl = submit(c, cmd);
	assert_int_not_equal(cpl.status, SLUICE_OK);
	if (!strstr(cpl.msg, needle))
		fail_msg("refusal says \"%s\", expected it to mention \"%s\"", cpl.msg, needle);
}

static void test_forged_descriptors(void **state)
{
	struct raw_client a, b;
	float *mem;
	uint32_t ra, ca, cb;
	struct sl_cmd ok;
	struct sl_cpl cpl;
	(void)state;

	hello(&a);
	ra = reg(&a, 4096, (void **)&mem);
	ca = comm1(&a, 0x1111);
	expect_refused(&a, allreduce(ca, ra + 7, 0, 16), "not inside memory");
	expect_refused(&a, allreduce(ca, ra, 4000, 100), "not inside memory");
	expect_refused(&a, allreduce(ca, ra, UINT64_MAX - 8, 4), "not inside memory");
	expect_refused(&a, allreduce(ca, ra, 0, 1ull << 62), "overflows");
	ok = allreduce(ca, ra, 0, 16);
	ok.dtype = 77;
	expect_refused(&a, ok, "unknown datatype");
	ok = allreduce(ca, ra, 0, 16);
	ok.opcode = 99;
	expect_refused(&a, ok, "opcode");

	/* A second application: none of a's regions or communicators are b's. */
	hello(&b);
	cb = comm1(&b, 0x2222);
	expect_refused(&b, allreduce(cb, ra, 0, 16), "not inside memory");
	expect_refused(&b, allreduce(ca, ra, 0, 16), "does not hold");

	/* And the real thing still works: one rank, so recv = send. */
	for (int i = 0; i < 16; i++)
		mem[i] = (float)i * 1.5f;
	ok = allreduce(ca, ra, 0, 16);
	ok.recv_off = 512;
	cpl = submit(&a, ok);
	assert_int_equal(cpl.status, SLUICE_OK);
	assert_memory_equal(mem, mem + 128, 16 * sizeof(float));
	close(a.fd);
	close(b.fd);
}

/* All-to-allv's counts are read from the client page's counts area at the
 * descriptor's offset: counts that run past the area are refused, and
 * counts written there run the call (one rank: its block to itself). */
static void test_alltoallv_counts(void **state)
{
	struct raw_client a;
	int32_t *mem;
	uint64_t *v;
	uint32_t ra, ca;
	struct sl_cpl cpl;
	(void)state;

	hello(&a);
	ra = reg(&a, 4096, (void **)&mem);
	ca = comm1(&a, 0x3333);
	struct sl_cmd cmd = { .opcode = SL_OP_ALLTOALLV, .comm = ca, .dtype = SLUICE_INT32, .send_region = ra,
			      .recv_region = ra, .recv_off = 256, .meta_off = 2 * SL_VMETA_UNIT };
	v = (uint64_t *)((uint8_t *)a.page + sl_page_vmeta_off() + cmd.meta_off);
	v[SL_VMETA_SEND_COUNT] = v[SL_VMETA_RECV_COUNT] = 5;
	v[SL_VMETA_SEND_DISPL] = 1;
	v[SL_VMETA_RECV_DISPL] = 3;
	for (int i = 0; i < 64; i++)
		mem[i] = i;
	cpl = submit(&a, cmd);
	assert_int_equal(cpl.status, SLUICE_OK);
	assert_memory_equal(mem + 64 + 3, mem + 1, 5 * sizeof(*mem));
	cmd.meta_off = SL_VMETA_BYTES - 16; /* one rank's counts are 32 bytes */
	expect_refused(&a, cmd, "counts area");
	cmd.meta_off = UINT32_MAX;
	expect_refused(&a, cmd, "counts area");
	close(a.fd);
}

static void test_wrong_version(void **state)
{
	struct sl_ctl_msg m = { .type = SL_CTL_INFO, .version = SL_ABI_VERSION + 1 };
	struct sl_ctl_reply r;
	int fd = connect_socket();
	(void)state;

	assert_true(fd >= 0);
	assert_int_equal(ctl_call(fd, &m, -1, &r), 0);
	assert_int_equal(r.status, SLUICE_ERR_INVALID_USAGE);
	assert_non_null(strstr(r.msg, "ABI version"));
	/* Before HELLO, nothing but INFO is served. */
	m = (struct sl_ctl_msg){ .type = SL_CTL_REG, .version = SL_ABI_VERSION, .a.size = 4096 };
	assert_int_equal(ctl_call(fd, &m, -1, &r), 0);
	assert_int_equal(r.status, SLUICE_ERR_INVALID_USAGE);
	close(fd);
}

static void test_other_user_refused(void **state)
{
	int status;
	pid_t pid;
	(void)state;

	if (geteuid() != 0)
		skip();
	pid = fork();
	if (pid == 0) {
		struct sl_ctl_reply r;
		int fd;
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		fd = connect_socket();
		if (fd < 0)
			_exit(4);
		/* The refusal arrives unasked, then the socket closes. */
		if (recv(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r) || r.status == SLUICE_OK ||
		    !strstr(r.msg, "refused"))
			_exit(5);
		if (recv(fd, &r, sizeof(r), 0) != 0)
			_exit(6);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int start_sluiced(void **state)
{
	const char *root = getenv("SLUICE_BUILD_ROOT");
	char exe[512];
	(void)state;

	strcpy(dir, "/tmp/sluice-rawabi.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	chmod(dir, 0755);
	snprintf(sock_path, sizeof(sock_path), "%s/sluiced.sock", dir);
	snprintf(exe, sizeof(exe), "%s/dataplane/sluiced", root ? root : "build");
	sluiced_pid = fork();
	if (sluiced_pid == 0) {
		execl(exe, exe, "--node", "0", "--socket", sock_path, "--quiet", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		struct stat st;
		if (stat(sock_path, &st) == 0)
			return 0;
		if (waitpid(sluiced_pid, NULL, WNOHANG) == sluiced_pid)
			break;
		usleep(20000);
	}
	fprintf(stderr, "sluiced (%s) did not start\n", exe);
	return -1;
}

static int stop_sluiced(void **state)
{
	int status = 0;
	(void)state;
	kill(sluiced_pid, SIGTERM);
	waitpid(sluiced_pid, &status, 0);
	rmdir(dir);
	/* It must survive all of the above and exit cleanly when asked. */
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The dataplane faults in only the page's rings of the channels it runs
 * (ctl_server.c): the rest, 1.5 MB since ABI 9, cost every attach 10 ms
 * here.  mincore sees the memfd's pages whoever faulted them in. */
static void test_unused_rings_not_faulted(void **state)
{
	(void)state;
	struct raw_client a;
	hello(&a);
	assert_true(a.channels < SL_MAX_CHANNELS); /* else there is nothing to check */

	size_t from = sl_page_submit_off(a.channels), resident;
	resident = resident_pages((uint8_t *)a.page + from, sl_page_bytes() - from);
	if (resident)
		fail_msg("%zu pages past channel %u's rings were faulted in", resident, a.channels - 1);
	close(a.fd);
}

/* Whether sluiced maps a memfd of this name now. */
static bool sluiced_maps(const char *memfd_name)
{
	char path[64], line[512], needle[128];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)sluiced_pid);
	snprintf(needle, sizeof(needle), "/memfd:%s ", memfd_name);
	f = fopen(path, "r");
	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* Wait (10 s at most) until sluiced maps the memfd named so, or no longer does. */
static void wait_mapped(const char *memfd_name, bool mapped, const char *what)
{
	for (int i = 0; sluiced_maps(memfd_name) != mapped; i++) {
		if (i == 1000)
			fail_msg("%s: sluiced %s maps it after 10 s", what, mapped ? "still never" : "still");
		usleep(10000);
	}
}

static bool replied(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

/* A registration whose pages take seconds to touch: sluiced touches every
 * page of a fresh memfd as it registers it (ctl_server.c), 0.7 ms a MiB at
 * best, 3-5 ms here, while a client's attach and a communicator take a few
 * milliseconds.  Memory: the first client's gigabyte, and a piece or two of
 * the third's. */
#define SLOW_REG_BYTES (1ull << 30)

/*
 * One client registers a gigabyte, whose touch takes seconds.  Meanwhile a
 * second client attaches, creates and destroys a communicator, and a third
 * hangs up in the middle of its own registration, which sluiced then lets
 * go of: all of it answered before the first registration, checked by the
 * order of the replies (on a faster machine too).  That one then comes, and
 * works.
 */
static void test_slow_registration_holds_up_nobody(void **state)
{
	struct sl_ctl_msg m = { .type = SL_CTL_REG, .version = SL_ABI_VERSION, .a.size = SLOW_REG_BYTES };
	struct sl_ctl_reply r;
	struct raw_client a, b, c;
	void *amem, *cmem;
	int afd, cfd;
	(void)state;

	hello(&a);
	afd = named_memfd("slow-reg-kept", m.a.size, &amem);
	assert_int_equal(ctl_send(a.fd, &m, afd), 0);
	wait_mapped("slow-reg-kept", true, "the first client's registration");

	hello(&b);
	struct sl_ctl_msg destroy = { .type = SL_CTL_COMM_DESTROY, .version = SL_ABI_VERSION };
	destroy.a.comm = comm1(&b, 0x5555);
	assert_int_equal(ctl_call(b.fd, &destroy, -1, &r), 0);
	assert_int_equal(r.status, SLUICE_OK);
	if (replied(a.fd))
		fail_msg("the first client's registration was answered before a second client's attach and "
			 "communicator were: the second waited behind it");

	hello(&c);
	cfd = named_memfd("slow-reg-dropped", m.a.size, &cmem);
	assert_int_equal(ctl_send(c.fd, &m, cfd), 0);
	wait_mapped("slow-reg-dropped", true, "the third client's registration");
	close(c.fd);
	wait_mapped("slow-reg-dropped", false, "a registration whose client hung up");
	if (replied(a.fd))
		fail_msg("the first client's registration was answered before a registration abandoned "
			 "after it was let go: that one was touched to its end for nobody");

	assert_int_equal(recv(a.fd, &r, sizeof(r), 0), (ssize_t)sizeof(r));
	assert_int_equal(r.status, SLUICE_OK);
	struct sl_ctl_msg dereg = { .type = SL_CTL_DEREG, .version = SL_ABI_VERSION };
	dereg.a.region = r.value;
	assert_int_equal(ctl_call(a.fd, &dereg, -1, &r), 0);
	assert_int_equal(r.status, SLUICE_OK);
	wait_mapped("slow-reg-kept", false, "a deregistered region");
	close(a.fd);
	close(b.fd);
	close(afd);
	close(cfd);
	munmap(amem, m.a.size);
	munmap(cmem, m.a.size);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forged_descriptors),
		cmocka_unit_test(test_alltoallv_counts),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_other_user_refused),
		cmocka_unit_test(test_unused_rings_not_faulted),
		cmocka_unit_test(test_slow_registration_holds_up_nobody),
	};
	return cmocka_run_group_tests(tests, start_sluiced, stop_sluiced);
}
