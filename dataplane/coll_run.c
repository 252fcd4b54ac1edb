/*
 * coll_run.c: running collectives on the engine.
 *
 * A descriptor from a client becomes a struct dp_coll: validated against
 * the client's own communicators and regions, given the communicator's next
 * sequence number, and driven by its coll/ schedule.  Arriving packets are
 * checked against the local call (a rank that called something else is a
 * mismatch, reported on every rank), applied straight into the destination
 * buffer, and the sends they unlock are handed to the transport.  Packets
 * that arrive before their collective is posted are kept (copied) until it
 * is.  A failure breaks the communicator, as in NCCL: every running and
 * later collective on it fails with the first error, and the other ranks
 * are told through an abort notice.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sluice/sluice.h>

#include "dp.h"
#include "reduce.h"

#define CHUNK_PACKETS 32 /* pipeline unit, in packets (at most 64) */
#define TIMER_NS 1000000ull

static const char *kind_name(uint32_t opcode)
{
	return opcode == SL_OP_ALLREDUCE ? "allreduce" : "unknown collective";
}

/* ---- completions ---- */

static bool post_cpl(struct dp_client *c, uint64_t req, int32_t status, const char *why)
{
	struct sl_cpl cpl = { .req = req, .status = status };

	if (status != SLUICE_OK)
		snprintf(cpl.msg, sizeof(cpl.msg), "%s", why);
	if (!sl_spsc_enqueue(&c->complete, &cpl))
		return false;
	/* seq_cst on both sides of the handshake: the client stores its
	 * sleeping flag then reads cpl_seq, we bump cpl_seq then read the flag. */
	atomic_fetch_add_explicit(&c->page->cpl_seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&c->page->client_sleeping, memory_order_seq_cst))
		syscall(SYS_futex, &c->page->cpl_seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	return true;
}

/* Answer a descriptor that never became a collective. */
static void reject(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *cmd, int32_t status,
		   const char *why)
{
	e->count.cmd_rejected++;
	/* The client bounds its outstanding requests by the ring, so this fits. */
	(void)post_cpl(c, cmd->req, status, why);
}

/* ---- collectives ---- */

static void coll_free(struct dp_engine *e, struct dp_coll *k)
{
	for (uint32_t i = 0; i < k->msgs_used; i++)
		sl_tp_cancel(e->tp, &k->msgs[i]);
	sl_ring_fini(&k->sched);
	free(k->msgs);
	free(k);
}

static void coll_unlink(struct dp_coll *k)
{
	struct dp_coll **p = &k->comm->colls;
	while (*p != k)
		p = &(*p)->next;
	*p = k->next;
}

/* Finish k: tell its client (retried by progress when the ring is full). */
static bool coll_finish(struct dp_engine *e, struct dp_coll *k)
{
	if (!post_cpl(k->comm->client, k->cmd.req, k->status, k->why))
		return false;
	if (k->status == SLUICE_OK)
		e->count.colls_done++;
	else
		e->count.colls_failed++;
	coll_unlink(k);
	coll_free(e, k);
	e->running--;
	return true;
}

/* ---- communicator failure ---- */

static void send_abort_notices(struct dp_engine *e, struct dp_comm *comm, uint32_t seq)
{
	comm->abort_msgs = calloc(comm->nranks, sizeof(*comm->abort_msgs));
	if (!comm->abort_msgs)
		return; /* the peers will time out instead */
	for (uint32_t r = 0; r < comm->nranks; r++) {
		struct sl_tp_msg *m = &comm->abort_msgs[r];
		if (r == comm->rank || !sl_tp_node_alive(e->tp, comm->node[r]))
			continue;
		m->dst_node = comm->node[r];
		m->hdr.type = SL_T_DATA;
		m->hdr.flags = SL_F_CTRL;
		m->hdr.comm = comm->key32;
		m->hdr.seq = seq;
		m->hdr.count = (uint64_t)comm->failed;
		m->hdr.len = (uint32_t)strlen(comm->why) + 1;
		m->src = (const uint8_t *)comm->why;
		m->owner = NULL;
		sl_tp_send(e->tp, m);
	}
}

/* Break comm with status and why; every running collective fails with it. */
static void comm_fail(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq,
		      bool notify, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void comm_fail(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq,
		      bool notify, const char *fmt, ...)
{
	va_list ap;

	if (comm->failed != SLUICE_OK)
		return;
	comm->failed = status;
	va_start(ap, fmt);
	vsnprintf(comm->why, sizeof(comm->why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "sluiced node %u: communicator %#" PRIx64 " rank %u failed: %s\n", e->node,
		comm->key, comm->rank, comm->why);
	for (struct dp_coll *k = comm->colls; k; k = k->next) {
		if (k->status == SLUICE_OK) {
			k->status = status;
			memcpy(k->why, comm->why, sizeof(k->why));
		}
	}
	if (notify)
		send_abort_notices(e, comm, seq);
}

/* ---- lookups ---- */

static struct dp_comm *comm_by_key(struct dp_engine *e, uint32_t key32)
{
	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		if (e->comms[i].live && e->comms[i].key32 == key32)
			return &e->comms[i];
	return NULL;
}

static struct dp_coll *coll_by_seq(struct dp_comm *comm, uint32_t seq)
{
	for (struct dp_coll *k = comm->colls; k; k = k->next)
		if (k->seq == seq)
			return k;
	return NULL;
}

static int rank_of_node(const struct dp_comm *comm, uint16_t node)
{
	for (uint32_t r = 0; r < comm->nranks; r++)
		if (comm->node[r] == node && r != comm->rank)
			return (int)r;
	return -1;
}

/* ---- applying packets ---- */

static uint8_t dtype_op(const struct sl_cmd *cmd)
{
	return (uint8_t)(cmd->dtype << 4 | cmd->redop);
}

static void report_mismatch(struct dp_engine *e, struct dp_coll *k, const struct sl_hdr *h)
{
	struct dp_comm *comm = k->comm;
	int peer = rank_of_node(comm, h->src_node);

	e->count.rx_mismatch++;
	comm_fail(e, comm, SLUICE_ERR_MISMATCH, k->seq, true,
		  "collective #%u differs across ranks: rank %u called %s(count=%" PRIu64 ", %s, %s) "
		  "but rank %d called %s(count=%" PRIu64 ", %s, %s): every rank must make the same "
		  "calls in the same order", k->seq, comm->rank, kind_name(k->cmd.opcode), k->cmd.count,
		  sl_dtype_name(k->cmd.dtype), sl_redop_name(k->cmd.redop), peer, kind_name(h->kind),
		  h->count, sl_dtype_name(h->dtype_op >> 4), sl_redop_name(h->dtype_op & 15));
}

static void apply(struct dp_engine *e, struct dp_coll *k, const struct sl_hdr *h, const uint8_t *payload)
{
	enum sl_ring_apply how;
	uint32_t esize = (uint32_t)sl_dtype_size(k->cmd.dtype);
	enum sl_redop op = k->cmd.redop == SL_AVG ? SL_SUM : (enum sl_redop)k->cmd.redop;

	if (k->status != SLUICE_OK)
		return;
	if (h->kind != k->cmd.opcode || h->dtype_op != dtype_op(&k->cmd) || h->count != k->cmd.count) {
		report_mismatch(e, k, h);
		return;
	}
	if (sl_ring_on_packet(&k->sched, h->step, h->offset, h->len, &how) != SL_RING_OK) {
		e->count.rx_bad_coll++;
		return;
	}
	if (how == SL_APPLY_COPY) {
		memcpy(k->recv + h->offset, payload, h->len);
	} else {
		sl_reduce(k->recv + h->offset, k->send + h->offset, payload, h->len / esize, k->cmd.dtype, op);
		/* The last reduce-scatter step completes these elements: average them once. */
		if (k->cmd.redop == SL_AVG && h->step + 2u == k->comm->nranks)
			sl_scale_avg(k->recv + h->offset, h->len / esize, k->cmd.dtype, k->comm->nranks);
	}
	k->last_progress_ns = sl_now(&e->clock);
}

static void stash(struct dp_engine *e, struct dp_comm *comm, const struct sl_hdr *h, const uint8_t *payload,
		  enum sl_deliver_result *res)
{
	struct dp_stashed *s, **tail;

	*res = SL_DELIVER_RETRY;
	if (comm->nstash >= DP_STASH_MAX || !(s = malloc(sizeof(*s) + h->len)))
		return;
	s->hdr = *h;
	s->payload = (uint8_t *)(s + 1);
	memcpy(s->payload, payload, h->len);
	s->next = NULL;
	for (tail = &comm->stash; *tail; tail = &(*tail)->next)
		;
	*tail = s;
	comm->nstash++;
	e->count.stashed++;
	*res = SL_DELIVER_DONE;
}

static void replay_stash(struct dp_engine *e, struct dp_coll *k)
{
	struct dp_comm *comm = k->comm;
	struct dp_stashed **p = &comm->stash;

	while (*p) {
		struct dp_stashed *s = *p;
		if (s->hdr.seq != k->seq) {
			p = &s->next;
			continue;
		}
		*p = s->next;
		comm->nstash--;
		apply(e, k, &s->hdr, s->payload);
		free(s);
	}
}

static void on_abort_notice(struct dp_engine *e, const struct sl_hdr *h, const uint8_t *payload)
{
	struct dp_comm *comm = comm_by_key(e, h->comm);
	int32_t status = (int32_t)h->count;

	if (!comm || h->len == 0 || payload[h->len - 1] != '\0')
		return;
	if (status != SLUICE_ERR_MISMATCH && status != SLUICE_ERR_TIMEOUT)
		status = SLUICE_ERR_REMOTE;
	comm_fail(e, comm, status, h->seq, false, "rank %d reported: %s", rank_of_node(comm, h->src_node),
		  (const char *)payload);
}

enum sl_deliver_result dp_deliver(void *engine, const struct sl_hdr *h, const uint8_t *payload)
{
	struct dp_engine *e = engine;
	struct dp_comm *comm;
	struct dp_coll *k;
	enum sl_deliver_result res = SL_DELIVER_DONE;

	if (h->flags & SL_F_CTRL) {
		on_abort_notice(e, h, payload);
		return SL_DELIVER_DONE;
	}
	comm = comm_by_key(e, h->comm);
	if (!comm) {
		e->count.rx_unknown_comm++;
		return SL_DELIVER_DONE;
	}
	if (rank_of_node(comm, h->src_node) < 0) {
		e->count.rx_bad_coll++;
		return SL_DELIVER_DONE;
	}
	if (comm->failed != SLUICE_OK)
		return SL_DELIVER_DONE;
	k = coll_by_seq(comm, h->seq);
	if (k)
		apply(e, k, h, payload);
	else if ((int32_t)(h->seq - comm->next_seq) >= 0)
		stash(e, comm, h, payload, &res);
	else
		e->count.rx_bad_coll++;
	return res;
}

void dp_msg_acked(void *engine, struct sl_tp_msg *m)
{
	struct dp_engine *e = engine;
	struct dp_coll *k = m->owner;

	if (!k)
		return; /* an abort notice */
	k->msgs_unacked--;
	k->last_progress_ns = sl_now(&e->clock);
}

void dp_flow_dead(void *engine, uint16_t node)
{
	struct dp_engine *e = engine;

	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		struct dp_comm *comm = &e->comms[i];
		int r = comm->live ? rank_of_node(comm, node) : -1;
		if (r < 0)
			continue;
		comm_fail(e, comm, SLUICE_ERR_TIMEOUT, comm->next_seq, true,
			  "rank %d (dataplane node %u) stopped answering: nothing was acknowledged for "
			  "%.1f s; it may have crashed, or its dataplane stopped", r, node,
			  (double)e->timeout_ns / 1e9);
	}
}

/* ---- posting ---- */

static uint8_t *region_range(struct dp_client *c, uint32_t region, uint64_t off, uint64_t bytes)
{
	static uint8_t empty;

	if (bytes == 0)
		return &empty; /* a zero-length range touches nothing: any region will do */
	if (region >= SL_MAX_REGIONS || !c->regions[region].live)
		return NULL;
	if (off > c->regions[region].size || bytes > c->regions[region].size - off)
		return NULL;
	return c->regions[region].base + off;
}

/* Check cmd against c's own state; NULL when valid, else why not. */
static const char *check_cmd(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *cmd,
			     struct dp_comm **comm, uint64_t *bytes, char *why)
{
	size_t esize;

	if (cmd->comm >= DP_MAX_COMMS || !e->comms[cmd->comm].live || e->comms[cmd->comm].client != c)
		return "the descriptor names a communicator this client does not hold";
	*comm = &e->comms[cmd->comm];
	if (cmd->opcode != SL_OP_ALLREDUCE)
		return "unknown collective opcode in the descriptor";
	if (cmd->dtype >= SL_DTYPE_COUNT || cmd->redop >= SL_REDOP_COUNT)
		return "unknown datatype or reduction op in the descriptor";
	esize = sl_dtype_size(cmd->dtype);
	if (cmd->count > UINT64_MAX / esize)
		return "element count overflows the buffer size";
	*bytes = cmd->count * esize;
	if (!region_range(c, cmd->send_region, cmd->send_off, *bytes) ||
	    !region_range(c, cmd->recv_region, cmd->recv_off, *bytes)) {
		snprintf(why, SL_ERRMSG_LEN, "buffers (regions %u+%" PRIu64 " and %u+%" PRIu64 ", %" PRIu64
			 " bytes) are not inside memory this client registered", cmd->send_region,
			 cmd->send_off, cmd->recv_region, cmd->recv_off, *bytes);
		return why;
	}
	return NULL;
}

static struct dp_coll *coll_new(struct dp_engine *e, struct dp_comm *comm, const struct sl_cmd *cmd,
				struct dp_client *c, uint64_t bytes)
{
	struct dp_coll *k = calloc(1, sizeof(*k));
	struct sl_ring_plan plan = {
		.nranks = comm->nranks, .rank = comm->rank, .count = cmd->count,
		.esize = (uint32_t)sl_dtype_size(cmd->dtype), .payload = e->payload,
		.chunk_bytes = (uint64_t)e->payload * CHUNK_PACKETS,
	};

	if (!k)
		return NULL;
	k->comm = comm;
	k->cmd = *cmd;
	k->bytes = bytes;
	k->send = region_range(c, cmd->send_region, cmd->send_off, bytes);
	k->recv = region_range(c, cmd->recv_region, cmd->recv_off, bytes);
	k->last_progress_ns = sl_now(&e->clock);
	if (sl_ring_init(&k->sched, &plan) != 0) {
		free(k);
		return NULL;
	}
	k->nmsgs = k->sched.nsteps * k->sched.max_chunks;
	k->msgs = calloc(k->nmsgs ? k->nmsgs : 1, sizeof(*k->msgs));
	if (!k->msgs) {
		sl_ring_fini(&k->sched);
		free(k);
		return NULL;
	}
	return k;
}

/* A single rank reduces with itself: recv = send (averaged: the same). */
static void run_alone(struct dp_coll *k)
{
	if (k->recv != k->send)
		memmove(k->recv, k->send, k->bytes);
}

void dp_coll_post(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *cmd)
{
	struct dp_comm *comm = NULL;
	struct dp_coll *k, **tail;
	uint64_t bytes = 0;
	char buf[SL_ERRMSG_LEN];
	const char *bad = check_cmd(e, c, cmd, &comm, &bytes, buf);

	if (bad) {
		reject(e, c, cmd, SLUICE_ERR_INVALID_ARGUMENT, bad);
		return;
	}
	if (comm->failed != SLUICE_OK) {
		reject(e, c, cmd, comm->failed, comm->why);
		return;
	}
	k = coll_new(e, comm, cmd, c, bytes);
	if (!k) {
		reject(e, c, cmd, SLUICE_ERR_NO_MEMORY, "the dataplane is out of memory for collectives");
		return;
	}
	k->seq = comm->next_seq++;
	e->count.colls_posted++;
	e->running++;
	for (tail = &comm->colls; *tail; tail = &(*tail)->next)
		;
	*tail = k;
	if (comm->nranks == 1)
		run_alone(k);
	replay_stash(e, k);
}

/* ---- progress ---- */

static void issue_sends(struct dp_engine *e, struct dp_coll *k)
{
	struct sl_ring_send s;
	struct dp_comm *comm = k->comm;
	uint16_t next = comm->node[(comm->rank + 1) % comm->nranks];

	while (k->status == SLUICE_OK && sl_ring_next_send(&k->sched, &s)) {
		struct sl_tp_msg *m = &k->msgs[k->msgs_used++];
		m->dst_node = next;
		m->hdr = (struct sl_hdr){
			.type = SL_T_DATA, .comm = comm->key32, .seq = k->seq, .step = (uint16_t)s.step,
			.kind = (uint8_t)k->cmd.opcode, .dtype_op = dtype_op(&k->cmd), .count = k->cmd.count,
			.offset = s.off, .len = (uint32_t)s.len,
		};
		m->src = (s.from_send ? k->send : k->recv) + s.off;
		m->owner = k;
		if (sl_tp_send(e->tp, m) != 0) {
			comm_fail(e, comm, SLUICE_ERR_TIMEOUT, k->seq, true,
				  "rank %u (dataplane node %u) cannot be reached: its flow is dead",
				  (comm->rank + 1) % comm->nranks, next);
			return;
		}
		k->msgs_unacked++;
	}
}

static void check_timeout(struct dp_engine *e, struct dp_coll *k, uint64_t now)
{
	struct dp_comm *comm = k->comm;

	if (k->status != SLUICE_OK || now - k->last_progress_ns < e->timeout_ns)
		return;
	comm_fail(e, comm, SLUICE_ERR_TIMEOUT, k->seq, true,
		  "%s #%u on rank %u made no progress for %.1f s (waiting for rank %u): a rank may not "
		  "have made this call, or may be stuck", kind_name(k->cmd.opcode), k->seq, comm->rank,
		  (double)e->timeout_ns / 1e9, (comm->rank + comm->nranks - 1) % comm->nranks);
}

uint32_t dp_colls_progress(struct dp_engine *e)
{
	uint32_t work = 0;
	uint64_t now = 0;
	bool timers = false;

	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		struct dp_comm *comm = &e->comms[i];
		struct dp_coll *k, *next;
		if (!comm->live || !comm->colls)
			continue;
		if (!now) {
			now = sl_now(&e->clock);
			timers = now >= e->next_timer_ns;
		}
		for (k = comm->colls; k; k = next) {
			next = k->next;
			issue_sends(e, k);
			if (timers)
				check_timeout(e, k, now);
			/* issue_sends drained the ready sends: received all and acked all is done */
			if (k->status != SLUICE_OK ||
			    (sl_ring_recv_done(&k->sched) && k->msgs_unacked == 0))
				work += coll_finish(e, k);
		}
	}
	if (timers)
		e->next_timer_ns = now + TIMER_NS;
	return work;
}

void dp_comm_release(struct dp_engine *e, struct dp_comm *comm)
{
	while (comm->colls) {
		struct dp_coll *k = comm->colls;
		comm->colls = k->next;
		coll_free(e, k);
		e->running--;
	}
	while (comm->stash) {
		struct dp_stashed *s = comm->stash;
		comm->stash = s->next;
		free(s);
	}
	if (comm->abort_msgs) {
		for (uint32_t r = 0; r < comm->nranks; r++)
			sl_tp_cancel(e->tp, &comm->abort_msgs[r]);
		free(comm->abort_msgs);
	}
	memset(comm, 0, sizeof(*comm));
}
