/*
 * memport.c: two sl_ports joined back to back in one process, so that the
 * transport can be tested without DPDK or a NIC.  Buffers come from one
 * fixed pool per pair; a sent frame's buffer moves (without a copy) into the
 * peer's bounded FIFO, where faults are applied as it crosses: drop,
 * duplicate (a copy), reorder (held back until a few later frames passed)
 * and corrupt (one byte flipped), by the engine in fault.c with one seeded
 * stream per direction, so a run replays exactly from its seed.  A
 * bottleneck behaves as a switch queue: frames wait for the shared rate, are
 * marked CE above its ECN threshold and lost above its buffer.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "memport.h"
#include "wire.h"

#define MP_HOLD_MAX_SKIP 4  /* a held frame is passed by 1..this many later frames */
#define MP_USER_BUFS 512    /* buffers the two users may hold at once */
#define MP_LAST_ROOM 4      /* FIFO places past depth that only last words take (port.h send_last) */

struct mp_frame {
	uint8_t *buf;
	uint32_t len;
	uint64_t due_ns; /* rate-limited: when its last bit has left */
};

/* One direction: a FIFO ring behind the fault engine. */
struct mp_link {
	struct mp_frame *fifo;
	uint32_t depth, head, count; /* the FIFO holds depth + MP_LAST_ROOM */
	struct sl_fault fault;
	struct sl_fault_sink sink;
	struct mp_pair *mp;
	struct sl_memport_bottleneck *neck; /* rate limit, NULL: none */
};

struct mp_pair {
	struct sl_port port[2];    /* port[i] sends on link[i], receives from link[1 - i] */
	struct mp_link link[2];
	uint8_t *slab;             /* every buffer, pool_count * max_frame bytes */
	uint8_t **pool;            /* free buffers, a stack */
	uint32_t pool_free, pool_count;
	bool down;                 /* the cable is cut: sends are lost */
};

static struct mp_pair *pair_of(const struct sl_port *port)
{
	return port->priv;
}

static int side_of(const struct sl_port *port)
{
	return port == &pair_of(port)->port[1];
}

static uint8_t *pool_get(struct mp_pair *mp)
{
	return mp->pool_free ? mp->pool[--mp->pool_free] : NULL;
}

static void pool_put(struct mp_pair *mp, uint8_t *buf)
{
	mp->pool[mp->pool_free++] = buf;
}

/* When the frame's last bit leaves the bottleneck b, or 0 when b's buffer
 * has no room for it (tail drop); marks it CE above the ECN threshold. */
static uint64_t neck_pass(struct sl_memport_bottleneck *b, struct sl_fault_frame *fr)
{
	uint64_t now = sl_now(&b->clock);
	uint64_t wait = b->busy_until_ns > now ? b->busy_until_ns - now : 0;

	if (b->buffer_ns && wait > b->buffer_ns) {
		b->dropped++;
		return 0;
	}
	if (b->ecn_ns && wait > b->ecn_ns)
		b->marked += sl_wire_mark_ce(fr->data, fr->len);
	b->max_wait_ns = wait > b->max_wait_ns ? wait : b->max_wait_ns;
	b->busy_until_ns = now + wait + (uint64_t)fr->len * 1000000000ull / b->bytes_per_s;
	return b->busy_until_ns;
}

static void fifo_push(struct mp_link *l, struct mp_frame fr)
{
	l->fifo[(l->head + l->count++) % (l->depth + MP_LAST_ROOM)] = fr;
}

/* Into the FIFO, or lost when it is full (like a switch queue overflowing),
 * when the bottleneck's buffer is, or when the cable is cut. */
static void link_emit(void *arg, struct sl_fault_frame fr)
{
	struct mp_link *l = arg;
	uint64_t due = 0;

	if (l->count >= l->depth || l->mp->down || (l->neck && !(due = neck_pass(l->neck, &fr)))) {
		pool_put(l->mp, fr.data);
		return;
	}
	fifo_push(l, (struct mp_frame){ fr.data, fr.len, due });
}

static void link_discard(void *arg, struct sl_fault_frame fr)
{
	pool_put(((struct mp_link *)arg)->mp, fr.data);
}

static bool link_copy(void *arg, const struct sl_fault_frame *fr, struct sl_fault_frame *out)
{
	uint8_t *copy = pool_get(((struct mp_link *)arg)->mp);

	if (!copy)
		return false;
	memcpy(copy, fr->data, fr->len);
	*out = (struct sl_fault_frame){ copy, fr->len, copy };
	return true;
}

static uint16_t mp_tx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct mp_pair *mp = pair_of(port);
	struct mp_link *l = &mp->link[side_of(port)];
	uint16_t i;

	for (i = 0; i < n && l->count < l->depth; i++) {
		port->stats.tx_pkts++;
		port->stats.tx_bytes += pkts[i].len;
		sl_fault_apply(&l->fault, (struct sl_fault_frame){ pkts[i].data, pkts[i].len, pkts[i].data },
			       &l->sink);
	}
	port->stats.tx_full += n - i;
	return i;
}

static uint16_t mp_rx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct mp_pair *mp = pair_of(port);
	struct mp_link *l = &mp->link[!side_of(port)];
	uint16_t i;

	/* nothing left to pass the held frames: let them through now */
	if (!l->count)
		sl_fault_flush(&l->fault, &l->sink);
	uint64_t now = l->neck ? sl_now(&l->neck->clock) : 0;
	for (i = 0; i < n && l->count && l->fifo[l->head].due_ns <= now; i++) {
		struct mp_frame fr = l->fifo[l->head];
		l->head = (l->head + 1) % (l->depth + MP_LAST_ROOM);
		l->count--;
		pkts[i] = (struct sl_pkt){ .data = fr.buf, .len = fr.len, .cap = port->max_frame,
					   .handle = fr.buf };
		port->stats.rx_pkts++;
		port->stats.rx_bytes += fr.len;
	}
	return i;
}

/* Past a full FIFO, into its last words' room; no fault and no bottleneck
 * (a cut cable loses it, as link_emit does). */
static bool mp_send_last(struct sl_port *port, const uint8_t *frame, uint32_t len)
{
	struct mp_pair *mp = pair_of(port);
	struct mp_link *l = &mp->link[side_of(port)];
	uint8_t *buf;

	if (l->count == l->depth + MP_LAST_ROOM || len > port->max_frame)
		return false;
	if (!mp->down) {
		if (!(buf = pool_get(mp)))
			return false;
		memcpy(buf, frame, len);
		fifo_push(l, (struct mp_frame){ buf, len, 0 });
	}
	port->stats.tx_pkts++;
	port->stats.tx_bytes += len;
	return true;
}

static uint16_t mp_alloc(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct mp_pair *mp = pair_of(port);
	uint16_t i;

	for (i = 0; i < n && mp->pool_free; i++) {
		uint8_t *buf = pool_get(mp);
		pkts[i] = (struct sl_pkt){ .data = buf, .len = 0, .cap = port->max_frame,
					   .handle = buf };
	}
	return i;
}

static void mp_free(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++)
		pool_put(pair_of(port), pkts[i].handle);
}

/* Closing one end does nothing: the pair goes as a whole in sl_memport_pair_free. */
static void mp_close(struct sl_port *port)
{
	(void)port;
}

static const struct sl_port_ops mp_ops = {
	.name = "memport",
	.rx_burst = mp_rx_burst,
	.tx_burst = mp_tx_burst,
	.alloc = mp_alloc,
	.free = mp_free,
	.close = mp_close,
	.send_last = mp_send_last,
};

static void pair_release(struct mp_pair *mp)
{
	free(mp->link[0].fifo);
	free(mp->link[1].fifo);
	free(mp->pool);
	free(mp->slab);
	free(mp);
}

static int pair_alloc(struct mp_pair *mp, uint32_t max_frame, uint32_t depth)
{
	mp->pool_count = 2 * (depth + MP_LAST_ROOM + SL_FAULT_HOLD) + MP_USER_BUFS;
	mp->slab = malloc((size_t)mp->pool_count * max_frame);
	mp->pool = malloc(mp->pool_count * sizeof(*mp->pool));
	mp->link[0].fifo = malloc((depth + MP_LAST_ROOM) * sizeof(struct mp_frame));
	mp->link[1].fifo = malloc((depth + MP_LAST_ROOM) * sizeof(struct mp_frame));
	if (!mp->slab || !mp->pool || !mp->link[0].fifo || !mp->link[1].fifo)
		return -1;
	for (uint32_t i = 0; i < mp->pool_count; i++)
		pool_put(mp, mp->slab + (size_t)i * max_frame);
	return 0;
}

int sl_memport_pair(struct sl_port **a, struct sl_port **b, uint32_t max_frame, uint32_t depth,
		    const struct sl_memport_faults *faults)
{
	struct mp_pair *mp = calloc(1, sizeof(*mp));

	if (!mp || !max_frame || !depth || pair_alloc(mp, max_frame, depth) < 0) {
		if (mp)
			pair_release(mp);
		return -1;
	}
	struct sl_fault_spec spec = { .drop = faults->drop, .dup = faults->dup,
				      .corrupt = faults->corrupt, .reorder = faults->reorder,
				      .reorder_depth = MP_HOLD_MAX_SKIP, .seed = faults->seed };
	for (int i = 0; i < 2; i++) {
		struct mp_link *l = &mp->link[i];
		l->depth = depth;
		l->mp = mp;
		l->sink = (struct sl_fault_sink){ link_emit, link_discard, link_copy, l };
		/* distinct streams per direction, each fixed by the seed */
		sl_fault_init(&l->fault, &spec, (uint64_t)(i + 1));
		mp->port[i] = (struct sl_port){ .ops = &mp_ops, .priv = mp, .max_frame = max_frame,
						.mac = { 0x02, 0x4d, 0x50, 0, 0, (uint8_t)(i + 1) },
						.rx_keep = MP_USER_BUFS / 4 };
	}
	*a = &mp->port[0];
	*b = &mp->port[1];
	return 0;
}

void sl_memport_set_bottleneck(struct sl_port *end, struct sl_memport_bottleneck *b)
{
	pair_of(end)->link[side_of(end)].neck = b;
}

void sl_memport_set_down(struct sl_port *end, bool down)
{
	pair_of(end)->down = down;
}

void sl_memport_pair_free(struct sl_port *a, struct sl_port *b)
{
	(void)b; /* both ends live in one allocation */
	if (a)
		pair_release(pair_of(a));
}

uint32_t sl_memport_held(const struct sl_port *p)
{
	const struct mp_pair *mp = pair_of(p);
	uint32_t inside = mp->pool_free;

	for (int i = 0; i < 2; i++)
		inside += mp->link[i].count + mp->link[i].fault.n_held;
	return mp->pool_count - inside;
}
