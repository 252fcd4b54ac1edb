/*
 * schedule.c: the transfer schedule of schedule.h as a state machine.
 *
 * sl_sched_init asks the algorithm's builder for this rank's transfers,
 * checks each against the buffers, sorts the receptions for lookup by
 * (peer, step), links each reception to the sends that wait on it, and
 * queues the chunks of sends that wait on nothing.  sl_sched_on_packet then
 * checks every packet (known transfer, exact packet boundary and length,
 * not seen before, predecessor chunk complete) and releases dependent
 * sends chunk by chunk.
 */
#include "schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Chunks of a transfer of len bytes; an empty one still has one (empty)
 * chunk, so that every transfer sends at least one packet: the receiver
 * learns the step happened, and checks the call it belongs to. */
static uint32_t chunks_of(const struct sl_sched_plan *p, uint64_t len)
{
	return len == 0 ? 1 : (uint32_t)((len + p->chunk_bytes - 1) / p->chunk_bytes);
}

static uint64_t chunk_len(const struct sl_sched_plan *p, const struct sl_xfer *x, uint32_t c)
{
	return x->len == 0 ? 0 : min_u64(p->chunk_bytes, x->len - (uint64_t)c * p->chunk_bytes);
}

/* Bit k set for each of a chunk's packets. */
static uint64_t full_mask(const struct sl_sched_plan *p, uint64_t clen)
{
	uint64_t npkts = clen == 0 ? 1 : (clen + p->payload - 1) / p->payload;

	return npkts == 64 ? UINT64_MAX : (UINT64_C(1) << npkts) - 1;
}

/* ---- names and support ---- */

const char *sl_coll_name(enum sl_coll c)
{
	static const char *const names[SL_COLL_COUNT] = {
		[SL_COLL_ALLREDUCE] = "allreduce", [SL_COLL_ALLGATHER] = "allgather",
		[SL_COLL_REDUCE_SCATTER] = "reduce_scatter", [SL_COLL_BROADCAST] = "broadcast",
		[SL_COLL_REDUCE] = "reduce", [SL_COLL_ALLTOALL] = "alltoall", [SL_COLL_BARRIER] = "barrier",
		[SL_COLL_SEND] = "send", [SL_COLL_RECV] = "recv", [SL_COLL_GATHER] = "gather",
		[SL_COLL_SCATTER] = "scatter", [SL_COLL_ALLTOALLV] = "alltoallv",
	};

	return (unsigned)c < SL_COLL_COUNT && names[c] ? names[c] : "unknown collective";
}

const char *sl_algo_name(enum sl_algo a)
{
	static const char *const names[SL_ALGO_COUNT] = {
		[SL_ALGO_RING] = "ring", [SL_ALGO_DIRECT] = "direct", [SL_ALGO_RD] = "rd",
		[SL_ALGO_RHD] = "rhd", [SL_ALGO_TREE] = "tree", [SL_ALGO_PAIRWISE] = "pairwise",
	};

	return (unsigned)a < SL_ALGO_COUNT && names[a] ? names[a] : "unknown algorithm";
}

bool sl_coll_reduces(enum sl_coll c)
{
	return c == SL_COLL_ALLREDUCE || c == SL_COLL_REDUCE_SCATTER || c == SL_COLL_REDUCE;
}

/* Direct serves every collective; each other algorithm, the collectives
 * its pattern fits (the planner in ctl/plan.c knows the same table). */
bool sl_algo_supported(enum sl_coll c, enum sl_algo a)
{
	if ((unsigned)c == 0 || (unsigned)c >= SL_COLL_COUNT)
		return false;
	switch (a) {
	case SL_ALGO_DIRECT: return true;
	case SL_ALGO_RING:
		return c == SL_COLL_ALLREDUCE || c == SL_COLL_ALLGATHER || c == SL_COLL_REDUCE_SCATTER ||
		       c == SL_COLL_BROADCAST || c == SL_COLL_REDUCE;
	case SL_ALGO_RD: return c == SL_COLL_ALLREDUCE;
	case SL_ALGO_RHD: return c == SL_COLL_ALLREDUCE || c == SL_COLL_REDUCE_SCATTER || c == SL_COLL_ALLGATHER;
	case SL_ALGO_TREE: return c == SL_COLL_BROADCAST || c == SL_COLL_REDUCE;
	case SL_ALGO_PAIRWISE: return c == SL_COLL_ALLTOALL;
	default: return false;
	}
}

const char *sl_sched_plan_check(const struct sl_sched_plan *p)
{
	if (!sl_algo_supported(p->coll, p->algo))
		return "the algorithm does not implement this collective";
	if (p->nranks == 0 || p->nranks > 65536)
		return "nranks is not in 1..65536";
	if (p->algo == SL_ALGO_RHD && p->nranks > 32767)
		return "recursive halving/doubling names its transfers in 16 bits: at most 32767 ranks";
	if (p->algo == SL_ALGO_RHD && p->coll != SL_COLL_ALLREDUCE && (p->nranks & (p->nranks - 1)))
		return "recursive halving/doubling runs reduce-scatter and all-gather only on a power-of-two "
		       "number of ranks";
	if (p->rank >= p->nranks)
		return "rank is not below nranks";
	if (p->root >= p->nranks)
		return "root (or peer) is not below nranks";
	if (p->esize == 0)
		return "element size is 0";
	if (p->payload == 0 || p->payload % 16 != 0 || p->payload % p->esize != 0)
		return "payload is not a positive multiple of 16 bytes and of the element size";
	if (p->chunk_bytes == 0 || p->chunk_bytes % p->payload != 0)
		return "chunk_bytes is not a positive multiple of payload";
	if (p->chunk_bytes > 64 * (uint64_t)p->payload)
		return "chunk_bytes exceeds 64 packets (one 64-bit arrival mask per chunk)";
	if (p->count > UINT64_MAX / p->esize / p->nranks)
		return "count * element size * nranks overflows 64 bits";
	if (p->stride && p->stride < p->count * p->esize)
		return "the block stride is smaller than a block: blocks would overlap";
	if (p->coll == SL_COLL_ALLTOALLV && (!p->send_count || !p->send_displ || !p->recv_count || !p->recv_displ))
		return "all-to-allv without its per-rank counts and displacements";
	return NULL;
}

/* ---- building ---- */

int32_t sl_sched_add(struct sl_sched *s, const struct sl_xfer *x)
{
	if (s->nx == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 8;
		struct sl_xfer *nx = realloc(s->x, cap * sizeof(*nx));
		if (!nx) {
			errno = ENOMEM;
			return -1;
		}
		s->x = nx;
		s->cap = cap;
	}
	s->x[s->nx] = *x;
	return (int32_t)s->nx++;
}

int sl_sched_local_copy(struct sl_sched *s, uint64_t src, uint64_t dst, uint64_t len)
{
	struct sl_xfer tx = { .peer = s->p.rank, .is_send = true, .buf = SL_BUF_SEND, .off = src, .len = len,
			      .after = -1 };
	struct sl_xfer rx = { .peer = s->p.rank, .buf = SL_BUF_RECV, .off = dst, .len = len, .after = -1 };

	return sl_sched_add(s, &tx) < 0 || sl_sched_add(s, &rx) < 0 ? -1 : 0;
}

uint64_t sl_sched_block(const struct sl_sched *s, uint8_t buf, uint64_t blk)
{
	uint64_t b = s->p.count * s->p.esize;
	bool packed = !s->p.stride || buf == SL_BUF_SCRATCH || (buf == SL_BUF_SEND && s->snapshot_send);

	return blk * (packed ? b : s->p.stride);
}

bool sl_sched_own_in_place(const struct sl_sched_plan *p)
{
	return p->in_place && p->coll == SL_COLL_ALLTOALL;
}

void sl_sched_snapshot(const struct sl_sched *s, uint64_t *n, uint64_t *len, uint64_t *stride, uint64_t *skip)
{
	const struct sl_sched_plan *p = &s->p;
	bool blocks = p->coll == SL_COLL_REDUCE_SCATTER || p->coll == SL_COLL_ALLTOALL ||
		      (p->coll == SL_COLL_SCATTER && p->rank == p->root);
	bool own = sl_sched_own_in_place(p);

	if ((p->stride && blocks) || own) {
		*n = p->nranks;
		*len = p->count * p->esize;
		*stride = p->stride ? p->stride : *len;
	} else {
		*n = 1;
		*len = p->send_bytes;
		*stride = 0;
	}
	*skip = own ? p->rank : *n;
}

void sl_segment(const struct sl_sched_plan *p, uint32_t parts, uint32_t k, uint64_t *off, uint64_t *len)
{
	uint64_t base = p->count / parts, extra = p->count % parts;

	*off = (k * base + (k < extra ? k : extra)) * p->esize;
	*len = (base + (k < extra)) * p->esize;
}

static bool in_buf(const struct sl_sched *s, uint8_t buf, uint64_t off, uint64_t len)
{
	return buf < SL_NBUFS && off <= s->bytes[buf] && len <= s->bytes[buf] - off;
}

/* A builder's transfer is inside its buffers and its dependency is sound. */
static bool xfer_ok(const struct sl_sched *s, const struct sl_xfer *x)
{
	const struct sl_xfer *a = x->after >= 0 && (uint32_t)x->after < s->nx ? &s->x[x->after] : NULL;

	if (x->peer >= s->p.nranks || x->step > UINT16_MAX || !in_buf(s, x->buf, x->off, x->len))
		return false;
	if (!x->is_send && x->apply == SL_APPLY_REDUCE && !in_buf(s, x->opnd_buf, x->opnd_off, x->len))
		return false;
	if (x->after >= 0 && (!a || a->is_send || a->len != x->len))
		return false;
	return true;
}

static int cmp_recv(const struct sl_sched *s, uint32_t a, uint32_t b)
{
	const struct sl_xfer *x = &s->x[a], *y = &s->x[b];

	if (x->peer != y->peer)
		return x->peer < y->peer ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

/* Insertion sort: a rank has a few transfers per peer, and this runs once. */
static bool sort_recvs(struct sl_sched *s)
{
	for (uint32_t i = 1; i < s->nrecv; i++) {
		uint32_t v = s->recvs[i], j = i;
		for (; j > 0 && cmp_recv(s, s->recvs[j - 1], v) > 0; j--)
			s->recvs[j] = s->recvs[j - 1];
		s->recvs[j] = v;
	}
	for (uint32_t i = 1; i < s->nrecv; i++)
		if (cmp_recv(s, s->recvs[i - 1], s->recvs[i]) == 0)
			return false; /* two receptions with one name */
	return true;
}

static void push_chunk(struct sl_sched *s, const struct sl_xfer *x, uint32_t c)
{
	uint64_t xoff = (uint64_t)c * s->p.chunk_bytes;

	/* ready_cap counts every send chunk once: never exceeded */
	s->ready[s->ready_tail++] = (struct sl_send){
		.peer = x->peer, .step = x->step, .buf = x->buf, .off = x->off + xoff,
		.len = chunk_len(&s->p, x, c), .xoff = xoff,
	};
}

/* The four tables in one zeroed block, reused from the previous schedule
 * when it is big enough (sl_sched_reinit): one allocation at most per call.
 * Largest alignment first. */
static int carve_tables(struct sl_sched *s, uint64_t masks, uint64_t sends)
{
	uint64_t need = masks * sizeof(*s->arrived) + sends * sizeof(*s->ready) +
			(s->nrecv + 1ull) * sizeof(*s->recvs) + masks * sizeof(*s->applied);

	if (need > s->tab_bytes) {
		void *t = malloc(need);
		if (!t) {
			errno = ENOMEM;
			return -1;
		}
		free(s->tab);
		s->tab = t;
		s->tab_bytes = need;
	}
	memset(s->tab, 0, need);
	s->arrived = s->tab;
	s->ready = (struct sl_send *)(s->arrived + masks);
	s->recvs = (uint32_t *)(s->ready + sends);
	s->applied = (uint8_t *)(s->recvs + s->nrecv + 1);
	return 0;
}

/* Number chunks, link dependencies, size and fill the tables. */
static int index_xfers(struct sl_sched *s)
{
	uint64_t masks = 0, sends = 0;

	for (uint32_t i = 0; i < s->nx; i++) {
		struct sl_xfer *x = &s->x[i];
		if (!xfer_ok(s, x)) {
			errno = EINVAL;
			return -1;
		}
		x->nchunks = chunks_of(&s->p, x->len);
		x->first_dep = x->next_dep = x->gate_send = -1;
		if (x->is_send) {
			sends += x->nchunks;
		} else {
			x->chunk0 = (uint32_t)masks;
			masks += x->nchunks;
			s->nrecv++;
		}
	}
	if (masks > UINT32_MAX || sends > UINT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	s->chunks_left = (uint32_t)masks;
	s->ready_cap = (uint32_t)sends;
	return carve_tables(s, masks + 1, sends + 1);
}

/* Whether x is a send that is ready at once (waits on nothing, not lazy). */
static bool ready_at_start(const struct sl_xfer *x)
{
	return x->is_send && x->after < 0 && !x->lazy;
}

/* Index the receptions, link each send to the one it waits for, and queue
 * the sends ready at once: to peers first, then to the rank itself.  A
 * local transfer (an own block) is a copy the engine makes in the pass
 * (DP_LOCAL_PER_PASS a pass): ahead of the network sends it held them back
 * by the whole copy (6-25 ms at 64 MiB blocks, perf/ALGORITHMS.md local30),
 * behind them it runs while they are on the wire.  Nothing waits on it
 * to leave: a reduction's own contribution that others wait for waits on
 * a reception itself, or is the first in the order, which its receptions
 * defer for (any order of this queue is sound). */
static void link_and_queue(struct sl_sched *s)
{
	uint32_t nr = 0;

	for (uint32_t i = 0; i < s->nx; i++) {
		struct sl_xfer *x = &s->x[i];
		if (!x->is_send) {
			s->recvs[nr++] = i;
		} else if (x->after >= 0) {
			x->next_dep = s->x[x->after].first_dep;
			s->x[x->after].first_dep = (int32_t)i;
		} else if (x->lazy) {
			s->lazy++;
		}
	}
	for (int local = 0; local < 2; local++)
		for (uint32_t i = 0; i < s->nx; i++)
			if (ready_at_start(&s->x[i]) && (s->x[i].peer == s->p.rank) == local)
				for (uint32_t c = 0; c < s->x[i].nchunks; c++)
					push_chunk(s, &s->x[i], c);
}

/*
 * In a rooted collective a rank that waits for data it was told would come
 * may wait for a rank that called something else.  Every data packet
 * carries its sender's call, and its receiver compares it with its own
 * (the engine's abort notices report a difference to every rank), also
 * when its own call is over (the engine keeps the last calls for that).
 * So a rank owes a call check only to the peers it receives from and sends
 * nothing to, in case such a peer, calling something else, never sends: the
 * check is lazy, sent only when the data is late (sl_sched_release_lazy).
 * That is enough: ranks that agree on the call agree on every data edge,
 * and each rank's edges in its own view reach every other rank through
 * ranks that hear from it, so any difference meets a comparison.  Checks
 * between ranks that exchange no data, which every pair of non-roots sent
 * each other (and waited for) on every call, cost 3 ranks on 2 cores a
 * packet, its ACK and often a wake-up each way per call (perf/ALGORITHMS.md).
 */
static int add_call_check(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	enum { DATA_TO = 1, DATA_FROM = 2 };
	uint8_t *data;

	if (p->coll != SL_COLL_BROADCAST && p->coll != SL_COLL_REDUCE && p->coll != SL_COLL_GATHER &&
	    p->coll != SL_COLL_SCATTER)
		return 0;
	if (!(data = calloc(p->nranks, 1))) {
		errno = ENOMEM;
		return -1;
	}
	for (uint32_t i = 0; i < s->nx; i++)
		data[s->x[i].peer] |= s->x[i].is_send ? DATA_TO : DATA_FROM;
	for (uint32_t q = 0; q < p->nranks; q++) {
		struct sl_xfer tx = { .peer = q, .step = SL_SCHED_CHECK_STEP, .is_send = true,
				      .lazy = true, .after = -1 };
		if (q != p->rank && data[q] == DATA_FROM && sl_sched_add(s, &tx) < 0) {
			free(data);
			return -1;
		}
	}
	free(data);
	return 0;
}

static int (*const builders[SL_ALGO_COUNT])(struct sl_sched *) = {
	[SL_ALGO_RING] = sl_build_ring, [SL_ALGO_DIRECT] = sl_build_direct, [SL_ALGO_RD] = sl_build_rd,
	[SL_ALGO_RHD] = sl_build_rhd, [SL_ALGO_TREE] = sl_build_tree, [SL_ALGO_PAIRWISE] = sl_build_pairwise,
};

/* All-to-allv's four count arrays of a and b (the same number of ranks) hold the same values. */
static bool same_counts(const struct sl_sched_plan *a, const struct sl_sched_plan *b)
{
	size_t n = a->nranks * sizeof(uint64_t);

	return a->coll != SL_COLL_ALLTOALLV ||
	       (!memcmp(a->send_count, b->send_count, n) && !memcmp(a->send_displ, b->send_displ, n) &&
		!memcmp(a->recv_count, b->recv_count, n) && !memcmp(a->recv_displ, b->recv_displ, n));
}

/*
 * Whether a and b build the same schedule: every field of the plan, since
 * the builders read them all, all-to-allv's counts by value (a schedule
 * keeps its own copy: keep_counts).  Rebuilding every all-to-allv was 4-5%
 * of a 2-rank 8 B loop's samples (perf/ALGORITHMS.md, a2av21).  Reusing a
 * schedule for a plan that differs runs the wrong call, so a field added
 * to the plan must be compared here; the assertion counts the plan's bytes
 * to say so.
 */
static bool same_plan(const struct sl_sched_plan *a, const struct sl_sched_plan *b)
{
	return a->coll == b->coll && a->algo == b->algo &&
	       a->nranks == b->nranks && a->rank == b->rank && a->root == b->root && a->count == b->count &&
	       a->esize == b->esize && a->payload == b->payload && a->chunk_bytes == b->chunk_bytes &&
	       a->stride == b->stride && a->send_bytes == b->send_bytes && a->recv_bytes == b->recv_bytes &&
	       a->in_place == b->in_place && a->gated == b->gated && same_counts(a, b);
}

/* Point s's plan at its own copy of all-to-allv's counts (from's: the
 * plan's own arrays), reusing the copy's memory when it fits.  0, or -1
 * with errno ENOMEM. */
static int keep_counts(struct sl_sched *s, const struct sl_sched_plan *from)
{
	uint32_t n = from->nranks;
	const uint64_t *src[4] = { from->send_count, from->send_displ, from->recv_count, from->recv_displ };

	if (s->p.coll != SL_COLL_ALLTOALLV)
		return 0;
	if (s->counts_cap < 4 * n) {
		uint64_t *c = realloc(s->counts, 4 * (size_t)n * sizeof(*c));
		if (!c) {
			errno = ENOMEM;
			return -1;
		}
		s->counts = c;
		s->counts_cap = 4 * n;
	}
	for (uint32_t a = 0; a < 4; a++)
		memcpy(s->counts + a * n, src[a], n * sizeof(*s->counts));
	s->p.send_count = s->counts;
	s->p.send_displ = s->counts + n;
	s->p.recv_count = s->counts + 2 * n;
	s->p.recv_displ = s->counts + 3 * n;
	return 0;
}
_Static_assert(sizeof(void *) != 8 || sizeof(struct sl_sched_plan) == 112,
	       "struct sl_sched_plan changed: compare the new field in same_plan");

/* Back to the state the build left.  The transfers, their links and the
 * sorted receptions are the plan's; arrivals, completions, checks and the
 * send queue are the run's.  Sends queued during a run go after
 * ready_built, so the first ones are still there. */
static void rewind_run(struct sl_sched *s)
{
	memset(s->arrived, 0, (s->chunks_built + 1ull) * sizeof(*s->arrived));
	memset(s->applied, 0, s->chunks_built + 1ull);
	s->chunks_left = s->chunks_built;
	s->lazy = s->lazy_built;
	s->ready_head = 0;
	s->ready_tail = s->ready_built;
}

bool sl_sched_holds(const struct sl_sched *s, const struct sl_sched_plan *p)
{
	return s->built && same_plan(&s->p, p);
}

int sl_sched_init(struct sl_sched *s, const struct sl_sched_plan *p)
{
	*s = (struct sl_sched){ 0 };
	return sl_sched_reinit(s, p);
}

void sl_sched_rewind(struct sl_sched *s)
{
	rewind_run(s);
	s->reused = true;
}

static void link_gate_sends(struct sl_sched *s); /* with sl_sched_gate_pull, which reads what it finds */

int sl_sched_reinit(struct sl_sched *s, const struct sl_sched_plan *p)
{
	int rc;

	if (sl_sched_holds(s, p)) {
		sl_sched_rewind(s);
		return 0;
	}
	*s = (struct sl_sched){ .p = *p, .x = s->x, .cap = s->cap, .tab = s->tab, .tab_bytes = s->tab_bytes,
				.counts = s->counts, .counts_cap = s->counts_cap };
	if (sl_sched_plan_check(p)) {
		errno = EINVAL;
		return -1;
	}
	if (keep_counts(s, p) != 0) {
		sl_sched_fini(s);
		errno = ENOMEM;
		return -1;
	}
	s->bytes[SL_BUF_SEND] = p->send_bytes;
	s->bytes[SL_BUF_RECV] = p->recv_bytes;
	/* one rank: every algorithm is a local copy, which direct does */
	rc = p->nranks > 1 ? builders[p->algo](s) : sl_build_direct(s);
	if (rc == 0 && s->snapshot_send) {
		uint64_t n, len, stride, skip;
		sl_sched_snapshot(s, &n, &len, &stride, &skip);
		s->bytes[SL_BUF_SEND] = n * len;
	}
	if (rc == 0)
		rc = add_call_check(s);
	if (rc == 0)
		rc = index_xfers(s);
	if (rc == 0) {
		link_and_queue(s);
		if (sort_recvs(s)) {
			link_gate_sends(s);
		} else {
			errno = EINVAL;
			rc = -1;
		}
	}
	if (rc != 0) {
		int err = errno;
		sl_sched_fini(s);
		errno = err;
		return rc;
	}
	s->built = true;
	s->ready_built = s->ready_tail;
	s->lazy_built = s->lazy;
	s->chunks_built = s->chunks_left;
	return 0;
}

int sl_sched_reinit_from(struct sl_sched *s, const struct sl_sched *from)
{
	if (!from->built || from == s) {
		errno = EINVAL;
		return -1;
	}
	if (s->cap < from->nx) {
		struct sl_xfer *x = realloc(s->x, from->nx * sizeof(*x));
		if (!x) {
			errno = ENOMEM;
			return -1;
		}
		s->x = x;
		s->cap = from->nx;
	}
	*s = (struct sl_sched){ .p = from->p, .snapshot_send = from->snapshot_send, .x = s->x,
				.nx = from->nx, .cap = s->cap, .nrecv = from->nrecv,
				.ready_cap = from->ready_cap, .tab = s->tab, .tab_bytes = s->tab_bytes,
				.counts = s->counts, .counts_cap = s->counts_cap };
	/* the tables as index_xfers sized them: a mask past the last chunk, a send past the last */
	if (keep_counts(s, &from->p) != 0 || carve_tables(s, from->chunks_built + 1ull, from->ready_cap + 1ull) != 0) {
		sl_sched_fini(s);
		errno = ENOMEM;
		return -1;
	}
	memcpy(s->bytes, from->bytes, sizeof(s->bytes));
	memcpy(s->x, from->x, from->nx * sizeof(*s->x));
	memcpy(s->recvs, from->recvs, from->nrecv * sizeof(*s->recvs));
	/* a run queues its sends after ready_built: the first ones are the build's */
	memcpy(s->ready, from->ready, from->ready_built * sizeof(*s->ready));
	s->built = true;
	s->ready_built = from->ready_built;
	s->lazy_built = from->lazy_built;
	s->chunks_built = from->chunks_built;
	rewind_run(s);
	return 0;
}

void sl_sched_fini(struct sl_sched *s)
{
	free(s->x);
	free(s->tab);
	free(s->counts);
	*s = (struct sl_sched){ .p = s->p };
}

bool sl_sched_next_send(struct sl_sched *s, struct sl_send *out)
{
	if (s->ready_head == s->ready_tail)
		return false;
	*out = s->ready[s->ready_head++];
	return true;
}

uint32_t sl_sched_release_lazy(struct sl_sched *s)
{
	uint32_t n = s->lazy;

	for (uint32_t i = 0; i < s->nx && s->lazy; i++)
		if (s->x[i].lazy) {
			push_chunk(s, &s->x[i], 0);
			s->lazy--;
		}
	return n;
}

/* ---- receiving ---- */

static struct sl_xfer *find_recv(const struct sl_sched *s, uint32_t from, uint32_t step)
{
	uint32_t lo = 0, hi = s->nrecv;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		struct sl_xfer *x = &s->x[s->recvs[mid]];
		if (x->peer == from && x->step == step)
			return x;
		if (x->peer < from || (x->peer == from && x->step < step))
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* applied[]'s bits, per reception chunk */
enum { CHUNK_COMPLETE = 1, CHUNK_RELEASED = 2 /* its dependents are ready */ };

static bool chunk_complete(const struct sl_sched *s, const struct sl_xfer *x, uint32_t c)
{
	return s->applied[x->chunk0 + c] & CHUNK_COMPLETE;
}

/* [off, off + len), in chunk c of x (sl_sched_recv_at), is exactly its
 * packet *pkt. */
static bool locate(const struct sl_sched *s, const struct sl_xfer *x, uint32_t c, uint64_t off, uint64_t len,
		   uint32_t *pkt)
{
	const struct sl_sched_plan *p = &s->p;

	if (x->len == 0) {
		*pkt = 0;
		return len == 0;
	}
	if (off % p->payload != 0)
		return false;
	*pkt = (uint32_t)((off - (uint64_t)c * p->chunk_bytes) / p->payload);
	/* chunks are whole payloads, so only the transfer's last packet is short */
	return len == min_u64(p->payload, x->len - off);
}

/* The send chunks it made ready. */
static uint32_t release_dependents(struct sl_sched *s, const struct sl_xfer *x, uint32_t c)
{
	uint8_t *flags = &s->applied[x->chunk0 + c];
	uint32_t n = 0;

	if (*flags & CHUNK_RELEASED)
		return 0;
	*flags |= CHUNK_RELEASED;
	for (int32_t d = x->first_dep; d >= 0; d = s->x[d].next_dep, n++)
		push_chunk(s, &s->x[d], c);
	return n;
}

/* Where byte off of reception x lies; false when outside it. */
static bool recv_at(const struct sl_sched *s, const struct sl_xfer *x, uint64_t off, struct sl_recv_at *at)
{
	if (off >= x->len && !(off == 0 && x->len == 0))
		return false;
	at->recv = (uint32_t)(x - s->x);
	at->chunk = (uint32_t)(off / s->p.chunk_bytes);
	at->index = x->chunk0 + at->chunk;
	return true;
}

bool sl_sched_recv_at(const struct sl_sched *s, uint32_t from, uint32_t step, uint64_t off, struct sl_recv_at *at)
{
	const struct sl_xfer *x = find_recv(s, from, step);

	return x && recv_at(s, x, off, at);
}

uint32_t sl_sched_chunk_packets(const struct sl_sched *s, const struct sl_recv_at *at)
{
	uint64_t len = chunk_len(&s->p, &s->x[at->recv], at->chunk);

	return len == 0 ? 1 : (uint32_t)((len + s->p.payload - 1) / s->p.payload);
}

uint32_t sl_sched_chunk_arrived(struct sl_sched *s, const struct sl_recv_at *at)
{
	return release_dependents(s, &s->x[at->recv], at->chunk);
}

/* Each reception's gate send, found once per build (before, a walk of every
 * transfer per chunk that waited at the gate): the first non-lazy send of
 * its peer and step, the walk from the last leaving the first in place. */
static void link_gate_sends(struct sl_sched *s)
{
	for (uint32_t i = s->nx; i-- > 0;) {
		const struct sl_xfer *x = &s->x[i];
		struct sl_xfer *r;
		if (x->is_send && !x->lazy && (r = find_recv(s, x->peer, x->step)))
			r->gate_send = (int32_t)i;
	}
}

uint32_t sl_sched_gate_pull(struct sl_sched *s, const struct sl_recv_at *at)
{
	int32_t g = s->x[at->recv].gate_send;

	/* the gate's send has the reception's length, so chunk c of one is chunk c of the other */
	if (g < 0 || s->x[g].after < 0)
		return 0;
	return release_dependents(s, &s->x[s->x[g].after], at->chunk);
}

enum sl_sched_result sl_sched_on_packet(struct sl_sched *s, uint32_t from, uint32_t step, uint64_t off,
					uint64_t len, struct sl_action *act)
{
	const struct sl_xfer *x = find_recv(s, from, step);
	struct sl_recv_at at;

	if (!x)
		return SL_SCHED_BAD_STEP;
	if (!recv_at(s, x, off, &at))
		return SL_SCHED_BAD_RANGE;
	return sl_sched_on_packet_at(s, &at, off, len, act);
}

enum sl_sched_result sl_sched_on_packet_at(struct sl_sched *s, const struct sl_recv_at *at, uint64_t off,
					   uint64_t len, struct sl_action *act)
{
	struct sl_xfer *x = &s->x[at->recv];
	uint32_t c = at->chunk, pkt;

	if (!locate(s, x, c, off, len, &pkt))
		return SL_SCHED_BAD_RANGE;
	uint64_t *mask = &s->arrived[x->chunk0 + c], bit = UINT64_C(1) << pkt;
	if (*mask & bit)
		return SL_SCHED_DUPLICATE;
	if (x->after >= 0 && !chunk_complete(s, &s->x[x->after], c))
		return SL_SCHED_DEFER;
	*mask |= bit;
	*act = (struct sl_action){
		.apply = x->apply, .buf = x->buf, .opnd_buf = x->opnd_buf, .payload_first = x->payload_first,
		.finishes = x->finishes,
		.off = x->off + off, .opnd_off = x->opnd_off + off,
	};
	if (*mask == full_mask(&s->p, chunk_len(&s->p, x, c))) {
		act->recv = (uint32_t)(x - s->x);
		act->chunk = c;
		act->chunk_full = s->p.gated;
		act->chunk_done = !s->p.gated;
		if (!s->p.gated)
			sl_sched_chunk_applied(s, act->recv, c);
	}
	return SL_SCHED_OK;
}

void sl_sched_chunk_applied(struct sl_sched *s, uint32_t recv, uint32_t chunk)
{
	const struct sl_xfer *x = &s->x[recv];

	if (s->applied[x->chunk0 + chunk] & CHUNK_COMPLETE)
		return;
	s->applied[x->chunk0 + chunk] |= CHUNK_COMPLETE;
	s->chunks_left--;
	release_dependents(s, x, chunk);
}

bool sl_sched_input_gate_ok(const struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;

	if (!s->snapshot_send || !sl_sched_own_in_place(p) || (p->stride && p->stride != p->count * p->esize))
		return false;
	for (uint32_t i = 0; i < s->nx; i++) {
		const struct sl_xfer *x = &s->x[i];
		/* each reception waits on the send of its step, which waits on one
		 * of an earlier step: no chain of waits comes back to where it began */
		if (x->is_send && !x->lazy &&
		    (!find_recv(s, x->peer, x->step) || (x->after >= 0 && s->x[x->after].step >= x->step)))
			return false;
	}
	return true;
}

int64_t sl_sched_recv_chunk(const struct sl_sched *s, uint32_t from, uint32_t step, uint64_t off)
{
	struct sl_recv_at at;

	return sl_sched_recv_at(s, from, step, off, &at) ? (int64_t)at.index : -1;
}

int sl_sched_waiting_on(const struct sl_sched *s)
{
	for (uint32_t i = 0; i < s->nx; i++) {
		const struct sl_xfer *x = &s->x[i];
		for (uint32_t c = 0; !x->is_send && c < x->nchunks; c++)
			if (!chunk_complete(s, x, c))
				return (int)x->peer;
	}
	return -1;
}
