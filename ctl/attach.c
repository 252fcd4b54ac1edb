/*
 * attach.c: sluice_init and sluice_finalize.  Connects to a dataplane's
 * attach socket (a running sluiced, or an engine started on threads of this
 * process in embedded mode), builds the client page with the submission and
 * completion rings, and hands it over with HELLO.  Also sl_ctl_call, the one
 * request/reply exchange every control message goes through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "sluice/touch.h"

#ifndef SLUICE_DP_LIB_DEFAULT
#define SLUICE_DP_LIB_DEFAULT "libsluice_dp.so"
#endif

/* ---- the attach socket ---- */

static const char *ctl_name(uint32_t type)
{
	static const char *const names[] = {
		[SL_CTL_HELLO] = "HELLO",   [SL_CTL_REG] = "REG",
		[SL_CTL_DEREG] = "DEREG",   [SL_CTL_COMM_CREATE] = "COMM_CREATE",
		[SL_CTL_COMM_DESTROY] = "COMM_DESTROY", [SL_CTL_INFO] = "INFO",
		[SL_CTL_STALLED] = "STALLED",
	};

	return type < sizeof(names) / sizeof(names[0]) && names[type] ? names[type] : "?";
}

static sluice_result_t ctl_send(struct sluice_ctx *ctx, const struct sl_ctl_msg *msg, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = sizeof(control.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	if (sendmsg(ctx->sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(*msg))
		return SLUICE_OK;
	return sl_fail(errno == EPIPE || errno == ECONNRESET ? SLUICE_ERR_UNAVAILABLE : SLUICE_ERR_SYSTEM,
		       "sending %s to the dataplane at %s failed: %s: the dataplane may have exited; "
		       "check it and sluice_init again",
		       ctl_name(msg->type), ctx->cfg.socket, strerror(errno));
}

int64_t sl_ctl_wait_s(int timeout_s, const struct sl_ctl_msg *msg)
{
	uint64_t gib = msg->type == SL_CTL_REG ? (msg->a.size >> 30) + ((msg->a.size & ((1u << 30) - 1)) != 0) : 0;

	/* the dataplane looks at its engines a fraction of a second: a wait
	 * that timed out already, asking why, is not doubled */
	if (msg->type == SL_CTL_STALLED)
		return SL_WAIT_MARGIN_S;

	/* the dataplane holds a destroy up to this SLUICE_TIMEOUT for the peers'
	 * closing words, and gives up on an engine that takes no pass for as
	 * long (HELLO told it): its answer gets the margin to arrive */
	return timeout_s + SL_WAIT_MARGIN_S +
	       (gib < SL_TIMEOUT_MAX / SL_REG_S_PER_GIB ? (int64_t)gib * SL_REG_S_PER_GIB : SL_TIMEOUT_MAX);
}

/* The answer to msg, waited for sl_ctl_wait_s at most. */
static sluice_result_t ctl_recv(struct sluice_ctx *ctx, const struct sl_ctl_msg *msg, struct sl_ctl_reply *reply)
{
	int64_t wait_s = sl_ctl_wait_s(ctx->cfg.timeout_s, msg), deadline = sl_now_ns() + wait_s * 1000000000;
	struct pollfd pfd = {.fd = ctx->sock, .events = POLLIN};
	uint32_t type = msg->type;
	int64_t left_ms;
	ssize_t n;
	int ready;

	do {
		left_ms = (deadline - sl_now_ns() + 999999) / 1000000;
		ready = left_ms > 0 ? poll(&pfd, 1, left_ms < INT_MAX ? (int)left_ms : INT_MAX) : 0;
	} while (ready < 0 ? errno == EINTR : ready == 0 && left_ms > 0);
	if (ready == 0) {
		ctx->ctl_broken = true;
		if (type == SL_CTL_REG)
			return sl_fail(SLUICE_ERR_TIMEOUT,
				       "the dataplane at %s did not answer %s of %llu bytes within %lld s "
				       "(SLUICE_TIMEOUT=%d s, %d s a GiB and %d s): check that it is alive, or raise "
				       "SLUICE_TIMEOUT",
				       ctx->cfg.socket, ctl_name(type), (unsigned long long)msg->a.size,
				       (long long)wait_s, ctx->cfg.timeout_s, SL_REG_S_PER_GIB, SL_WAIT_MARGIN_S);
		return sl_fail(SLUICE_ERR_TIMEOUT,
			       "the dataplane at %s did not answer %s within SLUICE_TIMEOUT=%d s (+%d s): check that "
			       "it is alive, or raise SLUICE_TIMEOUT",
			       ctx->cfg.socket, ctl_name(type), ctx->cfg.timeout_s, SL_WAIT_MARGIN_S);
	}
	if (ready < 0)
		return sl_fail(SLUICE_ERR_SYSTEM, "waiting for the dataplane's answer to %s from %s failed: %s",
			       ctl_name(type), ctx->cfg.socket, strerror(errno));
	do
		n = recv(ctx->sock, reply, sizeof(*reply), 0);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(*reply))
		return SLUICE_OK;
	if (n == 0)
		return sl_fail(SLUICE_ERR_UNAVAILABLE,
			       "the dataplane at %s exited (closed the socket) while answering %s: check its "
			       "log, restart it and sluice_init again",
			       ctx->cfg.socket, ctl_name(type));
	if (n > 0) {
		ctx->ctl_broken = true;
		return sl_fail(SLUICE_ERR_INTERNAL,
			       "the dataplane at %s answered %s with %zd bytes, not %zu: libsluice and sluiced "
			       "were built from different sources; use matching versions",
			       ctx->cfg.socket, ctl_name(type), n, sizeof(*reply));
	}
	return sl_fail(SLUICE_ERR_SYSTEM, "reading the dataplane's answer to %s from %s failed: %s",
		       ctl_name(type), ctx->cfg.socket, strerror(errno));
}

sluice_result_t sl_ctl_call(struct sluice_ctx *ctx, struct sl_ctl_msg *msg, int fd,
			    struct sl_ctl_reply *reply)
{
	sluice_result_t res;

	msg->version = SL_ABI_VERSION;
	pthread_mutex_lock(&ctx->call_lock);
	if (ctx->ctl_broken)
		res = sl_fail(SLUICE_ERR_INVALID_USAGE,
			      "an earlier request to the dataplane at %s failed midway, so its answers can no "
			      "longer be matched to requests: sluice_finalize and sluice_init again",
			      ctx->cfg.socket);
	else if ((res = ctl_send(ctx, msg, fd)) == SLUICE_OK)
		res = ctl_recv(ctx, msg, reply);
	pthread_mutex_unlock(&ctx->call_lock);
	if (res != SLUICE_OK)
		return res;
	reply->msg[SL_ERRMSG_LEN - 1] = '\0';
	if (reply->status == SLUICE_OK)
		return SLUICE_OK;
	res = reply->status > 0 && reply->status < SLUICE_IN_PROGRESS ? (sluice_result_t)reply->status
								      : SLUICE_ERR_INTERNAL;
	return sl_fail(res, "the dataplane at %s refused %s: %s", ctx->cfg.socket, ctl_name(msg->type),
		       reply->msg[0] ? reply->msg : "(no reason given)");
}

/* ---- connecting ---- */

static sluice_result_t ctl_connect(struct sluice_ctx *ctx)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	strcpy(sa.sun_path, ctx->cfg.socket);
	ctx->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (ctx->sock < 0)
		return sl_fail(SLUICE_ERR_SYSTEM, "socket(AF_UNIX, SOCK_SEQPACKET) failed: %s", strerror(errno));
	if (connect(ctx->sock, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return sl_fail(SLUICE_ERR_UNAVAILABLE,
			       "no dataplane at %s (connect: %s): start one with `sluiced --node 0 ...` or "
			       "run under `sluice-run`, or set SLUICE_EMBEDDED=1; SLUICE_SOCKET names the socket",
			       ctx->cfg.socket, strerror(errno));
	return SLUICE_OK;
}

/* Map a fresh client page in fd, with every channel's rings empty and our handles attached. */
static sluice_result_t page_create(struct sluice_ctx *ctx, int fd)
{
	struct sl_client_page *page;
	struct sl_spsc_shared *sub, *cpl;
	bool ok = true;

	if (ftruncate(fd, (off_t)sl_page_bytes()) != 0)
		return sl_fail(SLUICE_ERR_NO_MEMORY, "sizing the client page (%zu bytes) failed: %s",
			       sl_page_bytes(), strerror(errno));
	page = mmap(NULL, sl_page_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED)
		return sl_fail(SLUICE_ERR_NO_MEMORY, "mapping the client page (%zu bytes) failed: %s",
			       sl_page_bytes(), strerror(errno));
	ctx->page = page;
	page->magic = SL_ABI_MAGIC;
	page->version = SL_ABI_VERSION;
	for (uint32_t ch = 0; ch < SL_MAX_CHANNELS; ch++) {
		sub = (void *)((char *)page + sl_page_submit_off(ch));
		cpl = (void *)((char *)page + sl_page_complete_off(ch));
		sl_spsc_reset(sub);
		sl_spsc_reset(cpl);
		ok = ok && sl_spsc_attach(&ctx->submit[ch], sub, SL_SUBMIT_SLOTS, sizeof(struct sl_cmd), true) &&
		     sl_spsc_attach(&ctx->complete[ch], cpl, SL_COMPLETE_SLOTS, sizeof(struct sl_cpl), false);
	}
	return ok ? SLUICE_OK
		  : sl_fail(SLUICE_ERR_INTERNAL, "abi.h gives the rings a bad geometry (slots %u/%u, "
						 "slot sizes %zu/%zu)",
			    SL_SUBMIT_SLOTS, SL_COMPLETE_SLOTS, sizeof(struct sl_cmd), sizeof(struct sl_cpl));
}

static sluice_result_t hello(struct sluice_ctx *ctx)
{
	struct sl_ctl_msg msg = {.type = SL_CTL_HELLO, .a.timeout_ms = (uint32_t)ctx->cfg.timeout_s * 1000};
	struct sl_ctl_reply reply;
	sluice_result_t res;
	int fd = memfd_create("sluice-client-page", MFD_CLOEXEC);

	if (fd < 0)
		return sl_fail(SLUICE_ERR_SYSTEM, "memfd_create for the client page failed: %s", strerror(errno));
	res = page_create(ctx, fd);
	if (res == SLUICE_OK)
		res = sl_ctl_call(ctx, &msg, fd, &reply);
	close(fd);
	if (res != SLUICE_OK)
		return res;
	if (reply.channels < 1 || reply.channels > SL_MAX_CHANNELS)
		return sl_fail(SLUICE_ERR_INTERNAL, "the dataplane at %s says it runs %u channels, outside 1 to %u: "
			       "libsluice and sluiced differ in version", ctx->cfg.socket, reply.channels,
			       SL_MAX_CHANNELS);
	if (reply.payload < 16 || reply.payload % 16)
		return sl_fail(SLUICE_ERR_INTERNAL, "the dataplane at %s says its packets carry %u bytes, not a "
			       "multiple of 16 from 16 up: libsluice and sluiced differ in version",
			       ctx->cfg.socket, reply.payload);
	ctx->client_id = reply.value;
	ctx->nch = reply.channels;
	ctx->payload = reply.payload;
	return SLUICE_OK;
}

/* ---- embedded mode: one engine per process, shared by its contexts ---- */

typedef int (*embedded_start_fn)(const char *args, char *sock_path, size_t sock_len, char *err,
				 size_t err_len);

static struct {
	pthread_mutex_t lock;
	unsigned users;          /* contexts attached to it */
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	void (*stop)(void);
	int32_t (*drive)(int64_t now_ns); /* one engine pass from the caller's thread (sluice/drive.h) */
	void (*release)(bool more); /* the caller stops driving (more: it has other calls in flight) */
} embedded = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The dataplane library is never dlclose'd: DPDK is not made to be unloaded. */
static sluice_result_t embedded_load(const struct sl_config *cfg, embedded_start_fn *start)
{
	const char *path = cfg->dp_lib ? cfg->dp_lib : SLUICE_DP_LIB_DEFAULT;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!lib && !cfg->dp_lib) {
		path = "libsluice_dp.so";
		lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (!lib)
		return sl_fail(SLUICE_ERR_UNAVAILABLE,
			       "SLUICE_EMBEDDED=1 but the dataplane library could not be loaded: %s: set "
			       "SLUICE_DP_LIB to the path of libsluice_dp.so, or attach to a running sluiced "
			       "with SLUICE_EMBEDDED=0",
			       dlerror());
	*start = (embedded_start_fn)dlsym(lib, "sl_dp_embedded_start");
	embedded.stop = (void (*)(void))dlsym(lib, "sl_dp_embedded_stop");
	embedded.drive = (int32_t (*)(int64_t))dlsym(lib, "sl_dp_embedded_drive");
	embedded.release = (void (*)(bool))dlsym(lib, "sl_dp_embedded_release");
	if (!*start || !embedded.stop || !embedded.drive || !embedded.release)
		return sl_fail(SLUICE_ERR_UNAVAILABLE,
			       "%s does not export the sl_dp_embedded_ entry points sluice needs: it is not a "
			       "sluice dataplane library, or one from another version; set SLUICE_DP_LIB to a "
			       "matching libsluice_dp.so",
			       path);
	SL_INFO(SL_SUB_INIT, "loaded the embedded dataplane from %s", path);
	return SLUICE_OK;
}

static sluice_result_t embedded_start(struct sluice_ctx *ctx)
{
	embedded_start_fn start = NULL;
	char err[SL_ERRMSG_LEN] = "";
	sluice_result_t res = SLUICE_OK;

	pthread_mutex_lock(&embedded.lock);
	if (embedded.users == 0 && (res = embedded_load(&ctx->cfg, &start)) == SLUICE_OK &&
	    start(ctx->cfg.embedded_args, embedded.socket, sizeof(embedded.socket), err, sizeof(err)) != 0) {
		err[sizeof(err) - 1] = '\0';
		res = sl_fail(SLUICE_ERR_UNAVAILABLE,
			      "the embedded dataplane failed to start with SLUICE_EMBEDDED_ARGS=\"%s\": %s",
			      ctx->cfg.embedded_args, err[0] ? err : "(no reason given)");
	}
	if (res == SLUICE_OK) {
		embedded.users++;
		ctx->embedded = true;
		ctx->drive = embedded.drive;
		ctx->release = embedded.release;
		embedded.socket[sizeof(embedded.socket) - 1] = '\0';
		strcpy(ctx->cfg.socket, embedded.socket);
	}
	pthread_mutex_unlock(&embedded.lock);
	return res;
}

static void embedded_release(void)
{
	pthread_mutex_lock(&embedded.lock);
	if (--embedded.users == 0) {
		SL_INFO(SL_SUB_INIT, "stopping the embedded dataplane");
		embedded.stop();
	}
	pthread_mutex_unlock(&embedded.lock);
}

/* ---- init and finalize ---- */

static void ctx_free(struct sluice_ctx *ctx)
{
	if (ctx->sock >= 0)
		close(ctx->sock);
	sl_mem_unmap_all(ctx);
	if (ctx->page)
		munmap(ctx->page, sl_page_bytes());
	if (ctx->embedded)
		embedded_release();
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->call_lock);
	munmap(ctx, sizeof(*ctx));
}

sluice_result_t sluice_init(sluice_ctx_t **out)
{
	struct sluice_ctx *ctx;
	sluice_result_t res;

	if (!out)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_init: ctx is NULL: pass the address of a "
							    "sluice_ctx_t pointer");
	*out = NULL;
	/* Mapped, not malloc'd: 0.7 MiB, most of it the requests' failure
	 * messages, which only a failure faults in; the request table's pages
	 * are faulted in below (all given back whole at finalize). */
	ctx = mmap(NULL, sizeof(*ctx), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ctx == MAP_FAILED)
		return sl_fail(SLUICE_ERR_NO_MEMORY, "sluice_init: mapping the context (%zu bytes) failed: %s",
			       sizeof(*ctx), strerror(errno));
	ctx->sock = -1;
	ctx->next_tag = 1;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->call_lock, NULL);
	if ((res = sl_config_load(&ctx->cfg)) != SLUICE_OK ||
	    (ctx->cfg.embedded && (res = embedded_start(ctx)) != SLUICE_OK) ||
	    (res = ctl_connect(ctx)) != SLUICE_OK || (res = hello(ctx)) != SLUICE_OK) {
		ctx_free(ctx);
		return res;
	}
	/* Calls take request slots and ring slots in turn: fault their pages in
	 * now, not one every few calls (sluice/touch.h). */
	sl_touch(ctx->reqs, sizeof(ctx->reqs));
	sl_touch(ctx->page, sl_page_submit_off(ctx->nch));
	SL_INFO(SL_SUB_INIT, "attached to %s as client %u%s, %u channel%s", ctx->cfg.socket, ctx->client_id,
		ctx->embedded ? " (embedded)" : "", ctx->nch, ctx->nch == 1 ? "" : "s");
	*out = ctx;
	return SLUICE_OK;
}

sluice_result_t sluice_finalize(sluice_ctx_t *ctx)
{
	unsigned ncomms;

	if (!ctx)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_finalize: ctx is NULL");
	pthread_mutex_lock(&ctx->lock);
	ncomms = ctx->ncomms;
	pthread_mutex_unlock(&ctx->lock);
	if (ncomms > 0)
		return sl_fail(SLUICE_ERR_INVALID_USAGE,
			       "sluice_finalize: %u communicator%s still alive: sluice_comm_destroy them first",
			       ncomms, ncomms == 1 ? " is" : "s are");
	SL_INFO(SL_SUB_INIT, "detaching from %s; waits slept %llu times, spun %llu turns first", ctx->cfg.socket,
		(unsigned long long)atomic_load(&ctx->naps), (unsigned long long)atomic_load(&ctx->spins));
	ctx_free(ctx);
	return SLUICE_OK;
}
