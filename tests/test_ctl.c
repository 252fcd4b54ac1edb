/*
 * test_ctl.c: libsluice without a real dataplane.  Configuration errors,
 * the TCP bootstrap among threads on loopback, and, against a fake
 * dataplane (a thread serving the attach socket and the rings of abi.h),
 * attach, registered memory, communicators, the argument checks of
 * sluice_allreduce and the submit / complete / test / wait paths with
 * their errors.  The fake tests the library's side of the ABI only; the
 * real dataplane has its own integration tests.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>
#include <sluice/errmsg.h>

#include "../ctl/internal.h"
#include "faults.h"

#define FAKE_NODE 42
#define FAKE_REGION_BASE 5 /* fake region ids start here, so slot and id differ */
#define FAKE_MAX_CLIENTS 4
#define MAX_HELD 2048

/* The fake runs on its own thread, where cmocka's asserts cannot jump: it aborts instead. */
#define FAKE_CHECK(cond)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "fake dataplane: %s failed at line %d\n", #cond, __LINE__); \
			abort();                                                          \
		}                                                                         \
	} while (0)

static void assert_error(sluice_result_t got, sluice_result_t want, const char *needle)
{
	if (got != want || !strstr(sluice_last_error(), needle))
		fail_msg("got %s (%d), want %s (%d) with \"%s\"; message: %s", sluice_get_error_string(got),
			 got, sluice_get_error_string(want), want, needle, sluice_last_error());
}

static void clear_env(void)
{
	static const char *const vars[] = {
		"SLUICE_SOCKET", "SLUICE_EMBEDDED", "SLUICE_EMBEDDED_ARGS", "SLUICE_DP_LIB", "SLUICE_ROOT",
		"SLUICE_RANK", "SLUICE_WORLD_SIZE", "SLUICE_TIMEOUT", "SLUICE_DEBUG", "SLUICE_DEBUG_SUBSYS", "SLUICE_YIELD",
		"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
		"SLURM_PROCID", "SLURM_NTASKS", "MASTER_ADDR", "MASTER_PORT",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static int env_setup(void **state)
{
	(void)state;
	clear_env();
	return 0;
}

/* A port nobody listens on right now. */
static uint16_t free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* ==== configuration ==== */

static void init_without_dataplane(void **state)
{
	sluice_ctx_t *ctx = (void *)1;

	(void)state;
	setenv("SLUICE_SOCKET", "/nonexistent/sluice-test.sock", 1);
	assert_error(sluice_init(&ctx), SLUICE_ERR_UNAVAILABLE, "/nonexistent/sluice-test.sock");
	assert_non_null(strstr(sluice_last_error(), "sluiced --node 0"));
	assert_non_null(strstr(sluice_last_error(), "SLUICE_EMBEDDED=1"));
	assert_null(ctx);
}

static void env_errors_are_clear(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;

	(void)state;
	setenv("SLUICE_TIMEOUT", "-1", 1);
	assert_error(sluice_init(&ctx), SLUICE_ERR_INVALID_ARGUMENT, "SLUICE_TIMEOUT=\"-1\"");
	assert_non_null(strstr(sluice_last_error(), "from 1 to 86400"));
	setenv("SLUICE_TIMEOUT", "10s", 1);
	assert_error(sluice_init(&ctx), SLUICE_ERR_INVALID_ARGUMENT, "SLUICE_TIMEOUT=\"10s\"");
	unsetenv("SLUICE_TIMEOUT");
	setenv("SLUICE_EMBEDDED", "yes", 1);
	assert_error(sluice_init(&ctx), SLUICE_ERR_INVALID_ARGUMENT, "SLUICE_EMBEDDED=\"yes\"");
	unsetenv("SLUICE_EMBEDDED");
	setenv("SLUICE_YIELD", "yes", 1);
	assert_error(sluice_init(&ctx), SLUICE_ERR_INVALID_ARGUMENT, "SLUICE_YIELD=\"yes\"");
	unsetenv("SLUICE_YIELD");
	setenv("SLUICE_DEBUG", "LOUD", 1);
	assert_error(sluice_init(&ctx), SLUICE_ERR_INVALID_ARGUMENT, "WARN, INFO or TRACE");
	setenv("SLUICE_DEBUG", "WARN", 1);
	setenv("SLUICE_DEBUG_SUBSYS", "INIT,NET", 1);
	assert_error(sluice_init(&ctx), SLUICE_ERR_INVALID_ARGUMENT, "unknown subsystem \"NET\"");
	assert_non_null(strstr(sluice_last_error(), "TUNING")); /* every name it accepts */
	unsetenv("SLUICE_DEBUG");
	unsetenv("SLUICE_DEBUG_SUBSYS");

	setenv("SLUICE_RANK", "abc", 1);
	setenv("SLUICE_WORLD_SIZE", "4", 1);
	assert_error(sluice_comm_init_env(NULL, &comm), SLUICE_ERR_INVALID_ARGUMENT, "SLUICE_RANK=\"abc\"");
	setenv("SLUICE_RANK", "4", 1);
	assert_error(sluice_comm_init_env(NULL, &comm), SLUICE_ERR_INVALID_ARGUMENT,
		     "rank 4 (from SLUICE_RANK) is not below the world size 4 (from SLUICE_WORLD_SIZE)");
	unsetenv("SLUICE_RANK");
	unsetenv("SLUICE_WORLD_SIZE");
	assert_error(sluice_comm_init_env(NULL, &comm), SLUICE_ERR_INVALID_USAGE, "set SLUICE_RANK");
}

static void launcher_variables(void **state)
{
	char root[64], host[SL_HOST_MAX];
	uint16_t port;
	int rank, nranks;

	(void)state;
	setenv("RANK", "2", 1);
	setenv("WORLD_SIZE", "3", 1);
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_NTASKS", "1", 1);
	assert_int_equal(sl_config_rank_world(&rank, &nranks), SLUICE_OK);
	assert_int_equal(rank, 2);
	assert_int_equal(nranks, 3);
	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
	setenv("OMPI_COMM_WORLD_RANK", "5", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
	assert_int_equal(sl_config_rank_world(&rank, &nranks), SLUICE_OK);
	assert_int_equal(rank, 5);
	assert_int_equal(nranks, 8);

	assert_error(sl_config_root(root, sizeof(root)), SLUICE_ERR_INVALID_USAGE, "SLUICE_ROOT=host:port");
	setenv("MASTER_ADDR", "node7", 1);
	assert_error(sl_config_root(root, sizeof(root)), SLUICE_ERR_INVALID_USAGE, "MASTER_PORT");
	setenv("MASTER_PORT", "29500", 1);
	assert_int_equal(sl_config_root(root, sizeof(root)), SLUICE_OK);
	assert_string_equal(root, "node7:29500");
	assert_int_equal(sl_parse_hostport(root, "test", host, sizeof(host), &port), SLUICE_OK);
	assert_string_equal(host, "node7");
	assert_int_equal(port, 29500);
	assert_error(sl_parse_hostport("node7", "SLUICE_ROOT", host, sizeof(host), &port),
		     SLUICE_ERR_INVALID_ARGUMENT, "SLUICE_ROOT \"node7\" is not host:port");
	assert_error(sl_parse_hostport("node7:70000", "SLUICE_ROOT", host, sizeof(host), &port),
		     SLUICE_ERR_INVALID_ARGUMENT, "1 to 65535");
}

/* ==== bootstrap among threads ==== */

struct boot_rank {
	pthread_t thread;
	uint16_t port;
	int rank, nranks, timeout_s;
	sluice_result_t fail_barrier; /* what this rank brings to the barrier */
	bool leave_before_barrier;
	struct sl_boot b;
	sluice_result_t exchanged, barrier;
	char msg[512];
};

static void *boot_thread(void *arg)
{
	struct boot_rank *r = arg;

	/* ranks bring 4, 3, 2... channels: all must agree on the fewest */
	r->exchanged = sl_boot_exchange(&r->b, "127.0.0.1", r->port, r->rank, r->nranks,
					10 + (uint32_t)r->rank, 4 - (uint32_t)r->rank % 4, r->timeout_s);
	if (r->exchanged != SLUICE_OK) {
		snprintf(r->msg, sizeof(r->msg), "%s", sluice_last_error());
		return NULL;
	}
	if (r->leave_before_barrier) {
		sl_boot_close(&r->b);
		return NULL;
	}
	if (r->fail_barrier != SLUICE_OK)
		sl_fail(r->fail_barrier, "rank %d's own trouble", r->rank);
	r->barrier = sl_boot_barrier(&r->b, r->fail_barrier);
	snprintf(r->msg, sizeof(r->msg), "%s", sluice_last_error());
	sl_boot_close(&r->b);
	return NULL;
}

/* Run ranks[0..n) (those with nranks > 0), root first, and wait for all. */
static void boot_run(struct boot_rank *ranks, int n)
{
	uint16_t port = free_port();

	for (int i = 0; i < n; i++) {
		ranks[i].port = port;
		if (ranks[i].timeout_s == 0)
			ranks[i].timeout_s = 5;
		if (ranks[i].nranks > 0)
			assert_int_equal(pthread_create(&ranks[i].thread, NULL, boot_thread, &ranks[i]), 0);
	}
	for (int i = 0; i < n; i++)
		if (ranks[i].nranks > 0)
			pthread_join(ranks[i].thread, NULL);
}

static void bootstrap_agrees(void **state)
{
	struct boot_rank r[3] = {{.rank = 0, .nranks = 3}, {.rank = 1, .nranks = 3}, {.rank = 2, .nranks = 3}};

	(void)state;
	boot_run(r, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r[i].exchanged, SLUICE_OK);
		assert_int_equal(r[i].barrier, SLUICE_OK);
		assert_true(r[i].b.key == r[0].b.key);
		assert_int_equal(r[i].b.channels, 2);
		for (int j = 0; j < 3; j++)
			assert_int_equal(r[i].b.node[j], 10 + j);
	}
}

static void bootstrap_world_mismatch(void **state)
{
	struct boot_rank r[3] = {{.rank = 0, .nranks = 3}, {.rank = 1, .nranks = 3}, {.rank = 2, .nranks = 4}};

	(void)state;
	boot_run(r, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r[i].exchanged, SLUICE_ERR_INVALID_USAGE);
		assert_non_null(strstr(r[i].msg, "rank 2 says the world has 4 ranks, rank 0 says 3: all ranks "
						 "must agree on SLUICE_WORLD_SIZE"));
	}
}

static void bootstrap_duplicate_rank(void **state)
{
	struct boot_rank r[3] = {{.rank = 0, .nranks = 3}, {.rank = 1, .nranks = 3}, {.rank = 1, .nranks = 3}};

	(void)state;
	boot_run(r, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r[i].exchanged, SLUICE_ERR_INVALID_USAGE);
		assert_non_null(strstr(r[i].msg, "two processes claim rank 1"));
	}
}

static void bootstrap_missing_rank_times_out(void **state)
{
	struct boot_rank r[3] = {{.rank = 0, .nranks = 3, .timeout_s = 1}, {.rank = 1, .nranks = 3, .timeout_s = 1}};
	int64_t t0 = sl_now_ns();

	(void)state;
	boot_run(r, 3);
	assert_true(sl_now_ns() - t0 < 3000000000LL);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(r[i].exchanged, SLUICE_ERR_TIMEOUT);
		assert_non_null(strstr(r[i].msg, "missing: 2"));
	}
}

static void bootstrap_no_root_times_out(void **state)
{
	struct boot_rank r[2] = {{.nranks = 0}, {.rank = 1, .nranks = 2, .timeout_s = 1}};

	(void)state;
	boot_run(r, 2);
	assert_int_equal(r[1].exchanged, SLUICE_ERR_TIMEOUT);
	assert_non_null(strstr(r[1].msg, "could not reach the root 127.0.0.1"));
}

static void barrier_spreads_failure(void **state)
{
	struct boot_rank r[3] = {{.rank = 0, .nranks = 3},
				 {.rank = 1, .nranks = 3, .fail_barrier = SLUICE_ERR_NO_MEMORY},
				 {.rank = 2, .nranks = 3}};

	(void)state;
	boot_run(r, 3);
	assert_int_equal(r[1].barrier, SLUICE_ERR_NO_MEMORY);
	for (int i = 0; i < 3; i += 2) {
		assert_int_equal(r[i].barrier, SLUICE_ERR_REMOTE);
		assert_non_null(strstr(r[i].msg, "rank 1 failed: rank 1's own trouble"));
	}
}

static void barrier_names_leaver(void **state)
{
	struct boot_rank r[3] = {{.rank = 0, .nranks = 3},
				 {.rank = 1, .nranks = 3},
				 {.rank = 2, .nranks = 3, .leave_before_barrier = true}};

	(void)state;
	boot_run(r, 3);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(r[i].barrier, SLUICE_ERR_REMOTE);
		assert_non_null(strstr(r[i].msg, "rank 2 did not reach the bootstrap barrier"));
	}
}

/* ==== a fake dataplane ==== */

enum fake_mode {
	FAKE_COMPLETE, /* copy send to recv (a one-rank all-reduce) and complete */
	FAKE_FAIL,     /* complete with SLUICE_ERR_REMOTE */
	FAKE_HOLD,     /* take commands, complete nothing until release */
	FAKE_COMPLETE_AS, /* a release: complete with fake.release_status, the channel in the message */
};

struct fake_client {
	int fd;
	struct sl_client_page *page;
	struct sl_spsc submit[SL_MAX_CHANNELS], complete[SL_MAX_CHANNELS];
	uint8_t *region[SL_MAX_REGIONS];
	size_t region_size[SL_MAX_REGIONS];
};

static struct fake {
	char path[108];
	int lfd;
	pthread_t thread;
	atomic_bool stop, release, hang_up;
	_Atomic int mode;
	_Atomic int commands;
	unsigned channels;          /* what HELLO answers (0: 1) */
	_Atomic int fail_channel;   /* 1 + the channel whose commands fail, 0: none */
	_Atomic int release_only;   /* 1 + the one channel to release, 0: all */
	_Atomic int release_status; /* what released commands complete with (0: OK) */
	_Atomic int slow_ms;        /* answer REG and COMM_CREATE this late */
	struct fake_client client[FAKE_MAX_CLIENTS];
	int nclients;
	/* what COMM_CREATE was told */
	int creates;
	uint64_t key[FAKE_MAX_CLIENTS];
	uint32_t node0[FAKE_MAX_CLIENTS];
	/* what the last command said */
	struct sl_cmd last;
	/* commands held in FAKE_HOLD */
	struct {
		int client;
		unsigned ch;
		struct sl_cmd cmd;
	} held[MAX_HELD];
	int nheld;
} fake;

static int recv_with_fd(int sock, struct sl_ctl_msg *msg, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			    .msg_controllen = sizeof(control.buf)};
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	*fd = -1;
	if (n > 0 && cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	return (int)n;
}

static void fake_hello(struct fake_client *c, int fd, struct sl_ctl_reply *reply)
{
	c->page = mmap(NULL, sl_page_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->page == MAP_FAILED || c->page->magic != SL_ABI_MAGIC || c->page->version != SL_ABI_VERSION) {
		reply->status = SLUICE_ERR_INVALID_ARGUMENT;
		snprintf(reply->msg, sizeof(reply->msg), "bad client page");
		return;
	}
	for (uint32_t ch = 0; ch < SL_MAX_CHANNELS; ch++) {
		sl_spsc_attach(&c->submit[ch], (void *)((char *)c->page + sl_page_submit_off(ch)), SL_SUBMIT_SLOTS,
			       sizeof(struct sl_cmd), false);
		sl_spsc_attach(&c->complete[ch], (void *)((char *)c->page + sl_page_complete_off(ch)),
			       SL_COMPLETE_SLOTS, sizeof(struct sl_cpl), true);
	}
	reply->value = (uint32_t)(c - fake.client);
}

static void fake_reg(struct fake_client *c, const struct sl_ctl_msg *m, int fd, struct sl_ctl_reply *reply)
{
	for (unsigned i = 0; i < SL_MAX_REGIONS - FAKE_REGION_BASE; i++) {
		if (!c->region[i]) {
			c->region[i] = mmap(NULL, m->a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			c->region_size[i] = m->a.size;
			reply->value = FAKE_REGION_BASE + i;
			return;
		}
	}
	reply->status = SLUICE_ERR_NO_MEMORY;
}

static void fake_request(struct fake_client *c, int fd, const struct sl_ctl_msg *m)
{
	struct sl_ctl_reply reply = {.status = SLUICE_OK, .node = FAKE_NODE,
				     .channels = fake.channels ? fake.channels : 1, .payload = 16384};
	uint32_t idx = m->a.region - FAKE_REGION_BASE;

	switch (m->type) {
	case SL_CTL_HELLO:
		fake_hello(c, fd, &reply);
		break;
	case SL_CTL_REG:
		fake_reg(c, m, fd, &reply);
		break;
	case SL_CTL_DEREG:
		FAKE_CHECK(idx < SL_MAX_REGIONS && c->region[idx]);
		munmap(c->region[idx], c->region_size[idx]);
		c->region[idx] = NULL;
		break;
	case SL_CTL_COMM_CREATE:
		fake.key[fake.creates] = m->c.key;
		fake.node0[fake.creates++] = m->c.node[0];
		reply.value = 100 + (uint32_t)fake.creates;
		break;
	case SL_CTL_INFO:
	case SL_CTL_COMM_DESTROY:
		break;
	case SL_CTL_STALLED: /* a wait that timed out asks: this fake's engine is always stuck */
		reply.status = SLUICE_ERR_TIMEOUT;
		snprintf(reply.msg, sizeof(reply.msg), "the fake's engine has not come round");
		break;
	default:
		reply.status = SLUICE_ERR_INVALID_ARGUMENT;
	}
	if (fd >= 0)
		close(fd);
	if (fake.slow_ms && (m->type == SL_CTL_REG || m->type == SL_CTL_COMM_CREATE))
		usleep((useconds_t)fake.slow_ms * 1000);
	send(c->fd, &reply, sizeof(reply), MSG_NOSIGNAL);
}

static uint8_t *fake_range(struct fake_client *c, uint32_t region, uint64_t off, uint64_t bytes)
{
	uint32_t idx = region - FAKE_REGION_BASE;

	if (bytes == 0)
		return NULL;
	FAKE_CHECK(idx < SL_MAX_REGIONS && c->region[idx] && off + bytes <= c->region_size[idx]);
	return c->region[idx] + off;
}

#define LONG_MSG_END "(end)"

/* A failure's sentence as long as a completion holds (SL_ERRMSG_LEN - 1
 * bytes, ending in LONG_MSG_END): libsluice must hand it on whole. */
static void fake_long_msg(char *msg, uint32_t comm)
{
	int n = snprintf(msg, SL_ERRMSG_LEN, "rank 1 of comm %u vanished: check that host", comm);

	memset(msg + n, ' ', SL_ERRMSG_LEN - 1 - (size_t)n);
	memcpy(msg + SL_ERRMSG_LEN - sizeof(LONG_MSG_END), LONG_MSG_END, sizeof(LONG_MSG_END));
}

static void fake_complete(struct fake_client *c, const struct sl_cmd *cmd, int mode, unsigned ch)
{
	struct sl_cpl cpl = {.req = cmd->req, .status = SLUICE_OK};
	uint64_t bytes = cmd->count * sluice_datatype_size(cmd->dtype);

	if (mode == FAKE_FAIL || fake.fail_channel == (int)ch + 1) {
		cpl.status = SLUICE_ERR_REMOTE;
		fake_long_msg(cpl.msg, cmd->comm);
	} else if (mode == FAKE_COMPLETE_AS) {
		cpl.status = fake.release_status;
		snprintf(cpl.msg, sizeof(cpl.msg), "channel %u's slice: %s", ch, sluice_get_error_string(cpl.status));
	} else if (bytes > 0 && cmd->send_region != SL_REGION_NONE) {
		memmove(fake_range(c, cmd->recv_region, cmd->recv_off, bytes),
			fake_range(c, cmd->send_region, cmd->send_off, bytes), bytes);
	}
	while (!sl_spsc_enqueue(&c->complete[ch], &cpl))
		usleep(10);
	atomic_fetch_add(&c->page->cpl_seq, 1);
	if (atomic_load(&c->page->client_sleeping))
		syscall(SYS_futex, &c->page->cpl_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void fake_drain(struct fake_client *c)
{
	struct sl_cmd cmd;

	for (unsigned ch = 0; ch < SL_MAX_CHANNELS; ch++) {
		while (sl_spsc_dequeue(&c->submit[ch], &cmd)) {
			FAKE_CHECK(ch < (fake.channels ? fake.channels : 1));
			fake.last = cmd;
			fake.commands++;
			if (fake.mode == FAKE_HOLD) {
				FAKE_CHECK(fake.nheld < MAX_HELD);
				fake.held[fake.nheld].client = (int)(c - fake.client);
				fake.held[fake.nheld].ch = ch;
				fake.held[fake.nheld++].cmd = cmd;
			} else {
				fake_complete(c, &cmd, fake.mode, ch);
			}
		}
	}
}

static void fake_poll_sockets(void)
{
	struct pollfd pfd[FAKE_MAX_CLIENTS + 1] = {{.fd = fake.lfd, .events = POLLIN}};
	struct sl_ctl_msg msg;
	int fd;

	for (int i = 0; i < fake.nclients; i++)
		pfd[i + 1] = (struct pollfd){.fd = fake.client[i].fd, .events = POLLIN};
	if (poll(pfd, (nfds_t)fake.nclients + 1, 1) <= 0)
		return;
	if ((pfd[0].revents & POLLIN) && fake.nclients < FAKE_MAX_CLIENTS)
		fake.client[fake.nclients++].fd = accept(fake.lfd, NULL, NULL);
	for (int i = 0; i < fake.nclients; i++) {
		if (fake.client[i].fd < 0 || !(pfd[i + 1].revents & (POLLIN | POLLHUP)))
			continue;
		if (recv_with_fd(fake.client[i].fd, &msg, &fd) == (int)sizeof(msg)) {
			fake_request(&fake.client[i], fd, &msg);
		} else {
			close(fake.client[i].fd);
			fake.client[i].fd = -1;
		}
	}
}

static void *fake_thread(void *unused)
{
	(void)unused;
	while (!fake.stop) {
		fake_poll_sockets();
		for (int i = 0; i < fake.nclients; i++)
			if (fake.client[i].page)
				fake_drain(&fake.client[i]);
		if (fake.release) {
			int kept = 0;
			for (int i = 0; i < fake.nheld; i++) {
				if (fake.release_only && fake.release_only != (int)fake.held[i].ch + 1)
					fake.held[kept++] = fake.held[i];
				else
					fake_complete(&fake.client[fake.held[i].client], &fake.held[i].cmd,
						      fake.release_status ? FAKE_COMPLETE_AS : FAKE_COMPLETE, fake.held[i].ch);
			}
			fake.nheld = kept;
			fake.release = false;
		}
		if (fake.hang_up) {
			for (int i = 0; i < fake.nclients; i++)
				shutdown(fake.client[i].fd, SHUT_RDWR);
			fake.hang_up = false;
		}
	}
	return NULL;
}

static int fake_setup(void **state)
{
	static int seq;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	(void)state;
	clear_env();
	memset(&fake, 0, sizeof(fake));
	snprintf(fake.path, sizeof(fake.path), "/tmp/sluice-test-ctl-%d-%d.sock", (int)getpid(), seq++);
	strcpy(sa.sun_path, fake.path);
	unlink(fake.path);
	fake.lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (bind(fake.lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fake.lfd, 8) != 0)
		return -1;
	setenv("SLUICE_SOCKET", fake.path, 1);
	return pthread_create(&fake.thread, NULL, fake_thread, NULL);
}

static int fake_teardown(void **state)
{
	(void)state;
	fake.stop = true;
	pthread_join(fake.thread, NULL);
	for (int i = 0; i < fake.nclients; i++) {
		struct fake_client *c = &fake.client[i];

		if (c->fd >= 0)
			close(c->fd);
		if (c->page)
			munmap(c->page, sl_page_bytes());
		for (unsigned r = 0; r < SL_MAX_REGIONS; r++)
			if (c->region[r])
				munmap(c->region[r], c->region_size[r]);
	}
	close(fake.lfd);
	unlink(fake.path);
	return 0;
}

/* Attach, join a one-rank communicator, and allocate one buffer of bytes. */
static void open_all(sluice_ctx_t **ctx, sluice_comm_t **comm, void **buf, size_t bytes)
{
	assert_int_equal(sluice_init(ctx), SLUICE_OK);
	assert_int_equal(sluice_comm_init(*ctx, 1, 0, NULL, comm), SLUICE_OK);
	assert_int_equal(sluice_mem_alloc(*ctx, bytes, buf), SLUICE_OK);
}

static void close_all(sluice_ctx_t *ctx, sluice_comm_t *comm, void *buf)
{
	assert_int_equal(sluice_mem_free(ctx, buf), SLUICE_OK);
	assert_int_equal(sluice_comm_destroy(comm), SLUICE_OK);
	assert_int_equal(sluice_finalize(ctx), SLUICE_OK);
}

static void attach_and_memory(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	void *a, *b;
	int v;

	(void)state;
	assert_int_equal(sluice_init(&ctx), SLUICE_OK);
	assert_int_equal(sluice_mem_alloc(ctx, 4096, &a), SLUICE_OK);
	assert_int_equal(sluice_mem_alloc(ctx, 100, &b), SLUICE_OK);
	memset(a, 1, 4096);
	assert_error(sluice_mem_free(ctx, (char *)a + 8), SLUICE_ERR_INVALID_ARGUMENT, "not a pointer");
	assert_error(sluice_mem_alloc(ctx, 0, &a), SLUICE_ERR_INVALID_ARGUMENT, "size from 1 byte");
	assert_int_equal(sluice_mem_free(ctx, a), SLUICE_OK);
	assert_error(sluice_mem_free(ctx, a), SLUICE_ERR_INVALID_ARGUMENT, "freed already");

	assert_int_equal(sluice_comm_init(ctx, 1, 0, NULL, &comm), SLUICE_OK);
	assert_int_equal(sluice_comm_rank(comm, &v), SLUICE_OK);
	assert_int_equal(v, 0);
	assert_int_equal(sluice_comm_size(comm, &v), SLUICE_OK);
	assert_int_equal(v, 1);
	assert_int_equal(fake.node0[0], FAKE_NODE);
	assert_error(sluice_comm_init(ctx, 2, 2, NULL, &comm), SLUICE_ERR_INVALID_ARGUMENT, "rank 2 is out of range");
	assert_error(sluice_finalize(ctx), SLUICE_ERR_INVALID_USAGE, "1 communicator is still alive");
	assert_int_equal(sluice_comm_destroy(comm), SLUICE_OK);
	assert_int_equal(sluice_finalize(ctx), SLUICE_OK); /* b is unmapped with the context */
}

/* REG's answer may take SL_REG_S_PER_GIB more a GiB (or part of one) than
 * SLUICE_TIMEOUT: a daemon touches every page of the area as it maps it.
 * Every answer gets SL_WAIT_MARGIN_S past it: the dataplane bounds a
 * destroy's wait for the peers, and its wait for an engine that takes no
 * pass, by the same timeout, and then answers why. */
static void reg_wait_grows_with_size(void **state)
{
	struct sl_ctl_msg reg = {.type = SL_CTL_REG}, other = {.type = SL_CTL_INFO}, destroy = {.type = SL_CTL_COMM_DESTROY},
			  stalled = {.type = SL_CTL_STALLED};
	static const struct {
		uint64_t size;
		int64_t more; /* seconds past SLUICE_TIMEOUT */
	} w[] = {
		{1, SL_REG_S_PER_GIB}, {1ull << 30, SL_REG_S_PER_GIB}, {(1ull << 30) + 1, 2 * SL_REG_S_PER_GIB},
		{8ull << 30, 8 * SL_REG_S_PER_GIB}, {UINT64_MAX, SL_TIMEOUT_MAX}, /* a day more at most */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		reg.a.size = other.a.size = w[i].size;
		assert_int_equal(sl_ctl_wait_s(30, &reg), 30 + SL_WAIT_MARGIN_S + w[i].more);
		assert_int_equal(sl_ctl_wait_s(30, &other), 30 + SL_WAIT_MARGIN_S);
		assert_int_equal(sl_ctl_wait_s(30, &destroy), 30 + SL_WAIT_MARGIN_S);
		assert_int_equal(sl_ctl_wait_s(30, &stalled), SL_WAIT_MARGIN_S); /* asked after a wait's timeout */
	}
}

/* A dataplane answering 4 s late: REG is still waited for with
 * SLUICE_TIMEOUT=1, COMM_CREATE is not past its 2 s margin (and says so).
 * A second past COMM_CREATE's 3 s: at 0.1 s past, a client starved that
 * long (sanitizer tree, load 11) found the answer there and took it. */
static void reg_answer_waited_past_timeout(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	void *buf;

	(void)state;
	setenv("SLUICE_TIMEOUT", "1", 1);
	assert_int_equal(sluice_init(&ctx), SLUICE_OK);
	fake.slow_ms = 1000 * (2 + SL_WAIT_MARGIN_S);
	assert_int_equal(sluice_mem_alloc(ctx, 4096, &buf), SLUICE_OK);
	assert_error(sluice_comm_init(ctx, 1, 0, NULL, &comm), SLUICE_ERR_TIMEOUT,
		     "did not answer COMM_CREATE within SLUICE_TIMEOUT=1 s (+2 s)");
	sluice_finalize(ctx);
	fake.slow_ms = 0;
	unsetenv("SLUICE_TIMEOUT"); /* the later tests' calls keep the default */
}

static void allreduce_refuses_bad_arguments(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float heap[64], *buf;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	assert_error(sluice_allreduce(comm, heap, heap, 64, SLUICE_FLOAT32, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "is not inside memory from sluice_mem_alloc");
	assert_error(sluice_allreduce(comm, buf, buf, 1025, SLUICE_FLOAT32, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "(4100 bytes) is not inside memory from sluice_mem_alloc");
	assert_error(sluice_allreduce(comm, buf, heap, 64, SLUICE_FLOAT32, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "recv buffer");
	assert_error(sluice_allreduce(comm, buf, buf, SIZE_MAX / 2, SLUICE_FLOAT32, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "overflow");
	assert_error(sluice_allreduce(comm, buf, buf, 4, (sluice_datatype_t)99, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "datatype 99");
	assert_error(sluice_allreduce(comm, buf, buf, 4, SLUICE_FLOAT32, (sluice_redop_t)-1, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "op -1");
	assert_error(sluice_allreduce(comm, buf, buf, 4, SLUICE_INT32, SLUICE_AVG, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "avg");
	assert_error(sluice_allreduce(comm, NULL, buf, 4, SLUICE_FLOAT32, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "must not be NULL when count is 4");
	assert_error(sluice_allreduce(comm, buf, buf + 1, 4, SLUICE_FLOAT32, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "overlap");
	assert_error(sluice_allreduce(NULL, buf, buf, 4, SLUICE_FLOAT32, SLUICE_SUM, &req),
		     SLUICE_ERR_INVALID_ARGUMENT, "comm");
	assert_int_equal(fake.commands, 0);
	close_all(ctx, comm, buf);
}

static void allreduce_round_trip(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	int32_t *buf;
	sluice_result_t res;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 1 << 16);
	for (int i = 0; i < 1000; i++)
		buf[i] = i;
	/* out of place, at offsets inside the region */
	assert_int_equal(sluice_allreduce(comm, buf + 10, buf + 5000, 990, SLUICE_INT32, SLUICE_SUM, &req), SLUICE_OK);
	while ((res = sluice_test(req)) == SLUICE_IN_PROGRESS)
		;
	assert_int_equal(res, SLUICE_OK);
	assert_int_equal(fake.last.send_region, FAKE_REGION_BASE);
	assert_int_equal(fake.last.send_off, 40);
	assert_int_equal(fake.last.recv_off, 20000);
	assert_int_equal(fake.last.count, 990);
	assert_int_equal(fake.last.dtype, SLUICE_INT32);
	assert_int_equal(fake.last.comm, 101);
	for (int i = 0; i < 990; i++)
		assert_int_equal(buf[5000 + i], 10 + i);
	assert_error(sluice_test(req), SLUICE_ERR_INVALID_USAGE, "already finished");
	/* zero elements: no buffers needed, the sentinel region goes out */
	assert_int_equal(sluice_allreduce(comm, NULL, NULL, 0, SLUICE_FLOAT32, SLUICE_AVG, &req), SLUICE_OK);
	assert_int_equal(sluice_wait(req), SLUICE_OK);
	assert_int_equal(fake.last.send_region, SL_REGION_NONE);
	/* many more than the ring holds, waited in order */
	for (int round = 0; round < 3; round++) {
		sluice_req_t *reqs[600];

		for (int i = 0; i < 600; i++)
			assert_int_equal(sluice_allreduce(comm, buf, buf, 16, SLUICE_INT32, SLUICE_MAX, &reqs[i]), SLUICE_OK);
		for (int i = 0; i < 600; i++)
			assert_int_equal(sluice_wait(reqs[i]), SLUICE_OK);
	}
	assert_int_equal(fake.commands, 2 + 3 * 600);
	assert_true(atomic_load(&ctx->page->bell[0].doorbell) == 2 + 3 * 600);
	close_all(ctx, comm, buf);
}

/* Calls walk the request table and the rings a slot at a time; sluice_init
 * faulted their pages in, so that no call takes a page fault (10-14 us on
 * the VMs sluice is measured on: every 17th call paid one). */
static void calls_fault_no_page_in(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	int32_t *buf;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	memset(buf, 0, 4096);
	assert_int_equal(sluice_allreduce(comm, buf, buf, 16, SLUICE_INT32, SLUICE_MAX, &req), SLUICE_OK);
	assert_int_equal(sluice_wait(req), SLUICE_OK);
	long before = page_faults(RUSAGE_THREAD);
	for (unsigned i = 0; i < SL_MAX_REQS + SL_SUBMIT_SLOTS; i++) {
		assert_int_equal(sluice_allreduce(comm, buf, buf, 16, SLUICE_INT32, SLUICE_MAX, &req), SLUICE_OK);
		assert_int_equal(sluice_wait(req), SLUICE_OK);
	}
	long faults = page_faults(RUSAGE_THREAD) - before;
	/* the table alone would fault 14 pages in, the rings 16; the sanitizers'
	 * allocator takes a stray one now and then */
	if (faults > 4)
		fail_msg("%u calls faulted %ld pages in", SL_MAX_REQS + SL_SUBMIT_SLOTS, faults);
	/* nor did sluice_init or a success fault in the requests' messages
	 * (only a failure writes one: internal.h) */
	size_t msgs = resident_pages(ctx->req_msgs, sizeof(ctx->req_msgs));
	if (msgs)
		fail_msg("%zu pages of the requests' failure messages were faulted in", msgs);
	close_all(ctx, comm, buf);
}

static void allreduce_error_from_dataplane(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float *buf;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	fake.mode = FAKE_FAIL;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	assert_error(sluice_wait(req), SLUICE_ERR_REMOTE, "rank 1 of comm 101 vanished: check that host");
	assert_non_null(strstr(sluice_last_error(), LONG_MSG_END)); /* the longest arrives whole */
	fake.mode = FAKE_COMPLETE;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	assert_int_equal(sluice_wait(req), SLUICE_OK);
	close_all(ctx, comm, buf);
}

static void requests_run_out_then_recover(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	static sluice_req_t *reqs[SL_MAX_REQS];
	sluice_req_t *extra;
	float *buf;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	fake.mode = FAKE_HOLD;
	for (unsigned i = 0; i < SL_MAX_REQS; i++)
		assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &reqs[i]), SLUICE_OK);
	assert_error(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &extra),
		     SLUICE_ERR_NO_MEMORY, "all 1024 requests are outstanding");
	assert_error(sluice_mem_free(ctx, buf), SLUICE_ERR_INVALID_USAGE, "used by 1024 collectives in flight");
	assert_error(sluice_comm_destroy(comm), SLUICE_ERR_INVALID_USAGE, "1024 collectives in flight");
	assert_int_equal(sluice_test(reqs[0]), SLUICE_IN_PROGRESS);
	fake.mode = FAKE_COMPLETE;
	fake.release = true;
	for (unsigned i = 0; i < SL_MAX_REQS; i++)
		assert_int_equal(sluice_wait(reqs[i]), SLUICE_OK);
	close_all(ctx, comm, buf);
}

/* A held call's wait gave up, its communicator destroyed: the call is
 * released, reaped by the next wait, and everything closed. */
static void close_after_the_held(sluice_ctx_t *ctx, float *buf)
{
	sluice_comm_t *comm;
	sluice_req_t *req;

	fake.mode = FAKE_COMPLETE;
	fake.release = true;
	while (fake.release)
		usleep(100);
	assert_int_equal(sluice_comm_init(ctx, 1, 0, NULL, &comm), SLUICE_OK);
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	assert_int_equal(sluice_wait(req), SLUICE_OK); /* reaps the late one too */
	close_all(ctx, comm, buf);
}

static void wait_times_out_and_abandons(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float *buf;
	int64_t t0;

	(void)state;
	setenv("SLUICE_TIMEOUT", "1", 1);
	open_all(&ctx, &comm, (void **)&buf, 4096);
	fake.mode = FAKE_HOLD;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	t0 = sl_now_ns();
	/* with the dataplane's word on why (SL_CTL_STALLED) */
	assert_error(sluice_wait(req), SLUICE_ERR_TIMEOUT, "got no completion within SLUICE_TIMEOUT=1 s (+2 s) of "
		     "its start or its dataplane's last progress: the dataplane at");
	assert_non_null(strstr(sluice_last_error(), "says: the fake's engine has not come round"));
	assert_true(sl_now_ns() - t0 < 4000000000LL);
	/* the buffer stays busy until the late completion; the comm may go now */
	assert_error(sluice_mem_free(ctx, buf), SLUICE_ERR_INVALID_USAGE, "in flight");
	assert_int_equal(sluice_comm_destroy(comm), SLUICE_OK);
	close_after_the_held(ctx, buf);
}

/* A call whose timeout holds its verdict (the dataplane waits for a peer's
 * answer before saying why it failed: a long timeout's wait, past the 2 s
 * margin) says until when on the bell: the wait runs the margin past that,
 * not past its own timeout alone (it gave up first, without the reason). */
static void wait_runs_past_a_held_verdict(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float *buf;
	int64_t t0, took;

	(void)state;
	setenv("SLUICE_TIMEOUT", "1", 1);
	open_all(&ctx, &comm, (void **)&buf, 4096);
	fake.mode = FAKE_HOLD;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	t0 = sl_now_ns();
	atomic_store(&fake.client[0].page->bell[0].verdict_ns, (uint64_t)t0 + 2000000000);
	assert_error(sluice_wait(req), SLUICE_ERR_TIMEOUT, "got no completion");
	took = sl_now_ns() - t0;
	if (took < 4000000000LL || took > 5000000000LL)
		fail_msg("the wait gave up after %.2f s, want 4-5 s: the verdict's 2 s and the margin", (double)took / 1e9);
	assert_int_equal(sluice_comm_destroy(comm), SLUICE_OK);
	close_after_the_held(ctx, buf);
}

static void wait_sees_dataplane_exit(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float *buf;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	fake.mode = FAKE_HOLD;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	fake.hang_up = true;
	assert_error(sluice_wait(req), SLUICE_ERR_UNAVAILABLE, "exited");
	assert_non_null(strstr(sluice_last_error(), fake.path));
	assert_error(sluice_comm_destroy(comm), SLUICE_ERR_UNAVAILABLE, "exited");
	assert_int_equal(sluice_finalize(ctx), SLUICE_OK);
}

/* Two ranks, each its own context on the same (fake) dataplane, over the real bootstrap. */
struct join {
	pthread_t thread;
	int rank;
	char root[32];
	bool hold;        /* keep the communicator until done is set */
	atomic_bool done;
	sluice_result_t res;
};

static void *join_thread(void *arg)
{
	struct join *j = arg;
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;

	j->res = sluice_init(&ctx);
	if (j->res == SLUICE_OK)
		j->res = sluice_comm_init(ctx, 2, j->rank, j->root, &comm);
	while (j->res == SLUICE_OK && j->hold && !j->done)
		usleep(1000);
	if (j->res == SLUICE_OK)
		j->res = sluice_comm_destroy(comm);
	if (j->res == SLUICE_OK)
		j->res = sluice_finalize(ctx);
	return NULL;
}

static void comm_init_two_ranks(void **state)
{
	struct join j[2] = {{.rank = 0}, {.rank = 1}};
	uint16_t port = free_port();

	(void)state;
	for (int i = 0; i < 2; i++) {
		snprintf(j[i].root, sizeof(j[i].root), "localhost:%u", port);
		assert_int_equal(pthread_create(&j[i].thread, NULL, join_thread, &j[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(j[i].thread, NULL);
		assert_int_equal(j[i].res, SLUICE_OK);
	}
	assert_int_equal(fake.creates, 2);
	assert_true(fake.key[0] == fake.key[1]);
	assert_int_equal(fake.node0[0], FAKE_NODE);
}

/* Wait until the fake holds n commands, channel 0's first. */
static void wait_held(int n)
{
	for (int i = 0; i < 10000 && fake.nheld < n; i++)
		usleep(100);
	assert_int_equal(fake.nheld, n);
	if (n == 2 && fake.held[0].ch == 1) { /* the fake saw channel 1's part first */
		__typeof__(fake.held[0]) t = fake.held[0];
		fake.held[0] = fake.held[1];
		fake.held[1] = t;
	}
}

/* Complete what the fake holds (on channel only - 1, or all for 0), and wait until it has. */
static void release_held(int only)
{
	fake.release_only = only;
	fake.release = true;
	while (fake.release)
		usleep(100);
	fake.release_only = 0;
}

/* Held part p: on channel p, slice p of the call (offsets from the region's start). */
static void assert_part(int p, uint64_t count, uint64_t send_off, uint64_t recv_off)
{
	assert_int_equal(fake.held[p].ch, p);
	assert_int_equal(fake.held[p].cmd.count, count);
	if (send_off != UINT64_MAX)
		assert_int_equal(fake.held[p].cmd.send_off, send_off);
	else
		assert_int_equal(fake.held[p].cmd.send_region, SL_REGION_NONE);
	assert_int_equal(fake.held[p].cmd.recv_off, recv_off);
}

static void split_over_channels(void **state)
{
	const size_t n = 1 << 18, half = n / 2; /* 1 MiB of float32 */
	struct join other = { .rank = 1, .hold = true }; /* joins, then waits to be let go */
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float *buf;

	(void)state;
	setenv("SLUICE_LINK_PROBE", "0", 1);
	fake.channels = 2;
	snprintf(other.root, sizeof(other.root), "localhost:%u", free_port());
	assert_int_equal(pthread_create(&other.thread, NULL, join_thread, &other), 0);
	assert_int_equal(sluice_init(&ctx), SLUICE_OK);
	assert_int_equal(sluice_comm_init(ctx, 2, 0, other.root, &comm), SLUICE_OK);
	assert_int_equal(sluice_mem_alloc(ctx, 2 * n * sizeof(float), (void **)&buf), SLUICE_OK);
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)i;

	/* a large all-reduce: one slice per channel, done only when both are */
	fake.mode = FAKE_HOLD;
	assert_int_equal(sluice_allreduce(comm, buf, buf + n, n, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	wait_held(2);
	assert_part(0, half, 0, n * 4);
	assert_part(1, half, half * 4, n * 4 + half * 4);
	assert_int_equal(fake.held[0].cmd.req, fake.held[1].cmd.req);
	release_held(1);
	assert_int_equal(fake.nheld, 1);
	assert_int_equal(sluice_test(req), SLUICE_IN_PROGRESS); /* channel 1's slice is still out */
	release_held(0);
	assert_int_equal(sluice_wait(req), SLUICE_OK);
	for (size_t i = 0; i < n; i++)
		assert_true(buf[n + i] == (float)i);

	/* broadcast from rank 1: no send buffer here, the recv buffer sliced */
	assert_int_equal(sluice_broadcast(comm, NULL, buf, n, SLUICE_FLOAT32, 1, &req), SLUICE_OK);
	wait_held(2);
	assert_part(0, half, UINT64_MAX, 0);
	assert_part(1, half, UINT64_MAX, half * 4);
	assert_int_equal(fake.held[1].cmd.block_stride, 0); /* a vector, not blocks */
	release_held(0);
	assert_int_equal(sluice_wait(req), SLUICE_OK);

	/* all-gather: each slice takes the same elements of both ranks' blocks,
	 * which stay a whole block (half floats) apart in recv */
	assert_int_equal(sluice_allgather(comm, buf, buf + half, half, SLUICE_FLOAT32, &req), SLUICE_OK);
	wait_held(2);
	assert_part(0, half / 2, 0, half * 4);
	assert_part(1, half / 2, half / 2 * 4, half * 4 + half / 2 * 4);
	assert_int_equal(fake.held[0].cmd.block_stride, half * 4);
	assert_int_equal(fake.held[1].cmd.block_stride, half * 4);
	release_held(0);
	assert_int_equal(sluice_wait(req), SLUICE_OK);

	/* too small to split: channel 0 alone, blocks back to back */
	assert_int_equal(sluice_allreduce(comm, buf, buf, 4096, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	wait_held(1);
	assert_part(0, 4096, 0, 0);
	release_held(0);
	assert_int_equal(sluice_wait(req), SLUICE_OK);
	assert_int_equal(sluice_reduce_scatter(comm, buf, buf + n, 4096, SLUICE_FLOAT32, SLUICE_SUM, &req),
			 SLUICE_OK);
	wait_held(1);
	assert_part(0, 4096, 0, n * 4);
	assert_int_equal(fake.held[0].cmd.block_stride, 0);
	release_held(0);
	assert_int_equal(sluice_wait(req), SLUICE_OK);

	/* one slice times out, naming no cause, before the other names a cycle
	 * (the dataplane's channels): the call reports the name, whichever came
	 * first (it kept the first, the bare timeout, in about every other run) */
	for (int bare_first = 1; bare_first >= 0; bare_first--) {
		fake.mode = FAKE_HOLD;
		assert_int_equal(sluice_allreduce(comm, buf, buf + n, n, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
		wait_held(2);
		fake.release_status = bare_first ? SLUICE_ERR_TIMEOUT : SLUICE_ERR_MISMATCH;
		release_held(1 + bare_first);
		assert_int_equal(sluice_test(req), SLUICE_IN_PROGRESS); /* the first part is in */
		fake.release_status = bare_first ? SLUICE_ERR_MISMATCH : SLUICE_ERR_TIMEOUT;
		release_held(0);
		fake.release_status = 0;
		assert_error(sluice_wait(req), SLUICE_ERR_MISMATCH, "channel 0's slice: ranks called different");
	}

	/* one slice fails: the call fails with its reason, once both are in */
	fake.mode = FAKE_COMPLETE;
	fake.fail_channel = 2;
	assert_int_equal(sluice_allreduce(comm, buf, buf, n, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	assert_error(sluice_wait(req), SLUICE_ERR_REMOTE, "rank 1 of comm");
	fake.fail_channel = 0;

	assert_int_equal(sluice_mem_free(ctx, buf), SLUICE_OK);
	assert_int_equal(sluice_comm_destroy(comm), SLUICE_OK);
	assert_int_equal(sluice_finalize(ctx), SLUICE_OK);
	other.done = true;
	pthread_join(other.thread, NULL);
	assert_int_equal(other.res, SLUICE_OK);
}

/* An embedded engine's hooks, faked: every pass finds work (so a wait
 * never hands the engine back for idling), and hand-backs are counted, with
 * how many said that other calls were in flight. */
static _Atomic int releases, releases_with_more;

static int32_t drive_busy(int64_t now_ns)
{
	(void)now_ns;
	return 1;
}

static void count_release(bool more)
{
	releases++;
	releases_with_more += more;
}

/* A wait hands the engine back saying whether other calls are in flight
 * (the next wait, a grouped send's then its recv's, would only park the
 * woken thread again where ranks share cores: sl_dp_embedded_release). */
static void wait_says_whether_calls_fly(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *a, *b;
	float *buf;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	ctx->drive = drive_busy;
	ctx->release = count_release;
	releases = releases_with_more = 0;
	fake.mode = FAKE_HOLD;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &a), SLUICE_OK);
	wait_held(1);
	release_held(0); /* a is done, b stays in flight */
	assert_int_equal(sluice_allreduce(comm, buf + 8, buf + 8, 8, SLUICE_FLOAT32, SLUICE_SUM, &b), SLUICE_OK);
	wait_held(1);
	assert_int_equal(sluice_wait(a), SLUICE_OK);
	assert_int_equal(releases, 1);
	assert_int_equal(releases_with_more, 1); /* b is in flight */
	release_held(0);
	assert_int_equal(sluice_wait(b), SLUICE_OK);
	assert_int_equal(releases, 2);
	assert_int_equal(releases_with_more, 1); /* the last call's wait: nothing more */
	ctx->drive = NULL;
	ctx->release = NULL;
	close_all(ctx, comm, buf);
}

/* A wait's turns, scripted: what each pass answers, the time it was given
 * and the clock when it answered.  The held call completes in the last. */
#define SCRIPT_TURNS 24
static struct {
	int32_t answer[SCRIPT_TURNS];
	int64_t given[SCRIPT_TURNS], done[SCRIPT_TURNS];
	int turns;
} script;

static int32_t drive_scripted(int64_t now_ns)
{
	int i = script.turns;

	if (i >= SCRIPT_TURNS)
		return 1;
	if (i == SCRIPT_TURNS - 1)
		release_held(0);
	script.given[i] = now_ns;
	script.done[i] = sl_now_ns();
	script.turns = i + 1;
	return script.answer[i];
}

/* A wait reads the clock once every few idle turns, not every turn (10% of
 * a small call's samples), but always after a pass that did work or a turn
 * that gave the core away: the engine's pass takes the time it is given. */
static void wait_reads_the_clock_after_work(void **state)
{
	static const int32_t moved[] = {6, 7, 11, 15}; /* the turns that did not keep the core idle */
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float *buf;
	int run = 1, reused = 0;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	memset(&script, 0, sizeof(script));
	script.answer[moved[0]] = 5;
	script.answer[moved[1]] = SL_DRIVE_YIELDED;
	script.answer[moved[2]] = SL_DRIVE_BUSY;
	script.answer[moved[3]] = 1;
	ctx->drive = drive_scripted;
	ctx->release = count_release;
	ctx->cfg.busy_poll = true; /* no hand-back however slow the turns */
	fake.mode = FAKE_HOLD;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &req), SLUICE_OK);
	wait_held(1);
	assert_int_equal(sluice_wait(req), SLUICE_OK);
	assert_int_equal(script.turns, SCRIPT_TURNS);
	for (int i = 1; i < SCRIPT_TURNS; i++) {
		if (script.answer[i - 1] != 0) /* a fresh read after it */
			assert_true(script.given[i] >= script.done[i - 1]);
		run = script.given[i] == script.given[i - 1] ? run + 1 : 1;
		reused += run > 1;
		assert_in_range(run, 1, SL_WAIT_STALE_TURNS + 1);
	}
	assert_true(reused >= 10); /* 20 idle turns follow a read, at most one in four reads again */
	ctx->drive = NULL;
	ctx->release = NULL;
	close_all(ctx, comm, buf);
}

/* A waiter whose request another thread completes while it is mid-turn. */
static struct {
	pthread_t thread;
	sluice_req_t *req;
	sluice_result_t res;
	atomic_bool ready, in_turn, reaped;
	_Atomic int turns;
} waiter;

static int32_t drive_until_reaped(int64_t now_ns)
{
	(void)now_ns;
	if (!pthread_equal(pthread_self(), waiter.thread))
		return 0; /* the test's own thread, in sluice_test */
	waiter.turns++;
	waiter.in_turn = true;
	while (!waiter.reaped)
		usleep(100);
	return 0;
}

static void *waiter_thread(void *unused)
{
	(void)unused;
	while (!waiter.ready)
		usleep(100);
	waiter.res = sluice_wait(waiter.req);
	return NULL;
}

/* A wait takes the lock only once a completion came (page->cpl_seq moved):
 * one that another thread reaped for it counts too, or the wait would turn
 * on until its next check (5 ms), on however many communicators. */
static void wait_sees_a_completion_reaped_for_it(void **state)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm, *other;
	sluice_req_t *b;
	float *buf;

	(void)state;
	open_all(&ctx, &comm, (void **)&buf, 4096);
	assert_int_equal(sluice_comm_init(ctx, 1, 0, NULL, &other), SLUICE_OK);
	memset(&waiter, 0, sizeof(waiter));
	ctx->drive = drive_until_reaped;
	ctx->release = count_release;
	ctx->cfg.busy_poll = true;
	fake.mode = FAKE_HOLD;
	assert_int_equal(sluice_allreduce(comm, buf, buf, 8, SLUICE_FLOAT32, SLUICE_SUM, &waiter.req), SLUICE_OK);
	assert_int_equal(sluice_allreduce(other, buf + 8, buf + 8, 8, SLUICE_FLOAT32, SLUICE_SUM, &b), SLUICE_OK);
	wait_held(2);
	assert_int_equal(pthread_create(&waiter.thread, NULL, waiter_thread, NULL), 0);
	waiter.ready = true;
	while (!waiter.in_turn)
		usleep(100);
	release_held(0);
	assert_int_equal(sluice_test(b), SLUICE_OK); /* reaps the waiter's completion too */
	waiter.reaped = true;
	pthread_join(waiter.thread, NULL);
	assert_int_equal(waiter.res, SLUICE_OK);
	assert_int_equal(waiter.turns, 1);
	ctx->drive = NULL;
	ctx->release = NULL;
	assert_int_equal(sluice_comm_destroy(other), SLUICE_OK);
	close_all(ctx, comm, buf);
}

/* A message longer than sluice_last_error holds ends in errmsg.h's mark, not mid-word. */
static void last_error_cut_visibly(void **state)
{
	const char *msg;

	(void)state;
	sl_fail(SLUICE_ERR_INTERNAL, "%0*d", 2 * SL_LAST_ERROR_LEN, 7);
	msg = sluice_last_error();
	assert_int_equal(strlen(msg), SL_LAST_ERROR_LEN - 1);
	assert_string_equal(msg + strlen(msg) - strlen(SL_ERRMSG_CUT), SL_ERRMSG_CUT);
	sl_fail(SLUICE_ERR_INTERNAL, "short");
	assert_string_equal(sluice_last_error(), "short");
}

/* sl_cmd_bytes refuses sizes past 64 bits and no others: the edges of its
 * two checks, count * size * nranks and (nranks - 1) * stride + block. */
static void cmd_bytes_edges(void **state)
{
	uint64_t send, recv, half = UINT64_MAX / 2; /* 2^63 - 1 */

	(void)state;
	assert_true(sl_cmd_bytes(SL_OP_ALLREDUCE, UINT64_MAX / 12, 4, 3, 0, 0, 0, &send, &recv));
	assert_int_equal(send, UINT64_MAX / 12 * 4);
	assert_false(sl_cmd_bytes(SL_OP_ALLREDUCE, UINT64_MAX / 12 + 1, 4, 3, 0, 0, 0, &send, &recv));
	assert_false(sl_cmd_bytes(SL_OP_ALLREDUCE, UINT64_MAX / 4 + 1, 4, 1, 0, 0, 0, &send, &recv));
	/* a raw descriptor's stride below the block: the product still counts */
	assert_false(sl_cmd_bytes(SL_OP_ALLGATHER, UINT64_MAX / 12 + 1, 4, 3, 0, 0, 4, &send, &recv));
	assert_false(sl_cmd_bytes(SL_OP_ALLREDUCE, 1, 0, 3, 0, 0, 0, &send, &recv));
	assert_false(sl_cmd_bytes(SL_OP_ALLREDUCE, 1, 4, 0, 0, 0, 0, &send, &recv));
	assert_true(sl_cmd_bytes(SL_OP_ALLGATHER, 1, 1, 3, 0, 0, half, &send, &recv));
	assert_int_equal(recv, UINT64_MAX);
	assert_false(sl_cmd_bytes(SL_OP_ALLGATHER, 1, 1, 3, 0, 0, half + 1, &send, &recv)); /* the product */
	assert_false(sl_cmd_bytes(SL_OP_ALLGATHER, 2, 1, 3, 0, 0, half, &send, &recv));     /* the sum */
	assert_true(sl_cmd_bytes(SL_OP_ALLGATHER, 2, 1, 1, 0, 0, UINT64_MAX, &send, &recv)); /* one block */
	assert_int_equal(recv, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(init_without_dataplane, env_setup),
		cmocka_unit_test_setup(env_errors_are_clear, env_setup),
		cmocka_unit_test_setup(launcher_variables, env_setup),
		cmocka_unit_test_setup(bootstrap_agrees, env_setup),
		cmocka_unit_test_setup(bootstrap_world_mismatch, env_setup),
		cmocka_unit_test_setup(bootstrap_duplicate_rank, env_setup),
		cmocka_unit_test_setup(bootstrap_missing_rank_times_out, env_setup),
		cmocka_unit_test_setup(bootstrap_no_root_times_out, env_setup),
		cmocka_unit_test_setup(barrier_spreads_failure, env_setup),
		cmocka_unit_test_setup(barrier_names_leaver, env_setup),
		cmocka_unit_test_setup_teardown(attach_and_memory, fake_setup, fake_teardown),
		cmocka_unit_test(reg_wait_grows_with_size),
		cmocka_unit_test_setup_teardown(reg_answer_waited_past_timeout, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(allreduce_refuses_bad_arguments, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(allreduce_round_trip, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(calls_fault_no_page_in, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(allreduce_error_from_dataplane, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(requests_run_out_then_recover, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(wait_times_out_and_abandons, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(wait_runs_past_a_held_verdict, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(wait_sees_dataplane_exit, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(comm_init_two_ranks, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(split_over_channels, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(wait_says_whether_calls_fly, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(wait_reads_the_clock_after_work, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(wait_sees_a_completion_reaped_for_it, fake_setup, fake_teardown),
		cmocka_unit_test(cmd_bytes_edges),
		cmocka_unit_test(last_error_cut_visibly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
