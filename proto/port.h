/*
 * port.h: the one interface between the transport and whatever moves
 * frames (DPDK memif/af_packet/af_xdp, verbs, or the in-memory test port).
 * No DPDK type crosses it: a frame is a pointer, a length and an opaque
 * handle the port uses to free it.
 */
#ifndef SLUICE_PORT_H
#define SLUICE_PORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One frame, linear in memory (ports linearize chains). */
struct sl_pkt {
	uint8_t *data;  /* first byte of the Ethernet header */
	uint32_t len;   /* frame bytes; tx: set by the caller before tx_burst */
	uint32_t cap;   /* bytes available at data (tx buffers) */
	void *handle;   /* the port's own buffer (an rte_mbuf, ...) */
};

struct sl_port;

struct sl_port_ops {
	const char *name;
	/* Receive up to n frames; the caller frees each with free(). */
	uint16_t (*rx_burst)(struct sl_port *port, struct sl_pkt *pkts, uint16_t n);
	/* Send up to n frames; the port owns the sent ones, the caller keeps the rest. */
	uint16_t (*tx_burst)(struct sl_port *port, struct sl_pkt *pkts, uint16_t n);
	/* Get up to n empty tx buffers with cap >= port->max_frame. */
	uint16_t (*alloc)(struct sl_port *port, struct sl_pkt *pkts, uint16_t n);
	void (*free)(struct sl_port *port, struct sl_pkt *pkts, uint16_t n);
	void (*close)(struct sl_port *port);
	/* Wait up to timeout_ms for the peer (another process, started in any
	 * order) to come; 0, or -1 with a message in err.  NULL: up once opened. */
	int (*wait_up)(struct sl_port *port, unsigned timeout_ms, char *err, size_t errlen);
	/* Send a copy of one frame (len bytes) as a last word (wire.h
	 * SL_T_LAST: a failure's notice, sent as its sender stops) into room
	 * the port keeps back from alloc and tx_burst, so that it finds a
	 * place after ordinary frames filled a ring that a stopped peer does
	 * not read; true if it went.  NULL: the port keeps none (see
	 * sl_port_send_last). */
	bool (*send_last)(struct sl_port *port, const uint8_t *frame, uint32_t len);
};

struct sl_port_counters {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
	uint64_t tx_full;    /* frames the port refused (ring full) */
	uint64_t rx_chained; /* frames that arrived in several segments */
	uint64_t bad_desc;   /* descriptors a peer wrote in shared memory that failed their
				checks (shm: an index or length out of range), dropped */
};

struct sl_port {
	const struct sl_port_ops *ops;
	void *priv;              /* the port's own state */
	uint32_t max_frame;      /* largest frame it carries, Ethernet header included */
	uint16_t index;          /* position in the engine's port table */
	uint8_t mac[6];          /* source MAC for frames sent here */
	bool crc;                /* the link has no FCS (memif, veth): the transport adds a
				    CRC32C trailer to every frame it sends here */
	uint32_t rx_keep;        /* received frames a receiver may hold past its poll
				    (sl_tp_keep_frame), in any order, without starving the
				    sender of buffers; 0: none */
	/* Nothing to receive while *rx_posted equals *rx_taken (shm: the
	 * peer's posted count and the frames read), told without a call:
	 * on the shm mesh, one port per peer, a pass's empty polls were
	 * ~100 instructions a port.  NULL: only rx_burst tells.  A wrapper
	 * copies them when its rx_burst only passes the inner port's on, and
	 * sets rx_posted NULL when it does work of its own there. */
	const _Atomic uint32_t *rx_posted;
	const uint32_t *rx_taken;
	struct sl_port_counters stats;
};

/* Whether port surely has nothing to receive.  Acquire, as rx_burst's own
 * read: an engine about to sleep looks once more after reading its wake
 * word (dataplane/wake.h), and that look must see what its peer posted. */
static inline bool sl_port_rx_idle(const struct sl_port *port)
{
	return port->rx_posted && atomic_load_explicit(port->rx_posted, memory_order_acquire) == *port->rx_taken;
}

/* A last word on port: into its kept room, or (a port that keeps none:
 * memif, af_packet, whose peer's ring or socket buffer is out of reach)
 * as any frame. */
static inline bool sl_port_send_last(struct sl_port *port, const uint8_t *frame, uint32_t len)
{
	struct sl_pkt p;

	if (port->ops->send_last)
		return port->ops->send_last(port, frame, len);
	if (len > port->max_frame || port->ops->alloc(port, &p, 1) != 1)
		return false;
	memcpy(p.data, frame, len);
	p.len = len;
	if (port->ops->tx_burst(port, &p, 1) == 1)
		return true;
	port->ops->free(port, &p, 1);
	return false;
}

/* A monotonic clock in nanoseconds; tests pass a fake one. */
struct sl_clock {
	uint64_t (*now_ns)(void *arg);
	void *arg;
};

static inline uint64_t sl_now(const struct sl_clock *c)
{
	return c->now_ns(c->arg);
}

static inline int sl_port_wait_up(struct sl_port *port, unsigned timeout_ms, char *err, size_t errlen)
{
	return port->ops->wait_up ? port->ops->wait_up(port, timeout_ms, err, errlen) : 0;
}

#endif
