/*
 * schedule.h: a collective as a schedule of transfers, the one interface
 * between the algorithms (algo_*.c) and the engine that runs them
 * (dataplane/coll_run.c).
 *
 * A builder lists, for one rank, every transfer it takes part in: sends
 * (to a peer: a byte range of one of its buffers) and receptions (from a
 * peer: where the bytes go, and whether they are copied there or reduced
 * with a local operand).  A transfer is named on the wire by (peer, step);
 * a packet carries its byte offset within the transfer.  Transfers are cut
 * into chunks of chunk_bytes and chunks into packets of payload bytes; a
 * 64-bit mask per chunk records which packets were applied, so a packet is
 * applied at most once even if the transport were fooled.
 *
 * Ordering is by dependency, chunk by chunk: a transfer may name a
 * reception `after` which it waits for.  A send's chunk c leaves once chunk
 * c of its `after` has fully arrived (the pipeline); a reception's chunk c
 * is applied only once chunk c of its `after` has (the fixed reduction
 * order that makes results bitwise deterministic whatever the arrival
 * order: a packet that comes too early is deferred by the engine and
 * offered again later).  `after` must name a reception of the same length.
 *
 * A transfer with peer == rank is local: the engine applies its chunks
 * itself when they become ready (the own block of an all-gather, the local
 * operand of a direct reduction).  Of the sends ready at start, those to
 * peers are queued first: a copy ahead of them held them back by all of it.
 *
 * In rooted collectives a rank also holds one empty packet (step
 * SL_SCHED_CHECK_STEP) for each peer it receives data from and sends none
 * to: a lazy call check, which leaves only if the engine releases it, when
 * the data is late, so that a peer that called something else and sends
 * nothing still sees this rank's call (schedule.c says why that is enough).
 *
 * The schedule owns no data and checks every transfer a builder makes
 * against the buffer sizes it was given, so a wrong builder fails at init,
 * never writes out of bounds.
 */
#ifndef SLUICE_SCHEDULE_H
#define SLUICE_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

/* Collectives; values mirror enum sl_opcode in sluice/abi.h (the engine asserts it). */
enum sl_coll {
	SL_COLL_ALLREDUCE = 1,
	SL_COLL_ALLGATHER = 2,
	SL_COLL_REDUCE_SCATTER = 3,
	SL_COLL_BROADCAST = 4,
	SL_COLL_REDUCE = 5,
	SL_COLL_ALLTOALL = 6,
	SL_COLL_BARRIER = 7,
	SL_COLL_SEND = 8,
	SL_COLL_RECV = 9,
	SL_COLL_GATHER = 10,
	SL_COLL_SCATTER = 11,
	SL_COLL_ALLTOALLV = 12,
	SL_COLL_COUNT
};

/* Algorithms; values mirror SL_ALGO_* in sluice/abi.h. */
enum sl_algo {
	SL_ALGO_RING = 1,   /* bandwidth: n-1 or 2(n-1) pipelined neighbour steps */
	SL_ALGO_DIRECT = 2, /* latency: every rank sends straight to its destination, one step */
	SL_ALGO_RD = 3,     /* recursive doubling: log2 steps of whole vectors, for small all-reduce */
	SL_ALGO_RHD = 4,    /* recursive halving/doubling (Rabenseifner), for medium sizes */
	SL_ALGO_TREE = 5,   /* binomial tree from or to the root, pipelined in chunks */
	SL_ALGO_PAIRWISE = 6, /* all-to-all in n-1 paced steps: one peer to send to and one to hear from */
	SL_ALGO_COUNT
};

/* The step of the empty packets that check a rooted call's arguments. */
#define SL_SCHED_CHECK_STEP 65535u

enum sl_buf { SL_BUF_SEND, SL_BUF_RECV, SL_BUF_SCRATCH, SL_NBUFS };
enum sl_apply { SL_APPLY_COPY, SL_APPLY_REDUCE };

struct sl_sched_plan {
	enum sl_coll coll;
	enum sl_algo algo;
	uint32_t nranks, rank;
	uint32_t root;        /* rooted collectives; the peer of a send or recv */
	uint64_t count;       /* elements, as the collective's API counts them */
	uint32_t esize;       /* bytes per element */
	uint32_t payload;     /* bytes per packet, a multiple of 16 and of esize */
	uint64_t chunk_bytes; /* pipeline unit: a multiple of payload, at most 64 payloads */
	/* Bytes from one per-rank block to the next in the send and recv
	 * buffers that hold nranks blocks; 0 = count * esize.  A channel's
	 * slice of a call holds a part of every block: its blocks sit a whole
	 * block of the call apart (sl_sched_block). */
	uint64_t stride;
	uint64_t send_bytes, recv_bytes; /* this rank's buffers (sl_cmd_bytes, with stride) */
	bool in_place;        /* the send and recv buffers overlap */
	/* Packets are applied asynchronously (a GPU reducer): a chunk whose
	 * packets have all been accepted completes only when the engine says
	 * it has been applied (sl_sched_chunk_applied), so nothing that depends
	 * on it (a forward, the next contribution in the reduction order) reads
	 * memory the reducer is still writing. */
	bool gated;
	/* all-to-allv: per rank, in elements (count is unused) */
	const uint64_t *send_count, *send_displ, *recv_count, *recv_displ;
};

/* One transfer of this rank. */
struct sl_xfer {
	uint32_t peer;        /* rank it goes to (send) or comes from (recv) */
	uint32_t step;        /* names it on the wire, with the peer; below 65536 */
	bool is_send;
	uint8_t buf;          /* enum sl_buf: send's source, or recv's destination */
	uint8_t apply;        /* recv: enum sl_apply */
	uint8_t opnd_buf;     /* recv REDUCE: dst = operand op payload */
	bool payload_first;   /* recv REDUCE: dst = payload op operand instead (max, min and NaNs
			       * are not commutative in their bits) */
	bool finishes;        /* recv REDUCE: its elements are final after it (AVG divides) */
	bool lazy;            /* send: a call check (SL_SCHED_CHECK_STEP, no data) held until
			       * sl_sched_release_lazy */
	uint64_t off, len;    /* byte range in buf */
	uint64_t opnd_off;    /* recv REDUCE: operand's byte offset in opnd_buf */
	int32_t after;        /* index of the reception it waits for, chunk by chunk; -1 none */
	/* set by sl_sched_init */
	uint32_t chunk0;      /* recv: its first mask in arrived[] */
	uint32_t nchunks;
	int32_t first_dep;    /* recv: first send waiting on it, -1 none */
	int32_t next_dep;     /* send: next send waiting on the same reception */
	int32_t gate_send;    /* recv: the first non-lazy send to its peer at its step, -1 none:
			       * the one sl_sched_gate_pull makes ready */
};

/* One chunk ready to send. */
struct sl_send {
	uint32_t peer, step;
	uint8_t buf;       /* enum sl_buf */
	uint64_t off, len; /* bytes in buf */
	uint64_t xoff;     /* offset within the transfer: what the packets carry */
};

/* What to do with an accepted packet. */
struct sl_action {
	uint8_t apply;        /* enum sl_apply */
	uint8_t buf, opnd_buf;
	bool payload_first;   /* dst = payload op operand, not operand op payload */
	bool finishes;
	uint64_t off, opnd_off; /* where the payload's bytes go, and the operand's */
	bool chunk_done;      /* this packet completed its chunk: deferred packets may now apply */
	bool chunk_full;      /* gated: this packet was its chunk's last; report the chunk
			       * (recv, chunk) applied once every packet of it is */
	uint32_t recv, chunk;
};

enum sl_sched_result {
	SL_SCHED_OK = 0,
	SL_SCHED_DEFER,       /* valid, but its predecessor chunk has not arrived: offer it later */
	SL_SCHED_BAD_STEP,    /* no reception from that peer at that step */
	SL_SCHED_BAD_RANGE,   /* not exactly one packet of the transfer */
	SL_SCHED_DUPLICATE,   /* this packet was applied already */
};

struct sl_sched {
	struct sl_sched_plan p;
	uint64_t bytes[SL_NBUFS]; /* each buffer's size (scratch: what the builder asked for) */
	/* Run on a copy of the send buffer (in place, inputs overwritten): set
	 * by the builder before it addresses send's blocks, which the copy
	 * packs (sl_sched_snapshot). */
	bool snapshot_send;
	struct sl_xfer *x;
	uint32_t nx, cap;
	uint32_t *recvs;          /* reception indices sorted by (peer, step) */
	uint32_t nrecv;
	uint64_t *arrived;        /* packet masks, one per reception chunk */
	uint8_t *applied;         /* per reception chunk: complete (gated: reported applied) */
	uint32_t chunks_left;     /* reception chunks not yet complete */
	uint32_t lazy;            /* lazy checks not released yet */
	struct sl_send *ready;    /* FIFO of chunks ready to send */
	uint32_t ready_head, ready_tail, ready_cap;
	void *tab;                /* holds arrived, ready, recvs and applied */
	uint64_t tab_bytes;       /* its size */
	/* All-to-allv: the plan's four count arrays, copied (p's point here),
	 * so that a later call with equal counts finds its schedule built. */
	uint64_t *counts;
	uint32_t counts_cap;      /* entries it holds */
	/* What the build left, for sl_sched_reinit to start the same plan's
	 * next run from without building it again. */
	bool built;               /* x, recvs and the tables hold p's schedule */
	bool reused;              /* the last reinit took that path */
	uint32_t ready_built;     /* ready[0, ready_built): the sends that wait on nothing */
	uint32_t lazy_built;      /* lazy checks */
	uint32_t chunks_built;    /* reception chunks */
};

/* Check a plan; NULL or a sentence saying what is wrong with it. */
const char *sl_sched_plan_check(const struct sl_sched_plan *p);
/* Build the plan's schedule; the sends that wait on nothing are ready at
 * once.  0, or -1 with errno EINVAL (bad plan, unsupported algorithm, or a
 * builder's transfer outside its buffers) or ENOMEM. */
int sl_sched_init(struct sl_sched *s, const struct sl_sched_plan *p);
/* The same on a schedule that init or reinit built, or fini finished
 * (or a zeroed one): reuses its memory (no allocation when it is big
 * enough); the result is as if built new.  When s holds the schedule of an
 * equal plan (every field; all-to-allv's counts by value: s keeps a copy,
 * and p's arrays may go after the call), only the run's state is reset: a
 * loop that repeats one call builds its schedule once (s->reused says
 * which path was taken). */
int sl_sched_reinit(struct sl_sched *s, const struct sl_sched_plan *p);
/* s as sl_sched_reinit(s, &from->p) leaves it, from another schedule that
 * holds that plan (built, perhaps mid-run): its transfers, sorted
 * receptions and first sends are copied, not built again; s's memory is
 * reused when big enough.  0, or -1 with errno EINVAL (from holds no built
 * schedule) or ENOMEM. */
int sl_sched_reinit_from(struct sl_sched *s, const struct sl_sched *from);
/* Whether s holds p's schedule: sl_sched_reinit(s, p) would only reset it. */
bool sl_sched_holds(const struct sl_sched *s, const struct sl_sched_plan *p);
/* sl_sched_reinit(s, p) where sl_sched_holds(s, p) was found true: reset
 * the run without comparing the plans again (a small call compared its
 * plan three times, ~150 instructions). */
void sl_sched_rewind(struct sl_sched *s);
void sl_sched_fini(struct sl_sched *s);

/* Pop the next chunk ready to send; false when none is. */
bool sl_sched_next_send(struct sl_sched *s, struct sl_send *out);
/* Make the lazy checks ready to send; how many there were. */
uint32_t sl_sched_release_lazy(struct sl_sched *s);

/* A packet of transfer (from, step) covering [off, off + len) of it
 * arrived: check it, and unless refused or deferred record it and say how
 * to apply it.  Completing a chunk makes the sends that wait on it ready. */
enum sl_sched_result sl_sched_on_packet(struct sl_sched *s, uint32_t from, uint32_t step, uint64_t off,
					uint64_t len, struct sl_action *act);

/* Where a packet of reception (from, step) at byte off of it lands: found
 * once (sl_sched_recv_at) and passed on, so that a packet that waits on
 * something first (the input gate) is looked up once. */
struct sl_recv_at {
	uint32_t recv;  /* the reception, an index in x */
	uint32_t chunk; /* its chunk */
	uint32_t index; /* that chunk among every reception's (0 .. chunks_built - 1) */
};
/* False when no reception has that byte (sl_sched_on_packet refuses it). */
bool sl_sched_recv_at(const struct sl_sched *s, uint32_t from, uint32_t step, uint64_t off, struct sl_recv_at *at);
/* sl_sched_on_packet for a packet sl_sched_recv_at found. */
enum sl_sched_result sl_sched_on_packet_at(struct sl_sched *s, const struct sl_recv_at *at, uint64_t off,
					   uint64_t len, struct sl_action *act);
/* How many packets at's chunk holds. */
uint32_t sl_sched_chunk_packets(const struct sl_sched *s, const struct sl_recv_at *at);
/* Every packet of at's chunk has arrived but waits to land (a call on its
 * input: sl_sched_input_gate_ok): the sends that wait on that chunk are
 * ready now.  They only pace (pairwise: one peer a step), and they read
 * other blocks than it writes; waiting for it to land put the gate's
 * acknowledgement round trip between every two steps.  Its completion
 * (sl_sched_chunk_applied, or its last packet) releases nothing again.
 * The send chunks it made ready (0 when none waits on it, or they went already). */
uint32_t sl_sched_chunk_arrived(struct sl_sched *s, const struct sl_recv_at *at);
/* A packet of at's chunk waits at the input gate for this rank's send of
 * the same chunk to its peer (same step): when that send still waits on its
 * pacing (the reception it goes after), it is made ready now.  The peer is
 * at that step already, its data waits here until the send is acknowledged
 * (copied, past the frames the port lets a receiver hold), and the pacing
 * only spares receivers a second sender (pairwise).  Its pacing reception's
 * other dependents go with it, and nothing goes twice.  The send chunks it
 * made ready (0: none paced, or it was ready).  The build found that send
 * (sl_xfer.gate_send); a chunk's first packet to wait calls it. */
uint32_t sl_sched_gate_pull(struct sl_sched *s, const struct sl_recv_at *at);

/* Gated schedules: every packet of chunk `chunk` of reception `recv` (from
 * an action's chunk_full) has been applied.  Releases what waits on it. */
void sl_sched_chunk_applied(struct sl_sched *s, uint32_t recv, uint32_t chunk);

/* Every reception is complete (sends may still await their ACKs). */
static inline bool sl_sched_recv_done(const struct sl_sched *s)
{
	return s->chunks_left == 0;
}

/* What the engine copies when snapshot_send is set: *n pieces of *len
 * bytes, *stride apart in the client's send buffer, back to back in the
 * copy (bytes[SL_BUF_SEND] in all), except piece *skip (*n for none),
 * which nothing reads.  Strided blocks are packed, so that a channel's
 * slice copies its own elements, not the others' between them. */
void sl_sched_snapshot(const struct sl_sched *s, uint64_t *n, uint64_t *len, uint64_t *stride, uint64_t *skip);
/* In-place all-to-all: in NCCL's layout (send == recv) the own block
 * already lies where it lands, so builders give it no transfer and the
 * snapshot leaves it out. */
bool sl_sched_own_in_place(const struct sl_sched_plan *p);

/* In-place all-to-all: whether the engine may run on the input itself
 * instead of its copy (sl_sched_snapshot), each reception's chunk applied
 * only once the chunk of the send to the same peer, which reads the bytes
 * it overwrites, is acknowledged (sl_sched_recv_chunk names both).  True
 * when the blocks are not strided (the copy's packed layout is then the
 * input's) and every send has a reception from its peer at its own step
 * and waits on none or on a reception of an earlier step (a reception
 * gated on a send that waits on a reception of its own step or a later
 * one could wait on itself): direct, and pairwise (in place, one peer a
 * step both ways: algo_pairwise.c). */
bool sl_sched_input_gate_ok(const struct sl_sched *s);
/* The index among s's reception chunks (0 .. chunks_built - 1) of the one
 * that byte off of reception (from, step) lies in; -1 when there is none. */
int64_t sl_sched_recv_chunk(const struct sl_sched *s, uint32_t from, uint32_t step, uint64_t off);

/* The peer of the first incomplete reception, -1 when none: for messages. */
int sl_sched_waiting_on(const struct sl_sched *s);

bool sl_algo_supported(enum sl_coll c, enum sl_algo a);
/* Whether the collective reduces (and so takes a datatype's op). */
bool sl_coll_reduces(enum sl_coll c);
const char *sl_coll_name(enum sl_coll c);
const char *sl_algo_name(enum sl_algo a);

/* ---- for builders ---- */

/* Append a transfer; its index, or -1 (ENOMEM). */
int32_t sl_sched_add(struct sl_sched *s, const struct sl_xfer *x);
/* Copy len bytes from the send buffer at src to recv at dst: a transfer
 * to the rank itself, applied by the engine without the network. */
int sl_sched_local_copy(struct sl_sched *s, uint64_t src, uint64_t dst, uint64_t len);
/* Byte offset of per-rank block blk in buffer buf: the one place builders
 * address blocks.  Send and recv space them by the plan's stride; scratch,
 * the builder's own, and send's in-place copy pack them. */
uint64_t sl_sched_block(const struct sl_sched *s, uint8_t buf, uint64_t blk);
/* Element-balanced part k of count elements cut into parts: byte range. */
void sl_segment(const struct sl_sched_plan *p, uint32_t parts, uint32_t k, uint64_t *off, uint64_t *len);

int sl_build_ring(struct sl_sched *s);
int sl_build_direct(struct sl_sched *s);
int sl_build_rd(struct sl_sched *s);
int sl_build_rhd(struct sl_sched *s);
int sl_build_tree(struct sl_sched *s);
int sl_build_pairwise(struct sl_sched *s);

#endif
