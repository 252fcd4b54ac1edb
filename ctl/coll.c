/*
 * coll.c: posting collectives and collecting their results.  A collective
 * becomes one struct sl_cmd in a channel's submission ring (no system call
 * unless that engine is napping), or one per channel when the planner
 * splits it into slices; each struct sl_cpl comes back on its channel's
 * completion ring, matched to a request by tag, and the request is done
 * when every part is.  sluice_wait spins briefly (not at all when ranks
 * share cores, SLUICE_YIELD=1), then sleeps
 * on the page's completion counter, checking now and then that the
 * dataplane is still there.  ctx->lock guards the rings and the request
 * table, so several threads may post and wait at once; a wait takes it
 * again only once that counter moved or a check is due.  Inside a group
 * (sluice_group_start/end, per thread) calls are planned and checked at
 * once but their descriptors are held and submitted together at the end.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sched.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sluice/errmsg.h>

#include "internal.h"

#define SPIN_NS (5 * 1000LL)          /* busy-poll this long before sleeping */
#define DRIVE_IDLE_NS (100 * 1000LL)    /* embedded: drive an idle engine this long, then hand it back */
#define NAP_NS (1000 * 1000LL)         /* one futex sleep, at most */
#define HUP_CHECK_NS (5 * 1000000LL)   /* how often to ask whether the dataplane is alive */
#define RING_FULL_NAP_NS (50 * 1000LL) /* between retries on a full submission ring */

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
	return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

/* ---- the dataplane's health ---- */

/* True when the attach socket reports the dataplane gone; polls at most
 * every HUP_CHECK_NS (now: the caller's clock, read once per turn of its
 * loop, as a read costs 50-100 ns on these VMs). */
static bool dataplane_exited(struct sluice_ctx *ctx, int64_t now)
{
	struct pollfd pfd = {.fd = ctx->sock};

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

/* Mark units [first, first + n) of the counts area busy or free (ctx->lock held). */
static void vmeta_mark(struct sluice_ctx *ctx, unsigned first, unsigned n, bool busy)
{
	for (unsigned u = first; u < first + n; u++) {
		if (busy)
			ctx->vmeta_busy[u / 64] |= UINT64_C(1) << (u % 64);
		else
			ctx->vmeta_busy[u / 64] &= ~(UINT64_C(1) << (u % 64));
	}
}

/* The collective is over (or never started): release the buffers and the comm it held. */
static void req_release(struct sluice_req *r)
{
	if (r->send_slot >= 0)
		r->ctx->regions[r->send_slot].busy--;
	if (r->recv_slot >= 0)
		r->ctx->regions[r->recv_slot].busy--;
	if (r->vmeta_unit >= 0)
		vmeta_mark(r->ctx, (unsigned)r->vmeta_unit, r->vmeta_units, false);
	r->vmeta_unit = -1;
	if (r->comm) {
		r->comm->inflight--;
		r->ctx->inflight--;
	}
	r->comm = NULL;
}

/* The waiter gives up: the comm may go, the buffers stay busy until the completion comes. */
static void req_abandon(struct sluice_req *r)
{
	r->comm->inflight--;
	r->ctx->inflight--;
	r->comm = NULL;
	r->state = SL_REQ_ABANDONED;
}

/* r's reason when its status is not OK (internal.h says why it is apart). */
static char *req_msg(struct sluice_req *r)
{
	return r->ctx->req_msgs[r - r->ctx->reqs];
}

/* Keep the first failure among the parts of r, unless a later one names
 * a cycle or mismatch (SLUICE_ERR_MISMATCH) where the first timed out: a
 * slice on one channel may time out seeing no cause that another channel
 * names (the dataplane's comm_fail.c, comm_vfail). */
static void req_note(struct sluice_req *r, int32_t status, const char *msg)
{
	if (status == SLUICE_OK ||
	    (r->status != SLUICE_OK && !(r->status == SLUICE_ERR_TIMEOUT && status == SLUICE_ERR_MISMATCH)))
		return;
	r->status = status;
	sl_errmsg_copy(req_msg(r), SL_ERRMSG_LEN, msg);
}

/* One part of r is over: when it was the last, release what r held. */
static void req_part_done(struct sluice_req *r)
{
	if (--r->parts_left > 0)
		return;
	req_release(r);
	r->state = r->state == SL_REQ_ABANDONED ? SL_REQ_FREE : SL_REQ_DONE;
}

static void req_complete(struct sluice_req *r, const struct sl_cpl *cpl)
{
	bool known = cpl->status >= SLUICE_OK && cpl->status < SLUICE_IN_PROGRESS;
	char msg[SL_ERRMSG_LEN];

	if (cpl->status == SLUICE_OK) { /* its msg is not written (abi.h) */
		msg[0] = '\0';
	} else if (known) {
		memcpy(msg, cpl->msg, sizeof(msg));
		msg[sizeof(msg) - 1] = '\0';
	} else {
		sl_errmsg_format(msg, sizeof(msg), "the dataplane reported status %d, which is not a sluice_result_t: "
				 "libsluice and sluiced differ in version", cpl->status);
	}
	req_note(r, known ? cpl->status : SLUICE_ERR_INTERNAL, msg);
	req_part_done(r);
}

/* Drain every channel's completion ring into the request table. */
static void reap(struct sluice_ctx *ctx)
{
	const struct sl_cpl *cpl;

	/* read in place: a success's message is neither written nor copied */
	for (unsigned ch = 0; ch < ctx->nch; ch++) {
		for (; (cpl = sl_spsc_front(&ctx->complete[ch])); sl_spsc_pop(&ctx->complete[ch])) {
			struct sluice_req *r = &ctx->reqs[cpl->req % SL_MAX_REQS];

			if (r->tag == cpl->req && (r->state == SL_REQ_POSTED || r->state == SL_REQ_ABANDONED))
				req_complete(r, cpl);
			else
				SL_LOG(SL_LOG_WARN, SL_SUB_COLL,
				       "channel %u completed request %llu, which is not outstanding: ignored", ch,
				       (unsigned long long)cpl->req);
		}
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
		       *req_msg(r) ? req_msg(r) : "(no reason given)");
}

/* ---- submitting ---- */

/* Embedded, the wait that follows drives the engine: waking its thread
 * would only take the caller's core (without a wait, it looks within 1 ms). */
static void ring_doorbell(struct sluice_ctx *ctx, struct sl_channel_bell *bell)
{
	atomic_fetch_add_explicit(&bell->doorbell, 1, memory_order_seq_cst);
	if (!ctx->drive && atomic_load_explicit(&bell->engine_napping, memory_order_seq_cst))
		futex(&bell->doorbell, FUTEX_WAKE, INT_MAX, NULL);
}

/* Enqueue cmd on channel ch (ctx->lock held, dropped while waiting for room); then ring its doorbell. */
static sluice_result_t submit(struct sluice_ctx *ctx, const struct sl_cmd *cmd, unsigned ch)
{
	int64_t deadline = 0, now;

	while (!sl_spsc_enqueue(&ctx->submit[ch], cmd)) {
		reap(ctx);
		now = sl_now_ns();
		if (!deadline)
			deadline = now + (int64_t)ctx->cfg.timeout_s * 1000000000;
		if (dataplane_exited(ctx, now))
			return fail_exited(ctx, cmd->req);
		if (now > deadline)
			return sl_fail(SLUICE_ERR_TIMEOUT,
				       "the submission ring stayed full for SLUICE_TIMEOUT=%d s: the dataplane at %s "
				       "is not taking commands; check that it runs",
				       ctx->cfg.timeout_s, ctx->cfg.socket);
		pthread_mutex_unlock(&ctx->lock);
		nanosleep(&(struct timespec){.tv_nsec = RING_FULL_NAP_NS}, NULL);
		pthread_mutex_lock(&ctx->lock);
	}
	ring_doorbell(ctx, &ctx->page->bell[ch]);
	return SLUICE_OK;
}

/* Submit parts commands (ctx->lock held), part p on channel p; how many went, in *went. */
static sluice_result_t submit_parts(struct sluice_ctx *ctx, const struct sl_cmd *cmds, unsigned parts,
				    unsigned *went)
{
	sluice_result_t res = SLUICE_OK;

	for (*went = 0; *went < parts && (res = submit(ctx, &cmds[*went], *went)) == SLUICE_OK; (*went)++)
		;
	return res;
}

/* Fill r and its command from the checked call; take the buffers and comm (ctx->lock held). */
static sluice_result_t prepare(struct sluice_comm *comm, const struct sl_call *c, struct sluice_req *r,
			       struct sl_cmd *cmd)
{
	struct sl_range s, d;
	sluice_result_t res;

	if ((res = sl_mem_find(comm->ctx, "send buffer", c->send, c->send_bytes, &s)) != SLUICE_OK ||
	    (res = sl_mem_find(comm->ctx, "recv buffer", c->recv, c->recv_bytes, &d)) != SLUICE_OK)
		return res;
	r->comm = comm;
	r->vmeta_unit = -1;
	r->send_slot = s.slot;
	r->recv_slot = d.slot == s.slot ? -1 : d.slot; /* a region counts each collective once */
	if (s.slot >= 0)
		comm->ctx->regions[s.slot].busy++;
	if (r->recv_slot >= 0)
		comm->ctx->regions[r->recv_slot].busy++;
	comm->inflight++;
	comm->ctx->inflight++;
	cmd->req = r->tag;
	cmd->comm = comm->handle;
	cmd->send_region = s.region;
	cmd->send_off = s.off;
	cmd->recv_region = d.region;
	cmd->recv_off = d.off;
	return SLUICE_OK;
}

/* ---- all-to-allv's counts ---- */

/* The first of n free units in a row of the counts area, -1 for none (ctx->lock held). */
static int vmeta_find(const struct sluice_ctx *ctx, unsigned n)
{
	for (unsigned u = 0, run = 0; u < SL_VMETA_UNITS; u++) {
		run = ctx->vmeta_busy[u / 64] >> (u % 64) & 1 ? 0 : run + 1;
		if (run == n)
			return (int)(u + 1 - n);
	}
	return -1;
}

/* Copy c's counts into free units of the client page's counts area for r
 * and name them in cmd (ctx->lock held).  The dataplane copies them when
 * it takes the command, so the caller may reuse its arrays once the call
 * returns, and a retransmission reads nothing of them. */
static sluice_result_t vmeta_fill(struct sluice_comm *comm, const struct sl_call *c, struct sluice_req *r,
				  struct sl_cmd *cmd)
{
	struct sluice_ctx *ctx = comm->ctx;
	uint32_t n = (uint32_t)comm->nranks;
	unsigned units = (unsigned)((sl_vmeta_len(n) + SL_VMETA_UNIT - 1) / SL_VMETA_UNIT);
	int first = vmeta_find(ctx, units);

	if (first < 0)
		return sl_fail(SLUICE_ERR_NO_MEMORY, "%s: the counts of the all-to-allv calls in flight on this "
			       "context fill its %u bytes (%u each on this %u-rank communicator): wait for some first",
			       c->fn, SL_VMETA_BYTES, units * SL_VMETA_UNIT, n);
	uint64_t *v = (uint64_t *)((char *)ctx->page + sl_page_vmeta_off() + (size_t)first * SL_VMETA_UNIT);
	for (uint32_t a = SL_VMETA_SEND_COUNT; a <= SL_VMETA_RECV_DISPL; a++) /* c->v's order */
		for (uint32_t k = 0; k < n; k++)
			v[a * n + k] = c->v[a][k];
	vmeta_mark(ctx, (unsigned)first, units, true);
	r->vmeta_unit = first;
	r->vmeta_units = units;
	cmd->meta_off = (uint32_t)first * SL_VMETA_UNIT;
	return SLUICE_OK;
}

/* ---- groups ---- */

/* This thread's open group: calls wait here until the outermost end. */
static _Thread_local struct {
	int depth;
	struct held_call {
		struct sluice_req *req;
		struct sl_cmd cmd[SL_MAX_CHANNELS];
		unsigned parts;
	} *calls;
	size_t n, cap;
} group;

static sluice_result_t group_hold(struct sluice_req *r, const struct sl_cmd *cmds, unsigned parts)
{
	if (group.n == group.cap) {
		size_t cap = group.cap ? 2 * group.cap : 16;
		struct held_call *calls = realloc(group.calls, cap * sizeof(*calls));
		if (!calls)
			return sl_fail(SLUICE_ERR_NO_MEMORY, "sluice_group: no memory to hold %zu calls until "
				       "sluice_group_end", cap);
		group.calls = calls;
		group.cap = cap;
	}
	struct held_call *h = &group.calls[group.n++];
	h->req = r;
	h->parts = parts;
	memcpy(h->cmd, cmds, parts * sizeof(*cmds));
	r->state = SL_REQ_GROUPED;
	return SLUICE_OK;
}

sluice_result_t sluice_group_start(void)
{
	group.depth++;
	return SLUICE_OK;
}

/* Submit one held call; on failure its request carries the error to its waiter. */
static sluice_result_t group_submit(struct held_call *h)
{
	struct sluice_ctx *ctx = h->req->ctx;
	sluice_result_t res;
	unsigned went;

	pthread_mutex_lock(&ctx->lock);
	h->req->state = SL_REQ_POSTED;
	h->req->parts_left = h->parts;
	if ((res = submit_parts(ctx, h->cmd, h->parts, &went)) != SLUICE_OK) {
		req_note(h->req, res, sluice_last_error());
		while (went++ < h->parts)
			req_part_done(h->req); /* with none gone, this releases it: done, failed */
	}
	pthread_mutex_unlock(&ctx->lock);
	return res;
}

sluice_result_t sluice_group_end(void)
{
	sluice_result_t first = SLUICE_OK;

	if (group.depth == 0)
		return sl_fail(SLUICE_ERR_INVALID_USAGE, "sluice_group_end: no group is open on this thread: "
			       "call sluice_group_start first");
	if (--group.depth > 0)
		return SLUICE_OK;
	for (size_t i = 0; i < group.n; i++) {
		sluice_result_t res = group_submit(&group.calls[i]);
		if (first == SLUICE_OK)
			first = res;
	}
	group.n = 0;
	return first;
}

/* ---- posting ---- */

/* The parts of a split call: cmds[0] (the whole call) sliced over
 * plan->parts channels.  A slice of a call with per-rank blocks takes the
 * same elements of every block: its blocks stay a whole block apart. */
static void split(const struct sl_call *c, const struct sl_plan *plan, struct sl_cmd *cmds)
{
	uint64_t es = sluice_datatype_size(c->dtype), first, count;

	if (plan->parts == 1)
		return; /* the whole call is its one slice (and slicing one divides twice) */
	for (unsigned p = plan->parts; p-- > 0;) {
		cmds[p] = cmds[0];
		sl_plan_slice(c, plan->parts, p, &first, &count);
		cmds[p].count = count;
		if (sl_op_blocked(c->opcode))
			cmds[p].block_stride = c->count * es;
		if (cmds[p].send_region != SL_REGION_NONE)
			cmds[p].send_off += first * es;
		if (cmds[p].recv_region != SL_REGION_NONE)
			cmds[p].recv_off += first * es;
	}
}

/* One pass under ctx->lock: a small call took it twice here (1-2% of its
 * time), and zeroed all SL_MAX_CHANNELS descriptors where split fills the
 * parts it uses from cmds[0]. */
sluice_result_t sl_coll_post(struct sluice_comm *comm, const struct sl_call *c, sluice_req_t **req)
{
	struct sl_cmd cmds[SL_MAX_CHANNELS];
	struct sluice_ctx *ctx = comm->ctx;
	struct sl_call planned = *c;
	struct sluice_req *r = NULL;
	struct sl_plan plan;
	sluice_result_t res;
	unsigned went;

	pthread_mutex_lock(&ctx->lock);
	planned.device = sl_mem_is_device(ctx, c->recv ? c->recv : c->send);
	if ((res = sl_plan_pick(comm, &planned, &plan)) != SLUICE_OK)
		goto out;
	cmds[0] = (struct sl_cmd){ .opcode = c->opcode, .count = c->count, .dtype = c->dtype, .redop = c->op,
				   .root = (uint32_t)c->root, .algo = plan.algo, .chunk_bytes = plan.chunk_bytes };
	r = req_alloc(ctx);
	if (!r)
		res = sl_fail(SLUICE_ERR_NO_MEMORY, "%s: all %u requests are outstanding: sluice_wait or "
			      "sluice_test some before posting more", c->fn, SL_MAX_REQS);
	else if ((res = prepare(comm, c, r, &cmds[0])) == SLUICE_OK) {
		if (c->opcode == SL_OP_ALLTOALLV)
			res = vmeta_fill(comm, c, r, &cmds[0]);
		split(c, &plan, cmds);
		r->status = SLUICE_OK;
		r->parts_left = plan.parts;
		if (res == SLUICE_OK && group.depth > 0) {
			res = group_hold(r, cmds, plan.parts);
		} else if (res == SLUICE_OK) {
			r->state = SL_REQ_POSTED;
			if ((res = submit_parts(ctx, cmds, plan.parts, &went)) != SLUICE_OK && went > 0) {
				/* the parts that went finish in the dataplane, unwaited */
				r->parts_left = went;
				req_abandon(r);
				r = NULL;
			}
		}
		if (r && res != SLUICE_OK)
			req_release(r);
	}
	if (r && res != SLUICE_OK)
		r->state = SL_REQ_FREE;
out:
	pthread_mutex_unlock(&ctx->lock);
	if (res != SLUICE_OK)
		return res;
	SL_TRACE(SL_SUB_COLL, "%s request %llu%s: comm %u, %zu x %s, root %d, %u part%s", c->fn,
		 (unsigned long long)cmds[0].req, group.depth > 0 ? " (grouped)" : "", cmds[0].comm, c->count,
		 sl_datatype_name(c->dtype), c->root, plan.parts, plan.parts == 1 ? "" : "s");
	*req = r;
	return SLUICE_OK;
}

/* ---- waiting ---- */

/* ctx of a live request, or NULL after setting the error. */
static struct sluice_ctx *req_ctx(const struct sluice_req *r, const char *who)
{
	if (!r || !r->ctx) {
		sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: req is not a request from a sluice collective", who);
		return NULL;
	}
	return r->ctx;
}

static bool req_live(struct sluice_req *r, const char *who)
{
	if (r->state == SL_REQ_POSTED || r->state == SL_REQ_DONE)
		return true;
	if (r->state == SL_REQ_GROUPED) {
		sl_fail(SLUICE_ERR_INVALID_USAGE, "%s: request %llu was made inside a group that is still "
			"open: call sluice_group_end first", who, (unsigned long long)r->tag);
		return false;
	}
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
		ctx->drive(sl_now_ns()); /* embedded: testing makes progress, as in MPI */
	pthread_mutex_lock(&ctx->lock);
	if (!req_live(req, "sluice_test")) {
		res = SLUICE_ERR_INVALID_USAGE;
	} else {
		reap(ctx);
		if (req->state == SL_REQ_DONE) {
			res = req_take(req);
		} else if (dataplane_exited(ctx, sl_now_ns())) {
			req_abandon(req);
			res = fail_exited(ctx, req->tag);
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return res;
}

/* Sleep until the dataplane posts a completion after seen (page->cpl_seq
 * as the waiter last reaped), or NAP_NS passes.  One that came since, even
 * one another thread reaped, ends the sleep at once. */
static void nap(struct sluice_ctx *ctx, uint32_t seen)
{
	struct sl_client_page *page = ctx->page;
	struct timespec ts = {.tv_nsec = NAP_NS};

	atomic_fetch_add_explicit(&ctx->naps, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&page->client_sleeping, 1, memory_order_seq_cst);
	futex(&page->cpl_seq, FUTEX_WAIT, seen, &ts);
	atomic_fetch_sub_explicit(&page->client_sleeping, 1, memory_order_seq_cst);
}

/* When a wait whose calls last moved at the latest progress the dataplane
 * has published for this process's calls (abi.h, sl_channel_bell) gives
 * up: wait_ns after it, or SL_WAIT_MARGIN_S after the latest verdict a
 * timed-out call waits for (a long timeout's waits past the margin: a
 * peer that died late in the stall is named only then). */
static int64_t dataplane_deadline(const struct sluice_ctx *ctx, int64_t wait_ns)
{
	int64_t progress = 0, verdict = 0;

	for (unsigned ch = 0; ch < ctx->nch; ch++) {
		int64_t p = (int64_t)atomic_load_explicit(&ctx->page->bell[ch].progress_ns, memory_order_relaxed);
		int64_t v = (int64_t)atomic_load_explicit(&ctx->page->bell[ch].verdict_ns, memory_order_relaxed);
		progress = p > progress ? p : progress;
		verdict = v > verdict ? v : verdict;
	}
	progress += wait_ns;
	verdict += (int64_t)SL_WAIT_MARGIN_S * 1000000000;
	return progress > verdict ? progress : verdict;
}

/* A wait that timed out without the dataplane's reason: the dataplane
 * is asked whether one of its engines is stuck (SL_CTL_STALLED), and that
 * is the reason if so; it was libsluice's "is stuck or a rank stopped"
 * alone.  Asked with ctx->lock let go: sl_ctl_call takes call_lock. */
static sluice_result_t fail_no_completion(struct sluice_ctx *ctx, uint64_t tag)
{
	struct sl_ctl_msg msg = {.type = SL_CTL_STALLED};
	struct sl_ctl_reply reply = {.status = SLUICE_OK};

	if (sl_ctl_call(ctx, &msg, -1, &reply) == SLUICE_ERR_TIMEOUT && reply.status == SLUICE_ERR_TIMEOUT)
		return sl_fail(SLUICE_ERR_TIMEOUT,
			       "sluice_wait: request %llu got no completion within SLUICE_TIMEOUT=%d s (+%d s) of its "
			       "start or its dataplane's last progress: the dataplane at %s says: %s",
			       (unsigned long long)tag, ctx->cfg.timeout_s, SL_WAIT_MARGIN_S, ctx->cfg.socket,
			       reply.msg);
	return sl_fail(SLUICE_ERR_TIMEOUT,
		       "sluice_wait: request %llu got no completion within SLUICE_TIMEOUT=%d s (+%d s) of its start "
		       "or its dataplane's last progress: the dataplane at %s is stuck or a rank stopped; check "
		       "their logs",
		       (unsigned long long)tag, ctx->cfg.timeout_s, SL_WAIT_MARGIN_S, ctx->cfg.socket);
}

/* A waiter between its turns. */
struct waiter {
	int64_t start, now;  /* the wait's start; the time its turns go by */
	unsigned served;     /* turns now has served */
	int64_t idle_since;  /* embedded: since when passes found nothing (0: one did work) */
	bool driving;        /* embedded: this thread is the engine */
	uint32_t seen;       /* page->cpl_seq before the last reap */
};

/* Whether a completion came since seen: the dataplane bumps page->cpl_seq
 * after each is in its ring (and another thread may have reaped it since).
 * A turn that finds none takes no lock. */
static bool completions_since(const struct sluice_ctx *ctx, uint32_t seen)
{
	return atomic_load_explicit(&ctx->page->cpl_seq, memory_order_acquire) != seen;
}

/* One turn, ctx->lock not held: drive the embedded engine, nap or spin.
 * Whether the clock moved on by more than an idle turn. */
static bool wait_turn(struct sluice_ctx *ctx, struct waiter *w)
{
	if (w->driving) {
		/* Embedded, this thread is the engine while it waits.  When the
		 * engine's thread is mid-pass, yield: it may share this core, and
		 * spinning would keep it from finishing (and from ACKing). */
		int32_t work = ctx->drive(w->now);
		bool idle = work == 0 || work == SL_DRIVE_YIELDED;

		if (work == SL_DRIVE_BUSY)
			sched_yield();
		w->idle_since = !idle ? 0 : w->idle_since ? w->idle_since : w->now;
		/* Nothing to do for a while: the engine's thread waits for the
		 * wire, asleep (dataplane/idle.c), and so does this one. */
		if (w->idle_since && w->now - w->idle_since > DRIVE_IDLE_NS && !ctx->cfg.busy_poll) {
			ctx->release(false);
			w->driving = false;
		}
		return work != 0;
	}
	/* Ranks that share cores nap at once: their dataplane's engine may
	 * need this core to finish the call. */
	if (ctx->cfg.yield || w->now - w->start > SPIN_NS) {
		nap(ctx, w->seen);
		return true;
	}
	atomic_fetch_add_explicit(&ctx->spins, 1, memory_order_relaxed);
	return false;
}

/* Turns until a completion comes or now reaches until (ctx->lock let go meanwhile). */
static void wait_turns(struct sluice_ctx *ctx, struct waiter *w, int64_t until)
{
	do {
		if (w->served > SL_WAIT_STALE_TURNS) {
			w->now = sl_now_ns();
			w->served = 0;
		}
		w->served = wait_turn(ctx, w) ? SL_WAIT_STALE_TURNS + 1 : w->served + 1;
	} while (!completions_since(ctx, w->seen) && w->now < until);
}

sluice_result_t sluice_wait(sluice_req_t *req)
{
	struct sluice_ctx *ctx = req_ctx(req, "sluice_wait");
	sluice_result_t res = SLUICE_OK;
	bool timed_out = false;

	if (!ctx)
		return SLUICE_ERR_INVALID_ARGUMENT;
	struct waiter w = {.start = sl_now_ns(), .driving = ctx->drive != NULL};
	/* The dataplane fails a call that has made no progress for its timeout
	 * (the same SLUICE_TIMEOUT under sluice-run), with the reason: this wait
	 * counts from the call's start or the last progress the dataplane
	 * published, whichever is later, and gives the reason SL_WAIT_MARGIN_S more
	 * to arrive (past a verdict the dataplane holds, if later).  Without
	 * progress counted, a call that moved for a while and then stopped ended
	 * here first, with no reason. */
	int64_t wait_ns = (int64_t)(ctx->cfg.timeout_s + SL_WAIT_MARGIN_S) * 1000000000;
	int64_t deadline = w.start + wait_ns;

	w.now = w.start;
	pthread_mutex_lock(&ctx->lock);
	if (!req_live(req, "sluice_wait")) {
		pthread_mutex_unlock(&ctx->lock);
		return SLUICE_ERR_INVALID_USAGE;
	}
	w.seen = atomic_load_explicit(&ctx->page->cpl_seq, memory_order_acquire);
	reap(ctx);
	while (req->state == SL_REQ_POSTED) {
		if (dataplane_exited(ctx, w.now)) {
			res = fail_exited(ctx, req->tag);
			break;
		}
		if (w.now > deadline && w.now > (deadline = dataplane_deadline(ctx, wait_ns))) {
			res = SLUICE_ERR_TIMEOUT;
			timed_out = true;
			break;
		}
		/* back under the lock when a check above is due */
		int64_t until = ctx->next_hup_check < deadline + 1 ? ctx->next_hup_check : deadline + 1;
		pthread_mutex_unlock(&ctx->lock);
		wait_turns(ctx, &w, until);
		pthread_mutex_lock(&ctx->lock);
		w.seen = atomic_load_explicit(&ctx->page->cpl_seq, memory_order_acquire);
		reap(ctx);
	}
	if (res != SLUICE_OK)
		req_abandon(req);
	else
		res = req_take(req);
	/* Embedded: the engine's thread takes over, told whether this thread
	 * has other calls in flight, which it most likely waits for next (a
	 * grouped send's wait, then its recv's): sl_dp_embedded_release. */
	if (ctx->release)
		ctx->release(ctx->inflight > 0);
	pthread_mutex_unlock(&ctx->lock);
	return timed_out ? fail_no_completion(ctx, req->tag) : res;
}
