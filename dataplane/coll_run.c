/*
 * coll_run.c: running collectives on the engine.
 *
 * A descriptor from a client becomes a struct dp_coll: validated against
 * the client's own communicators and regions, given the communicator's next
 * sequence number (sends and recvs: the next of their pair), and driven by
 * its coll/ schedule (schedule.h), whatever the collective and algorithm.
 * Arriving packets are checked against the local call (a rank that called
 * something else is a mismatch, reported on every rank), applied straight
 * into the destination buffer as the schedule says, and the sends they
 * unlock are handed to the transport; transfers to the rank itself are
 * applied here.  Packets that arrive before their collective is posted are
 * kept (copied) until it is (coll_stash.c), and so are packets that arrive
 * before their turn in a fixed reduction order.  A failure breaks the
 * communicator, as in NCCL: every running and later collective on it fails
 * with the first error, and the other ranks are told through an abort
 * notice (comm_fail.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "coll_stash.h"
#include "coll_timeout.h"
#include "coll_wire.h"
#include "comm_close.h"
#include "comm_fail.h"
#include "dp.h"
#include "reduce.h"
#include "wait_notes.h"

#define TIMER_NS 1000000ull
/* A call whose data has not come this long after its post sends its lazy
 * call checks (schedule.c): only a mismatch waits for them. */
#define LAZY_CHECK_NS 1000000ull
#define COUNT_ROOT_SHIFT 56 /* wire count = count | root << 56 (the header has no root field) */

/* coll/ mirrors the ABI's numbers; these catch a drift. */
_Static_assert(SL_OP_ALLREDUCE == (int)SL_COLL_ALLREDUCE && SL_OP_SCATTER == (int)SL_COLL_SCATTER &&
		       SL_OP_COUNT == (int)SL_COLL_COUNT && SL_OP_COUNT <= 1 << KIND_ALGO_SHIFT,
	       "enum sl_coll must mirror enum sl_opcode");
_Static_assert(SL_DTYPE_COUNT == (int)SLUICE_DATATYPE_COUNT && SL_FLOAT8_E5M2 == (int)SLUICE_FLOAT8_E5M2 &&
		       SL_REDOP_COUNT == (int)SLUICE_REDOP_COUNT,
	       "enum sl_dtype and sl_redop must mirror sluice_datatype_t and sluice_redop_t");
_Static_assert(SL_ALGO_ID_RING == (int)SL_ALGO_RING && SL_ALGO_ID_DIRECT == (int)SL_ALGO_DIRECT &&
		       SL_ALGO_ID_RD == (int)SL_ALGO_RD && SL_ALGO_ID_RHD == (int)SL_ALGO_RHD &&
		       SL_ALGO_ID_TREE == (int)SL_ALGO_TREE && SL_ALGO_ID_PAIRWISE == (int)SL_ALGO_PAIRWISE &&
		       SL_ALGO_ID_COUNT == (int)SL_ALGO_COUNT && SL_ALGO_COUNT <= 1 << (8 - KIND_ALGO_SHIFT),
	       "enum sl_algo must mirror enum sl_algo_id, and fit the wire kind's top bits");

/* ---- completions ---- */

static bool post_cpl(struct dp_engine *e, struct dp_client *c, uint64_t req, int32_t status, const char *why)
{
	struct sl_cpl cpl;

	cpl.req = req;
	cpl.status = status;
	cpl.reserved = 0;
	/* A success writes no message: its SL_ERRMSG_LEN bytes would be
	 * zeroed, copied into the ring, out of it and again by the client,
	 * every call. */
	if (status != SLUICE_OK)
		sl_errmsg_copy(cpl.msg, sizeof(cpl.msg), why);
	if (!sl_spsc_enqueue_part(&c->complete, &cpl,
				  status == SLUICE_OK ? (uint32_t)offsetof(struct sl_cpl, msg) : sizeof(cpl)))
		return false;
	/* seq_cst on both sides of the handshake: the client stores its
	 * sleeping flag then reads cpl_seq, we bump cpl_seq then read the flag. */
	atomic_fetch_add_explicit(&c->page->cpl_seq, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&c->page->client_sleeping, memory_order_seq_cst))
		return true;
	syscall(SYS_futex, &c->page->cpl_seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	/* An embedded application's wait woken: it drives next (its next
	 * call's wait), as after an ordinary hand-back, so the engine's thread
	 * parks between calls (engine.c park) rather than spin on the core it
	 * likely shares with the woken thread: a 2-rank broadcast's first call
	 * after a long wait held its rank's core 50-180 us that way
	 * (perf/ALGORITHMS.md, stall8). */
	if (c->drives)
		atomic_store_explicit(&e->drove_ns, dp_now_ns(NULL), memory_order_relaxed);
	return true;
}

/* Answer a descriptor that never became a collective. */
static void reject(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *cmd, int32_t status,
		   const char *why)
{
	e->count.cmd_rejected++;
	/* The client bounds its outstanding requests by the ring, so this fits. */
	(void)post_cpl(e, c, cmd->req, status, why);
}

/* ---- collectives ---- */

/*
 * A collective's own buffer (scratch, in-place input copy): a block of its
 * size class from the engine's pool, which keeps it for the next call of
 * that class: a block on its class's free list, or malloc'd and kept among
 * the DP_POOL_KEEP_BYTES of malloc'd blocks, never carved from the arena,
 * which early packets and lingering copies need (pool.h dp_pool_get_kept).
 * A malloc and free per call made glibc give the heap top back and fault
 * it in again (a 128 KiB in-place all-reduce: 10x its time); one spare
 * buffer for all calls was taken by whichever call came first, so two
 * calls of different sizes in turn, or two running at once, still malloc'd
 * one a round, and where glibc mmaps such blocks (a fixed mmap threshold)
 * faulted them in every call: 0.96 ms a 512 KiB all-to-all instead of 0.04
 * (perf/ALGORITHMS.md, spare (session 17)).
 */
static uint8_t *owned_get(struct dp_engine *e, uint64_t len)
{
	uint64_t heap = e->pool.from_heap;
	uint8_t *p = dp_pool_get_kept(&e->pool, len);

	/* never carved from the arena: a fresh one is a malloc */
	e->count.owned_allocs += e->pool.from_heap != heap;
	return p;
}

static void coll_drop(struct dp_engine *e, struct dp_coll *k)
{
	sl_sched_fini(&k->sched);
	dp_pool_put(&e->pool, k->msgs);
	dp_pool_put(&e->pool, k->linger_copy);
	dp_pool_put(&e->pool, k);
}

/* The memory a kept collective holds. */
static uint64_t coll_mem(const struct dp_coll *k)
{
	return sizeof(*k) + k->sched.tab_bytes + (uint64_t)k->sched.cap * sizeof(*k->sched.x) +
	       (uint64_t)k->msgs_cap * sizeof(*k->msgs) + k->linger_cap;
}

void dp_coll_free_all(struct dp_engine *e)
{
	while (e->coll_free) {
		struct dp_coll *k = e->coll_free;
		e->coll_free = k->next;
		coll_drop(e, k);
	}
	e->coll_free_bytes = 0;
}

/*
 * A collective for the next call: a finished one, reset, with its
 * schedule's tables, its message table and its lingering copy kept for
 * reuse.  Allocating and freeing them (five blocks) on every call was about
 * a tenth of a small call's samples.  One whose schedule is the plan's
 * (a loop repeating a call) is preferred, so that sl_sched_reinit need not
 * build it again; the walk stops after DP_COLL_MATCH_WALK, which covers a
 * loop of a few calls of different shapes (gradient buckets).  Without
 * one, the last walked is taken, or new memory while fewer are kept, not
 * the newest: a rank that alternates two plans one call at a time (a
 * gather, then a reduce) took its one kept collective and built the other
 * plan into it every call (a 3-rank root built 4105 schedules in 4109).
 * *found: whether the one taken holds the plan's schedule.
 */
static struct dp_coll *coll_get(struct dp_engine *e, const struct sl_sched_plan *plan, bool *found)
{
	struct dp_coll **at = &e->coll_free, **last = NULL, **pick, *k;
	uint32_t i = 0;

	*found = false;
	for (; *at && i < DP_COLL_MATCH_WALK && !(*found = sl_sched_holds(&(*at)->sched, plan)); i++) {
		last = at;
		at = &(*at)->next;
	}
	pick = *found ? at : i == DP_COLL_MATCH_WALK ? last : NULL;
	if (!pick) {
		if ((k = dp_pool_get(&e->pool, sizeof(*k))))
			memset(k, 0, sizeof(*k));
		return k;
	}
	k = *pick;
	*pick = k->next;
	e->coll_free_bytes -= coll_mem(k);
	memset(k, 0, offsetof(struct dp_coll, sched)); /* the rest is kept (dp.h) */
	return k;
}

/* Keep k for coll_get while the kept ones stay within DP_COLL_KEEP_BYTES. */
static void coll_put(struct dp_engine *e, struct dp_coll *k)
{
	uint64_t mem = coll_mem(k);

	if (e->coll_free_bytes + mem > DP_COLL_KEEP_BYTES) {
		coll_drop(e, k);
		return;
	}
	k->next = e->coll_free;
	e->coll_free = k;
	e->coll_free_bytes += mem;
}

static void coll_free(struct dp_engine *e, struct dp_coll *k)
{
	for (uint32_t i = 0; i < k->msgs_used; i++)
		sl_tp_cancel(e->tp, &k->msgs[i]);
	if (k->gdev)
		dp_async_fini(k);
	dp_packets_free(e, k->deferred);
	for (uint32_t c = 0; k->gate_wait && c < k->sched.chunks_built; c++)
		dp_packets_free(e, k->gate_wait[c]);
	dp_pool_put(&e->pool, k->owned);
	coll_put(e, k);
}

/* ---- a communicator's lists of collectives (dp.h: colls and linger) ---- */

static void list_push(struct dp_coll **head, struct dp_coll **tail, struct dp_coll *k)
{
	k->next = NULL;
	k->prev = *tail;
	if (*tail)
		(*tail)->next = k;
	else
		*head = k;
	*tail = k;
}

static void list_drop(struct dp_coll **head, struct dp_coll **tail, struct dp_coll *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		*head = k->next;
	if (k->next)
		k->next->prev = k->prev;
	else
		*tail = k->prev;
	k->next = k->prev = NULL;
}

static void coll_unlink(struct dp_coll *k)
{
	struct dp_comm *comm = k->comm;

	if (k->lingering)
		list_drop(&comm->linger, &comm->linger_tail, k);
	else
		list_drop(&comm->colls, &comm->colls_tail, k);
}

static void done_note(const struct dp_coll *k);
static uint32_t issue_sends(struct dp_engine *e, struct dp_coll *k, bool locals);

/* Finish k: tell its client (retried by progress when the ring is full),
 * unless it was told when k began to linger. */
static bool coll_finish(struct dp_engine *e, struct dp_coll *k)
{
	struct dp_comm *comm = k->comm;

	if (k->lingering) {
		comm->nlinger--;
		comm->linger_bytes -= k->linger_len;
		comm->linger_ready -= k->linger_ready;
		e->lingering--;
	} else {
		if (!post_cpl(e, comm->client, k->cmd.req, k->status, k->why))
			return false;
		if (k->status == SLUICE_OK)
			e->count.colls_done++;
		else
			e->count.colls_failed++;
		if (k->status != SLUICE_OK)
			note_failure_told(comm);
	}
	done_note(k);
	coll_unlink(k);
	e->gated -= k->gdev != NULL;
	coll_free(e, k);
	e->running--;
	if (comm->close_done && !comm->colls && !comm->linger)
		dp_comm_close_try(e, comm, sl_tp_poll_ns(e->tp));
	return true;
}

static bool in_range(const uint8_t *p, const uint8_t *base, uint64_t len)
{
	return len && p >= base && p < base + len;
}

/* A byte range of one buffer. */
struct span {
	uint64_t off, len;
};

/* The bytes of k's send and recv buffers that copy_sources copies: in
 * each, from the first to the last byte a message with data reads, and
 * nothing of the in-place snapshot (ours already).  A scatter root's own
 * block goes on no wire: copying it was a third of a 3-rank root's copy. */

static void sources_read(const struct dp_coll *k, struct span read[2])
{
	const struct sl_sched *s = &k->sched;
	uint64_t lo[2] = { UINT64_MAX, UINT64_MAX }, hi[2] = { 0, 0 };

	for (uint32_t i = 0; i < k->msgs_used; i++) {
		const struct sl_tp_msg *m = &k->msgs[i];
		for (int b = SL_BUF_SEND; b <= SL_BUF_RECV && m->hdr.len; b++) {
			if (!in_range(m->src, k->buf[b], s->bytes[b]))
				continue;
			uint64_t off = (uint64_t)(m->src - k->buf[b]);
			lo[b] = off < lo[b] ? off : lo[b];
			hi[b] = off + m->hdr.len > hi[b] ? off + m->hdr.len : hi[b];
		}
	}
	for (int b = SL_BUF_SEND; b <= SL_BUF_RECV; b++)
		read[b] = hi[b] && !(b == SL_BUF_SEND && in_range(k->buf[b], k->owned, k->owned_len))
				  ? (struct span){ lo[b], hi[b] - lo[b] } : (struct span){ 0, 0 };
}

/* The peers k sends data to (not call checks, not its own block). */
static uint32_t data_peers(const struct sl_sched *s)
{
	uint64_t seen[SL_MAX_RANKS / 64] = { 0 };
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->nx; i++) {
		const struct sl_xfer *x = &s->x[i];
		if (!x->is_send || !x->len || x->peer == s->p.rank || (seen[x->peer / 64] >> (x->peer % 64) & 1))
			continue;
		seen[x->peer / 64] |= 1ull << (x->peer % 64);
		n++;
	}
	return n;
}

/* Whether s receives from other ranks (its own block is a local copy). */
static bool receives(const struct sl_sched *s)
{
	for (uint32_t i = 0; i < s->nrecv; i++)
		if (s->x[s->recvs[i]].peer != s->p.rank)
			return true;
	return false;
}

/* Whether k is small enough to linger: its buffers hold at most
 * DP_EAGER_MAX together; or it receives nothing from other ranks (the root
 * of a scatter or broadcast, a leaf of a gather) and the bytes its messages
 * read are at most DP_EAGER_MAX for each peer it sends to, as MPI sends up
 * to its eager limit to each without waiting.  Such a sender's call waits
 * for ACKs alone: 3 ranks on 2 cores, the root of a 64 KiB scatter waited
 * for a descheduled peer's every call, 40-100 us, where Open MPI's took
 * 5-10; a 128 KiB scatter's root (87 KiB to its two peers) that waits ran
 * in lockstep with its leaves at 28-44 us a call, one that lingers at
 * 11-16 (gs5).  A send of 128 KiB to one peer of three that lingered took
 * 1.4x the time of one that waits (perf/ALGORITHMS.md). */
static bool eager(const struct dp_coll *k, uint64_t *copy)
{
	const struct sl_sched *s = &k->sched;
	struct span read[2];

	*copy = s->bytes[SL_BUF_SEND] + s->bytes[SL_BUF_RECV];
	if (*copy <= DP_EAGER_MAX)
		return true;
	if (receives(s))
		return false;
	sources_read(k, read);
	*copy = read[SL_BUF_SEND].len + read[SL_BUF_RECV].len;
	return *copy <= (uint64_t)DP_EAGER_MAX * data_peers(s);
}

/* Whether k only sends, to one rank, and is no root: it may linger up to
 * DP_LINGER_ONE_MAX deep (dp.h).  Set with its schedule, which a repeated
 * call reuses: walking the schedule's transfers for it on every call was
 * 2.5% of a 3-rank gather leaf's samples (a leaf far ahead reuses cold ones). */
static bool sends_to_one(const struct dp_coll *k)
{
	const struct sl_sched *s = &k->sched;

	return !(is_rooted(k->cmd.opcode) && k->cmd.root == k->comm->rank) && !receives(s) && data_peers(s) == 1;
}

/* Whether k is a scatter's root: it sends its peers' blocks, receives nothing. */
static bool scatter_root(const struct dp_coll *k)
{
	return k->cmd.opcode == SL_OP_SCATTER && k->cmd.root == k->comm->rank;
}

/* Whether k sends straight from the client's buffer and ends at its ACKs,
 * lingering only once it got none for DP_ACK_WAIT_NS: a collective's leaf
 * that only sends to one rank, or a scatter's root, of DP_ACKED_SEND_MIN
 * bytes or more, where ranks share cores (dp.h).  Its receivers ACK at once
 * (acks_may_wait), and it waits in step with them, so that a gather root's
 * early packets are of its next call, kept in their frames (coll_stash.c
 * dp_stash_packet), not copied; a scatter root copied its peers' blocks
 * twice lingering, into its copy and into the frames (3 ranks, 64-128 KiB:
 * 1.3-1.9x the mean call of one that waits; perf/ALGORITHMS.md, gin33).
 * Not a send: its receiver keeps those in their frames anyway, so only the
 * send's own copy was saved, and 3-rank send/recv at 32-64 KiB measured
 * 1.05-1.1x slower waiting. */
static bool sends_acked(const struct dp_engine *e, const struct dp_coll *k)
{
	return (k->to_one || scatter_root(k)) && e->idle.cfg.yield_app && !dp_is_p2p(k->cmd.opcode) &&
	       k->sched.bytes[SL_BUF_SEND] + k->sched.bytes[SL_BUF_RECV] >= DP_ACKED_SEND_MIN;
}

/*
 * Report k done before its sends are acknowledged, or the call checks of
 * other ranks have come: once its receptions hold their data (the result
 * is final) and every send is with the transport.  The client may then
 * reuse its buffers, and the transport rebuilds lost packets from the
 * source, so the sends' bytes in the client's buffers are copied first
 * (bounded: eager).  Waiting for an ACK cost a round trip per call,
 * and a rooted call's checks another: the root of a small broadcast took
 * 3-6x Open MPI's time.  k stays on the list until both have come; a
 * mismatch or a lost peer found then breaks the communicator, and the next
 * call (or sluice_comm_destroy) reports it.
 */
static bool may_linger(const struct dp_engine *e, const struct dp_coll *k, uint64_t now)
{
	const struct sl_sched *s = &k->sched;
	uint64_t copy;

	return !k->lingering && !k->gdev && k->status == SLUICE_OK &&
	       (!sends_acked(e, k) || now >= k->last_progress_ns + DP_ACK_WAIT_NS) && sl_sched_recv_done(s) &&
	       k->msgs_sent == k->msgs_used && !k->holding &&
	       k->comm->nlinger < (k->to_one ? DP_LINGER_ONE_MAX : DP_LINGER_MAX) && eager(k, &copy) &&
	       k->comm->linger_bytes + copy <= DP_LINGER_BYTES;
}

/* Point k's messages that read the client's send or recv buffer at a copy
 * of it.  Only a buffer that some message with data reads is copied: a
 * broadcast's root sends from its send buffer alone, and a rank whose
 * messages are call checks copies nothing (3 ranks on 2 cores: the copies
 * of calls that linger grew the heap by hundreds of KiB in a short run, a
 * page fault per 4 KiB, 15-20 us each on this VM). */
static bool copy_sources(struct dp_engine *e, struct dp_coll *k)
{
	struct span read[2];
	const uint8_t *sfrom, *rfrom;
	uint64_t len;

	sources_read(k, read);
	len = read[SL_BUF_SEND].len + read[SL_BUF_RECV].len;
	if (!len)
		return true; /* nothing to copy, or copied already (the completion found no room) */
	if (!k->linger_copy || len > k->linger_cap) {
		uint8_t *p = dp_pool_get(&e->pool, len); /* len > 0: len + 1 took the next class at 4 KiB */
		if (!p)
			return false;
		dp_pool_put(&e->pool, k->linger_copy);
		k->linger_copy = p;
		k->linger_cap = dp_pool_cap(p);
	}
	k->linger_len = len;
	sfrom = k->buf[SL_BUF_SEND] + read[SL_BUF_SEND].off;
	rfrom = k->buf[SL_BUF_RECV] + read[SL_BUF_RECV].off;
	memcpy(k->linger_copy, sfrom, read[SL_BUF_SEND].len);
	memcpy(k->linger_copy + read[SL_BUF_SEND].len, rfrom, read[SL_BUF_RECV].len);
	for (uint32_t i = 0; i < k->msgs_used; i++) {
		struct sl_tp_msg *m = &k->msgs[i];
		if (!m->hdr.len)
			continue;
		if (in_range(m->src, sfrom, read[SL_BUF_SEND].len))
			m->src = k->linger_copy + (m->src - sfrom);
		else if (in_range(m->src, rfrom, read[SL_BUF_RECV].len))
			m->src = k->linger_copy + read[SL_BUF_SEND].len + (m->src - rfrom);
	}
	return true;
}

static bool coll_linger(struct dp_engine *e, struct dp_coll *k)
{
	if (!copy_sources(e, k))
		return false; /* no memory: it finishes the ordinary way */
	if (!post_cpl(e, k->comm->client, k->cmd.req, SLUICE_OK, ""))
		return false;
	e->count.colls_done++;
	list_drop(&k->comm->colls, &k->comm->colls_tail, k);
	if (!k->comm->linger || k->last_progress_ns < k->comm->linger_since_ns)
		k->comm->linger_since_ns = k->last_progress_ns;
	list_push(&k->comm->linger, &k->comm->linger_tail, k);
	k->lingering = true;
	k->comm->nlinger++;
	k->comm->linger_bytes += k->linger_len;
	e->lingering++;
	dp_linger_mark(k);
	return true;
}

/* ---- lookups ---- */

static struct dp_comm *comm_by_key(struct dp_engine *e, uint32_t key32)
{
	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		if (e->comms[i].live && e->comms[i].key32 == key32)
			return &e->comms[i];
	return NULL;
}

/* ---- what a packet carries of its call ---- */

static uint8_t dtype_op(const struct sl_cmd *cmd)
{
	return (uint8_t)(cmd->dtype << 4 | cmd->redop);
}

/* Collective and algorithm; a recv expects its peer's send. */
static uint8_t wire_kind(const struct sl_cmd *cmd)
{
	uint32_t op = cmd->opcode == SL_OP_RECV ? SL_OP_SEND : cmd->opcode;

	return (uint8_t)(op | cmd->algo << KIND_ALGO_SHIFT);
}

/* The count a packet between this rank and peer carries: all-to-allv's
 * is the pair's own (what the sender sends must be what the receiver expects). */
static uint64_t wire_count(const struct dp_coll *k, uint32_t peer, bool sending)
{
	const struct sl_cmd *cmd = &k->cmd;

	if (cmd->opcode == SL_OP_ALLTOALLV) /* the schedule's copy of the counts */
		return sending ? k->sched.p.send_count[peer] : k->sched.p.recv_count[peer];
	return cmd->count | (is_rooted(cmd->opcode) ? (uint64_t)cmd->root << COUNT_ROOT_SHIFT : 0);
}

static struct dp_coll *coll_for_packet(struct dp_comm *comm, const struct sl_hdr *h, int src)
{
	for (int l = 0; l < 2; l++)
		for (struct dp_coll *k = l ? comm->linger : comm->colls; k; k = k->next)
			if (packet_is_for(k, h, src))
				return k;
	return NULL;
}

/* "allreduce(count=1000, float32, sum) by ring" and the like. */
static void describe(char *buf, size_t len, uint8_t kind, uint64_t count, uint8_t dt_op)
{
	uint32_t op = kind & ((1u << KIND_ALGO_SHIFT) - 1), root = (uint32_t)(count >> COUNT_ROOT_SHIFT);
	char rootbuf[24] = "";

	if (is_rooted(op))
		snprintf(rootbuf, sizeof(rootbuf), ", root %u", root);
	snprintf(buf, len, "%s(count=%" PRIu64 ", %s%s%s%s) by %s", sl_coll_name((enum sl_coll)op),
		 count & ((UINT64_C(1) << COUNT_ROOT_SHIFT) - 1), sl_dtype_name(dt_op >> 4),
		 sl_coll_reduces((enum sl_coll)op) ? ", " : "",
		 sl_coll_reduces((enum sl_coll)op) ? sl_redop_name(dt_op & 15) : "", rootbuf,
		 sl_algo_name((enum sl_algo)(kind >> KIND_ALGO_SHIFT)));
}

/* A lazy call check (schedule.c) at a rank that sent its sender the data:
 * nothing expects it, and the data's receiver compared the calls. */
static bool stray_check(const struct sl_hdr *h)
{
	return h->step == SL_SCHED_CHECK_STEP && h->len == 0;
}

/* Rank peer's packet h says it called another call than #seq here (kind,
 * count and dtype_op as this rank's packets to peer would carry them; p2p:
 * a send or recv). */
static void mismatch(struct dp_engine *e, struct dp_comm *comm, uint32_t seq, bool p2p, uint8_t kind,
		     uint64_t count, uint8_t dt_op, const struct sl_hdr *h, int peer)
{
	char mine[96], theirs[96];

	e->count.rx_mismatch++;
	describe(mine, sizeof(mine), kind, count, dt_op);
	describe(theirs, sizeof(theirs), h->kind, h->count, h->dtype_op);
	/* the planner splits a large call over the channels (or, counts
	 * differing, on one rank and not another): the dataplane sees slices */
	comm_fail(e, comm, SLUICE_ERR_MISMATCH, seq, true,
		  "%s #%u differs across ranks: rank %u called %s but rank %d called %s%s: every rank "
		  "must make the same calls in the same order (a recv the same count and type as its send)",
		  p2p ? "send/recv" : "collective", seq, comm->rank, mine, peer, theirs,
		  comm->channels_failed ? " (counts of a call split over the communicator's channels are "
					  "one slice's)" : "");
}

static void report_mismatch(struct dp_engine *e, struct dp_coll *k, const struct sl_hdr *h, int peer)
{
	/* this rank's call as it was made: a recv is named a recv, not the send its packets pair with */
	uint8_t kind = (uint8_t)(k->cmd.opcode | k->cmd.algo << KIND_ALGO_SHIFT);

	mismatch(e, k->comm, k->seq, dp_is_p2p(k->cmd.opcode), kind, wire_count(k, (uint32_t)peer, false),
		 dtype_op(&k->cmd), h, peer);
}

/* Remember a rooted call that ends here (dp.h: done); without memory for
 * that, a late packet is only counted, as before. */
static void done_note(const struct dp_coll *k)
{
	struct dp_comm *comm = k->comm;

	if (!is_rooted(k->cmd.opcode) || k->status != SLUICE_OK)
		return;
	comm->done[k->seq % DP_DONE_CALLS] = (struct dp_done_call){
		.seq = k->seq, .kind = wire_kind(&k->cmd), .dtype_op = dtype_op(&k->cmd), .count = wire_count(k, 0, false),
	};
}

/* A packet for a rooted call that ended here: compared with it.  Ranks that
 * made the same call send nothing after it ended but lazy checks (its data
 * ended it), so this is one, or a rank that called something else and
 * waits, or sent data this call never expected.  True when it was known. */
static bool late_packet(struct dp_engine *e, struct dp_comm *comm, const struct sl_hdr *h, int src)
{
	const struct dp_done_call *d = &comm->done[h->seq % DP_DONE_CALLS];

	if (!d->kind || d->seq != h->seq || packet_is_p2p(h))
		return false;
	if (h->kind != d->kind || h->dtype_op != d->dtype_op || h->count != d->count) {
		mismatch(e, comm, d->seq, false, d->kind, d->count, d->dtype_op, h, src);
		return true;
	}
	return stray_check(h);
}

/* ---- applying packets ---- */

static void apply_action(struct dp_coll *k, const struct sl_action *a, const uint8_t *payload, uint32_t len)
{
	uint8_t *dst = k->buf[a->buf] + a->off;
	uint32_t esize = (uint32_t)sl_dtype_size(k->cmd.dtype);
	enum sl_redop op = k->cmd.redop == SL_AVG ? SL_SUM : (enum sl_redop)k->cmd.redop;

	if (a->apply == SL_APPLY_COPY) {
		memmove(dst, payload, len); /* a local transfer may overlap itself */
		return;
	}
	const uint8_t *opnd = k->buf[a->opnd_buf] + a->opnd_off;

	sl_reduce(dst, a->payload_first ? payload : opnd, a->payload_first ? opnd : payload, len / esize,
		  k->cmd.dtype, op);
	/* the schedule's last contribution to these elements: average them once */
	if (k->cmd.redop == SL_AVG && a->finishes)
		sl_scale_avg(dst, len / esize, k->cmd.dtype, k->comm->nranks);
}

/* A packet of k, on its input, arrived at `at` before the send that reads
 * those bytes was acknowledged (offer).  The first of its chunk makes that
 * send ready if it still waited on its pacing (sl_sched_gate_pull): in
 * pairwise a rank behind its peer held the peer's whole step for as long as
 * it lagged, most of it copied out of the port's frames (perf/ALGORITHMS.md,
 * a2a30).  Once its whole chunk has arrived, the sends that pace on that
 * chunk may go (sl_sched_chunk_arrived), an acknowledgement's round trip
 * before it lands. */
static void gate_held(struct dp_engine *e, struct dp_coll *k, const struct sl_recv_at *at)
{
	uint8_t *held = &k->gate_held[at->index];
	uint32_t packets = sl_sched_chunk_packets(&k->sched, at);

	if (*held == 0)
		e->count.sends_pulled_at_gate += sl_sched_gate_pull(&k->sched, at);
	if (*held < packets && ++*held == packets)
		e->count.sends_released_at_gate += sl_sched_chunk_arrived(&k->sched, at);
}

/* Offer one packet of k from rank src to its schedule and apply it (or,
 * gated, post it to the reducer) if its turn has come.  On the input
 * itself (k->src_free) a packet lands only once the send that reads its
 * bytes is acknowledged (no retransmission reads them again); the
 * reception it lands in is looked up once, here, for both.  held: on its
 * first offer (NULL on the next), the reception chunk whose gate holds it,
 * else -1.  *chunk_done says whether deferred packets may now fit. */
static enum sl_sched_result offer(struct dp_engine *e, struct dp_coll *k, uint32_t src, const struct sl_hdr *h,
				  const uint8_t *payload, int64_t *held, bool *chunk_done)
{
	struct sl_action act;
	struct sl_recv_at at;
	enum sl_sched_result res;
	/* one the schedule does not know is let through, to be refused there */
	bool gated = k->src_free && sl_sched_recv_at(&k->sched, src, h->step, h->offset, &at);

	*chunk_done = false;
	if (k->snapping || (k->gdev && !dp_async_room(k, h->len, true)))
		return SL_SCHED_DEFER; /* the input is being copied or the reducer is full: like an
					* early packet, offered again later */
	if (gated && !k->src_free[at.index]) {
		if (held) {
			*held = at.index;
			gate_held(e, k, &at);
		}
		return SL_SCHED_DEFER; /* a send still reads where it lands */
	}
	res = gated ? sl_sched_on_packet_at(&k->sched, &at, h->offset, h->len, &act)
		    : sl_sched_on_packet(&k->sched, src, h->step, h->offset, h->len, &act);
	if (res == SL_SCHED_OK) {
		if (!k->gdev)
			apply_action(k, &act, payload, h->len);
		else if (dp_async_post(e, k, &act, payload, h->len, true) == 0 && act.chunk_full)
			dp_async_chunk_posted(k, &act);
		*chunk_done = act.chunk_done;
		k->last_progress_ns = sl_tp_poll_ns(e->tp);
	} else if (res != SL_SCHED_DEFER && !(res == SL_SCHED_BAD_STEP && stray_check(h))) {
		e->count.rx_bad_coll++;
	}
	return res;
}

/* Offer k's deferred packets again until none fits any more, or until
 * those applied hold budget bytes; the bytes applied. */
static uint64_t retry_deferred_upto(struct dp_engine *e, struct dp_coll *k, uint64_t budget)
{
	bool again = true;
	uint64_t applied = 0;

	while (again && k->deferred && k->status == SLUICE_OK && applied < budget) {
		struct dp_stashed **p = &k->deferred;
		again = false;
		while (*p) {
			struct dp_stashed *s = *p;
			bool done;
			if (offer(e, k, (uint32_t)rank_of_node(k->comm, s->hdr.src_node), &s->hdr, s->payload, NULL,
				  &done) == SL_SCHED_DEFER) {
				p = &s->next;
				continue;
			}
			*p = s->next;
			k->ndeferred--;
			applied += s->hdr.len;
			dp_packet_put(e, s);
			again |= done;
			if (applied >= budget)
				break;
		}
	}
	return applied;
}

/* All of them; but those deferred while the input was copied go a budget's
 * worth a pass (issue_sends), not all at the next completed chunk, and
 * those of a call on its input wait for the acknowledgements that free
 * their destination, not for a chunk (an all-to-all's receptions wait on
 * no other). */
static void retry_deferred(struct dp_engine *e, struct dp_coll *k)
{
	if (!k->deferred_due && !k->src_free)
		retry_deferred_upto(e, k, UINT64_MAX);
}

/*
 * A packet before its turn waits, copied.  A peer's packets come once each
 * (the transport applies a PSN once), so the chunks still to complete hold
 * every one that can wait; more means a peer sends the same data again
 * under new PSNs (misbehaving, or forged), each copy a pool block, malloc'd
 * past the arena, for as long as the call ran: the call fails instead.
 * Honest calls come close to that count: a direct all-reduce waits with
 * (n - 2) / (n - 1) of it while its first contributor is late (it_mix, 4
 * ranks: 2/3), a gated one whose input is still being copied with all of
 * it; so the bound is DEFER_SLACK times it, where no honest call reaches
 * half, and a slip in that count fails no correct job.
 */
#define DEFER_SLACK 2

static bool defer_overflows(struct dp_engine *e, struct dp_coll *k, int src)
{
	const struct sl_sched_plan *p = &k->sched.p;
	uint64_t left;

	/* compared in payload bytes, no division per packet: a chunk is whole payloads */
	if ((uint64_t)k->ndeferred * p->payload < DEFER_SLACK * (uint64_t)k->sched.chunks_left * p->chunk_bytes)
		return false;
	left = (uint64_t)k->sched.chunks_left * (p->chunk_bytes / p->payload);
	comm_fail(e, k->comm, SLUICE_ERR_REMOTE, k->seq, true,
		  "rank %d sent more packets of %s #%u before their turn than %d times what the call has left to "
		  "receive (%u waiting, %" PRIu64 " left): is that rank's dataplane misbehaving?", src,
		  sl_coll_name(k->cmd.opcode), k->seq, DEFER_SLACK, k->ndeferred, left);
	return true;
}

/* held: the reception chunk whose input gate holds it (offer), -1 none:
 * kept on that chunk's list, offered again once the gate opens
 * (source_freed), not at every acknowledgement of the call. */
static void defer(struct dp_engine *e, struct dp_coll *k, int src, const struct sl_hdr *h, const uint8_t *payload,
		  int64_t held)
{
	struct dp_stashed **list = held < 0 ? &k->deferred : &k->gate_wait[held];
	struct dp_stashed *s;

	if (defer_overflows(e, k, src))
		return;
	s = dp_packet_keep(e, h, payload, !is_rooted(k->cmd.opcode)); /* as dp_stash_packet's */
	if (!s) {
		comm_fail(e, k->comm, SLUICE_ERR_NO_MEMORY, k->seq, true,
			  "the dataplane on rank %u ran out of memory holding packets of %s #%u: "
			  "use smaller messages or the ring algorithm", k->comm->rank,
			  sl_coll_name(k->cmd.opcode), k->seq);
		return;
	}
	s->next = *list;
	*list = s;
	k->ndeferred++;
}

static void apply(struct dp_engine *e, struct dp_coll *k, int src, const struct sl_hdr *h, const uint8_t *payload)
{
	bool chunk_done;

	if (k->status != SLUICE_OK)
		return;
	if (h->kind != wire_kind(&k->cmd) || h->dtype_op != dtype_op(&k->cmd) ||
	    h->count != wire_count(k, (uint32_t)src, false)) {
		report_mismatch(e, k, h, src);
		return;
	}
	int64_t held = -1;

	if (offer(e, k, (uint32_t)src, h, payload, &held, &chunk_done) == SL_SCHED_DEFER)
		defer(e, k, src, h, payload, held);
	else if (chunk_done)
		retry_deferred(e, k);
	dp_linger_mark(k); /* a lingering call's check has come */
}

static void local_refused(struct dp_engine *e, struct dp_coll *k, const struct sl_send *s, uint64_t o)
{
	comm_fail(e, k->comm, SLUICE_ERR_INTERNAL, k->seq, true,
		  "%s #%u: the schedule refused its own local transfer (step %u, offset %" PRIu64
		  "): a bug in sluice's coll/, please report it", sl_coll_name(k->cmd.opcode),
		  k->seq, s->step, s->xoff + o);
}

/* A chunk k sends to its own rank: applied here, packet by packet, as if it
 * had arrived, up to most bytes (whole packets, at least one), the rest on
 * a later call; gated, posted whole as one piece of work (the source is
 * the collective's own memory, which stays put).  *done: the bytes applied.
 * False when the reducer has no room yet. */
static bool apply_local(struct dp_engine *e, struct dp_coll *k, const struct sl_send *s, uint64_t most,
			uint64_t *done)
{
	uint64_t o = 0;
	bool chunk_done = false;
	struct sl_action first, act;

	*done = s->len; /* a refused transfer fails the call: nothing of it is left */
	if (k->gdev && !dp_async_room(k, s->len, false))
		return false;
	do {
		uint64_t len = s->len - o < e->payload ? s->len - o : e->payload;
		const uint8_t *src = k->buf[s->buf] + s->off + o;
		if (k->gdev) {
			if (sl_sched_on_packet(&k->sched, k->comm->rank, s->step, s->xoff + o, len, &act) != SL_SCHED_OK) {
				local_refused(e, k, s, o);
				return true;
			}
			if (o == 0)
				first = act;
		} else {
			struct sl_hdr h = { .step = (uint16_t)s->step, .offset = s->xoff + o, .len = (uint32_t)len };
			if (offer(e, k, k->comm->rank, &h, src, NULL, &chunk_done) != SL_SCHED_OK) {
				local_refused(e, k, s, o);
				return true;
			}
		}
		o += len;
	} while (o < s->len && (k->gdev || o < most));
	if (k->gdev) {
		/* a send is one chunk of its reception, so the last packet completed it */
		if (dp_async_post(e, k, &first, k->buf[s->buf] + s->off, s->len, false) == 0 && act.chunk_full)
			dp_async_chunk_posted(k, &act);
		k->last_progress_ns = sl_tp_poll_ns(e->tp);
	}
	if (chunk_done)
		retry_deferred(e, k);
	*done = o;
	return true;
}

/* Apply k's early packets; returns how many. */
static uint32_t replay_stash(struct dp_engine *e, struct dp_coll *k)
{
	uint32_t applied = 0;

	for (struct dp_stashed *s = dp_stash_take(k), *next; s; s = next, applied++) {
		next = s->next;
		apply(e, k, rank_of_node(k->comm, s->hdr.src_node), &s->hdr, s->payload);
		dp_packet_put(e, s);
	}
	dp_stash_drained(e, k->comm);
	return applied;
}

/* Rank src has closed: its calls are over and its communicator is gone,
 * so no packet this rank still sends it can change anything there.  Its
 * messages stop waiting for acknowledgements: a lingering call held a
 * destroy until the flow to such a peer died, when frames between them
 * were lost for 20 s (veth_fault_all_3ranks, once).  Gated calls keep
 * theirs (their reducer tracks each send). */
static void sends_moot(struct dp_engine *e, struct dp_comm *comm, int src)
{
	for (int l = 0; l < 2; l++) {
		for (struct dp_coll *k = l ? comm->linger : comm->colls; k; k = k->next) {
			for (uint32_t i = 0; i < k->msgs_sent && !k->gdev; i++) {
				struct sl_tp_msg *m = &k->msgs[i];
				if (m->dst_node != comm->node[src] || (!m->queued && !m->unacked))
					continue;
				sl_tp_cancel(e->tp, m);
				m->unacked = 0;
				k->msgs_unacked--;
			}
			dp_linger_mark(k);
		}
	}
}

/* Whether a peer's reason (an abort notice's) is one it relayed from
 * another channel of its dataplane: the wire carries no mark for it, only
 * these words, read here where they come in. */
static bool says_other_channel(const char *why)
{
	size_t len = strlen(why), note = sizeof(OTHER_CHANNEL) - 1;

	return len >= note && !strcmp(why + len - note, OTHER_CHANNEL);
}

static void on_notice(struct dp_engine *e, const struct sl_hdr *h, const uint8_t *payload)
{
	struct dp_comm *comm = comm_by_key(e, h->comm);
	int32_t status = (int32_t)h->count;
	int src;

	if (!comm || h->len == 0 || payload[h->len - 1] != '\0' || (src = rank_of_node(comm, h->src_node)) < 0)
		return;
	if (status == SLUICE_OK)
		dp_wait_note_came(e, comm, src, h, (const char *)payload);
	if (h->step == NOTICE_CLOSING && !comm->peer_closed[src]) {
		comm->peer_closed[src] = true;
		comm->peer_seq[src] = h->seq;
		sends_moot(e, comm, src);
	}
	if (status != SLUICE_OK) {
		if (status != SLUICE_ERR_MISMATCH && status != SLUICE_ERR_TIMEOUT)
			status = SLUICE_ERR_REMOTE;
		dp_comm_fail_relayed(e, comm, status, h->seq, false, says_other_channel((const char *)payload),
				     "rank %d reported: %s", src, (const char *)payload);
	}
	if (comm->close_done && !comm->colls && !comm->linger)
		dp_comm_close_try(e, comm, sl_tp_poll_ns(e->tp));
}

enum sl_deliver_result dp_deliver(void *engine, const struct sl_hdr *h, const uint8_t *payload)
{
	struct dp_engine *e = engine;
	struct dp_comm *comm;
	struct dp_coll *k;
	enum sl_deliver_result res = SL_DELIVER_DONE;
	int src;

	if (h->flags & SL_F_CTRL) {
		on_notice(e, h, payload);
		return SL_DELIVER_DONE;
	}
	comm = comm_by_key(e, h->comm);
	if (!comm) {
		e->count.rx_unknown_comm++;
		return SL_DELIVER_DONE;
	}
	if ((src = rank_of_node(comm, h->src_node)) < 0) {
		e->count.rx_bad_coll++;
		return SL_DELIVER_DONE;
	}
	if (comm->failed != SLUICE_OK)
		return SL_DELIVER_DONE;
	/* An early packet's call is not posted, so no list holds it: a leaf
	 * runs up to DP_LINGER_ONE_MAX calls ahead, and walking its lingering
	 * ones for every early packet would cost that many misses each. */
	if (packet_is_early(comm, h, src))
		res = dp_stash_packet(e, comm, src, h, payload);
	else if ((k = coll_for_packet(comm, h, src)))
		apply(e, k, src, h, payload);
	else if (!late_packet(e, comm, h, src) && !stray_check(h))
		e->count.rx_bad_coll++;
	return res;
}

/* m, a send chunk of a call on its input, is acknowledged: the peer's
 * chunk that lands on the same bytes may now (offer). */
static void source_freed(struct dp_coll *k, const struct sl_tp_msg *m)
{
	int r = rank_of_node(k->comm, m->dst_node);
	int64_t c = r < 0 ? -1 : sl_sched_recv_chunk(&k->sched, (uint32_t)r, m->hdr.step, m->hdr.offset);

	if (c < 0)
		return;
	k->src_free[c] = 1;
	while (k->gate_wait[c]) { /* its packets, offered again a budget a pass (issue_sends) */
		struct dp_stashed *s = k->gate_wait[c];
		k->gate_wait[c] = s->next;
		s->next = k->deferred;
		k->deferred = s;
	}
	k->deferred_due |= k->deferred != NULL;
}

void dp_msg_acked(void *engine, struct sl_tp_msg *m)
{
	struct dp_engine *e = engine;
	struct dp_coll *k = m->owner;

	if (m->hdr.flags & SL_F_CTRL) {
		dp_notice_done(e, m);
		return;
	}
	if (k->gdev)
		dp_async_acked(k, m);
	if (k->src_free)
		source_freed(k, m);
	k->msgs_unacked--;
	k->last_progress_ns = sl_tp_poll_ns(e->tp);
	dp_linger_mark(k);
}

void dp_flow_dead(void *engine, uint16_t node)
{
	struct dp_engine *e = engine;
	char why[SL_ERRMSG_LEN];

	dp_notices_last_words(e, node); /* it may be stopped, not dead: its port keeps them */
	for (struct dp_notices *n = e->notices, *next; n; n = next) {
		next = n->next;
		for (uint32_t r = 0; r < n->nranks; r++) {
			struct sl_tp_msg *m = &n->msgs[r];
			if (m->owner && m->dst_node == node) {
				sl_tp_cancel(e->tp, m);
				if (dp_notice_done(e, m))
					break;
			}
		}
	}
	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		struct dp_comm *comm = &e->comms[i];
		int r = comm->live ? rank_of_node(comm, node) : -1;
		if (r < 0 || comm->peer_closed[r]) /* it is done with this communicator: sends_moot */
			continue;
		dp_silent_peer_sentence(why, sizeof(why), r, node, "nothing was acknowledged", e->timeout_ns);
		comm_fail(e, comm, SLUICE_ERR_TIMEOUT, comm->next_seq, true, "%s", why);
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

/* The GPU a (registered, non-empty) range lives on; -1 for host memory. */
static int region_gpu(const struct dp_client *c, uint32_t region, uint64_t bytes)
{
	return bytes ? c->regions[region].gpu : -1;
}

/* Where cmd's buffers live (-1: host); NULL when valid, else why not. */
static const char *buffers_gpu(const struct dp_client *c, const struct sl_cmd *cmd, const uint64_t bytes[2],
			       int *gpu, char *why)
{
	int s = region_gpu(c, cmd->send_region, bytes[0]), r = region_gpu(c, cmd->recv_region, bytes[1]);

	*gpu = s >= 0 ? s : r;
	if ((bytes[0] && bytes[1] && s != r) || (cmd->opcode == SL_OP_ALLTOALLV && *gpu < 0 && s != r)) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "the send buffer is %s%.0d and the recv buffer %s%.0d: both buffers "
				 "of one call must be host memory, or memory of the same GPU", s < 0 ? "host memory" : "on GPU ",
				 s < 0 ? 0 : s, r < 0 ? "host memory" : "on GPU ", r < 0 ? 0 : r);
		return why;
	}
	return NULL;
}

/* The call's own arguments; NULL when valid, else why not. */
static const char *check_call(const struct dp_comm *comm, const struct sl_cmd *cmd, char *why)
{
	if (cmd->opcode == 0 || cmd->opcode >= SL_OP_COUNT)
		return "unknown collective opcode in the descriptor";
	if (!sl_algo_supported((enum sl_coll)cmd->opcode, (enum sl_algo)cmd->algo)) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "algorithm %u (%s) does not implement %s: the descriptor's "
				 "algo must name one that does", cmd->algo, sl_algo_name(cmd->algo),
				 sl_coll_name(cmd->opcode));
		return why;
	}
	if (cmd->dtype >= SL_DTYPE_COUNT || cmd->redop >= SL_REDOP_COUNT)
		return "unknown datatype or reduction op in the descriptor";
	if (cmd->count >> COUNT_ROOT_SHIFT)
		return "element count overflows the 56 bits a packet carries (2^56 or more)";
	if ((is_rooted(cmd->opcode) || dp_is_p2p(cmd->opcode)) && cmd->root >= comm->nranks) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "root or peer %u is not a rank of this %u-rank communicator",
				 cmd->root, comm->nranks);
		return why;
	}
	if (dp_is_p2p(cmd->opcode) && cmd->root == comm->rank)
		return "a send or recv names its own rank as the peer";
	if (cmd->block_stride && !sl_op_blocked(cmd->opcode))
		return "a block stride on a collective whose buffers hold no per-rank blocks: it must be 0";
	if (cmd->block_stride && cmd->block_stride / sl_dtype_size(cmd->dtype) < cmd->count)
		return "the block stride is smaller than a block (count * element size): blocks would overlap";
	return NULL;
}

/* All-to-allv's counts, copied from the client page's counts area into
 * vmeta (abi.h's layout; the client may reuse its units once the call is
 * posted); NULL when valid, else why not. */
static const char *read_vmeta(struct dp_client *c, const struct sl_cmd *cmd, uint32_t nranks, uint64_t *vmeta,
			      uint64_t bytes[2])
{
	uint64_t len = sl_vmeta_len(nranks);

	if (cmd->meta_off > SL_VMETA_BYTES || len > SL_VMETA_BYTES - cmd->meta_off)
		return "the all-to-allv counts run past the client page's counts area";
	memcpy(vmeta, (const uint8_t *)c->page + sl_page_vmeta_off() + cmd->meta_off, len);
	if (!sl_vmeta_bytes(vmeta, nranks, sl_dtype_size(cmd->dtype), &bytes[0], &bytes[1]))
		return "an all-to-allv count plus displacement overflows the buffer size";
	for (uint32_t r = 0; r < nranks; r++)
		if ((vmeta[SL_VMETA_SEND_COUNT * nranks + r] | vmeta[SL_VMETA_RECV_COUNT * nranks + r]) >> COUNT_ROOT_SHIFT)
			return "an all-to-allv count overflows the 56 bits a packet carries (2^56 or more)";
	return NULL;
}

static bool overlap(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

/* Check cmd against c's own state; NULL when valid, else why not.  The
 * buffers' addresses found here, in at, are the call's (coll_new). */
static const char *check_cmd(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *cmd,
			     struct dp_comm **comm, uint64_t bytes[2], uint8_t *at[2], char *why)
{
	const char *bad;

	if (cmd->comm >= DP_MAX_COMMS || !e->comms[cmd->comm].live || e->comms[cmd->comm].client != c)
		return "the descriptor names a communicator this client does not hold";
	*comm = &e->comms[cmd->comm];
	if ((bad = check_call(*comm, cmd, why)))
		return bad;
	if (cmd->opcode == SL_OP_ALLTOALLV) {
		if ((bad = read_vmeta(c, cmd, (*comm)->nranks, e->vmeta, bytes)))
			return bad;
	} else if (!sl_cmd_bytes(cmd->opcode, cmd->count, sl_dtype_size(cmd->dtype), (*comm)->nranks,
				 (*comm)->rank, cmd->root, cmd->block_stride, &bytes[0], &bytes[1])) {
		return "element count (or block stride) overflows the buffer size";
	}
	/* the blocks of a strided slice, gaps included, must lie in the regions too */
	uint8_t *send = at[SL_BUF_SEND] = region_range(c, cmd->send_region, cmd->send_off, bytes[0]);
	uint8_t *recv = at[SL_BUF_RECV] = region_range(c, cmd->recv_region, cmd->recv_off, bytes[1]);
	if (!send || !recv) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "buffers (regions %u+%" PRIu64 " for %" PRIu64 " bytes and %u+%"
				 PRIu64 " for %" PRIu64 " bytes) are not inside memory this client registered",
				 cmd->send_region, cmd->send_off, bytes[0], cmd->recv_region, cmd->recv_off, bytes[1]);
		return why;
	}
	/* in place, an all-to-all leaves its own block where it lies
	 * (sl_sched_own_in_place), which only the same buffer for both has */
	if (cmd->opcode == SL_OP_ALLTOALL && send != recv && overlap(send, bytes[0], recv, bytes[1]))
		return "an in-place all-to-all must pass one buffer as both send and recv; these overlap only in part";
	return NULL;
}

/*
 * An in-place all-to-all whose copy of its input would take more than a
 * pass runs on the input itself (sl_sched_input_gate_ok says when it can):
 * a copy that large was fresh memory every call (past the pool's keep),
 * and faulting it in ran at 170-200 MB/s on the VMs measured here, 80 ms a
 * pass: 3.0 s of a 2-rank 1 GiB call's 3.2, while the peer, unanswered,
 * backed its RTO off and resent its window (perf/ALGORITHMS.md, big27).
 * Its packets then wait for the acknowledgement of the send that reads
 * where they land (offer): about a window of them, not the input.  So
 * does one whose copy, taken in a pass, would hold its sends back longer
 * than that wait (DP_INPUT_GATE_MIN: its input, own block included).
 */
static bool runs_on_input(const struct dp_engine *e, const struct dp_coll *k, uint64_t snap)
{
	return !k->gdev && (snap > e->local_per_pass || snap > DP_INPUT_GATE_MIN) &&
	       sl_sched_input_gate_ok(&k->sched);
}

/* Scratch and, in place when the schedule asks, a copy of the input to run
 * on (taken here for host buffers, by the reducer for gated ones), or the
 * flags of a call that runs on its input (runs_on_input). */
static int alloc_owned(struct dp_engine *e, struct dp_coll *k, char *why)
{
	const struct sl_sched *s = &k->sched;
	uint64_t snap = s->snapshot_send ? s->bytes[SL_BUF_SEND] : 0, gate = 0, scratch = s->bytes[SL_BUF_SCRATCH];
	const uint8_t *input = k->buf[SL_BUF_SEND];
	static uint8_t none; /* the scratch of a call that needs none: zero-length transfers point here */

	if (runs_on_input(e, k, snap)) {
		/* gate_wait, src_free and gate_held, after scratch (aligned for gate_wait) */
		scratch = (scratch + 7) & ~UINT64_C(7);
		gate = s->chunks_built * (sizeof(*k->gate_wait) + 2);
		snap = 0;
	}
	if (k->gdev && dp_async_alloc(k, s->bytes[SL_BUF_SCRATCH], snap, why) != 0)
		return -1;
	/* Scratch on the host, if any: most small calls need none (a gather's
	 * leaf), and taking a block of one byte each was 2-3% of a leaf's time
	 * (then a malloc). */
	if ((!k->gdev || k->gdev->device < 0) && !(scratch + snap + gate)) {
		k->buf[SL_BUF_SCRATCH] = &none;
	} else if (!k->gdev || k->gdev->device < 0) {
		k->owned_len = scratch + snap + gate;
		if (!(k->owned = owned_get(e, k->owned_len)))
			return -1;
		k->buf[SL_BUF_SCRATCH] = k->owned;
		if (snap)
			k->buf[SL_BUF_SEND] = k->owned + s->bytes[SL_BUF_SCRATCH];
		if (gate) {
			k->gate_wait = memset(k->owned + scratch, 0, gate);
			k->src_free = (uint8_t *)(k->gate_wait + s->chunks_built);
			k->gate_held = k->src_free + s->chunks_built;
		}
	}
	if (snap) { /* copied by issue_sends, or gated, by the reducer */
		k->snap_src = input;
		k->snap_piece = k->snap_off = 0;
		k->snapping = true;
	}
	return 0;
}

bool dp_snap_next(struct dp_coll *k, uint64_t most, const uint8_t **src, uint8_t **dst, uint64_t *len)
{
	uint64_t n, plen, stride, skip;

	sl_sched_snapshot(&k->sched, &n, &plen, &stride, &skip);
	for (; k->snap_piece < n && (k->snap_piece == skip || k->snap_off == plen); k->snap_off = 0)
		k->snap_piece++;
	if (k->snap_piece == n)
		return false;
	*src = k->snap_src + k->snap_piece * stride + k->snap_off;
	*dst = k->buf[SL_BUF_SEND] + k->snap_piece * plen + k->snap_off;
	*len = plen - k->snap_off < most ? plen - k->snap_off : most;
	return true;
}

/* Copy up to e->local_per_pass more of k's in-place input (host buffers):
 * the bytes copied.  Whole at post, a 4 GiB in-place all-to-all's copy
 * held the engine for seconds, as an own block did (DP_LOCAL_PER_PASS). */
static uint64_t snap_copy(struct dp_engine *e, struct dp_coll *k)
{
	const uint8_t *src;
	uint8_t *dst;
	uint64_t len, copied = 0;
	bool more = true;

	while (copied < e->local_per_pass && (more = dp_snap_next(k, e->local_per_pass - copied, &src, &dst, &len))) {
		memcpy(dst, src, len);
		k->snap_off += len;
		copied += len;
	}
	if (copied) /* progress, for the call's timeout */
		k->last_progress_ns = sl_tp_poll_ns(e->tp);
	/* asked again only when the budget ended the copy: a small call's one
	 * piece was looked up three times (perf/ALGORITHMS.md small31) */
	k->snapping = more && dp_snap_next(k, 1, &src, &dst, &len);
	return copied;
}

/* A zeroed message table of nmsgs (at least one), reusing the kept one. */
static int msgs_fit(struct dp_engine *e, struct dp_coll *k)
{
	uint32_t n = k->nmsgs ? k->nmsgs : 1;

	if (n > k->msgs_cap) {
		struct sl_tp_msg *m = dp_pool_get(&e->pool, n * sizeof(*m));
		if (!m)
			return -1;
		dp_pool_put(&e->pool, k->msgs);
		k->msgs = m;
		k->msgs_cap = (uint32_t)(dp_pool_cap(m) / sizeof(*m));
	}
	memset(k->msgs, 0, n * sizeof(*k->msgs));
	return 0;
}

/* A collective of comm that holds plan's schedule, to copy rather than
 * build it: one of the newest DP_LIKE_WALK running or lingering ones.  A
 * leaf far ahead keeps no finished collective of its own plan (they all
 * linger), and 3-rank gather leaves built 55-88% of their schedules anew;
 * one that alternates plans (a gather, then a reduce) finds its plan one
 * or two back, and looking at the newest alone it built every one. */
static const struct dp_coll *coll_like(const struct dp_comm *comm, const struct sl_sched_plan *plan)
{
	for (int l = 0; l < 2; l++) {
		const struct dp_coll *k = l ? comm->linger_tail : comm->colls_tail;
		for (unsigned i = 0; k && i < DP_LIKE_WALK; i++, k = k->prev)
			if (sl_sched_holds(&k->sched, plan))
				return k;
	}
	return NULL;
}

/* A new collective for cmd on the buffers at (check_cmd's; all-to-allv's
 * counts in e->vmeta), or NULL with *why set (perhaps to buf, SL_ERRMSG_LEN
 * bytes). */
static struct dp_coll *coll_new(struct dp_engine *e, struct dp_comm *comm, const struct sl_cmd *cmd,
				struct dp_client *c, const uint64_t bytes[2], uint8_t *const at[2],
				const char **why, char *buf)
{
	struct dp_coll *k;
	const struct dp_coll *like;
	struct dp_gdev *gdev;
	uint8_t *send = at[SL_BUF_SEND], *recv = at[SL_BUF_RECV];
	int gpu;
	bool holds;
	struct sl_sched_plan plan = {
		.coll = (enum sl_coll)cmd->opcode, .algo = (enum sl_algo)cmd->algo,
		.nranks = comm->nranks, .rank = comm->rank, .root = cmd->root, .count = cmd->count,
		.esize = (uint32_t)sl_dtype_size(cmd->dtype), .payload = e->payload,
		.chunk_bytes = sl_chunk_used(cmd->chunk_bytes, e->payload), .stride = cmd->block_stride,
		.send_bytes = bytes[0], .recv_bytes = bytes[1],
	};

	if ((*why = buffers_gpu(c, cmd, bytes, &gpu, buf)) || dp_gdev_for(e, gpu, &gdev, buf) != 0) {
		errno = *why ? EFAULT : ENODEV;
		*why = buf;
		return NULL;
	}
	plan.gated = gdev != NULL;
	if (cmd->opcode == SL_OP_ALLTOALLV) { /* the schedule copies them */
		plan.send_count = e->vmeta + SL_VMETA_SEND_COUNT * comm->nranks;
		plan.send_displ = e->vmeta + SL_VMETA_SEND_DISPL * comm->nranks;
		plan.recv_count = e->vmeta + SL_VMETA_RECV_COUNT * comm->nranks;
		plan.recv_displ = e->vmeta + SL_VMETA_RECV_DISPL * comm->nranks;
	}
	plan.in_place = overlap(send, bytes[0], recv, bytes[1]);
	*why = "the dataplane is out of memory for collectives";
	if (!(k = coll_get(e, &plan, &holds))) {
		return NULL;
	}
	k->comm = comm;
	k->cmd = *cmd;
	k->gdev = gdev;
	k->buf[SL_BUF_SEND] = send;
	k->buf[SL_BUF_RECV] = recv;
	k->posted_ns = k->last_progress_ns = sl_tp_poll_ns(e->tp); /* the pass's clock: a read costs 50-100 ns here */
	like = holds ? NULL : coll_like(comm, &plan);
	if (holds)
		sl_sched_rewind(&k->sched);
	else if ((like ? sl_sched_reinit_from(&k->sched, &like->sched) : sl_sched_reinit(&k->sched, &plan)) != 0) {
		if (errno != ENOMEM)
			*why = sl_sched_plan_check(&plan) ? sl_sched_plan_check(&plan)
							  : "the schedule does not fit the buffers (a bug in sluice's "
							    "coll/, please report it)";
		coll_drop(e, k);
		return NULL;
	}
	if (like) {
		k->to_one = like->to_one;
	} else if (!k->sched.reused) { /* built for this plan: else kept with the schedule */
		k->to_one = sends_to_one(k);
		e->count.sched_built++;
	}
	k->nmsgs = k->sched.ready_cap;
	if (msgs_fit(e, k) != 0) {
		coll_free(e, k);
		return NULL;
	}
	if (alloc_owned(e, k, buf) < 0) {
		if (k->gdev)
			*why = buf;
		coll_free(e, k);
		return NULL;
	}
	return k;
}

/* The sequence number that pairs this call with its peers'. */
static uint32_t next_seq(struct dp_comm *comm, const struct sl_cmd *cmd)
{
	if (cmd->opcode == SL_OP_SEND)
		return comm->p2p_send_seq[cmd->root]++;
	if (cmd->opcode == SL_OP_RECV)
		return comm->p2p_recv_seq[cmd->root]++;
	return comm->next_seq++;
}

/* Another channel's timeout fails comm: the first of this channel's calls
 * that waits in a cycle its notes show names it instead (true), before its
 * own timeout, since comm fails either way.  The slice that timed out there
 * may have seen no cycle (its peer ran the call on this channel alone);
 * before, it waited up to an eighth of the timeout for this channel's name,
 * and lost to an engine the load held longer.  A cycle that closes on
 * another communicator is named here, and there at that one's timeout. */
static bool name_own_cycle(struct dp_engine *e, struct dp_comm *comm)
{
	char waiting[64], why[SL_ERRMSG_LEN];
	struct dp_comm *also;

	for (struct dp_coll *k = comm->colls; k; k = k->next) {
		int peer = dp_coll_waited_rank(k, waiting, sizeof(waiting));
		if (k->status == SLUICE_OK && dp_cycle_named(e, k, peer, why, sizeof(why), &also)) {
			comm_fail(e, comm, SLUICE_ERR_MISMATCH, k->seq, true, "%s", why);
			return true;
		}
	}
	return false;
}

/* Another channel failed this communicator: so does this one (and tells
 * its peers), noting where the failure came from.  A failure marked
 * relayed says so already: a peer's channel heard it from the peer's
 * other channel, and told ours.  Once is enough (twice cut it_mismatch's
 * check, when that relay came first). */
static void check_channels(struct dp_engine *e, struct dp_comm *comm)
{
	const struct dp_channels_failed *cf = comm->channels_failed;
	int32_t status;

	if (comm->failed != SLUICE_OK || !cf || (status = atomic_load_explicit(&cf->status, memory_order_acquire)) == 0)
		return;
	if (status == SLUICE_ERR_TIMEOUT && name_own_cycle(e, comm))
		return;
	/* its reason first: a message cut to SL_ERRMSG_LEN keeps the cause */
	dp_comm_fail_relayed(e, comm, status,
			     comm->colls ? comm->colls->seq : comm->linger ? comm->linger->seq : comm->next_seq, true,
			     true, "%s%s", cf->why, cf->relayed ? "" : OTHER_CHANNEL);
}

/* A call of DP_EAGER_MAX bytes or less, its buffers together. */
static bool small_call(const struct dp_coll *k)
{
	return k->sched.bytes[SL_BUF_SEND] + k->sched.bytes[SL_BUF_RECV] <= DP_EAGER_MAX;
}

/* Whether k's local transfers may be applied as it is posted, before the
 * pass's transport poll.  A reduction's own contribution: the replayed
 * packets wait for it (dp_coll_post).  A small call's copies: shorter than
 * a poll, and left to the pass's walk they made 60-byte 3-rank all-gathers
 * and all-to-alls 3-8% slower (perf/ALGORITHMS.md local30).  Any other
 * call's copy (an own block) waits for the walk, after the poll has put the
 * first sends on the wire, instead of holding them back by a budget's copy. */
static bool locals_at_post(const struct dp_coll *k)
{
	return sl_coll_reduces(k->cmd.opcode) || small_call(k);
}

void dp_coll_post(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *given)
{
	struct dp_comm *comm = NULL;
	struct dp_coll *k;
	uint64_t bytes[2] = { 0, 0 };
	uint8_t *at[2];
	char buf[SL_ERRMSG_LEN];
	struct sl_cmd resolved = *given, *cmd = &resolved;
	const char *bad;

	if (cmd->algo == 0) /* the descriptor leaves the choice to the dataplane */
		cmd->algo = sl_algo_supported((enum sl_coll)cmd->opcode, SL_ALGO_RING) ? SL_ALGO_ID_RING
											 : SL_ALGO_ID_DIRECT;
	bad = check_cmd(e, c, cmd, &comm, bytes, at, buf);
	if (!bad) /* a call split on a peer, and not here, may have failed only on another channel */
		check_channels(e, comm);
	if (bad || comm->failed != SLUICE_OK) {
		if (bad) {
			reject(e, c, cmd, SLUICE_ERR_INVALID_ARGUMENT, bad);
		} else {
			reject(e, c, cmd, comm->failed, comm->why);
			note_failure_told(comm);
		}
		return;
	}
	k = coll_new(e, comm, cmd, c, bytes, at, &bad, buf);
	if (!k) {
		reject(e, c, cmd, errno == ENOMEM ? SLUICE_ERR_NO_MEMORY : errno == EFAULT ? SLUICE_ERR_INVALID_ARGUMENT
				  : errno == ENODEV ? SLUICE_ERR_SYSTEM : SLUICE_ERR_INTERNAL, bad);
		return;
	}
	k->seq = next_seq(comm, cmd);
	e->count.colls_posted++;
	e->running++;
	e->gated += k->gdev != NULL;
	list_push(&comm->colls, &comm->colls_tail, k);
	/* Sends first: among them the own contribution (a local transfer),
	 * which the rank-order reduction applies before later ranks' blocks
	 * (on rank 0, before all).  Replayed first, their early packets were
	 * refused and copied a second time to wait for it: every packet of a
	 * 2-rank reduce whose leaf ran ahead of the root.  Other local
	 * copies may wait (locals_at_post). */
	bool locals = locals_at_post(k);
	issue_sends(e, k, locals);
	/* and what the replayed blocks made ready (a tree's forward): the
	 * pass's transport poll, next, puts them on the wire (engine.c) */
	if (replay_stash(e, k))
		issue_sends(e, k, locals);
	dp_stash_posted(e, k);
}

/* ---- progress ---- */

/* Hand k's messages to the transport in order, each once its source is
 * ready (gated: once its staging copy has landed). */
static void send_ready(struct dp_engine *e, struct dp_coll *k)
{
	while (k->msgs_sent < k->msgs_used && k->status == SLUICE_OK) {
		struct sl_tp_msg *m = &k->msgs[k->msgs_sent];
		if (k->gdev && !dp_async_landed(e, k, m))
			return;
		k->msgs_sent++;
		if (sl_tp_send(e->tp, m) != 0) {
			comm_fail(e, k->comm, SLUICE_ERR_TIMEOUT, k->seq, true,
				  "rank %d (dataplane node %u) cannot be reached: its flow is dead",
				  rank_of_node(k->comm, m->dst_node), m->dst_node);
			return;
		}
		k->msgs_unacked++;
	}
}

/* Whether k will not wait for its sends' ACKs: a small call lingers once
 * they are with the transport (may_linger), so its receivers may delay them
 * (delayed ACKs, transport.h).  Any other call (and one that sends_acked)
 * waits for the last packet's ACK, which then goes at once. */
static bool acks_may_wait(const struct dp_engine *e, const struct dp_coll *k)
{
	return !k->gdev && small_call(k) && !sends_acked(e, k);
}

/* The bytes of k's local transfers a pass may apply.  While a copying
 * call's sends are with the transport, a slice: the transport puts
 * TP_FLOW_BURST packets a flow on the wire a poll, and a 2-rank broadcast
 * root copied its whole own block between its first and second bursts
 * while the leaf, its first burst landed, waited (perf/ALGORITHMS.md,
 * big32).  A reduction's own contribution is not sliced: receptions wait
 * for it in the reduction order. */
static uint64_t local_budget(const struct dp_engine *e, const struct dp_coll *k)
{
	bool sending = k->msgs_unacked || k->msgs_sent < k->msgs_used;

	return sending && !sl_coll_reduces(k->cmd.opcode) && DP_LOCAL_BESIDE_SENDS < e->local_per_pass
		       ? DP_LOCAL_BESIDE_SENDS : e->local_per_pass;
}

/* Copies more of k's in-place input (host) or, once it is copied, hands k's
 * ready sends to the transport and, with locals, applies its local ones, up
 * to e->local_per_pass bytes of both (dp.h DP_LOCAL_PER_PASS; of the local
 * ones, local_budget's); without, the first local one stops it.  Returns
 * the local chunks (or pieces of one) applied, plus one for a piece of the
 * copy (work). */
static uint32_t issue_sends(struct dp_engine *e, struct dp_coll *k, bool locals)
{
	struct dp_comm *comm = k->comm;
	uint64_t local = 0, budget = local_budget(e, k);
	uint32_t applied = 0;

	if (k->snapping && !k->gdev) {
		applied = (local = snap_copy(e, k)) > 0; /* out of the pass's budget for local work */
		k->deferred_due = !k->snapping;
	}
	if (k->snapping)
		return applied; /* our sends read the input's copy */
	/* Packets that came while it copied, or that acknowledgements let land
	 * (src_free), a budget's worth a pass: a peer may have sent most of its
	 * data meanwhile. */
	if (k->deferred_due && local < e->local_per_pass) {
		uint64_t retried = retry_deferred_upto(e, k, e->local_per_pass - local);
		local += retried;
		k->deferred_due = local >= e->local_per_pass && k->deferred;
		applied += retried > 0;
	}
	while (k->status == SLUICE_OK) {
		const struct sl_send *s = &k->held;
		if (!k->holding && !sl_sched_next_send(&k->sched, &k->held))
			break;
		k->holding = true; /* until it is taken: the reducer or the stager may be full */
		if (s->peer == comm->rank) {
			uint64_t done;
			if (!locals || local >= budget || !apply_local(e, k, s, budget - local, &done))
				break;
			local += done;
			applied++;
			if (done < s->len) { /* the rest on a later pass */
				k->held.off += done;
				k->held.xoff += done;
				k->held.len -= done;
				break;
			}
			k->holding = false;
			continue;
		}
		struct sl_tp_msg *m = &k->msgs[k->msgs_used];
		m->dst_node = comm->node[s->peer];
		m->hdr = (struct sl_hdr){
			.type = SL_T_DATA, .comm = comm->key32, .seq = k->seq, .step = (uint16_t)s->step,
			.kind = wire_kind(&k->cmd), .dtype_op = dtype_op(&k->cmd), .count = wire_count(k, s->peer, true),
			.offset = s->xoff, .len = (uint32_t)s->len,
		};
		m->src = k->buf[s->buf] + s->off;
		m->owner = k;
		m->ack_late = acks_may_wait(e, k);
		/* a park may hold it (coll_stash.c stash_park) */
		m->order = k->cmd.opcode == SL_OP_SEND ? SL_TP_SENDS : dp_is_p2p(k->cmd.opcode) ? SL_TP_UNORDERED
											  : SL_TP_CALLS;
		if (k->gdev && !dp_async_send(e, k, m, m->src, s->len))
			break;
		k->msgs_used++;
		k->holding = false;
	}
	send_ready(e, k);
	return applied;
}

/* Finish comm's lingering calls that are marked ready; on a timer pass
 * once the oldest progress among them is a timeout old, check every one's
 * timeout and take the oldest progress again.  Not the oldest call alone:
 * a call of several messages (a broadcast root's) is acknowledged
 * piecemeal, each ACK moving its own deadline, and one stuck behind it
 * was checked only once that call ended (up to a timeout late per ACK;
 * 0.8 of one in the test).  Nor every call
 * each pass: a walk of a leaf's DP_LINGER_ONE_MAX every millisecond was 7%
 * of its samples; this walk comes about once a timeout.  test_engine
 * lingering_calls_behind_the_oldest_*, a_call_acknowledged_piecemeal_*. */
static uint32_t linger_progress(struct dp_engine *e, struct dp_comm *comm, uint64_t now, bool timers)
{
	uint32_t work = 0;
	bool check = timers && now >= comm->linger_since_ns && now - comm->linger_since_ns >= dp_comm_timeout(e, comm);
	uint64_t since = UINT64_MAX;

	for (struct dp_coll *k = comm->linger, *next; k && (check || comm->linger_ready); k = next) {
		next = k->next;
		if (check)
			dp_coll_check_timeout(e, k, now);
		if (k->linger_ready)
			work += coll_finish(e, k);
		else if (k->last_progress_ns < since)
			since = k->last_progress_ns;
	}
	if (check)
		comm->linger_since_ns = since;
	return work;
}

/* Tell k's client that its calls still move: its wait times out from this,
 * as dp_coll_check_timeout does from last_progress_ns, so the dataplane's reason for
 * a call that stops after making progress reaches the client before the
 * client's own timeout (abi.h, sl_channel_bell). */
static void publish_progress(const struct dp_coll *k)
{
	struct dp_client *c = k->comm->client;

	if (c && c->bell && k->last_progress_ns > atomic_load_explicit(&c->bell->progress_ns, memory_order_relaxed))
		atomic_store_explicit(&c->bell->progress_ns, k->last_progress_ns, memory_order_relaxed);
}

uint32_t dp_colls_progress(struct dp_engine *e)
{
	uint32_t work = 0;
	uint64_t now = 0;
	bool timers = false;

	/* Every posted collective is on one of its communicator's lists: stop
	 * after the last of them rather than test all 64 communicators (a cache
	 * miss each, 6% of a pass's time during a 1 MiB all-reduce). */
	uint32_t left = e->running;

	for (unsigned i = 0; i < DP_MAX_COMMS && left; i++) {
		struct dp_comm *comm = &e->comms[i];
		struct dp_coll *k, *next;
		if (!comm->live || (!comm->colls && !comm->linger))
			continue;
		if (!now) {
			now = sl_tp_poll_ns(e->tp);
			timers = now >= e->next_timer_ns;
		}
		if (timers)
			check_channels(e, comm);
		left -= comm->nlinger;
		for (k = comm->colls; k; k = next) {
			next = k->next;
			left--;
			if (k->gdev && dp_async_reap(e, k))
				retry_deferred(e, k);
			if (timers && k->sched.lazy && !sl_sched_recv_done(&k->sched) &&
			    now >= k->posted_ns + LAZY_CHECK_NS)
				sl_sched_release_lazy(&k->sched);
			work += issue_sends(e, k, true);
			if (timers) {
				dp_stash_starves(e, k, now);
				dp_note_stall(e, k, now);
				dp_coll_check_timeout(e, k, now);
				publish_progress(k);
			}
			/* issue_sends drained the ready sends: received all and acked all is done */
			if (k->status != SLUICE_OK || (sl_sched_recv_done(&k->sched) && k->msgs_unacked == 0 &&
							 k->msgs_sent == k->msgs_used && !k->holding))
				work += coll_finish(e, k);
			else if (may_linger(e, k, now))
				work += coll_linger(e, k);
		}
		if (timers || comm->linger_ready)
			work += linger_progress(e, comm, now, timers);
	}
	if (e->closing && !now) {
		now = sl_tp_poll_ns(e->tp);
		timers = now >= e->next_timer_ns;
	}
	if (timers) {
		dp_comm_close_timers(e, now);
		e->next_timer_ns = now + TIMER_NS;
	}
	return work;
}

void dp_comm_release(struct dp_engine *e, struct dp_comm *comm)
{
	for (int l = 0; l < 2; l++) {
		struct dp_coll *k = l ? comm->linger : comm->colls;
		while (k) {
			struct dp_coll *next = k->next;
			e->lingering -= k->lingering;
			e->gated -= k->gdev != NULL;
			coll_free(e, k);
			e->running--;
			k = next;
		}
	}
	dp_stash_close(e, comm);
	if (!comm->closing_sent) /* its client left, or the engine stops: the peers need not wait */
		dp_send_notices(e, comm, comm->next_seq, NOTICE_CLOSING);
	e->closing -= comm->close_waiting;
	if (comm->close_done) /* released otherwise (its client left, the engine stops): destroyed */
		dp_ctl_answer(comm->close_done, 0);
	memset(comm, 0, sizeof(*comm));
}
