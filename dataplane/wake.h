/*
 * wake.h: waking a sleeping engine from outside it.
 *
 * DPDK 22.11's memif and af_packet drivers have no rx interrupts
 * (rte_eth_dev_rx_intr_enable answers -ENOTSUP), so a sleeping engine
 * cannot ask the kernel to wake it when a frame arrives.  Instead every
 * dataplane has a wake word in a small shared file, and a peer on the same
 * host that sends it frames bumps the word and wakes it (a futex) when, and
 * only when, the word says its engine sleeps.  Clients wake it through
 * their page's doorbell (abi.h) the same way.
 */
#ifndef SLUICE_WAKE_H
#define SLUICE_WAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port.h"

/* One per dataplane.  The engine sets sleeping, then reads seq, then looks
 * for work once more before it waits on seq; a sender makes its frames
 * visible, then reads sleeping (with a full fence between), then bumps seq.
 * So either the engine's last look finds the frames or the sender sees it
 * sleeping and its bump ends the wait. */
struct dp_wake {
	_Atomic uint32_t seq;      /* futex word, bumped per wake-up */
	_Atomic uint32_t sleeping; /* the engine is (about to be) waiting on seq */
};

/* The wake word of a node's channel's engine in dir (dir/wake-NODE-CHANNEL), created (own) or mapped
 * (a peer's, which must exist: it is made before the peer's links).  dir
 * NULL: private memory, for a dataplane no peer on this host reaches.
 * NULL with a message in err. */
struct dp_wake *dp_wake_open(const char *dir, unsigned node, unsigned channel, bool own, char *err, size_t len);
void dp_wake_close(struct dp_wake *w);
/* Wake w's engine if it sleeps. */
void dp_wake_kick(struct dp_wake *w);
/* Wake w's engine whether or not it says it sleeps (its own process, which
 * may have told peers to stop kicking it). */
void dp_wake_force(struct dp_wake *w);
/* A port that forwards to inner and kicks peer after every burst it sent
 * something in.  NULL when out of memory. */
struct sl_port *dp_wake_port_wrap(struct sl_port *inner, struct dp_wake *peer);

#endif
