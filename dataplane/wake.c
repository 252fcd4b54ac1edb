/*
 * wake.c: the wake word a dataplane sleeps on, and the port wrapper with
 * which its peers wake it (wake.h says why there is no interrupt to use).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sluice/errmsg.h>

#include "wake.h"

struct dp_wake *dp_wake_open(const char *dir, unsigned node, unsigned channel, bool own, char *err, size_t len)
{
	char path[PATH_MAX];
	void *p;
	int fd;

	if (!dir) {
		p = mmap(NULL, sizeof(struct dp_wake), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED)
			return p;
		sl_errmsg_format(err, len, "cannot map the engine's wake word: %s", strerror(errno));
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/wake-%u-%u", dir, node, channel);
	fd = own ? open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || (own && ftruncate(fd, sizeof(struct dp_wake)) != 0)) {
		sl_errmsg_format(err, len, "cannot %s the wake word %s: %s", own ? "create" : "open", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p = mmap(NULL, sizeof(struct dp_wake), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		return p;
	sl_errmsg_format(err, len, "cannot map the wake word %s: %s", path, strerror(errno));
	return NULL;
}

void dp_wake_close(struct dp_wake *w)
{
	if (w)
		munmap(w, sizeof(*w));
}

void dp_wake_kick(struct dp_wake *w)
{
	/* the frames (or the submission) are written: order that before the read */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&w->sleeping, memory_order_relaxed))
		dp_wake_force(w);
}

void dp_wake_force(struct dp_wake *w)
{
	atomic_fetch_add_explicit(&w->seq, 1, memory_order_seq_cst);
	/* not private: the word is shared between processes */
	syscall(SYS_futex, &w->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* ---- the kicking port ---- */

struct kick_port {
	struct sl_port port;
	struct sl_port *inner;
	struct dp_wake *peer;
};

static struct sl_port *inner_of(struct sl_port *port)
{
	return ((struct kick_port *)port->priv)->inner;
}

static uint16_t kick_rx(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	return inner_of(port)->ops->rx_burst(inner_of(port), pkts, n);
}

static uint16_t kick_tx(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct kick_port *k = port->priv;
	uint16_t sent = k->inner->ops->tx_burst(k->inner, pkts, n);

	if (sent)
		dp_wake_kick(k->peer);
	return sent;
}

static bool kick_send_last(struct sl_port *port, const uint8_t *frame, uint32_t len)
{
	struct kick_port *k = port->priv;
	bool sent = sl_port_send_last(k->inner, frame, len);

	if (sent)
		dp_wake_kick(k->peer);
	return sent;
}

static uint16_t kick_alloc(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	return inner_of(port)->ops->alloc(inner_of(port), pkts, n);
}

static void kick_free(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	inner_of(port)->ops->free(inner_of(port), pkts, n);
}

static void kick_close(struct sl_port *port)
{
	struct kick_port *k = port->priv;

	k->inner->ops->close(k->inner);
	free(k);
}

static const struct sl_port_ops kick_ops = {
	.name = "kick", .rx_burst = kick_rx, .tx_burst = kick_tx, .alloc = kick_alloc, .free = kick_free,
	.close = kick_close, .send_last = kick_send_last,
};

struct sl_port *dp_wake_port_wrap(struct sl_port *inner, struct dp_wake *peer)
{
	struct kick_port *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->inner = inner;
	k->peer = peer;
	k->port = *inner;
	k->port.ops = &kick_ops;
	k->port.priv = k;
	return &k->port;
}
