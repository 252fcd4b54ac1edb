/*
 * port_dpdk.h: a sluice port (proto/port.h) backed by one DPDK ethdev: a
 * vdev such as net_memif, net_af_packet or net_af_xdp, hot-plugged after EAL
 * is up.  Only this file's .c knows about mbufs; the transport sees sl_pkt.
 */
#ifndef SLUICE_PORT_DPDK_H
#define SLUICE_PORT_DPDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port.h"

/*
 * Probe devargs (e.g. "net_memif0,role=server,socket=/run/x/a.sock,socket-abstract=no"),
 * make pools of max_frame-sized linear buffers (one for rx, one for tx),
 * set up one rx and one tx queue and start the device.  For net_memif without bsize=, bsize is chosen
 * so that max_frame crosses as one segment; both ends of a memif link must then
 * use the same max_frame (the server writes into the client's buffers).
 * The link may still be down: see sl_dpdk_port_wait_up().
 * Tx contract: send only buffers from this port's alloc() (or its rx_burst),
 * with data left where the port put it and len <= cap.
 * Close only after every frame is back (freed or sent): the pools go with it.
 * Returns NULL with a message in err.  Not thread-safe: control path only.
 */
struct sl_port *sl_dpdk_port_open(const char *devargs, uint32_t max_frame, uint16_t rxq_desc,
				  uint16_t txq_desc, char *err, size_t errlen);

/* EAL memory the pools of a port opened with these arguments take, in bytes. */
size_t sl_dpdk_port_pool_bytes(uint32_t max_frame, uint16_t rxq_desc, uint16_t txq_desc);

/*
 * Wait until the link is up: for memif, until the peer (a separate process,
 * started in any order) has connected.  A memif client whose server is not
 * there yet keeps retrying to connect here.  0, or -1 with a message in err.
 */
int sl_dpdk_port_wait_up(struct sl_port *port, unsigned timeout_ms, char *err, size_t errlen);

/* Whether the link is up now (memif: the peer is connected).  Control path. */
bool sl_dpdk_port_link_up(struct sl_port *port);

/* Whether the link runs memif zero-copy: a DPDK port, a client opened with
 * zero-copy=yes whose driver, once the link came up, took our buffers for its
 * ring.  False for any other port. */
bool sl_dpdk_port_zero_copy(const struct sl_port *port);

/* A descriptor that polls readable while a received frame waits
 * (net_af_packet's socket: its ring), for an engine to sleep on; -1 for any
 * other port. */
int sl_dpdk_port_rx_fd(const struct sl_port *port);

/* Frames received but dropped: chained and too long for one buffer, or no buffer to linearize into. */
uint64_t sl_dpdk_port_rx_dropped(const struct sl_port *port);

/* What the driver and the pools say, for a hung link's post-mortem: frames
 * the driver missed or had no buffer for, and the free buffers of each pool
 * (a pool that ran dry stops the link for good).  Writes ", ..." into buf as
 * snprintf does; 0 and nothing for a port that is not DPDK's.  Control path. */
int sl_dpdk_port_describe(const struct sl_port *port, char *buf, size_t len);

#endif
