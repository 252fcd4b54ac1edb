/*
 * trace.h: the trace ring, the shared memory between a dataplane's trace
 * taps (the producer: its engine) and sluice-trace (the consumer).
 *
 * A tracer sends SL_CTL_TRACE_ATTACH (abi.h) on the attach socket; the
 * dataplane creates a memfd holding one struct sl_trace_page followed by an
 * spsc ring (spsc.h) of fixed-size slots, each a struct sl_trace_rec and the
 * first bytes of one frame, and passes the fd back.  The engine copies every
 * frame its ports receive or send into the ring while the tracer's socket
 * stays open; closing the socket detaches.  A full ring drops the record and
 * counts it in dropped[port]: never silent.
 *
 * The page also carries a log of the dataplane's communicators (key ->
 * rank, node of every rank), appended by the control thread, so that the
 * tracer names the peer rank of each packet.
 *
 * Frames are kept as they were on the wire; sl_trace_peek decodes the
 * sluice header from a captured prefix (the layout of proto/wire.h, which a
 * unit test checks against sl_wire_build).  Everything here is plain C and
 * libc, so sluice-trace needs nothing else.
 */
#ifndef SLUICE_TRACE_H
#define SLUICE_TRACE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "spsc.h"

#define SL_TRACE_MAGIC 0x534c5452u /* "SLTR" */
#define SL_TRACE_VERSION 3u
#define SL_TRACE_MAX_PORTS 8u
#define SL_TRACE_MAX_RANKS 256u
#define SL_TRACE_COMM_LOG 64u         /* communicator records kept, the newest */
#define SL_TRACE_MAX_SNAP 8192u       /* payload bytes a record may keep */
#define SL_TRACE_RING_BYTES (16u << 20) /* slots are sized to about this much */

/* The frame layout (proto/wire.h): Ethernet 14, IPv4 20, UDP 8, sluice 48, body. */
#define SL_TRACE_OFF_UDP 34u
#define SL_TRACE_OFF_HDR 42u
#define SL_TRACE_OFF_BODY 90u
#define SL_TRACE_ACK_LEN 48u
#define SL_TRACE_UDP_PORT 0x51ceu
#define SL_TRACE_T_DATA 1u
#define SL_TRACE_T_ACK 2u
#define SL_TRACE_T_LAST 3u /* a last word: a control message outside the PSN stream */
#define SL_TRACE_F_RETX 1u /* the sluice header's flags */
#define SL_TRACE_F_CTRL 2u
#define SL_TRACE_F_VOID 4u
#define SL_TRACE_F_CRC 8u
/* The dataplane packs the algorithm above the opcode in the header's kind
 * (dataplane/coll_run.c, KIND_ALGO_SHIFT), and a rooted collective's root in
 * the top byte of its count (COUNT_ROOT_SHIFT). */
#define SL_TRACE_KIND_ALGO_SHIFT 5u
#define SL_TRACE_COUNT_ROOT_SHIFT 56u

enum sl_trace_dir {
	SL_TRACE_RX = 0, /* the port received it */
	SL_TRACE_TX = 1, /* the port sent it */
};

/* One slot's header; the frame's first caplen bytes follow in data[]. */
struct sl_trace_rec {
	uint64_t ts_ns;  /* CLOCK_MONOTONIC at the burst; page->realtime_off_ns converts */
	uint32_t len;    /* frame bytes */
	uint16_t caplen; /* bytes kept in data[] */
	uint8_t port;    /* port index, < page->nports */
	uint8_t dir;     /* enum sl_trace_dir */
	uint8_t data[];
};

/* What the engine keeps; a zero field matches everything. */
enum sl_trace_match {
	SL_TRACE_M_COMM = 1u << 0, /* filter.comm: communicator key, low 32 bits */
	SL_TRACE_M_SEQ = 1u << 1,  /* filter.seq: collective sequence number */
	SL_TRACE_M_TYPE = 1u << 2, /* filter.type: SL_TRACE_T_DATA or _ACK */
	SL_TRACE_M_NODE = 1u << 3, /* filter.node: the peer dataplane (the flow) */
	SL_TRACE_M_RETX = 1u << 4, /* retransmissions only */
};

struct sl_trace_filter {
	uint32_t match; /* enum sl_trace_match bits */
	uint32_t comm;
	uint32_t seq;
	uint16_t node;
	uint8_t type;
	uint8_t reserved;
};

struct sl_trace_port_info {
	uint16_t peer_node; /* the dataplane at the other end */
	uint16_t reserved;
	char name[60];      /* the port's device, e.g. "net_memif1" */
};

struct sl_trace_comm {
	uint32_t key32;  /* as carried in every packet */
	uint32_t rank;   /* this dataplane's rank in it */
	uint32_t nranks;
	uint32_t reserved;
	uint16_t node[SL_TRACE_MAX_RANKS]; /* rank -> dataplane node */
};

/* The transport's sender state for one port's flow, refreshed by the engine
 * about every millisecond while packets arrive there (for sluice-trace top). */
struct sl_trace_flow {
	_Atomic uint64_t cwnd_milli;  /* congestion window in packets x 1000 (the fixed window without cc) */
	_Atomic uint64_t srtt_ns;     /* smoothed RTT */
	_Atomic uint64_t rto_ns;      /* retransmission timeout */
	_Atomic uint64_t pace_ns;     /* gap between sends when paced, else 0 */
	_Atomic uint64_t in_flight;   /* PSNs sent and not yet retired */
	_Atomic uint64_t credit;      /* packets the peer's credit allows in flight */
	_Atomic uint64_t paths;       /* multipath: paths alive << 16 | paths */
	_Atomic uint64_t updated_ns;  /* CLOCK_MONOTONIC of the last refresh; 0: none yet */
};

struct sl_trace_page {
	uint32_t magic;           /* SL_TRACE_MAGIC */
	uint32_t version;         /* SL_TRACE_VERSION */
	uint32_t slots;           /* ring geometry: a power of two */
	uint32_t slot_size;       /* bytes per slot, a multiple of 8 */
	uint32_t ring_off;        /* byte offset of the ring's struct sl_spsc_shared */
	uint32_t snap;            /* payload bytes kept per DATA frame */
	uint16_t node;            /* this dataplane's node id */
	uint16_t nports;
	uint32_t reserved;
	int64_t realtime_off_ns;  /* CLOCK_REALTIME - CLOCK_MONOTONIC at attach */
	struct sl_trace_filter filter;
	struct sl_trace_port_info ports[SL_TRACE_MAX_PORTS];
	/* written by the engine only (relaxed), read by the tracer */
	alignas(SL_CACHE_LINE) _Atomic uint64_t dropped[SL_TRACE_MAX_PORTS]; /* ring full */
	struct sl_trace_flow flows[SL_TRACE_MAX_PORTS];
	/* written by the control thread only: comms[i % SL_TRACE_COMM_LOG] is the
	 * i-th communicator it announced; ncomms is stored (release) after it */
	alignas(SL_CACHE_LINE) _Atomic uint32_t ncomms;
	struct sl_trace_comm comms[SL_TRACE_COMM_LOG];
};

static inline uint32_t sl_trace_ring_off(void)
{
	return (uint32_t)((sizeof(struct sl_trace_page) + SL_CACHE_LINE - 1) & ~(size_t)(SL_CACHE_LINE - 1));
}

/* Bytes a slot holds of a frame: its headers, and snap bytes of a DATA
 * payload or an ACK body, whichever is longer. */
static inline uint32_t sl_trace_hdr_keep(uint32_t snap)
{
	return SL_TRACE_OFF_BODY + (snap > SL_TRACE_ACK_LEN ? snap : SL_TRACE_ACK_LEN);
}

/* ---- producer side: fill slots in place, publish the ones that count ---- */

/* Free slots, at most want (the engine's burst). */
static inline uint32_t sl_trace_ring_room(struct sl_spsc *r, uint32_t want)
{
	uint32_t head = atomic_load_explicit(&r->sh->head, memory_order_relaxed);
	uint32_t room = r->mask + 1 - (head - r->other);

	if (room < want) {
		r->other = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
		room = r->mask + 1 - (head - r->other);
	}
	return room < want ? room : want;
}

/* The i-th slot after head (i < what sl_trace_ring_room returned). */
static inline struct sl_trace_rec *sl_trace_ring_slot(struct sl_spsc *r, uint32_t i)
{
	uint32_t head = atomic_load_explicit(&r->sh->head, memory_order_relaxed);

	return (struct sl_trace_rec *)&r->sh->slots[(size_t)((head + i) & r->mask) * r->slot_size];
}

/* Publish the first n filled slots. */
static inline void sl_trace_ring_commit(struct sl_spsc *r, uint32_t n)
{
	uint32_t head = atomic_load_explicit(&r->sh->head, memory_order_relaxed);

	atomic_store_explicit(&r->sh->head, head + n, memory_order_release);
}

/* ---- reading a captured frame ---- */

/* The sluice header (and ACK body) of a frame, host order. */
struct sl_trace_pkt {
	uint8_t type, kind;
	uint16_t flags, src_node, dst_node, step, entropy;
	uint32_t psn, comm, seq, len, ts; /* an ACK's psn is its ACK number (proto/wire.h) */
	uint64_t count, offset;
	bool has_ack;          /* type ACK and the body was captured */
	uint32_t cum_psn, echo_ts, credit;
	uint64_t sack[4];
};

static inline uint64_t sl_trace_get(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* Decode a captured prefix of caplen bytes; false when it is not a sluice
 * frame or too short to hold the sluice header. */
static inline bool sl_trace_peek(const uint8_t *f, uint32_t caplen, struct sl_trace_pkt *p)
{
	const uint8_t *h = f + SL_TRACE_OFF_HDR;

	if (caplen < SL_TRACE_OFF_BODY || sl_trace_get(f + 12, 2) != 0x0800 || f[23] != 17 ||
	    sl_trace_get(f + SL_TRACE_OFF_UDP + 2, 2) != SL_TRACE_UDP_PORT)
		return false;
	p->entropy = (uint16_t)sl_trace_get(f + SL_TRACE_OFF_UDP, 2);
	p->type = h[1];
	p->flags = (uint16_t)sl_trace_get(h + 2, 2);
	p->src_node = (uint16_t)sl_trace_get(h + 4, 2);
	p->dst_node = (uint16_t)sl_trace_get(h + 6, 2);
	p->psn = (uint32_t)sl_trace_get(h + 8, 4);
	p->comm = (uint32_t)sl_trace_get(h + 12, 4);
	p->seq = (uint32_t)sl_trace_get(h + 16, 4);
	p->step = (uint16_t)sl_trace_get(h + 20, 2);
	p->kind = h[22];
	p->count = sl_trace_get(h + 24, 8);
	p->offset = sl_trace_get(h + 32, 8);
	p->len = (uint32_t)sl_trace_get(h + 40, 4);
	p->ts = (uint32_t)sl_trace_get(h + 44, 4);
	p->has_ack = p->type == SL_TRACE_T_ACK && caplen >= SL_TRACE_OFF_BODY + SL_TRACE_ACK_LEN;
	if (p->has_ack) {
		const uint8_t *a = f + SL_TRACE_OFF_BODY;
		p->cum_psn = (uint32_t)sl_trace_get(a, 4);
		p->echo_ts = (uint32_t)sl_trace_get(a + 4, 4);
		p->credit = (uint32_t)sl_trace_get(a + 8, 4);
		for (unsigned i = 0; i < 4; i++)
			p->sack[i] = sl_trace_get(a + 16 + 8 * i, 8);
	}
	return true;
}

/* Whether a decoded frame passes the filter; peer is the other end's node.
 * ACKs belong to a flow, not to a collective (their comm and seq are 0), so
 * the communicator and sequence filters keep them. */
static inline bool sl_trace_match(const struct sl_trace_filter *flt, const struct sl_trace_pkt *p, uint16_t peer)
{
	uint32_t m = flt->match;
	bool data = p->type == SL_TRACE_T_DATA;

	return !((m & SL_TRACE_M_COMM && data && p->comm != flt->comm) ||
		 (m & SL_TRACE_M_SEQ && data && p->seq != flt->seq) ||
		 (m & SL_TRACE_M_TYPE && p->type != flt->type) || (m & SL_TRACE_M_NODE && peer != flt->node) ||
		 (m & SL_TRACE_M_RETX && !(p->flags & SL_TRACE_F_RETX)));
}

#endif
