/*
 * bootstrap.c: the TCP rendezvous that turns nranks processes into one
 * communicator.  Rank 0 listens at the root address; every other rank
 * connects (retrying until SLUICE_TIMEOUT), says who it is, and gets back
 * the communicator key and every rank's dataplane node id, or the one error
 * message that every rank then returns.  The same connections carry a
 * barrier and are closed when sluice_comm_init ends.  Every wait is a poll
 * with a deadline; nothing blocks forever.
 *
 * Messages are fixed-size structs in host byte order: the magic word
 * rejects a peer of another byte order or another version.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sluice/errmsg.h>

#include "internal.h"

#define BOOT_MAGIC 0x534c4233u /* "SLB3": its barrier message grew to SL_LAST_ERROR_LEN */
#define BOOT_MSG_LEN SL_LAST_ERROR_LEN
#define RETRY_NS (50 * 1000000LL)
#define DRAIN_NS (100 * 1000000LL)
#define GRACE_NS (1000 * 1000000LL) /* a rank waits this much longer than the root, to hear its verdict */

struct boot_hello {
	uint32_t magic;
	uint32_t rank;
	uint32_t nranks;
	uint32_t node; /* the rank's dataplane node id */
	uint32_t channels; /* ... and its channels */
	uint32_t pad;
	uint64_t key;  /* the rank's random proposal, folded into the key */
};

struct boot_answer {
	uint32_t magic;
	int32_t status; /* sluice_result_t */
	uint64_t key;
	uint32_t node[SL_MAX_RANKS];
	uint32_t channels; /* the fewest of any rank */
	char msg[BOOT_MSG_LEN]; /* the error every rank returns */
};

/* The barrier, both ways: a rank's own result, then the first failure of all. */
struct boot_sync {
	uint32_t magic;
	int32_t status;
	int32_t rank; /* who failed, when status != OK */
	char msg[BOOT_MSG_LEN];
};

/* ---- I/O with deadlines ---- */

static int poll_ms(int64_t deadline)
{
	int64_t left = deadline - sl_now_ns();

	return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

/* Move len bytes (send when out); 0, ETIMEDOUT, ECONNRESET when the peer left, or errno. */
static int xfer(int fd, void *buf, size_t len, bool out, int64_t deadline)
{
	char *p = buf;

	while (len > 0) {
		struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
		ssize_t n;
		int ready = poll(&pfd, 1, poll_ms(deadline));

		if (ready < 0 && errno != EINTR)
			return errno;
		if (ready == 0)
			return ETIMEDOUT;
		if (ready < 0)
			continue;
		n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n == 0)
			return ECONNRESET;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return errno == EPIPE ? ECONNRESET : errno;
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		}
	}
	return 0;
}

static const char *xfer_why(int err)
{
	return err == ETIMEDOUT ? "no answer before SLUICE_TIMEOUT"
	       : err == ECONNRESET ? "it disconnected (did it exit or crash?)"
				   : strerror(err);
}

static void set_nonblocking(int fd)
{
	int one = 1;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- root side ---- */

/* Every interface, not host's address: other ranks may reach this host by another name. */
static sluice_result_t root_listen(uint16_t port, int *out)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return sl_fail(SLUICE_ERR_SYSTEM, "bootstrap: socket() for the root listener failed: %s",
			       strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, SL_MAX_RANKS) != 0) {
		int err = errno;

		close(fd);
		return sl_fail(SLUICE_ERR_SYSTEM,
			       "bootstrap: rank 0 cannot listen on port %u: %s: pick a free port in "
			       "SLUICE_ROOT (or MASTER_PORT)",
			       port, strerror(err));
	}
	*out = fd;
	return SLUICE_OK;
}

/* What the root learns while accepting; the first problem becomes everyone's error. */
struct gather {
	int fd[SL_MAX_RANKS];     /* accepted connections, in arrival order */
	struct boot_hello hello[SL_MAX_RANKS];
	int count;
	struct boot_answer answer;
};

static void gather_error(struct gather *g, sluice_result_t status, const char *fmt, ...) SL_PRINTF(3, 4);

static void gather_error(struct gather *g, sluice_result_t status, const char *fmt, ...)
{
	va_list ap;

	if (g->answer.status != SLUICE_OK)
		return;
	g->answer.status = status;
	va_start(ap, fmt);
	sl_errmsg_vformat(g->answer.msg, sizeof(g->answer.msg), fmt, ap);
	va_end(ap);
}

/* Check one rank's hello against the root's view and the ranks seen so far. */
static void check_hello(struct sl_boot *b, struct gather *g, const struct boot_hello *h)
{
	if (h->magic != BOOT_MAGIC)
		gather_error(g, SLUICE_ERR_INVALID_USAGE,
			     "bootstrap: something that is not this version of sluice connected to the "
			     "root: use the same libsluice on every rank and a port nothing else uses");
	else if (h->nranks != (uint32_t)b->nranks)
		gather_error(g, SLUICE_ERR_INVALID_USAGE,
			     "rank %u says the world has %u ranks, rank 0 says %d: all ranks must agree on "
			     "SLUICE_WORLD_SIZE",
			     h->rank, h->nranks, b->nranks);
	else if (h->rank == 0 || h->rank >= h->nranks)
		gather_error(g, SLUICE_ERR_INVALID_USAGE,
			     "a second process claims rank %u of %u: give every process its own rank, "
			     "0 to world size - 1 (SLUICE_RANK)",
			     h->rank, h->nranks);
	for (int i = 0; i < g->count && h->magic == BOOT_MAGIC; i++)
		if (g->hello[i].rank == h->rank)
			gather_error(g, SLUICE_ERR_INVALID_USAGE,
				     "two processes claim rank %u: give every process its own rank, 0 to "
				     "world size - 1 (SLUICE_RANK)",
				     h->rank);
}

/* Accept one connection and read its hello; false when none came before deadline. */
static bool accept_one(struct sl_boot *b, int lfd, struct gather *g, int64_t deadline)
{
	struct pollfd pfd = {.fd = lfd, .events = POLLIN};
	struct boot_hello h;
	int fd, err;

	if (g->count >= (int)SL_MAX_RANKS || poll(&pfd, 1, poll_ms(deadline)) <= 0)
		return false;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return true; /* gone already, or EINTR: poll again */
	set_nonblocking(fd);
	err = xfer(fd, &h, sizeof(h), false, deadline);
	if (err != 0) {
		gather_error(g, SLUICE_ERR_REMOTE, "bootstrap: a rank connected to the root but sent no "
						   "hello (%s): check that every rank runs this sluice",
			     xfer_why(err));
		close(fd);
		return true;
	}
	check_hello(b, g, &h);
	g->fd[g->count] = fd;
	g->hello[g->count++] = h;
	return true;
}

/* "1, 3" into buf: the ranks in 1..nranks-1 that have not said hello. */
static void missing_ranks(const struct sl_boot *b, const struct gather *g, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int r = 1; r < b->nranks && used + 16 < len; r++) {
		bool seen = false;

		for (int i = 0; i < g->count; i++)
			seen |= g->hello[i].rank == (uint32_t)r;
		if (!seen)
			used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? ", " : "", r);
	}
}

static void gather_all(struct sl_boot *b, int lfd, uint16_t port, struct gather *g, int64_t deadline)
{
	char missing[128];

	/* Even after a problem, wait for everyone expected, so that they all hear of it. */
	while (g->count < b->nranks - 1)
		if (!accept_one(b, lfd, g, deadline))
			break;
	if (g->count < b->nranks - 1) {
		missing_ranks(b, g, missing, sizeof(missing));
		gather_error(g, SLUICE_ERR_TIMEOUT,
			     "bootstrap: rank 0 waited SLUICE_TIMEOUT=%d s on port %u but only %d of %d "
			     "ranks joined (missing: %s): start every rank with the same SLUICE_ROOT and "
			     "SLUICE_WORLD_SIZE, and check that they can reach rank 0's host",
			     b->timeout_s, port, g->count + 1, b->nranks, missing);
	}
	/* After a failure, answer ranks beyond root's count too (they believe in a larger world). */
	while (g->answer.status != SLUICE_OK && accept_one(b, lfd, g, sl_now_ns() + DRAIN_NS))
		;
}

static sluice_result_t root_exchange(struct sl_boot *b, uint16_t port, uint32_t node, uint32_t channels,
				     int64_t deadline)
{
	struct gather g;
	sluice_result_t res;
	int lfd = -1, err;

	if ((res = root_listen(port, &lfd)) != SLUICE_OK)
		return res;
	memset(&g, 0, sizeof(g));
	g.answer.magic = BOOT_MAGIC;
	gather_all(b, lfd, port, &g, deadline);
	close(lfd);
	if (getrandom(&g.answer.key, sizeof(g.answer.key), 0) != sizeof(g.answer.key))
		g.answer.key = (uint64_t)sl_now_ns() * 0x9e3779b97f4a7c15u;
	g.answer.node[0] = node;
	g.answer.channels = channels;
	for (int i = 0; i < g.count; i++) {
		g.answer.key ^= g.hello[i].key;
		if (g.hello[i].channels < g.answer.channels)
			g.answer.channels = g.hello[i].channels;
		if (g.answer.status == SLUICE_OK)
			g.answer.node[g.hello[i].rank] = g.hello[i].node;
	}
	for (int i = 0; i < g.count; i++) {
		err = xfer(g.fd[i], &g.answer, sizeof(g.answer), true, deadline);
		if (err != 0)
			gather_error(&g, SLUICE_ERR_REMOTE, "bootstrap: rank %u left before rank 0 answered: %s",
				     g.hello[i].rank, xfer_why(err));
		if (g.answer.status == SLUICE_OK)
			b->peer[g.hello[i].rank] = g.fd[i];
		else
			close(g.fd[i]);
	}
	if (g.answer.status != SLUICE_OK)
		return sl_fail(g.answer.status, "%s", g.answer.msg);
	b->key = g.answer.key;
	b->channels = g.answer.channels;
	memcpy(b->node, g.answer.node, sizeof(b->node));
	return SLUICE_OK;
}

/* ---- the other ranks ---- */

/* One connection attempt to ai, waiting at most until deadline; fd or -1 with errno set. */
static int try_connect(const struct addrinfo *ai, int64_t deadline)
{
	struct pollfd pfd = {.events = POLLOUT};
	int err = 0;
	socklen_t len = sizeof(err);
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

	if (fd < 0)
		return -1;
	set_nonblocking(fd);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
		err = errno;
	} else {
		pfd.fd = fd;
		if (poll(&pfd, 1, poll_ms(deadline)) <= 0)
			err = ETIMEDOUT;
		else
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	}
	if (err == 0)
		return fd;
	close(fd);
	errno = err;
	return -1;
}

static sluice_result_t connect_root(struct sl_boot *b, const char *host, uint16_t port, int64_t deadline)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ais;
	char port_s[8];
	int err = ETIMEDOUT, gai;

	snprintf(port_s, sizeof(port_s), "%u", port);
	gai = getaddrinfo(host, port_s, &hints, &ais);
	if (gai != 0)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "bootstrap: rank %d cannot resolve the root host \"%s\": %s: check SLUICE_ROOT "
			       "(or MASTER_ADDR)",
			       b->rank, host, gai_strerror(gai));
	do {
		for (struct addrinfo *ai = ais; ai && b->fd < 0; ai = ai->ai_next) {
			b->fd = try_connect(ai, deadline);
			err = b->fd < 0 ? errno : 0;
		}
		if (b->fd < 0 && sl_now_ns() + RETRY_NS < deadline)
			nanosleep(&(struct timespec){.tv_nsec = RETRY_NS}, NULL);
	} while (b->fd < 0 && sl_now_ns() + RETRY_NS < deadline);
	freeaddrinfo(ais);
	if (b->fd >= 0)
		return SLUICE_OK;
	return sl_fail(SLUICE_ERR_TIMEOUT,
		       "bootstrap: rank %d could not reach the root %s:%u within SLUICE_TIMEOUT=%d s (last "
		       "error: %s): check that rank 0 runs and that SLUICE_ROOT names its host and port",
		       b->rank, host, port, b->timeout_s, strerror(err));
}

static sluice_result_t peer_exchange(struct sl_boot *b, const char *host, uint16_t port, uint32_t node,
				     uint32_t channels, int64_t deadline)
{
	struct boot_hello h = {.magic = BOOT_MAGIC, .rank = (uint32_t)b->rank,
			       .nranks = (uint32_t)b->nranks, .node = node, .channels = channels};
	struct boot_answer a;
	sluice_result_t res;
	int err;

	if ((res = connect_root(b, host, port, deadline)) != SLUICE_OK)
		return res;
	if (getrandom(&h.key, sizeof(h.key), 0) != sizeof(h.key))
		h.key = (uint64_t)sl_now_ns();
	err = xfer(b->fd, &h, sizeof(h), true, deadline);
	if (err == 0)
		err = xfer(b->fd, &a, sizeof(a), false, deadline + GRACE_NS);
	if (err != 0)
		return sl_fail(err == ETIMEDOUT ? SLUICE_ERR_TIMEOUT : SLUICE_ERR_REMOTE,
			       "bootstrap: rank %d reached the root %s:%u but got no answer: %s: the root "
			       "answers once all %d ranks have joined; check that every rank was started",
			       b->rank, host, port, xfer_why(err), b->nranks);
	a.msg[sizeof(a.msg) - 1] = '\0';
	if (a.magic != BOOT_MAGIC || a.status < 0 || a.status >= SLUICE_IN_PROGRESS)
		return sl_fail(SLUICE_ERR_INVALID_USAGE,
			       "bootstrap: %s:%u answered rank %d with something that is not this version of "
			       "sluice: use the same libsluice on every rank",
			       host, port, b->rank);
	if (a.status != SLUICE_OK)
		return sl_fail(a.status, "%s", a.msg);
	b->key = a.key;
	b->channels = a.channels;
	memcpy(b->node, a.node, sizeof(b->node));
	return SLUICE_OK;
}

sluice_result_t sl_boot_exchange(struct sl_boot *b, const char *host, uint16_t port, int rank,
				 int nranks, uint32_t node, uint32_t channels, int timeout_s)
{
	int64_t deadline = sl_now_ns() + (int64_t)timeout_s * 1000000000;
	sluice_result_t res;

	b->rank = rank;
	b->nranks = nranks;
	b->timeout_s = timeout_s;
	b->fd = -1;
	for (unsigned i = 0; i < SL_MAX_RANKS; i++)
		b->peer[i] = -1;
	res = rank == 0 ? root_exchange(b, port, node, channels, deadline)
			: peer_exchange(b, host, port, node, channels, deadline);
	if (res != SLUICE_OK)
		sl_boot_close(b);
	else
		SL_INFO(SL_SUB_BOOT, "rank %d of %d joined through %s:%u, key %016llx", rank, nranks, host,
			port, (unsigned long long)b->key);
	return res;
}

/* ---- barrier ---- */

/* Collect every rank's result into s (the first failure wins), then send s to all. */
static void barrier_root(struct sl_boot *b, struct boot_sync *s, int64_t deadline)
{
	struct boot_sync in;
	int err;

	for (int r = 1; r < b->nranks; r++) {
		err = xfer(b->peer[r], &in, sizeof(in), false, deadline);
		if (err == 0 && (in.magic != BOOT_MAGIC || in.status < 0 || in.status >= SLUICE_IN_PROGRESS))
			err = EPROTO;
		if (err != 0 && s->status == SLUICE_OK) {
			s->status = err == ETIMEDOUT ? SLUICE_ERR_TIMEOUT : SLUICE_ERR_REMOTE;
			s->rank = r;
			sl_errmsg_format(s->msg, sizeof(s->msg), "rank %d did not reach the bootstrap barrier: %s", r,
					 xfer_why(err));
		} else if (err == 0 && in.status != SLUICE_OK && s->status == SLUICE_OK) {
			*s = in;
			s->rank = r;
		}
	}
	for (int r = 1; r < b->nranks; r++)
		xfer(b->peer[r], s, sizeof(*s), true, deadline); /* a rank that left fails on its own */
}

sluice_result_t sl_boot_barrier(struct sl_boot *b, sluice_result_t mine)
{
	int64_t deadline = sl_now_ns() + (int64_t)b->timeout_s * 1000000000;
	struct boot_sync s;
	int err = 0;

	memset(&s, 0, sizeof(s));
	s.magic = BOOT_MAGIC;
	s.status = mine;
	s.rank = b->rank;
	if (mine != SLUICE_OK)
		sl_errmsg_copy(s.msg, sizeof(s.msg), sluice_last_error());
	if (b->rank == 0)
		barrier_root(b, &s, deadline);
	else if ((err = xfer(b->fd, &s, sizeof(s), true, deadline)) == 0)
		err = xfer(b->fd, &s, sizeof(s), false, deadline + GRACE_NS);
	s.msg[sizeof(s.msg) - 1] = '\0';
	if (err != 0)
		return sl_fail(err == ETIMEDOUT ? SLUICE_ERR_TIMEOUT : SLUICE_ERR_REMOTE,
			       "bootstrap barrier: rank %d lost the root (rank 0): %s", b->rank, xfer_why(err));
	if (s.status == SLUICE_OK || s.rank == b->rank)
		return s.status == SLUICE_OK ? SLUICE_OK : mine;
	return sl_fail(s.status == SLUICE_ERR_TIMEOUT ? SLUICE_ERR_TIMEOUT : SLUICE_ERR_REMOTE,
		       "rank %d failed: %s", s.rank, s.msg);
}

void sl_boot_close(struct sl_boot *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	for (unsigned i = 0; i < SL_MAX_RANKS; i++) {
		if (b->peer[i] >= 0)
			close(b->peer[i]);
		b->peer[i] = -1;
	}
}
