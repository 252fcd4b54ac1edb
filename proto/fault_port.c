/*
 * fault_port.c: faults on any port's transmit side (see fault_port.h).
 *
 * Frames the transport sends go through the fault engine (fault.c); what
 * survives waits in a FIFO until its delay has passed and the inner port
 * takes it.  The FIFO admits a burst only while it has room for every frame
 * the engine could emit in return (the frame, its duplicate and every held
 * frame), so the engine never meets a full queue.  Nothing runs between
 * calls: each tx_burst and rx_burst first hands due frames to the inner
 * port, and releases held-back frames when the link has gone quiet.
 */
#include "fault_port.h"

#include <stdlib.h>
#include <string.h>

#define FP_QUEUE 4096            /* frames waiting for their delay or the inner port */
#define FP_BURST 32              /* frames handed to the inner port per call */
#define FP_QUIET_NS 50000        /* no frame sent this long: release the held ones */

struct fp_entry {
	struct sl_fault_frame frame;
	uint64_t due_ns;
};

struct fault_port {
	struct sl_port port;          /* what the transport holds; priv points back here */
	struct sl_port *inner;
	struct sl_clock clock;
	struct sl_fault fault;
	struct sl_fault_sink sink;
	uint64_t now_ns;              /* read once per call when timing matters */
	uint64_t last_tx_ns;
	struct fp_entry queue[FP_QUEUE];
	uint32_t head, count;
};

static struct fault_port *fp_of(const struct sl_port *port)
{
	return port->priv;
}

static bool timed(const struct fault_port *fp)
{
	return fp->fault.spec.delay_ns || fp->fault.spec.reorder_depth;
}

static void fp_emit(void *arg, struct sl_fault_frame fr)
{
	struct fault_port *fp = arg;

	fp->queue[(fp->head + fp->count++) % FP_QUEUE] =
		(struct fp_entry){ fr, fp->now_ns + fp->fault.spec.delay_ns };
}

static void fp_discard(void *arg, struct sl_fault_frame fr)
{
	struct fault_port *fp = arg;
	struct sl_pkt pkt = { .data = fr.data, .len = fr.len, .cap = fr.len, .handle = fr.handle };

	fp->inner->ops->free(fp->inner, &pkt, 1);
}

static bool fp_copy(void *arg, const struct sl_fault_frame *fr, struct sl_fault_frame *out)
{
	struct fault_port *fp = arg;
	struct sl_pkt pkt;

	if (fp->inner->ops->alloc(fp->inner, &pkt, 1) != 1)
		return false;
	memcpy(pkt.data, fr->data, fr->len);
	*out = (struct sl_fault_frame){ pkt.data, fr->len, pkt.handle };
	return true;
}

/* Hand due frames to the inner port, oldest first, until it refuses. */
static void drain(struct fault_port *fp)
{
	struct sl_pkt pkts[FP_BURST];

	while (fp->count) {
		uint16_t n = 0;
		for (uint32_t i = 0; i < fp->count && n < FP_BURST; i++, n++) {
			const struct fp_entry *e = &fp->queue[(fp->head + i) % FP_QUEUE];
			if (e->due_ns > fp->now_ns)
				break;
			pkts[n] = (struct sl_pkt){ .data = e->frame.data, .len = e->frame.len,
						   .cap = e->frame.len, .handle = e->frame.handle };
		}
		uint16_t sent = n ? fp->inner->ops->tx_burst(fp->inner, pkts, n) : 0;
		fp->head = (fp->head + sent) % FP_QUEUE;
		fp->count -= sent;
		if (sent < FP_BURST)
			return;
	}
}

static void tick(struct fault_port *fp)
{
	if (timed(fp))
		fp->now_ns = sl_now(&fp->clock);
	if (fp->fault.n_held && fp->now_ns - fp->last_tx_ns >= FP_QUIET_NS)
		sl_fault_flush(&fp->fault, &fp->sink);
	drain(fp);
}

static uint16_t fp_tx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct fault_port *fp = fp_of(port);
	uint16_t i;

	if (timed(fp))
		fp->now_ns = sl_now(&fp->clock);
	for (i = 0; i < n && fp->count + fp->fault.n_held + 2 <= FP_QUEUE; i++) {
		port->stats.tx_pkts++;
		port->stats.tx_bytes += pkts[i].len;
		sl_fault_apply(&fp->fault,
			       (struct sl_fault_frame){ pkts[i].data, pkts[i].len, pkts[i].handle },
			       &fp->sink);
	}
	port->stats.tx_full += n - i;
	if (i)
		fp->last_tx_ns = fp->now_ns;
	drain(fp);
	return i;
}

static uint16_t fp_rx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct fault_port *fp = fp_of(port);
	uint16_t got;

	tick(fp);
	got = fp->inner->ops->rx_burst(fp->inner, pkts, n);
	port->stats.rx_pkts += got;
	for (uint16_t i = 0; i < got; i++)
		port->stats.rx_bytes += pkts[i].len;
	return got;
}

static uint16_t fp_alloc(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct sl_port *inner = fp_of(port)->inner;

	return inner->ops->alloc(inner, pkts, n);
}

static void fp_free(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct sl_port *inner = fp_of(port)->inner;

	inner->ops->free(inner, pkts, n);
}

/* Straight to the inner port's room for last words, past the faults and
 * the delay queue, which work on its ordinary buffers: sent once as its
 * sender stops, a last word would die in the queue with the process. */
static bool fp_send_last(struct sl_port *port, const uint8_t *frame, uint32_t len)
{
	return sl_port_send_last(fp_of(port)->inner, frame, len);
}

/* Frames still held or queued are lost, as on a link going down. */
static void fp_close(struct sl_port *port)
{
	struct fault_port *fp = fp_of(port);

	sl_fault_flush(&fp->fault, &fp->sink);
	for (; fp->count; fp->count--, fp->head = (fp->head + 1) % FP_QUEUE)
		fp_discard(fp, fp->queue[fp->head].frame);
	fp->inner->ops->close(fp->inner);
	free(fp);
}

static const struct sl_port_ops fp_ops = {
	.name = "fault",
	.rx_burst = fp_rx_burst,
	.tx_burst = fp_tx_burst,
	.alloc = fp_alloc,
	.free = fp_free,
	.close = fp_close,
	.send_last = fp_send_last,
};

struct sl_port *sl_fault_port_wrap(struct sl_port *inner, const struct sl_fault_spec *spec,
				   uint64_t stream, const struct sl_clock *clock)
{
	struct fault_port *fp = calloc(1, sizeof(*fp));

	if (!fp)
		return NULL;
	fp->inner = inner;
	fp->clock = *clock;
	sl_fault_init(&fp->fault, spec, stream);
	fp->sink = (struct sl_fault_sink){ fp_emit, fp_discard, fp_copy, fp };
	fp->port = *inner;
	fp->port.ops = &fp_ops;
	fp->port.priv = fp;
	fp->port.rx_keep = 0; /* its duplicates and held-back frames are its own buffers' */
	fp->port.rx_posted = NULL; /* its rx_burst sends what came due (tick) */
	memset(&fp->port.stats, 0, sizeof(fp->port.stats));
	return &fp->port;
}

const struct sl_fault_counters *sl_fault_port_counters(const struct sl_port *port)
{
	return &fp_of(port)->fault.count;
}
