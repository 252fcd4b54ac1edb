/*
 * coll.c: posting collectives and collecting their results.  A collective
 * becomes one struct sl_cmd in the submission ring (no system call unless
 * the engine is napping); its struct sl_cpl comes back on the completion
 * ring, matched to a request by tag.  sluice_wait spins briefly, then sleeps
 * on the page's completion counter, checking now and then that the
 * dataplane is still there.  ctx->lock guards the rings and the request
 * table, so several threads may post and wait at once.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define SPIN_NS (5 * 1000LL)          /* busy-poll this long before sleeping */
#define NAP_NS (1000 * 1000LL)         /* one futex sleep, at most */
#define HUP_CHECK_NS (5 * 1000000LL)   /* how often to ask whether the dataplane is alive */
#define WAIT_MARGIN_S 2                /* past SLUICE_TIMEOUT: the dataplane reports peer failures first */
#define RING_FULL_NAP_NS (50 * 1000LL) /* between retries on a full submission ring */

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
	return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

/* ---- the dataplane's health ---- */

/* True when the attach socket reports the dataplane gone; polls at most every HUP_CHECK_NS. */
static bool dataplane_exited(struct sluice_ctx *ctx)
{
	struct pollfd pfd = {.fd = ctx->sock};
	int64_t now = sl_now_ns();

	if (now < ctx->next_hup_check)
		return false;
	ctx->next_hup_check = now + HUP_CHECK_NS;
	return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR)) != 0;
}

static sluice_result_t fail_exited(struct sluice_ctx *ctx, uint64_t tag)
{
	return sl_fail(SLUICE_ERR_UNAVAILABLE,
		       "the dataplane at %s exited while request %llu was in flight: check its log, then "
		       "sluice_finalize and attach again",
		       ctx->cfg.socket, (unsigned long long)tag);
}

/* ---- requests (ctx->lock held) ---- */

/* A free slot with the next tag; NULL when all SL_MAX_REQS are outstanding. */
static struct sluice_req *req_alloc(struct sluice_ctx *ctx)
{
	for (unsigned i = 0; i < SL_MAX_REQS; i++) {
		uint64_t tag = ctx->next_tag++;
		struct sluice_req *r = &ctx->reqs[tag % SL_MAX_REQS];

		if (r->state == SL_REQ_FREE) {
			r->ctx = ctx;
			r->tag = tag;
			return r;
		}
	}
	return NULL;
}

/* The collective is over (or never started): release the buffers and the comm it held. */
static void req_release(struct sluice_req *r)
{
	if (r->send_slot >= 0)
		r->ctx->regions[r->send_slot].busy--;
	if (r->recv_slot >= 0)
		r->ctx->regions[r->recv_slot].busy--;
	if (r->comm)
		r->comm->inflight--;
	r->comm = NULL;
}

/* The waiter gives up: the comm may go, the buffers stay busy until the completion comes. */
static void req_abandon(struct sluice_req *r)
{
	r->comm->inflight--;
	r->comm = NULL;
	r->state = SL_REQ_ABANDONED;
}

static void req_complete(struct sluice_req *r, const struct sl_cpl *cpl)
{
	bool known = cpl->status >= SLUICE_OK && cpl->status < SLUICE_IN_PROGRESS;

	req_release(r);
	if (r->state == SL_REQ_ABANDONED) {
		r->state = SL_REQ_FREE;
		return;
	}
	r->state = SL_REQ_DONE;
	r->status = known ? cpl->status : SLUICE_ERR_INTERNAL;
	memcpy(r->msg, cpl->msg, sizeof(r->msg));
	r->msg[sizeof(r->msg) - 1] = '\0';
	if (!known)
		snprintf(r->msg, sizeof(r->msg), "the dataplane reported status %d, which is not a "
						 "sluice_result_t: libsluice and sluiced differ in version",
			 cpl->status);
}

/* Drain the completion ring into the request table. */
static void reap(struct sluice_ctx *ctx)
{
	struct sl_cpl cpl;

	while (sl_spsc_dequeue(&ctx->complete, &cpl)) {
		struct sluice_req *r = &ctx->reqs[cpl.req % SL_MAX_REQS];

		if (r->tag == cpl.req && (r->state == SL_REQ_POSTED || r->state == SL_REQ_ABANDONED))
			req_complete(r, &cpl);
		else
			SL_LOG(SL_LOG_WARN, SL_SUB_COLL,
			       "the dataplane completed request %llu, which is not outstanding: ignored",
			       (unsigned long long)cpl.req);
	}
}

/* Hand the result over and free the request. */
static sluice_result_t req_take(struct sluice_req *r)
{
	sluice_result_t res = r->status;

	r->state = SL_REQ_FREE;
	if (res == SLUICE_OK)
		return SLUICE_OK;
	return sl_fail(res, "collective request %llu failed in the dataplane: %s", (unsigned long long)r->tag,
		       r->msg[0] ? r->msg : "(no reason given)");
}

/* ---- submitting ---- */

static void ring_doorbell(struct sl_client_page *page)
{
	atomic_fetch_add_explicit(&page->doorbell, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&page->engine_napping, memory_order_seq_cst))
		futex(&page->doorbell, FUTEX_WAKE, INT_MAX, NULL);
}

/* Enqueue cmd (ctx->lock held, dropped while waiting for room); then ring the doorbell. */
static sluice_result_t submit(struct sluice_ctx *ctx, const struct sl_cmd *cmd)
{
	int64_t deadline = sl_now_ns() + (int64_t)ctx->cfg.timeout_s * 1000000000;

	while (!sl_spsc_enqueue(&ctx->submit, cmd)) {
		reap(ctx);
		if (dataplane_exited(ctx))
			return fail_exited(ctx, cmd->req);
		if (sl_now_ns() > deadline)
			return sl_fail(SLUICE_ERR_TIMEOUT,
				       "the submission ring stayed full for SLUICE_TIMEOUT=%d s: the dataplane at %s "
				       "is not taking commands; check that it runs",
				       ctx->cfg.timeout_s, ctx->cfg.socket);
		pthread_mutex_unlock(&ctx->lock);
		nanosleep(&(struct timespec){.tv_nsec = RING_FULL_NAP_NS}, NULL);
		pthread_mutex_lock(&ctx->lock);
	}
	ring_doorbell(ctx->page);
	return SLUICE_OK;
}

static bool is_float(sluice_datatype_t dtype)
{
	return dtype == SLUICE_FLOAT16 || dtype == SLUICE_FLOAT32 || dtype == SLUICE_FLOAT64 ||
	       dtype == SLUICE_BFLOAT16;
}

static sluice_result_t check_args(const struct sluice_comm *comm, const void *send, const void *recv,
				  size_t count, sluice_datatype_t dtype, sluice_redop_t op, sluice_req_t **req)
{
	size_t size = sluice_datatype_size(dtype);
	uintptr_t s = (uintptr_t)send, d = (uintptr_t)recv;

	if (!comm || !req)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_allreduce: comm (%p) and req (%p) must "
							    "not be NULL",
			       (const void *)comm, (void *)req);
	if (size == 0)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_allreduce: datatype %d is not a "
							    "sluice_datatype_t: use SLUICE_INT8 to SLUICE_BFLOAT16",
			       (int)dtype);
	if ((unsigned)op >= SLUICE_REDOP_COUNT)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_allreduce: op %d is not a sluice_redop_t: "
							    "use SLUICE_SUM, SLUICE_PROD, SLUICE_MAX, SLUICE_MIN or SLUICE_AVG",
			       (int)op);
	if (op == SLUICE_AVG && !is_float(dtype))
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_allreduce: SLUICE_AVG needs a "
							    "floating-point datatype, not %s (an integer avg "
							    "would truncate): use SLUICE_SUM and divide",
			       sl_dtype_name(dtype));
	if (count > SIZE_MAX / size)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_allreduce: count %zu of %s (%zu bytes "
							    "each) overflows size_t: pass the number of elements, not bytes",
			       count, sl_dtype_name(dtype), size);
	if (count > 0 && (!send || !recv))
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_allreduce: send (%p) and recv (%p) must "
							    "not be NULL when count is %zu",
			       send, recv, count);
	if (s != d && s < d + count * size && d < s + count * size)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_allreduce: send %p and recv %p overlap "
							    "(%zu bytes each): pass the same pointer to run in place, "
							    "or disjoint buffers",
			       send, recv, count * size);
	return SLUICE_OK;
}

/* Fill r and its command from the checked arguments; take the buffers and comm (ctx->lock held). */
static sluice_result_t prepare(struct sluice_comm *comm, const void *send, void *recv, size_t bytes,
			       struct sluice_req *r, struct sl_cmd *cmd)
{
	struct sl_range s, d;
	sluice_result_t res;

	if ((res = sl_mem_find(comm->ctx, "send buffer", send, bytes, &s)) != SLUICE_OK ||
	    (res = sl_mem_find(comm->ctx, "recv buffer", recv, bytes, &d)) != SLUICE_OK)
		return res;
	r->comm = comm;
	r->send_slot = s.slot;
	r->recv_slot = d.slot == s.slot ? -1 : d.slot; /* a region counts each collective once */
	r->state = SL_REQ_POSTED;
	if (s.slot >= 0)
		comm->ctx->regions[s.slot].busy++;
	if (r->recv_slot >= 0)
		comm->ctx->regions[r->recv_slot].busy++;
	comm->inflight++;
	cmd->req = r->tag;
	cmd->comm = comm->handle;
	cmd->send_region = s.region;
	cmd->send_off = s.off;
	cmd->recv_region = d.region;
	cmd->recv_off = d.off;
	return SLUICE_OK;
}

sluice_result_t sluice_allreduce(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				 sluice_datatype_t dtype, sluice_redop_t op, sluice_req_t **req)
{
	struct sl_cmd cmd = {.opcode = SL_OP_ALLREDUCE, .count = count, .dtype = dtype, .redop = op};
	struct sluice_ctx *ctx;
	struct sluice_req *r;
	sluice_result_t res;

	if ((res = check_args(comm, send, recv, count, dtype, op, req)) != SLUICE_OK)
		return res;
	ctx = comm->ctx;
	pthread_mutex_lock(&ctx->lock);
	r = req_alloc(ctx);
	if (!r)
		res = sl_fail(SLUICE_ERR_NO_MEMORY, "sluice_allreduce: all %u requests are outstanding: "
						    "sluice_wait or sluice_test some before posting more",
			      SL_MAX_REQS);
	else if ((res = prepare(comm, send, recv, count * sluice_datatype_size(dtype), r, &cmd)) == SLUICE_OK &&
		 (res = submit(ctx, &cmd)) != SLUICE_OK)
		req_release(r);
	if (r && res != SLUICE_OK)
		r->state = SL_REQ_FREE;
	pthread_mutex_unlock(&ctx->lock);
	if (res != SLUICE_OK)
		return res;
	SL_TRACE(SL_SUB_COLL, "allreduce request %llu: comm %u, %zu x %s, %s", (unsigned long long)cmd.req,
		 cmd.comm, count, sl_dtype_name(dtype), sl_op_name(op));
	*req = r;
	return SLUICE_OK;
}

/* ---- waiting ---- */

/* ctx of a live request, or NULL after setting the error. */
static struct sluice_ctx *req_ctx(const struct sluice_req *r, const char *who)
{
	if (!r || !r->ctx) {
		sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: req is not a request from sluice_allreduce", who);
		return NULL;
	}
	return r->ctx;
}

static bool req_live(struct sluice_req *r, const char *who)
{
	if (r->state == SL_REQ_POSTED || r->state == SL_REQ_DONE)
		return true;
	sl_fail(SLUICE_ERR_INVALID_USAGE, "%s: request %llu was already finished and freed by sluice_wait "
					  "or sluice_test: use each request once",
		who, (unsigned long long)r->tag);
	return false;
}

sluice_result_t sluice_test(sluice_req_t *req)
{
	struct sluice_ctx *ctx = req_ctx(req, "sluice_test");
	sluice_result_t res = SLUICE_IN_PROGRESS;

	if (!ctx)
		return SLUICE_ERR_INVALID_ARGUMENT;
	if (ctx->drive)
		ctx->drive(); /* embedded: testing makes progress, as in MPI */
	pthread_mutex_lock(&ctx->lock);
	if (!req_live(req, "sluice_test")) {
		res = SLUICE_ERR_INVALID_USAGE;
	} else {
		reap(ctx);
		if (req->state == SL_REQ_DONE) {
			res = req_take(req);
		} else if (dataplane_exited(ctx)) {
			req_abandon(req);
			res = fail_exited(ctx, req->tag);
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return res;
}

/* Sleep until the dataplane posts a completion, or NAP_NS passes. */
static void nap(struct sluice_ctx *ctx)
{
	struct sl_client_page *page = ctx->page;
	struct timespec ts = {.tv_nsec = NAP_NS};
	uint32_t seen;

	atomic_fetch_add_explicit(&page->client_sleeping, 1, memory_order_seq_cst);
	seen = atomic_load_explicit(&page->cpl_seq, memory_order_seq_cst);
	if (sl_spsc_count(&ctx->complete) == 0)
		futex(&page->cpl_seq, FUTEX_WAIT, seen, &ts);
	atomic_fetch_sub_explicit(&page->client_sleeping, 1, memory_order_seq_cst);
}

sluice_result_t sluice_wait(sluice_req_t *req)
{
	struct sluice_ctx *ctx = req_ctx(req, "sluice_wait");
	int64_t start = sl_now_ns(), deadline;
	sluice_result_t res = SLUICE_OK;

	if (!ctx)
		return SLUICE_ERR_INVALID_ARGUMENT;
	deadline = start + (int64_t)(ctx->cfg.timeout_s + WAIT_MARGIN_S) * 1000000000;
	pthread_mutex_lock(&ctx->lock);
	if (!req_live(req, "sluice_wait")) {
		pthread_mutex_unlock(&ctx->lock);
		return SLUICE_ERR_INVALID_USAGE;
	}
	reap(ctx);
	while (req->state == SL_REQ_POSTED) {
		int64_t now = sl_now_ns();

		if (dataplane_exited(ctx)) {
			res = fail_exited(ctx, req->tag);
			break;
		}
		if (now > deadline) {
			res = sl_fail(SLUICE_ERR_TIMEOUT,
				      "sluice_wait: request %llu got no completion within SLUICE_TIMEOUT=%d s "
				      "(+%d s): the dataplane at %s is stuck or a rank stopped; check their logs",
				      (unsigned long long)req->tag, ctx->cfg.timeout_s, WAIT_MARGIN_S,
				      ctx->cfg.socket);
			break;
		}
		pthread_mutex_unlock(&ctx->lock);
		if (ctx->drive)
			ctx->drive(); /* embedded: this thread is the engine while it waits */
		else if (now - start > SPIN_NS)
			nap(ctx);
		pthread_mutex_lock(&ctx->lock);
		reap(ctx);
	}
	if (res != SLUICE_OK)
		req_abandon(req);
	else
		res = req_take(req);
	pthread_mutex_unlock(&ctx->lock);
	return res;
}
