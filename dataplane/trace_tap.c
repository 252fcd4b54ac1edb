/*
 * trace_tap.c: the trace taps (a port wrapper recording frames into the
 * trace ring) and the control-thread side of attaching a tracer: creating
 * the ring's memfd, publishing it to the taps, and taking it back.
 *
 * Publishing and taking back without a lock: a tap that sees a ring sets
 * busy, then reads the ring pointer again; detach clears the pointer, then
 * waits for busy to drop.  Both pairs are sequentially consistent, so either
 * the tap's second read sees NULL or detach sees busy (Dekker): the memory is
 * never unmapped under a tap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "dp.h"
#include "trace_tap.h"

#define TAP_BURST 64 /* frames recorded per step; larger bursts go in steps */
#define FLOW_INFO_NS 1000000ull /* how often a port's flow state is copied to the page */

_Static_assert(SL_TRACE_OFF_HDR == SL_ETH_LEN + SL_IP_LEN + SL_UDP_LEN, "trace.h: frame layout");
_Static_assert(SL_TRACE_OFF_BODY == SL_FRAME_OVERHEAD && SL_TRACE_ACK_LEN == SL_ACK_LEN, "trace.h: lengths");
_Static_assert(SL_TRACE_UDP_PORT == SL_UDP_PORT && SL_TRACE_T_DATA == SL_T_DATA && SL_TRACE_T_ACK == SL_T_ACK &&
		       SL_TRACE_T_LAST == SL_T_LAST,
	       "trace.h: port and types");
_Static_assert(SL_TRACE_F_RETX == SL_F_RETX && SL_TRACE_F_CTRL == SL_F_CTRL && SL_TRACE_F_VOID == SL_F_VOID &&
	       SL_TRACE_F_CRC == SL_F_CRC, "trace.h: flags");
_Static_assert(SL_TRACE_MAX_PORTS >= SL_MAX_PORTS && SL_TRACE_MAX_RANKS == SL_MAX_RANKS, "trace.h: sizes");

/* The engine's view of an attached tracer; the page may be scribbled on by
 * the tracer, so geometry and filter are private copies. */
struct dp_trace_ring {
	struct sl_trace_page *page;
	size_t bytes;
	struct sl_spsc prod;
	struct sl_trace_filter filter;
	bool filtering;
	uint32_t keep_data; /* bytes kept of a DATA frame: headers and the payload snap */
	uint32_t keep_ack;  /* of any other frame: headers and an ACK body */
	const struct sl_tp *tp;                     /* the engine's transport, for flow state */
	uint64_t now;                               /* the clock at the last traced burst */
	uint64_t flow_due[SL_TRACE_MAX_PORTS];      /* next flow state refresh, per port */
};

/* ---- the taps (engine thread) ---- */

/* The attached ring, with busy set; NULL (the common case) when none. */
static inline struct dp_trace_ring *trace_enter(struct dp_trace *t)
{
	if (__builtin_expect(atomic_load_explicit(&t->ring, memory_order_relaxed) == NULL, 1))
		return NULL;
	atomic_store(&t->busy, true);
	struct dp_trace_ring *r = atomic_load(&t->ring);
	if (!r)
		atomic_store_explicit(&t->busy, false, memory_order_release);
	return r;
}

static void trace_exit(struct dp_trace *t)
{
	atomic_store_explicit(&t->busy, false, memory_order_release);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool wanted(const struct dp_trace_ring *r, const struct dp_trace_tap *tap, const struct sl_pkt *p)
{
	struct sl_trace_pkt d;

	if (!r->filtering)
		return true;
	return sl_trace_peek(p->data, p->len, &d) && sl_trace_match(&r->filter, &d, tap->peer_node);
}

/*
 * Copy the wanted frames of pkts[0..n) (n <= TAP_BURST) into unpublished
 * slots.  slots_before[i] and wanted_before[i] count, for the frames before
 * i, the slots filled and the frames the filter kept, so that a caller who
 * learns only later how many frames count (tx) publishes exactly those.
 */
static void fill(struct dp_trace_ring *r, const struct dp_trace_tap *tap, const struct sl_pkt *pkts,
		 uint16_t n, uint8_t dir, uint16_t *slots_before, uint16_t *wanted_before)
{
	uint32_t room = sl_trace_ring_room(&r->prod, n);
	uint64_t now = r->now = mono_ns();
	uint16_t used = 0, want = 0;

	for (uint16_t i = 0; i < n; i++) {
		slots_before[i] = used;
		wanted_before[i] = want;
		if (!wanted(r, tap, &pkts[i]))
			continue;
		want++;
		if (used == room)
			continue;
		struct sl_trace_rec *rec = sl_trace_ring_slot(&r->prod, used++);
		bool data = pkts[i].len > SL_TRACE_OFF_HDR + 1 && pkts[i].data[SL_TRACE_OFF_HDR + 1] == SL_TRACE_T_DATA;
		uint32_t keep = data ? r->keep_data : r->keep_ack;
		keep = pkts[i].len < keep ? pkts[i].len : keep;
		*rec = (struct sl_trace_rec){ .ts_ns = now, .len = pkts[i].len, .caplen = (uint16_t)keep,
					      .port = tap->index, .dir = dir };
		memcpy(rec->data, pkts[i].data, keep);
	}
	slots_before[n] = used;
	wanted_before[n] = want;
}

/* Publish the slots of the first n frames fill() saw; count the ones that found no room. */
static void publish(struct dp_trace_ring *r, const struct dp_trace_tap *tap, uint16_t n,
		    const uint16_t *slots_before, const uint16_t *wanted_before)
{
	uint16_t lost = (uint16_t)(wanted_before[n] - slots_before[n]);

	sl_trace_ring_commit(&r->prod, slots_before[n]);
	if (lost) {
		_Atomic uint64_t *d = &r->page->dropped[tap->index];
		/* the engine is the only writer: no read-modify-write needed */
		atomic_store_explicit(d, atomic_load_explicit(d, memory_order_relaxed) + lost,
				      memory_order_relaxed);
	}
}

/* About every millisecond, the transport's view of the tap's flow (this
 * runs inside the transport's receive poll, on its thread: a read-only call). */
static void flow_state(struct dp_trace_ring *r, const struct dp_trace_tap *tap)
{
	struct sl_tp_flow_info fi;
	struct sl_trace_flow *f = &r->page->flows[tap->index];

	if (!r->tp || r->now < r->flow_due[tap->index] || sl_tp_flow_info(r->tp, tap->peer_node, &fi) != 0)
		return;
	r->flow_due[tap->index] = r->now + FLOW_INFO_NS;
	atomic_store_explicit(&f->cwnd_milli, (uint64_t)(fi.cwnd * 1000), memory_order_relaxed);
	atomic_store_explicit(&f->srtt_ns, fi.srtt_ns, memory_order_relaxed);
	atomic_store_explicit(&f->rto_ns, fi.rto_ns, memory_order_relaxed);
	atomic_store_explicit(&f->pace_ns, fi.pace_ns, memory_order_relaxed);
	atomic_store_explicit(&f->in_flight, fi.in_flight, memory_order_relaxed);
	atomic_store_explicit(&f->credit, fi.credit, memory_order_relaxed);
	atomic_store_explicit(&f->paths, (uint64_t)fi.paths_alive << 16 | fi.paths, memory_order_relaxed);
	atomic_store_explicit(&f->updated_ns, r->now, memory_order_release);
}

static uint16_t tap_rx(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct dp_trace_tap *tap = port->priv;
	uint16_t got = tap->inner->ops->rx_burst(tap->inner, pkts, n);
	struct dp_trace_ring *r;

	if (got == 0 || !(r = trace_enter(tap->trace)))
		return got;
	for (uint16_t done = 0; done < got;) {
		uint16_t k = got - done < TAP_BURST ? (uint16_t)(got - done) : TAP_BURST;
		uint16_t slots[TAP_BURST + 1], want[TAP_BURST + 1];
		fill(r, tap, pkts + done, k, SL_TRACE_RX, slots, want);
		publish(r, tap, k, slots, want);
		done = (uint16_t)(done + k);
	}
	flow_state(r, tap);
	trace_exit(tap->trace);
	return got;
}

/* Frames are recorded before the port takes them (it may free them at
 * once) and published only once it has: a refused frame is offered again
 * later and must appear once. */
static uint16_t tap_tx(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct dp_trace_tap *tap = port->priv;
	struct dp_trace_ring *r = trace_enter(tap->trace);
	uint16_t sent = 0;

	if (!r)
		return tap->inner->ops->tx_burst(tap->inner, pkts, n);
	while (sent < n) {
		uint16_t k = n - sent < TAP_BURST ? (uint16_t)(n - sent) : TAP_BURST;
		uint16_t slots[TAP_BURST + 1], want[TAP_BURST + 1];
		fill(r, tap, pkts + sent, k, SL_TRACE_TX, slots, want);
		uint16_t took = tap->inner->ops->tx_burst(tap->inner, pkts + sent, k);
		publish(r, tap, took, slots, want);
		sent = (uint16_t)(sent + took);
		if (took < k)
			break;
	}
	trace_exit(tap->trace);
	return sent;
}

/* A last word, recorded as tap_tx records a frame. */
static bool tap_send_last(struct sl_port *port, const uint8_t *frame, uint32_t len)
{
	struct dp_trace_tap *tap = port->priv;
	struct dp_trace_ring *r = trace_enter(tap->trace);
	const struct sl_pkt p = { .data = (uint8_t *)frame, .len = len, .cap = len };
	uint16_t slots[2], want[2];
	bool sent;

	if (!r)
		return sl_port_send_last(tap->inner, frame, len);
	fill(r, tap, &p, 1, SL_TRACE_TX, slots, want);
	sent = sl_port_send_last(tap->inner, frame, len);
	publish(r, tap, (uint16_t)sent, slots, want);
	trace_exit(tap->trace);
	return sent;
}

static uint16_t tap_alloc(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct dp_trace_tap *tap = port->priv;

	return tap->inner->ops->alloc(tap->inner, pkts, n);
}

static void tap_free(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct dp_trace_tap *tap = port->priv;

	tap->inner->ops->free(tap->inner, pkts, n);
}

static void tap_close(struct sl_port *port)
{
	struct dp_trace_tap *tap = port->priv;

	tap->inner->ops->close(tap->inner);
}

static const struct sl_port_ops tap_ops = {
	.name = "trace-tap",
	.rx_burst = tap_rx,
	.tx_burst = tap_tx,
	.alloc = tap_alloc,
	.send_last = tap_send_last,
	.free = tap_free,
	.close = tap_close,
};

struct sl_port *dp_trace_tap(struct dp_trace *t, struct sl_port *inner, uint16_t peer_node)
{
	if (t->ntaps == SL_TRACE_MAX_PORTS) {
		fprintf(stderr, "sluiced: more than %u ports: the port to node %u is not traced\n",
			SL_TRACE_MAX_PORTS, peer_node);
		return inner;
	}
	struct dp_trace_tap *tap = &t->taps[t->ntaps];
	*tap = (struct dp_trace_tap){ .inner = inner, .trace = t, .peer_node = peer_node, .index = t->ntaps };
	tap->port = *inner;
	tap->port.ops = &tap_ops;
	tap->port.priv = tap;
	memset(&tap->port.stats, 0, sizeof(tap->port.stats)); /* the inner port counts */
	t->ntaps++;
	return &tap->port;
}

/* ---- attaching (control thread) ---- */

static void comm_record(struct sl_trace_page *pg, const struct dp_comm *c)
{
	uint32_t i = atomic_load_explicit(&pg->ncomms, memory_order_relaxed);
	struct sl_trace_comm *rec = &pg->comms[i % SL_TRACE_COMM_LOG];

	*rec = (struct sl_trace_comm){ .key32 = c->key32, .rank = c->rank, .nranks = c->nranks };
	memcpy(rec->node, c->node, sizeof(rec->node));
	atomic_store_explicit(&pg->ncomms, i + 1, memory_order_release);
}

static void page_init(struct sl_trace_page *pg, const struct dp_trace *t, const struct dp_engine *e,
		      uint32_t slots, uint32_t slot_size, const struct sl_ctl_msg *m)
{
	struct timespec rt;
	uint64_t mono = mono_ns();

	clock_gettime(CLOCK_REALTIME, &rt);
	pg->magic = SL_TRACE_MAGIC;
	pg->version = SL_TRACE_VERSION;
	pg->slots = slots;
	pg->slot_size = slot_size;
	pg->ring_off = sl_trace_ring_off();
	pg->snap = m->t.snap;
	pg->node = e->node;
	pg->nports = t->ntaps;
	pg->realtime_off_ns = (int64_t)((uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec - mono);
	pg->filter = m->t.filter;
	for (unsigned i = 0; i < t->ntaps; i++) {
		pg->ports[i].peer_node = t->taps[i].peer_node;
		snprintf(pg->ports[i].name, sizeof(pg->ports[i].name), "%s", t->taps[i].inner->ops->name);
	}
	/* The engine changes its communicator table only on requests from this
	 * thread, which waits for each: reading it here races with nothing. */
	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		if (e->comms[i].live)
			comm_record(pg, &e->comms[i]);
	sl_spsc_reset((struct sl_spsc_shared *)((uint8_t *)pg + pg->ring_off));
}

static int refuse(struct sl_ctl_reply *r, int32_t status, const char *why, int err)
{
	r->status = status;
	sl_errmsg_format(r->msg, sizeof(r->msg), "trace attach: %s%s%s", why, err ? ": " : "", err ? strerror(err) : "");
	return -1;
}

/* The ring memory: a memfd so that the tracer maps the same pages. */
static int ring_create(struct dp_trace_ring *ring, size_t bytes, struct sl_ctl_reply *r)
{
	int fd = memfd_create("sluice-trace", MFD_CLOEXEC);

	if (fd < 0)
		return refuse(r, SLUICE_ERR_SYSTEM, "memfd_create failed", errno);
	if (ftruncate(fd, (off_t)bytes) != 0) {
		int err = errno;
		close(fd);
		return refuse(r, SLUICE_ERR_NO_MEMORY, "cannot size the trace ring", err);
	}
	ring->page = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (ring->page == MAP_FAILED) {
		int err = errno;
		close(fd);
		return refuse(r, SLUICE_ERR_NO_MEMORY, "cannot map the trace ring", err);
	}
	ring->bytes = bytes;
	return fd;
}

int dp_trace_attach(struct dp_trace *t, const struct dp_engine *e, const struct sl_ctl_msg *m,
		    struct sl_ctl_reply *r)
{
	if (!t || t->ntaps == 0)
		return refuse(r, SLUICE_ERR_INVALID_USAGE, "this dataplane has no traced ports", 0);
	if (atomic_load(&t->ring))
		return refuse(r, SLUICE_ERR_INVALID_USAGE, "another tracer is attached (one at a time): "
			      "stop it first", 0);
	if (m->t.snap > SL_TRACE_MAX_SNAP) {
		r->status = SLUICE_ERR_INVALID_ARGUMENT;
		sl_errmsg_format(r->msg, sizeof(r->msg), "trace attach: snap %u is above the %u bytes a record keeps",
				 m->t.snap, SL_TRACE_MAX_SNAP);
		return -1;
	}
	struct dp_trace_ring *ring = calloc(1, sizeof(*ring));
	if (!ring)
		return refuse(r, SLUICE_ERR_NO_MEMORY, "out of memory", 0);
	ring->keep_data = SL_TRACE_OFF_BODY + m->t.snap;
	ring->keep_ack = SL_TRACE_OFF_BODY + SL_TRACE_ACK_LEN;
	uint32_t slot_size = (uint32_t)(sizeof(struct sl_trace_rec) + sl_trace_hdr_keep(m->t.snap) + 7) & ~7u;
	uint32_t slots = 1024;
	while ((size_t)slots * 2 * slot_size <= SL_TRACE_RING_BYTES)
		slots *= 2;
	int fd = ring_create(ring, sl_trace_ring_off() + sl_spsc_bytes(slots, slot_size), r);
	if (fd < 0) {
		free(ring);
		return -1;
	}
	page_init(ring->page, t, e, slots, slot_size, m);
	ring->filter = m->t.filter;
	ring->filtering = m->t.filter.match != 0;
	ring->tp = e->tp;
	sl_spsc_attach(&ring->prod, (struct sl_spsc_shared *)((uint8_t *)ring->page + ring->page->ring_off),
		       slots, slot_size, true);
	atomic_store(&t->ring, ring);
	r->value = slots;
	return fd;
}

void dp_trace_detach(struct dp_trace *t)
{
	struct dp_trace_ring *ring = t ? atomic_exchange(&t->ring, NULL) : NULL;

	if (!ring)
		return;
	while (atomic_load(&t->busy))
		usleep(10);
	munmap(ring->page, ring->bytes);
	free(ring);
}

void dp_trace_note_comm(struct dp_trace *t, const struct dp_comm *comm)
{
	struct dp_trace_ring *ring = t ? atomic_load(&t->ring) : NULL;

	if (ring)
		comm_record(ring->page, comm);
}
