/*
 * ctl_server.c: the attach socket.
 *
 * Applications (libsluice) connect to a unix SOCK_SEQPACKET socket and send
 * struct sl_ctl_msg requests (abi.h): HELLO with their client page, REG with
 * memory files, communicator creation.  Each connection has a thread of its
 * own, which serves its requests in turn: checks each, maps what it is
 * given, and hands the result to every channel's engine through
 * dp_engine_call; it never touches an engine's tables itself.  So one
 * client's slow request (a registration's pages touched, a destroy waiting
 * for its peers, an engine that does not answer) holds up no other client.
 * The server's own thread accepts connections and watches the engines.
 * Channel 0's engine owns the mappings and the others borrow them, so
 * removals go to the owner last.  A peer of another user is refused
 * (SO_PEERCRED) unless the daemon was told to share.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>
#include <sluice/touch.h>

#include "ctl_server.h"
#include "stall_watch.h"
#include "trace_tap.h"

/* How long SL_CTL_STALLED watches each engine for a pass. */
#define STALL_LOOK_NS 100000000ull
/* A stall that ended this long before STALLED, past the client's own
 * SLUICE_TIMEOUT, is the reason its wait ran out: libsluice's margin for
 * its wait (SL_WAIT_MARGIN_S) and again for this answer. */
#define STALL_RECENT_MARGIN_NS 4000000000ull

struct server;

struct conn {
	/* the server's thread's */
	bool running;                     /* in use: its thread runs, or returned and is not joined yet */
	pthread_t thread;
	_Atomic bool ended;               /* the connection's thread returned: join it */
	/* the connection's thread's */
	struct server *s;
	int fd;
	bool hello;                       /* HELLO done: the engine knows this client */
	uint32_t patience_ms;             /* its SLUICE_TIMEOUT, from HELLO (dp_ctl_req's) */
	bool tracer;                      /* a sluice-trace attached through this connection */
	bool region_used[SL_MAX_REGIONS];
};

/* Per communicator slot, what its first failing channel stored (dp.h's
 * channels_failed): static, since engines outlive the server's frame. */
static struct dp_channels_failed comm_channels_failed[DP_MAX_COMMS];

struct server {
	struct dp_engine *const *e;       /* one engine per channel; e[0] owns the mappings */
	unsigned nch;
	const struct dp_server_cfg *cfg;
	int listen_fd;
	struct conn conns[DP_MAX_CLIENTS];
	pthread_mutex_t lock;             /* what connections share: comm_owner, the trace taps */
	int comm_owner[DP_MAX_COMMS];     /* client index holding each comm slot, -1 = free */
	pthread_mutex_t stall_lock;       /* stall: the server's loop and STALLED's answers look */
	struct dp_stall_watch stall[SL_MAX_CHANNELS];
};

static int reply_err(struct sl_ctl_reply *r, int32_t status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int reply_err(struct sl_ctl_reply *r, int32_t status, const char *fmt, ...)
{
	va_list ap;
	r->status = status;
	va_start(ap, fmt);
	sl_errmsg_vformat(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	return 0;
}

void *dp_map_client_file(int fd, uint64_t len, uint64_t touch)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p != MAP_FAILED)
		sl_touch(p, touch);
	return p;
}

/* Every page now, not at its first use by a call: on the PVM guests sluice
 * runs on, this process's first access to a page costs 10-14 us even after
 * MAP_POPULATE, and a 3-rank 128 KiB scatter's first call on fresh buffers
 * took 550-700 us against 110 (perf/ALGORITHMS.md, gaps2).  Registering
 * costs that instead: 3-5 ms a MiB here (MAP_POPULATE alone 0.7), on the
 * registering client's own thread. */
const char *dp_touch_client_memory(void *p, uint64_t len, const char *(*abandon)(void *), void *arg)
{
	const char *why;

	for (uint64_t off = 0; off < len; off += DP_TOUCH_PIECE) {
		if ((why = abandon(arg)))
			return why;
		sl_touch((uint8_t *)p + off, len - off < DP_TOUCH_PIECE ? len - off : DP_TOUCH_PIECE);
	}
	return NULL;
}

static void *map_fd(int fd, uint64_t want, uint64_t touch, struct sl_ctl_reply *r, const char *what)
{
	struct stat st;
	void *p;

	if (fd < 0) {
		reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "%s: no file descriptor came with the request", what);
		return NULL;
	}
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < want || want == 0) {
		reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "%s: the file is %lld bytes, %llu needed", what,
			  (long long)st.st_size, (unsigned long long)want);
		return NULL;
	}
	p = dp_map_client_file(fd, want, touch);
	if (p == MAP_FAILED) {
		reply_err(r, SLUICE_ERR_SYSTEM, "%s: mmap of %llu bytes failed: %s", what,
			  (unsigned long long)want, strerror(errno));
		return NULL;
	}
	return p;
}

static int32_t server_call(struct server *s, unsigned ch, struct dp_ctl_req *req)
{
	req->patience_ms = s->conns[req->client].patience_ms;
	return dp_engine_call(s->e[ch], req, NULL);
}

/* The reply's status for an engine's answer res (not 0): the status it
 * named, a timeout when it did not answer, else fail. */
static int32_t answer_status(int32_t res, int32_t fail)
{
	return res >= DP_CTL_STATUS ? res - DP_CTL_STATUS : res == DP_CTL_NO_ANSWER ? SLUICE_ERR_TIMEOUT : fail;
}

static void call_engine(struct server *s, unsigned ch, struct dp_ctl_req *req, struct sl_ctl_reply *r, int32_t fail)
{
	char why[SL_ERRMSG_LEN] = "";
	int32_t res;

	req->why = why;
	if ((res = server_call(s, ch, req)) != 0)
		reply_err(r, answer_status(res, fail), "%s", why);
}

/* A removal, channel 0 (the owner) last.  A refusal (1: still in use)
 * stops it and is the reply: libsluice removes nothing in use, so it means
 * a client that broke the protocol, and the channels already reached have
 * let go (calls that name the object there fail with a clear error).  An
 * engine that does not answer stops it too: the owner keeps the memory
 * that engine may still read.  A failure reported on the way (a
 * communicator's, at destroy) does not stop it: that channel let go too,
 * and the first such report is the reply. */
static void remove_all(struct server *s, const struct dp_ctl_req *req, struct sl_ctl_reply *r, int32_t refused)
{
	for (unsigned ch = s->nch; ch-- > 0;) {
		struct dp_ctl_req q = *req;
		char why[SL_ERRMSG_LEN] = "";
		int32_t res;

		q.why = why;
		if ((res = server_call(s, ch, &q)) == 0)
			continue;
		if (r->status == SLUICE_OK)
			reply_err(r, answer_status(res, refused), "%s", why);
		if (res < DP_CTL_STATUS)
			return;
	}
}

/* Whether the client on fd is this very process (the embedded dataplane). */
static bool peer_is_us(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid == getpid();
}

static void do_hello(struct server *s, int ci, int fd, const struct sl_ctl_msg *m, struct sl_ctl_reply *r)
{
	struct dp_client c = { .id = (uint32_t)ci, .drives = peer_is_us(fd) };

	if (s->conns[ci].hello) {
		reply_err(r, SLUICE_ERR_INVALID_USAGE, "HELLO sent twice on one connection");
		return;
	}
	s->conns[ci].patience_ms = m->a.timeout_ms;
	c.page_len = sl_page_bytes();
	/* the rings of channels this dataplane runs, not all SL_MAX_CHANNELS:
	 * the others are never read, and their completion slots (640 B each
	 * since ABI 9) made a 2-rank sluice_init 10 ms slower here (odds23) */
	c.page = map_fd(fd, c.page_len, sl_page_submit_off(s->nch), r, "client page");
	if (!c.page)
		return;
	if (c.page->magic != SL_ABI_MAGIC || c.page->version != SL_ABI_VERSION) {
		reply_err(r, SLUICE_ERR_INVALID_USAGE, "client page has ABI version %u, this dataplane "
			  "speaks %u: use libsluice and sluiced from the same build", c.page->version,
			  SL_ABI_VERSION);
		munmap(c.page, c.page_len);
		return;
	}
	/* Ring geometry comes from the ABI, never from the page.  Each engine
	 * copies its own view at once (dp_engine_call waits), so c is reused.
	 * After a failure the client counts as known: its hang-up removes it
	 * from every engine that may have taken it. */
	for (unsigned ch = 0; ch < s->nch && r->status == SLUICE_OK; ch++) {
		struct dp_ctl_req req = { .op = DP_CTL_ADD_CLIENT, .client = (uint32_t)ci, .obj = &c };
		c.owner = ch == 0;
		c.bell = &c.page->bell[ch];
		sl_spsc_attach(&c.submit, (void *)((uint8_t *)c.page + sl_page_submit_off(ch)), SL_SUBMIT_SLOTS,
			       sizeof(struct sl_cmd), false);
		sl_spsc_attach(&c.complete, (void *)((uint8_t *)c.page + sl_page_complete_off(ch)),
			       SL_COMPLETE_SLOTS, sizeof(struct sl_cpl), true);
		call_engine(s, ch, &req, r, SLUICE_ERR_INTERNAL);
	}
	s->conns[ci].hello = true;
	r->value = (uint32_t)ci;
}

/* A client's GPU buffer: its own pointer when it lives in this process,
 * else opened from its IPC handle.  0, or -1 with r filled. */
static int open_device_region(const struct sl_ctl_msg *m, int sock, struct dp_region *reg, struct sl_ctl_reply *r)
{
	struct sl_gdma_ipc h;
	char err[256];
	void *p;

	_Static_assert(sizeof(h) == SL_DEV_HANDLE_BYTES, "abi.h's device handle is gpu_dma's sl_gdma_ipc");
	if (m->a.size == 0 || m->a.gpu < 0 || m->a.gpu >= DP_MAX_GPUS) {
		reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "a GPU buffer of %llu bytes on GPU %d: register at "
			  "least one byte, on GPU 0 to %u", (unsigned long long)m->a.size, m->a.gpu, DP_MAX_GPUS - 1);
		return -1;
	}
	reg->gpu = m->a.gpu;
	if (peer_is_us(sock)) {
		p = (void *)(uintptr_t)m->a.addr;
		if (sl_gdma_mem_check(p, m->a.size, m->a.gpu, err, sizeof(err)) != 0) {
			reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "%s", err);
			return -1;
		}
	} else {
		memcpy(&h, m->a.handle, sizeof(h));
		if (h.size != m->a.size || h.device != m->a.gpu ||
		    sl_gdma_ipc_import(&h, &reg->ipc_base, &p, err, sizeof(err)) != 0) {
			reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "cannot open the client's GPU buffer: %s",
				  h.size != m->a.size || h.device != m->a.gpu ? "its handle does not match the "
				  "size and GPU of the request" : err);
			return -1;
		}
	}
	reg->base = p;
	return 0;
}

/* Why to stop touching a registration, or NULL: the client hung up (its
 * reply would go nowhere), or the dataplane stops. */
static const char *reg_abandoned(void *conn)
{
	const struct conn *cn = conn;
	struct pollfd p = { .fd = cn->fd, .events = POLLRDHUP };

	if (atomic_load(cn->s->cfg->stop))
		return "the dataplane is stopping: start it again and attach anew";
	if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)))
		return "the client hung up";
	return NULL;
}

/* Map a registration's file and touch its pages, on this client's thread;
 * NULL with r filled when it failed or was abandoned. */
static void *map_region(struct conn *cn, int fd, uint64_t size, struct sl_ctl_reply *r)
{
	void *p = map_fd(fd, size, 0, r, "registered memory");
	const char *why;

	if (!p)
		return NULL;
	if (!(why = dp_touch_client_memory(p, size, reg_abandoned, cn)))
		return p;
	munmap(p, size);
	reply_err(r, SLUICE_ERR_UNAVAILABLE, "registering %llu bytes was abandoned: %s",
		  (unsigned long long)size, why);
	return NULL;
}

static void do_reg(struct server *s, int ci, int fd, const struct sl_ctl_msg *m, struct sl_ctl_reply *r)
{
	struct conn *cn = &s->conns[ci];
	struct dp_region reg = { .size = m->a.size, .gpu = -1 };
	unsigned i;

	for (i = 0; i < SL_MAX_REGIONS && cn->region_used[i]; i++)
		;
	if (i == SL_MAX_REGIONS) {
		reply_err(r, SLUICE_ERR_NO_MEMORY, "this client already registered %u regions, the most "
			  "one client may: allocate fewer, larger buffers", SL_MAX_REGIONS);
		return;
	}
	if (m->a.kind == SL_REGION_DEVICE) {
		if (open_device_region(m, cn->fd, &reg, r) != 0)
			return;
	} else if (m->a.kind != SL_REGION_HOST) {
		reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "unknown memory kind %u in a registration", m->a.kind);
		return;
	} else if (!(reg.base = map_region(cn, fd, m->a.size, r))) {
		return;
	}
	/* Taking a region is never refused.  An engine that does not answer
	 * may take it later: the slot stays used, released at hang-up. */
	for (unsigned ch = 0; ch < s->nch && r->status == SLUICE_OK; ch++) {
		struct dp_ctl_req req = { .op = DP_CTL_ADD_REGION, .client = (uint32_t)ci, .index = i, .obj = &reg };
		reg.owner = ch == 0;
		call_engine(s, ch, &req, r, SLUICE_ERR_INTERNAL);
	}
	cn->region_used[i] = true;
	r->value = i;
}

static void do_dereg(struct server *s, int ci, const struct sl_ctl_msg *m, struct sl_ctl_reply *r)
{
	struct dp_ctl_req req = { .op = DP_CTL_DEL_REGION, .client = (uint32_t)ci, .index = m->a.region };

	if (m->a.region >= SL_MAX_REGIONS || !s->conns[ci].region_used[m->a.region]) {
		reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "region %u is not registered by this client",
			  m->a.region);
		return;
	}
	remove_all(s, &req, r, SLUICE_ERR_INVALID_USAGE);
	if (r->status == SLUICE_OK)
		s->conns[ci].region_used[m->a.region] = false;
}

static const char *check_comm(const struct server *s, const struct sl_ctl_msg *m, char *buf)
{
	uint32_t n = m->c.nranks;

	if (n == 0 || n > SL_MAX_RANKS || m->c.rank >= n)
		return "rank or rank count out of range";
	if (m->c.node[m->c.rank] != s->e[0]->node) {
		sl_errmsg_format(buf, SL_ERRMSG_LEN, "the communicator places this rank on dataplane node %u, but "
				 "this dataplane is node %u", m->c.node[m->c.rank], s->e[0]->node);
		return buf;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (i != m->c.rank && m->c.node[i] == s->e[0]->node) {
			sl_errmsg_format(buf, SL_ERRMSG_LEN, "ranks %u and %u share dataplane node %u: this version runs "
					 "one rank of a communicator per dataplane (sluice-run -n N starts N)",
					 m->c.rank, i, s->e[0]->node);
			return buf;
		}
		if (m->c.node[i] >= SL_MAX_NODES)
			return "a node id is out of range";
	}
	return NULL;
}

static void do_comm_create(struct server *s, int ci, const struct sl_ctl_msg *m, struct sl_ctl_reply *r)
{
	struct dp_comm comm = { 0 };
	char buf[SL_ERRMSG_LEN];
	const char *bad = check_comm(s, m, buf);
	unsigned i, ch;

	if (bad) {
		reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "communicator creation: %s", bad);
		return;
	}
	pthread_mutex_lock(&s->lock); /* the slot is this client's while the engines take it */
	for (i = 0; i < DP_MAX_COMMS && s->comm_owner[i] >= 0; i++)
		;
	if (i < DP_MAX_COMMS)
		s->comm_owner[i] = ci;
	pthread_mutex_unlock(&s->lock);
	if (i == DP_MAX_COMMS) {
		reply_err(r, SLUICE_ERR_NO_MEMORY, "this dataplane already runs %u communicators: destroy "
			  "some first", DP_MAX_COMMS);
		return;
	}
	comm.key = m->c.key;
	comm.key32 = (uint32_t)m->c.key;
	comm.rank = m->c.rank;
	comm.nranks = m->c.nranks;
	comm.timeout_ns = (uint64_t)m->c.timeout_ms * 1000000;
	for (uint32_t k = 0; k < comm.nranks; k++)
		comm.node[k] = (uint16_t)m->c.node[k];
	atomic_store(&comm_channels_failed[i].claimed, 0);
	atomic_store(&comm_channels_failed[i].status, 0);
	atomic_store(&comm_channels_failed[i].told, false);
	comm.channels_failed = s->nch > 1 ? &comm_channels_failed[i] : NULL;
	for (ch = 0; ch < s->nch && r->status == SLUICE_OK; ch++) {
		struct dp_ctl_req req = { .op = DP_CTL_ADD_COMM, .client = (uint32_t)ci, .index = i, .obj = &comm };
		comm.client = &s->e[ch]->clients[ci];
		call_engine(s, ch, &req, r, SLUICE_ERR_INVALID_ARGUMENT);
	}
	/* refused by one channel: the ones before it let go of it (nothing ran
	 * on it yet).  One that did not answer may take it later: the slot
	 * stays the client's, released at hang-up. */
	bool held = r->status == SLUICE_ERR_TIMEOUT;
	for (unsigned k = 0; r->status != SLUICE_OK && !held && k + 1 < ch; k++) {
		struct dp_ctl_req undo = { .op = DP_CTL_DEL_COMM, .client = (uint32_t)ci, .index = i };
		struct sl_ctl_reply undone = { 0 };
		call_engine(s, k, &undo, &undone, SLUICE_ERR_INTERNAL);
		held |= undone.status == SLUICE_ERR_TIMEOUT;
	}
	pthread_mutex_lock(&s->lock);
	if (r->status == SLUICE_OK) {
		r->value = i;
		dp_trace_note_comm(s->cfg->trace, &comm);
	} else if (!held) {
		s->comm_owner[i] = -1;
	}
	pthread_mutex_unlock(&s->lock);
}

static bool comm_held_by(struct server *s, uint32_t comm, int ci)
{
	bool held;

	pthread_mutex_lock(&s->lock);
	held = comm < DP_MAX_COMMS && s->comm_owner[comm] == ci;
	pthread_mutex_unlock(&s->lock);
	return held;
}

static void do_comm_destroy(struct server *s, int ci, const struct sl_ctl_msg *m, struct sl_ctl_reply *r)
{
	struct dp_ctl_req req = { .op = DP_CTL_DEL_COMM, .client = (uint32_t)ci, .index = m->a.comm };

	if (!comm_held_by(s, m->a.comm, ci)) {
		reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "communicator %u is not held by this client",
			  m->a.comm);
		return;
	}
	remove_all(s, &req, r, SLUICE_ERR_INVALID_USAGE);
	/* refused only while collectives run, or not answered; a failure
	 * reported at destroy released it */
	if (r->status != SLUICE_ERR_INVALID_USAGE && r->status != SLUICE_ERR_TIMEOUT) {
		pthread_mutex_lock(&s->lock);
		s->comm_owner[m->a.comm] = -1;
		pthread_mutex_unlock(&s->lock);
	}
}

static void look_at_engine(struct server *s, unsigned ch, uint64_t now);

/* In r, the first engine that takes no pass while the server looks (a
 * working one takes one every millisecond at most, idle.c), or one that
 * came round again after a stall that the client's wait ran out in (a whole
 * process stopped past the client's timeout: the client gave up before the
 * engine's first pass): a client's wait that timed out asks, so that it can
 * say why rather than time out bare. */
static void do_stalled(struct server *s, int ci, struct sl_ctl_reply *r)
{
	char why[SL_ERRMSG_LEN];
	uint64_t patience = s->conns[ci].patience_ms ? s->conns[ci].patience_ms * 1000000ull : s->e[0]->timeout_ns;
	bool ended = false;

	for (unsigned ch = 0; ch < s->nch; ch++) {
		pthread_mutex_lock(&s->stall_lock);
		look_at_engine(s, ch, dp_now_ns(NULL)); /* the server's loop may not have looked since a stop */
		struct dp_stall_watch seen = s->stall[ch];
		pthread_mutex_unlock(&s->stall_lock);
		if (dp_engine_stalled(s->e[ch], STALL_LOOK_NS, &seen, why)) {
			reply_err(r, SLUICE_ERR_TIMEOUT, "%s", why);
			return;
		}
	}
	for (unsigned ch = 0; ch < s->nch && !ended; ch++) {
		pthread_mutex_lock(&s->stall_lock);
		uint64_t now = dp_now_ns(NULL); /* under the lock: the looks' times never go back */
		look_at_engine(s, ch, now); /* the server's loop may not have seen it come round yet */
		ended = dp_stall_ended(&s->stall[ch], now, patience + STALL_RECENT_MARGIN_NS, why, sizeof(why));
		pthread_mutex_unlock(&s->stall_lock);
		if (ended)
			reply_err(r, SLUICE_ERR_TIMEOUT, "channel %u's engine (dataplane node %u) %s; the client's "
				  "wait ran out in that time", ch, s->e[ch]->node, why);
	}
}

/* *reply_fd: a file descriptor to pass back with the reply, or -1. */
static void handle(struct server *s, int ci, const struct sl_ctl_msg *m, int fd, struct sl_ctl_reply *r,
		   int *reply_fd)
{
	r->node = s->e[0]->node;
	r->channels = s->nch;
	r->payload = s->e[0]->payload;
	if (m->version != SL_ABI_VERSION) {
		reply_err(r, SLUICE_ERR_INVALID_USAGE, "request of ABI version %u, this dataplane speaks %u: "
			  "use libsluice and sluiced from the same build", m->version, SL_ABI_VERSION);
		return;
	}
	if (m->type != SL_CTL_HELLO && m->type != SL_CTL_INFO && m->type != SL_CTL_TRACE_ATTACH &&
	    !s->conns[ci].hello) {
		reply_err(r, SLUICE_ERR_INVALID_USAGE, "HELLO must come first");
		return;
	}
	switch (m->type) {
	case SL_CTL_HELLO: do_hello(s, ci, fd, m, r); break;
	case SL_CTL_REG: do_reg(s, ci, fd, m, r); break;
	case SL_CTL_DEREG: do_dereg(s, ci, m, r); break;
	case SL_CTL_COMM_CREATE: do_comm_create(s, ci, m, r); break;
	case SL_CTL_COMM_DESTROY: do_comm_destroy(s, ci, m, r); break;
	case SL_CTL_INFO: break;
	case SL_CTL_STALLED: do_stalled(s, ci, r); break;
	case SL_CTL_TRACE_ATTACH:
		pthread_mutex_lock(&s->lock);
		*reply_fd = dp_trace_attach(s->cfg->trace, s->e[0], m, r);
		pthread_mutex_unlock(&s->lock);
		s->conns[ci].tracer |= *reply_fd >= 0;
		break;
	default: reply_err(r, SLUICE_ERR_INVALID_ARGUMENT, "unknown request type %u", m->type);
	}
}

/* Receive one request and its file descriptor, if any. 0, or -1 on hang-up. */
static int recv_req(int fd, struct sl_ctl_msg *m, int *passed, bool *short_msg)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

	*passed = -1;
	if (n <= 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(passed, CMSG_DATA(c), sizeof(int));
	/* Requests may be shorter than the struct (no rank table): the rest reads as zero. */
	if ((size_t)n < sizeof(*m))
		memset((char *)m + n, 0, sizeof(*m) - (size_t)n);
	*short_msg = (size_t)n < offsetof(struct sl_ctl_msg, a);
	return 0;
}

/* Let go of client ci on channel ch's engine, waiting for it as long as it
 * takes: until it answers, that engine may still hold the client (read the
 * memory the owner maps, use the slot).  Its answer comes in order, after
 * everything the client asked of it.  False when the dataplane stops first. */
static bool let_go(struct server *s, unsigned ch, int ci)
{
	struct dp_ctl_req req = { .op = DP_CTL_DEL_CLIENT, .client = (uint32_t)ci };
	struct dp_ctl_call *late;
	char why[SL_ERRMSG_LEN];

	req.why = why;
	if (dp_engine_call(s->e[ch], &req, &late) != DP_CTL_NO_ANSWER)
		return true;
	fprintf(stderr, "sluiced node %u: client %d hung up but cannot be let go yet (its slot stays taken until the "
		"engine answers): %s\n", s->e[0]->node, ci, why);
	for (;;) {
		bool stop = atomic_load(s->cfg->stop);
		if (dp_ctl_late_answer(late, stop, NULL) != DP_CTL_NO_ANSWER)
			break;
		if (stop)
			return false;
		usleep(10000);
	}
	fprintf(stderr, "sluiced node %u: client %d let go: channel %u's engine answered after all\n",
		s->e[0]->node, ci, ch);
	return true;
}

/* The client is gone: every engine lets go of it, the owner last, so that
 * its slot is free again only once no engine holds it.  When the dataplane
 * stops first, its communicator slots stay taken (nobody takes any more). */
static void drop_conn(struct server *s, int ci)
{
	struct conn *cn = &s->conns[ci];
	bool all = true;

	for (unsigned ch = s->nch; cn->hello && all && ch-- > 0;)
		all = let_go(s, ch, ci);
	pthread_mutex_lock(&s->lock);
	if (cn->tracer)
		dp_trace_detach(s->cfg->trace);
	for (unsigned i = 0; i < DP_MAX_COMMS && all; i++)
		if (s->comm_owner[i] == ci)
			s->comm_owner[i] = -1;
	pthread_mutex_unlock(&s->lock);
	close(cn->fd);
}

/* Send one reply, with fd (when >= 0) as SCM_RIGHTS. */
static bool send_reply(int sock, const struct sl_ctl_reply *r, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { (void *)r, sizeof(*r) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(*r);
}

/* One request and its reply.  False when the client hung up. */
static bool serve_conn(struct server *s, int ci)
{
	struct sl_ctl_msg m;
	struct sl_ctl_reply r;
	int fd, reply_fd = -1;
	bool short_msg;

	if (recv_req(s->conns[ci].fd, &m, &fd, &short_msg) != 0)
		return false;
	memset(&r, 0, sizeof(r));
	if (short_msg)
		reply_err(&r, SLUICE_ERR_INVALID_ARGUMENT, "request too short");
	else
		handle(s, ci, &m, fd, &r, &reply_fd);
	if (fd >= 0)
		close(fd); /* mapped already, or refused */
	bool sent = send_reply(s->conns[ci].fd, &r, reply_fd);
	if (reply_fd >= 0)
		close(reply_fd); /* the peer has its own copy now */
	return sent;
}

/* A connection's thread: its requests, one at a time, until it hangs up or
 * the dataplane stops. */
static void *conn_main(void *conn)
{
	struct conn *cn = conn;
	struct server *s = cn->s;
	int ci = (int)(cn - s->conns);
	struct pollfd p = { .fd = cn->fd, .events = POLLIN };

	while (!atomic_load(s->cfg->stop)) {
		int n = poll(&p, 1, 100);
		if ((n < 0 && errno != EINTR) || (n > 0 && !serve_conn(s, ci)))
			break;
	}
	drop_conn(s, ci);
	atomic_store(&cn->ended, true);
	return NULL;
}

static bool peer_allowed(const struct server *s, int fd, struct sl_ctl_reply *r)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		reply_err(r, SLUICE_ERR_SYSTEM, "cannot read the peer's credentials: %s", strerror(errno));
		return false;
	}
	if (s->cfg->allow_any_user || cred.uid == geteuid())
		return true;
	reply_err(r, SLUICE_ERR_INVALID_USAGE, "refused: this dataplane runs as uid %u and serves only "
		  "that user, you are uid %u (start sluiced with --allow-any-user to share it)",
		  (unsigned)geteuid(), (unsigned)cred.uid);
	return false;
}

/* Join the threads of connections that ended (every engine let go of
 * their clients, or the dataplane stops): their slots are free again. */
static void reap_conns(struct server *s)
{
	for (int i = 0; i < DP_MAX_CLIENTS; i++) {
		struct conn *cn = &s->conns[i];
		if (!cn->running || !atomic_load(&cn->ended))
			continue;
		pthread_join(cn->thread, NULL);
		cn->running = false;
	}
}

static void accept_conn(struct server *s)
{
	struct sl_ctl_reply r = { .status = SLUICE_OK };
	int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	struct conn *cn = NULL;
	int ci, err;

	if (fd < 0)
		return;
	for (ci = 0; ci < DP_MAX_CLIENTS && s->conns[ci].running; ci++)
		;
	if (!peer_allowed(s, fd, &r) ||
	    (ci == DP_MAX_CLIENTS &&
	     reply_err(&r, SLUICE_ERR_NO_MEMORY, "this dataplane serves %u clients already", DP_MAX_CLIENTS) == 0))
		goto refuse;
	cn = &s->conns[ci];
	*cn = (struct conn){ .s = s, .fd = fd };
	atomic_init(&cn->ended, false);
	/* running is this (the server's) thread's alone: set once the thread
	 * exists, no search for a free slot can come in between */
	if ((err = pthread_create(&cn->thread, NULL, conn_main, cn)) == 0) {
		cn->running = true;
		return;
	}
	reply_err(&r, SLUICE_ERR_SYSTEM, "the dataplane cannot start a thread for this client: %s: free memory "
		  "or raise its limit of threads", strerror(err));
refuse:
	/* Say why, then hang up: the client reads this as the answer to its first request. */
	send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

/* The socket is bound under a temporary name and renamed into place once it
 * listens: whoever waits for the path to appear (sluice-run, tests) may
 * connect at once, never in the window between bind and listen. */
static int open_listener(const char *path, char *err, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const char tmp_suffix[] = ".new";
	int fd;

	if (strlen(path) + sizeof(tmp_suffix) > sizeof(sa.sun_path)) {
		sl_errmsg_format(err, len, "socket path %s is longer than %zu bytes", path,
				 sizeof(sa.sun_path) - sizeof(tmp_suffix));
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s", path, tmp_suffix);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	unlink(sa.sun_path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
	    /* Anyone may connect; SO_PEERCRED decides who is served, with a reason. */
	    chmod(sa.sun_path, 0666) != 0 || rename(sa.sun_path, path) != 0) {
		sl_errmsg_format(err, len, "cannot listen on %s: %s (does its directory exist and is it writable?)",
				 path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(sa.sun_path);
		}
		return -1;
	}
	return fd;
}

/* An engine stuck in a call is named on stderr, with where it is
 * (stall_watch.h).  Under stall_lock. */
static void look_at_engine(struct server *s, unsigned ch, uint64_t now)
{
	const struct dp_engine *e = s->e[ch];
	char msg[768];

	if (!dp_stall_check(&s->stall[ch], atomic_load_explicit(&e->passes, memory_order_relaxed),
			    dp_engine_holder(e, NULL), now, msg, sizeof(msg)))
		return;
	if (ch)
		fprintf(stderr, "sluiced node %u channel %u: %s\n", e->node, ch, msg);
	else
		fprintf(stderr, "sluiced node %u: %s\n", e->node, msg);
}

/* From the server's loop, which waits on no engine. */
static void watch_engines(struct server *s)
{
	pthread_mutex_lock(&s->stall_lock);
	uint64_t now = dp_now_ns(NULL);
	for (unsigned ch = 0; ch < s->nch; ch++)
		look_at_engine(s, ch, now);
	pthread_mutex_unlock(&s->stall_lock);
}

int dp_server_run(struct dp_engine *const *engines, unsigned nengines, const struct dp_server_cfg *cfg,
		  _Atomic bool *ready, char *err, size_t len)
{
	struct server s = { .e = engines, .nch = nengines, .cfg = cfg };
	s.listen_fd = open_listener(cfg->socket_path, err, len);
	if (s.listen_fd < 0)
		return -1;
	pthread_mutex_init(&s.lock, NULL);
	pthread_mutex_init(&s.stall_lock, NULL);
	for (int i = 0; i < DP_MAX_COMMS; i++)
		s.comm_owner[i] = -1;
	if (ready)
		atomic_store(ready, true);
	while (!atomic_load(cfg->stop)) {
		struct pollfd pfd = { .fd = s.listen_fd, .events = POLLIN };

		if (poll(&pfd, 1, 100) > 0 && (pfd.revents & POLLIN))
			accept_conn(&s);
		watch_engines(&s);
		reap_conns(&s);
	}
	/* each connection's thread sees the stop within 100 ms, or once its engine call is answered or
	 * given up on (a removal's late answer: within 10 ms) */
	for (int i = 0; i < DP_MAX_CLIENTS; i++)
		if (s.conns[i].running)
			pthread_join(s.conns[i].thread, NULL);
	pthread_mutex_destroy(&s.lock);
	pthread_mutex_destroy(&s.stall_lock);
	close(s.listen_fd);
	unlink(cfg->socket_path);
	return 0;
}
