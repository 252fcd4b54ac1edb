/*
 * port_dpdk.c: struct sl_port over one DPDK ethdev, and nothing else.
 *
 * The transport wants linear frames of up to max_frame bytes and never sees
 * an mbuf.  So every buffer here is one mbuf whose data room holds a whole
 * max_frame; chains the driver hands up anyway are copied into one buffer
 * (counted in stats.rx_chained, so a misconfigured link shows).  Counters are
 * our own because memif resets its statistics when the peer disconnects.
 *
 * net_memif needs care to deliver big frames unchained: its receive path
 * gives one mbuf per memif buffer, and memif buffers default to 2048 bytes,
 * so the memif buffer size (bsize=) must cover max_frame as well as the mbuf.
 * We set bsize to the mbuf's data room (less headroom), which also puts both
 * ends of the driver's copy loop on its single-copy fast path.
 *
 * A memif client opened with zero-copy=yes hands the driver its own mbufs:
 * its rx pool fills the server-to-client ring and its tx mbufs go on the
 * other ring as they are, so this end copies nothing (the server still
 * copies both ways).  The driver takes the flag only where EAL's memory
 * allows it (eal.c's zero-copy layout); we believe it once the driver has
 * lent its ring our rx buffers (sl_dpdk_port_zero_copy).
 */
#include "afp_ring.h"
#include "eal.h"
#include "eal_intr.h"
#include "port_dpdk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

/* Frames handled per driver call; bounds the on-stack mbuf arrays. */
#define SL_DPDK_BURST 64
/* Buffers beyond the rings: for tx, frames staged or held back (the fault
 * injector's queue) and per-lcore caches; for rx, bursts and caches. */
#define SL_DPDK_TX_SLACK 2048u
#define SL_DPDK_RX_SLACK 512u
#define SL_DPDK_POOL_CACHE 256u
/* A memif client retries connecting after this long without link, doubling up to the max. */
#define SL_DPDK_CONNECT_RETRY_MS 50u        /* looking for the server's socket file */
#define SL_DPDK_RECONNECT_MS 3000u           /* a started client's handshake gets this long */

struct sl_dpdk_port {
	struct sl_port port;         /* what the engine holds; priv points back here */
	/* One mbuf per frame.  Apart, so that frames waiting to leave can never
	 * take the buffers the port needs to receive: two ends whose sends wait
	 * on each other's receiving would otherwise both stop for good. */
	struct rte_mempool *rx_pool, *tx_pool;
	uint64_t rx_dropped;         /* chained frames we could not linearize */
	int afp_fd;                  /* net_af_packet: the driver's socket, for ring drops and idle waits; else -1 */
	uint64_t afp_drops;          /* ... summed, since the kernel's count resets on reading */
	uint16_t port_id;            /* ethdev port */
	bool started;                /* rte_eth_dev_start succeeded */
	bool memif_client;           /* start may fail until the server listens */
	bool zero_copy_asked;        /* memif client with zero-copy=yes */
	bool zero_copy;              /* ... and the driver lends its ring our buffers */
	bool socket_file;            /* memif socket is a file, not an abstract name */
	char name[RTE_DEV_NAME_MAX_LEN]; /* vdev name, e.g. "net_memif0" */
	char socket[108];            /* memif socket path, for retries and messages */
	char hidden[108];            /* memif server: where it listens until started */
	bool socket_shown;           /* ... and it was moved from there to socket */
};

static inline struct sl_dpdk_port *dp_of(const struct sl_port *port)
{
	return port->priv;
}

/* Copy a chain into one fresh buffer; the chain is freed either way. */
static struct rte_mbuf *linearize(struct sl_dpdk_port *dp, struct rte_mbuf *chain)
{
	struct rte_mbuf *flat = NULL;
	uint32_t len = rte_pktmbuf_pkt_len(chain);

	if (len <= dp->port.max_frame)
		flat = rte_pktmbuf_alloc(dp->rx_pool);
	if (likely(flat != NULL)) {
		rte_pktmbuf_read(chain, 0, len, rte_pktmbuf_mtod(flat, void *));
		flat->data_len = (uint16_t)len;
		flat->pkt_len = len;
	} else {
		dp->rx_dropped++;
	}
	rte_pktmbuf_free(chain);
	return flat;
}

static uint16_t dpdk_rx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct sl_dpdk_port *dp = dp_of(port);
	struct rte_mbuf *mbufs[SL_DPDK_BURST];
	uint64_t bytes = 0;
	uint16_t got = 0;

	while (got < n) {
		uint16_t want = RTE_MIN(n - got, SL_DPDK_BURST);
		uint16_t nb = rte_eth_rx_burst(dp->port_id, 0, mbufs, want);

		for (uint16_t i = 0; i < nb; i++) {
			struct rte_mbuf *m = mbufs[i];

			if (unlikely(m->nb_segs > 1)) {
				port->stats.rx_chained++;
				m = linearize(dp, m);
				if (m == NULL)
					continue;
			}
			pkts[got].data = rte_pktmbuf_mtod(m, uint8_t *);
			pkts[got].len = m->data_len;
			/* Room to reuse the buffer in place, e.g. to turn it into a reply. */
			pkts[got].cap = m->data_len + rte_pktmbuf_tailroom(m);
			pkts[got].handle = m;
			bytes += m->data_len;
			got++;
		}
		if (nb < want)
			break;
	}
	port->stats.rx_pkts += got;
	port->stats.rx_bytes += bytes;
	return got;
}

static uint16_t dpdk_tx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct sl_dpdk_port *dp = dp_of(port);
	struct rte_mbuf *mbufs[SL_DPDK_BURST];
	uint16_t sent = 0;

	while (sent < n) {
		uint16_t want = RTE_MIN(n - sent, SL_DPDK_BURST);
		uint16_t nb;

		for (uint16_t i = 0; i < want; i++) {
			struct rte_mbuf *m = pkts[sent + i].handle;

			RTE_ASSERT(pkts[sent + i].data == rte_pktmbuf_mtod(m, uint8_t *));
			m->data_len = (uint16_t)pkts[sent + i].len;
			m->pkt_len = pkts[sent + i].len;
			mbufs[i] = m;
		}
		nb = rte_eth_tx_burst(dp->port_id, 0, mbufs, want);
		for (uint16_t i = 0; i < nb; i++)
			port->stats.tx_bytes += pkts[sent + i].len;
		sent += nb;
		if (nb < want)
			break;
	}
	port->stats.tx_pkts += sent;
	port->stats.tx_full += n - sent;
	return sent;
}

static uint16_t dpdk_alloc(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct sl_dpdk_port *dp = dp_of(port);
	struct rte_mbuf *mbufs[SL_DPDK_BURST];
	uint16_t got = 0;

	while (got < n) {
		uint16_t want = RTE_MIN(n - got, SL_DPDK_BURST);

		/* Bulk allocation is all or nothing: when short, ask for less. */
		while (rte_pktmbuf_alloc_bulk(dp->tx_pool, mbufs, want) != 0) {
			want /= 2;
			if (want == 0)
				return got;
		}
		for (uint16_t i = 0; i < want; i++, got++) {
			pkts[got].data = rte_pktmbuf_mtod(mbufs[i], uint8_t *);
			pkts[got].len = 0;
			pkts[got].cap = rte_pktmbuf_tailroom(mbufs[i]);
			pkts[got].handle = mbufs[i];
		}
	}
	return got;
}

static void dpdk_free(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct rte_mbuf *mbufs[SL_DPDK_BURST];

	(void)port;
	for (uint16_t done = 0; done < n;) {
		uint16_t k = RTE_MIN(n - done, SL_DPDK_BURST);

		for (uint16_t i = 0; i < k; i++)
			mbufs[i] = pkts[done + i].handle;
		rte_pktmbuf_free_bulk(mbufs, k);
		done += k;
	}
}

/*
 * Stopping and removing the device run on EAL's interrupt thread
 * (sl_eal_on_intr_thread), where memif handles its peer's messages: 22.11
 * frees a link's regions and closes its descriptors without a lock both when
 * the peer disconnects and when the port stops, and the two at once freed
 * them twice (rte_free's "EAL: Error: Invalid memory" in 4 of 5 test runs,
 * and then and again a process that crashed or hung in teardown).
 */
static void stop_device(void *arg)
{
	struct sl_dpdk_port *dp = arg;

	rte_eth_dev_stop(dp->port_id);
	dp->started = false;
}

static void remove_device(void *arg)
{
	struct sl_dpdk_port *dp = arg;

	if (dp->started)
		stop_device(dp);
	/* Give memif back the name it made, so that it removes the file itself. */
	if (dp->socket_shown)
		rename(dp->socket, dp->hidden);
	rte_eth_dev_close(dp->port_id);
	rte_eal_hotplug_remove("vdev", dp->name);
}

/* memif: the caller has stopped rx/tx on both ends first (see DPDK-NOTES). */
static void release(struct sl_dpdk_port *dp)
{
	sl_eal_on_intr_thread(remove_device, dp, "closed a DPDK port");
	rte_mempool_free(dp->rx_pool);
	rte_mempool_free(dp->tx_pool);
	free(dp);
}

static void dpdk_close(struct sl_port *port)
{
	release(dp_of(port));
}

static const struct sl_port_ops dpdk_ops = {
	.name = "dpdk",
	.rx_burst = dpdk_rx_burst,
	.tx_burst = dpdk_tx_burst,
	.alloc = dpdk_alloc,
	.free = dpdk_free,
	.close = dpdk_close,
	.wait_up = sl_dpdk_port_wait_up,
};

/* A memif client can only start once its server's socket accepts: try when it exists. */
static int try_start(struct sl_dpdk_port *dp)
{
	struct stat st;

	if (dp->memif_client && dp->socket_file && stat(dp->socket, &st) != 0)
		return -ENOENT;
	int rc = rte_eth_dev_start(dp->port_id);
	if (rc == 0)
		dp->started = true;
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * A zero-copy client's receive call fills the ring with buffers from our rx
 * pool (a copying one takes none and keeps none): one empty receive tells
 * whether the driver really runs zero-copy.  Before the engine runs only.
 */
static void check_zero_copy(struct sl_dpdk_port *dp)
{
	if (!dp->zero_copy_asked || dp->zero_copy)
		return;
	rte_eth_rx_burst(dp->port_id, 0, NULL, 0);
	dp->zero_copy = rte_mempool_in_use_count(dp->rx_pool) > 0;
}

bool sl_dpdk_port_zero_copy(const struct sl_port *port)
{
	return port->ops == &dpdk_ops && dp_of(port)->zero_copy;
}

int sl_dpdk_port_rx_fd(const struct sl_port *port)
{
	return port->ops == &dpdk_ops ? dp_of(port)->afp_fd : -1;
}

bool sl_dpdk_port_link_up(struct sl_port *port)
{
	struct sl_dpdk_port *dp = dp_of(port);
	struct rte_eth_link link;

	memset(&link, 0, sizeof(link));
	return dp->started && rte_eth_link_get_nowait(dp->port_id, &link) == 0 &&
	       link.link_status == RTE_ETH_LINK_UP;
}

int sl_dpdk_port_wait_up(struct sl_port *port, unsigned timeout_ms, char *err, size_t errlen)
{
	struct sl_dpdk_port *dp = dp_of(port);
	uint64_t now = now_ms(), deadline = now + timeout_ms, tried_at = now;
	const uint64_t retry_ms = SL_DPDK_CONNECT_RETRY_MS;
	int start_rc = dp->started ? 0 : -ENOENT;

	for (;;) {
		if (sl_dpdk_port_link_up(port)) {
			check_zero_copy(dp);
			return 0;
		}
		now = now_ms();
		if (now >= deadline)
			break;
		/*
		 * A memif client that was refused, or whose server went away, never
		 * reconnects by itself: stop and start it again, backing off.
		 */
		/*
		 * Stopping a client in the middle of a slow handshake (a loaded
		 * machine) makes 22.11's memif server panic in its interrupt
		 * thread, so a started client is given SL_DPDK_RECONNECT_MS.
		 */
		if (now - tried_at >= (dp->started ? SL_DPDK_RECONNECT_MS : retry_ms)) {
			if (dp->started && dp->memif_client)
				sl_eal_on_intr_thread(stop_device, dp, "stopped a memif client to retry");
			if (!dp->started)
				start_rc = try_start(dp);
			tried_at = now;
		}
		usleep(1000);
	}
	if (dp->socket[0] != '\0')
		sl_set_err(err, errlen,
			"%s: no memif peer on socket %s after %u ms (%s): start the other end "
			"with the same socket path and bsize/max_frame, or check its log%s",
			dp->name, dp->socket, timeout_ms,
			dp->started ? "link down" :
			start_rc == -ENOENT ? "socket file absent" : "connect refused",
			dp->zero_copy_asked ? "; this end is a zero-copy client: where the logs show \"mmap "
					      "failed\" or \"sendmsg fail\", try --no-zero-copy (SLUICE_ZERO_COPY=0)" : "");
	else
		sl_set_err(err, errlen, "%s: link still down after %u ms%s%s", dp->name, timeout_ms,
			dp->started ? "" : "; start failed: ",
			dp->started ? "" : rte_strerror(-start_rc));
	return -1;
}

uint64_t sl_dpdk_port_rx_dropped(const struct sl_port *port)
{
	return dp_of(port)->rx_dropped;
}

int sl_dpdk_port_describe(const struct sl_port *port, char *buf, size_t len)
{
	struct sl_dpdk_port *dp;
	struct rte_eth_stats st;

	if (port->ops != &dpdk_ops)
		return 0;
	dp = dp_of(port);
	if (rte_eth_stats_get(dp->port_id, &st) != 0)
		memset(&st, 0, sizeof(st));
	/* 22.11's af_packet leaves imissed at 0: its ring's drops are the kernel's to tell */
	st.imissed += dp_afp_drops(dp->afp_fd, &dp->afp_drops);
	return snprintf(buf, len, ", driver missed %llu no-buffer %llu errors %llu/%llu, "
			"buffers free rx %u of %u tx %u of %u",
			(unsigned long long)st.imissed, (unsigned long long)st.rx_nombuf,
			(unsigned long long)st.ierrors, (unsigned long long)st.oerrors,
			rte_mempool_avail_count(dp->rx_pool), dp->rx_pool->size,
			rte_mempool_avail_count(dp->tx_pool), dp->tx_pool->size);
}

/*
 * Rewrite memif devargs (the part after the name) for open: add bsize= if
 * absent (see top), and give a server's socket file a hidden name until the
 * port is started.  A server refuses clients between probe (when it makes
 * its socket) and start, and in 22.11 a refused client never retries and the
 * refusal has been seen to crash EAL's interrupt thread; hiding the socket
 * means no client connects early.  Sets *out to a malloc'd string and
 * returns 0; -EINVAL for unparsable devargs, -ERANGE for a bsize below room.
 */
static int memif_args(struct sl_dpdk_port *dp, const char *args, uint32_t room, char **out)
{
	struct rte_kvargs *kv = rte_kvargs_parse(args, NULL);
	size_t len = 0;
	int rc = 0;
	FILE *f;

	*out = NULL;
	if (kv == NULL)
		return -EINVAL;
	const char *role = rte_kvargs_get(kv, "role");
	const char *sock = rte_kvargs_get(kv, "socket");
	const char *abstract = rte_kvargs_get(kv, "socket-abstract");
	const char *zc = rte_kvargs_get(kv, "zero-copy");

	dp->memif_client = role != NULL && (strcmp(role, "client") == 0 || strcmp(role, "slave") == 0);
	dp->socket_file = abstract != NULL && strcmp(abstract, "no") == 0;
	dp->zero_copy_asked = dp->memif_client && zc != NULL && strcmp(zc, "yes") == 0;
	/* memif's default socket name when none is given. */
	snprintf(dp->socket, sizeof(dp->socket), "%s", sock != NULL ? sock : "/run/memif.sock");
	if (!dp->memif_client && dp->socket_file &&
	    (size_t)snprintf(dp->hidden, sizeof(dp->hidden), "%s.starting", dp->socket) >=
		    sizeof(dp->hidden))
		dp->hidden[0] = '\0'; /* too long to hide: start unhidden */

	f = open_memstream(out, &len);
	if (f != NULL) {
		for (unsigned i = 0; i < kv->count; i++) {
			const char *v = kv->pairs[i].value;

			if (strcmp(kv->pairs[i].key, "socket") == 0 && dp->hidden[0] != '\0')
				v = dp->hidden;
			fprintf(f, "%s%s=%s", i ? "," : "", kv->pairs[i].key, v);
		}
		const char *bsize = rte_kvargs_get(kv, "bsize");

		if (bsize == NULL)
			fprintf(f, "%sbsize=%u", kv->count ? "," : "", room);
		/*
		 * Smaller buffers make memif split frames, and 22.11's copy-mode tx
		 * leaves a stale "next" flag on reused descriptors: after the ring
		 * wraps, the receiver glues unrelated frames together (seen here).
		 */
		else if (strtoul(bsize, NULL, 10) < room)
			rc = -ERANGE;
		if (fclose(f) != 0)
			rc = -ENOMEM;
	}
	if (f == NULL || rc != 0) {
		free(*out);
		*out = NULL;
		rc = rc ? rc : -ENOMEM;
	}
	rte_kvargs_free(kv);
	return rc;
}

/* MTU as large as max_frame wants, within what the driver says it takes. */
static uint16_t pick_mtu(const struct rte_eth_dev_info *info, uint32_t max_frame)
{
	uint32_t mtu = max_frame > RTE_ETHER_HDR_LEN ? max_frame - RTE_ETHER_HDR_LEN : 0;

	/* Same overhead rule ethdev applies when it validates the MTU at configure. */
	uint32_t overhead = info->max_mtu != UINT16_MAX && info->max_rx_pktlen > info->max_mtu ?
				    info->max_rx_pktlen - info->max_mtu :
				    RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;

	/* memif and af_packet report 1518 B yet carry bigger frames; asking more fails configure. */
	mtu = RTE_MIN(mtu, (uint32_t)info->max_mtu);
	if (info->max_rx_pktlen > overhead)
		mtu = RTE_MIN(mtu, info->max_rx_pktlen - overhead);
	return (uint16_t)RTE_MAX(mtu, (uint32_t)info->min_mtu);
}

static int setup_queues(struct sl_dpdk_port *dp, uint32_t max_frame, uint16_t rxd, uint16_t txd,
			char *err, size_t errlen)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	struct rte_eth_txconf txconf;
	int sock = rte_eth_dev_socket_id(dp->port_id);
	int rc;

	if (sock < 0)
		sock = (int)rte_socket_id();
	rc = rte_eth_dev_info_get(dp->port_id, &info);
	if (rc != 0) {
		sl_set_err(err, errlen, "%s: rte_eth_dev_info_get: %s", dp->name, rte_strerror(-rc));
		return -1;
	}
	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = pick_mtu(&info, max_frame);
	/* All tx buffers come from our tx pool with refcnt 1: the driver may free them fast. */
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
	rc = rte_eth_dev_configure(dp->port_id, 1, 1, &conf);
	if (rc == 0)
		rc = rte_eth_dev_adjust_nb_rx_tx_desc(dp->port_id, &rxd, &txd);
	if (rc != 0) {
		sl_set_err(err, errlen, "%s: configure 1 rx + 1 tx queue, mtu %u: %s", dp->name,
			conf.rxmode.mtu, rte_strerror(-rc));
		return -1;
	}
	rc = rte_eth_rx_queue_setup(dp->port_id, 0, rxd, sock, NULL, dp->rx_pool);
	if (rc != 0) {
		sl_set_err(err, errlen, "%s: rx queue of %u descriptors: %s", dp->name, rxd,
			rte_strerror(-rc));
		return -1;
	}
	txconf = info.default_txconf;
	txconf.offloads = conf.txmode.offloads;
	rc = rte_eth_tx_queue_setup(dp->port_id, 0, txd, sock, &txconf);
	if (rc != 0) {
		sl_set_err(err, errlen, "%s: tx queue of %u descriptors: %s", dp->name, txd,
			rte_strerror(-rc));
		return -1;
	}
	return 0;
}

/*
 * Write every page of a buffer once, at creation.  Without hugepages EAL's
 * memory is faulted in on first touch, and the first thousands of packets
 * would otherwise each take page faults on the data path.
 */
static void touch_buffer(struct rte_mempool *mp, void *arg, void *obj, unsigned idx)
{
	volatile uint8_t *p = obj;
	(void)arg;
	(void)idx;
	for (size_t off = 0; off < mp->elt_size; off += 4096)
		p[off] = p[off];
}

size_t sl_dpdk_port_pool_bytes(uint32_t max_frame, uint16_t rxq_desc, uint16_t txq_desc)
{
	size_t n = (size_t)rxq_desc + SL_DPDK_RX_SLACK + txq_desc + SL_DPDK_TX_SLACK;
	/* an mbuf, its headroom and data room, and the mempool's own header per object */
	size_t obj = sizeof(struct rte_mbuf) + RTE_PKTMBUF_HEADROOM +
		     RTE_ALIGN_CEIL(max_frame, RTE_CACHE_LINE_SIZE) + 2 * RTE_CACHE_LINE_SIZE;

	return n * obj;
}

static struct rte_mempool *make_pool(struct sl_dpdk_port *dp, const char *what, uint16_t data_room,
				     unsigned n, char *err, size_t errlen)
{
	char pname[RTE_MEMPOOL_NAMESIZE];
	struct rte_mempool *mp;

	snprintf(pname, sizeof(pname), "sl_%s%u", what, dp->port_id);
	mp = rte_pktmbuf_pool_create(pname, n, SL_DPDK_POOL_CACHE, 0, data_room, rte_socket_id());
	if (mp == NULL)
		sl_set_err(err, errlen,
			"%s: %s pool of %u buffers x %u B: %s; give EAL more memory (mem_mb) or "
			"use fewer descriptors", dp->name, what, n, data_room, rte_strerror(rte_errno));
	else
		rte_mempool_obj_iter(mp, touch_buffer, NULL);
	return mp;
}

struct sl_port *sl_dpdk_port_open(const char *devargs, uint32_t max_frame, uint16_t rxq_desc,
				  uint16_t txq_desc, char *err, size_t errlen)
{
	/* Line-sized buffers keep memif's slots (bsize apart) cache-line aligned. */
	uint32_t room = RTE_ALIGN_CEIL(max_frame, RTE_CACHE_LINE_SIZE);
	const char *comma = strchr(devargs, ',');
	size_t name_len = comma != NULL ? (size_t)(comma - devargs) : strlen(devargs);
	const char *args = comma != NULL ? comma + 1 : "";
	char *vdev_args = NULL;
	struct sl_dpdk_port *dp;
	int rc;

	if (max_frame < RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN ||
	    room + RTE_PKTMBUF_HEADROOM > UINT16_MAX) {
		sl_set_err(err, errlen, "max_frame %u out of range: %u to %u (mbuf data room is 16 bits)",
			max_frame, RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN,
			UINT16_MAX - RTE_PKTMBUF_HEADROOM - RTE_CACHE_LINE_SIZE + 1);
		return NULL;
	}
	dp = calloc(1, sizeof(*dp));
	if (dp == NULL || name_len == 0 || name_len >= sizeof(dp->name)) {
		sl_set_err(err, errlen, dp ? "bad devargs \"%s\": expected name,key=value,..." :
			"out of memory", devargs);
		free(dp);
		return NULL;
	}
	memcpy(dp->name, devargs, name_len);
	dp->afp_fd = -1;

	if (strncmp(dp->name, "net_memif", strlen("net_memif")) == 0) {
		rc = memif_args(dp, args, room, &vdev_args);
		if (rc != 0) {
			sl_set_err(err, errlen,
				rc == -ERANGE ? "%s: bsize in \"%s\" is below %u: memif would split "
						"frames, which 22.11 corrupts; leave bsize= out" :
						"%s: cannot parse memif devargs \"%s\" (%u)",
				dp->name, args, room);
			free(dp);
			return NULL;
		}
	}
	rc = rte_eal_hotplug_add("vdev", dp->name, vdev_args != NULL ? vdev_args : args);
	free(vdev_args);
	if (rc != 0) {
		sl_set_err(err, errlen,
			"probing %s failed (%s): check the devargs; memif needs its socket's "
			"directory to exist and no stale server socket file", devargs,
			rc == -EEXIST ? "a device with this name exists" : rte_strerror(-rc));
		free(dp);
		return NULL;
	}
	if (rte_eth_dev_get_port_by_name(dp->name, &dp->port_id) != 0) {
		sl_set_err(err, errlen, "%s probed but is not an ethdev", dp->name);
		rte_eal_hotplug_remove("vdev", dp->name);
		free(dp);
		return NULL;
	}
	uint16_t data_room = (uint16_t)(room + RTE_PKTMBUF_HEADROOM);
	dp->rx_pool = make_pool(dp, "rx", data_room, rxq_desc + SL_DPDK_RX_SLACK, err, errlen);
	if (dp->rx_pool)
		dp->tx_pool = make_pool(dp, "tx", data_room, txq_desc + SL_DPDK_TX_SLACK, err, errlen);
	if (!dp->tx_pool || setup_queues(dp, max_frame, rxq_desc, txq_desc, err, errlen) != 0)
		goto fail;
	rc = try_start(dp);
	/* An absent memif server is not an error yet: wait_up keeps trying. */
	if (rc != 0 && !dp->memif_client) {
		sl_set_err(err, errlen, "%s: start: %s", dp->name, rte_strerror(-rc));
		goto fail;
	}
	if (dp->hidden[0] != '\0') {
		if (rename(dp->hidden, dp->socket) != 0) {
			sl_set_err(err, errlen, "%s: cannot move socket %s to %s: %s", dp->name, dp->hidden,
				dp->socket, strerror(errno));
			goto fail;
		}
		dp->socket_shown = true;
	}

	struct rte_eth_dev_info info;
	if (strncmp(dp->name, "net_af_packet", strlen("net_af_packet")) == 0 &&
	    rte_eth_dev_info_get(dp->port_id, &info) == 0 && info.if_index > 0)
		dp->afp_fd = dp_afp_socket((int)info.if_index);

	struct rte_ether_addr mac;
	rte_eth_macaddr_get(dp->port_id, &mac);
	memcpy(dp->port.mac, mac.addr_bytes, sizeof(dp->port.mac));
	dp->port.ops = &dpdk_ops;
	dp->port.priv = dp;
	dp->port.max_frame = max_frame;
	dp->port.crc = true; /* the vdevs run here (memif, af_packet, af_xdp) have no FCS */
	return &dp->port;

fail:
	release(dp);
	return NULL;
}
