/*
 * port_shm.h: a sluice port over shared memory, for the links between
 * dataplanes on one host (the mesh sluice-run builds), in place of
 * net_memif.  memif copies every frame twice on its way, into its ring and
 * out of it; here the sender builds the frame straight into a buffer that
 * the receiver maps, the receiver checks and applies it where it lies and
 * then hands the buffer back.  No DPDK: the transport sees sl_pkt only.
 *
 * Each direction of a link is one file in /dev/shm, made by its sender
 * (layout below).  Either end may start first; frames posted before the
 * peer maps the file wait in its ring.
 * A peer may be buggy or hostile: every index and length read from shared
 * memory is checked before use, and bad ones are counted (stats.bad_desc)
 * and dropped.
 */
#ifndef SLUICE_PORT_SHM_H
#define SLUICE_PORT_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port.h"

/*
 * The contract between the two processes: one direction's file, made and
 * written by its sender (the owner).
 *
 *   head     struct shm_head: magic, geometry, the owner's pid; then, a cache
 *            line each, the posted count (owner writes), the handed-back
 *            count (peer writes), the peer's pid once it mapped the file and
 *            the CPU the owner's data path last ran on (owner writes)
 *   tx[]     nbufs posted frames, struct shm_desc
 *   ret[]    nbufs handed-back buffer indexes (uint32_t)
 *   bufs     nbufs buffers of stride bytes, from sl_shm_bufs_offset(nbufs)
 *
 * Both rings have one slot per buffer, so neither can overflow: a buffer is
 * posted again only after the peer handed it back, which it does only after
 * reading its slot.  Counts run free and are masked into slots.  A count is
 * published with a release store after the slots it covers are written, and
 * read with an acquire load before them.
 */
#define SHM_MAGIC 0x316d68732d6c73ull /* "sl-shm1" */
#define SHM_VERSION 2
#define SHM_LINE 64

struct shm_desc {
	uint32_t idx; /* buffer */
	uint32_t len; /* frame bytes in it */
};

struct shm_head {
	uint64_t magic;   /* stored last, with release: the rest is valid once it reads right */
	uint32_t version;
	uint32_t frame;   /* largest frame */
	uint32_t stride;  /* bytes between buffers */
	uint32_t nbufs;
	int32_t owner;    /* the sender's pid */
	_Alignas(SHM_LINE) _Atomic uint32_t posted;  /* tx slots written */
	_Alignas(SHM_LINE) _Atomic uint32_t handed;  /* ret slots written */
	_Alignas(SHM_LINE) _Atomic int32_t attached; /* the peer's pid, 0 before it mapped */
	_Alignas(SHM_LINE) _Atomic int32_t cpu;      /* where the owner last sent or received, -1 before */
};

/* Buffers alloc keeps back for last words (port.h send_last): a peer
 * stopped for seconds reads nothing, the sender's retransmissions and
 * probes take every other buffer, and a failure's notice sent as the
 * sender stops found none (perf/ALGORITHMS.md, word34).  One a notice:
 * a failed communicator's abort and closing word, and a few more. */
#define SHM_LAST_BUFS 8u

/* Where the buffers start in a file of nbufs buffers. */
size_t sl_shm_bufs_offset(uint32_t nbufs);

/* The file of channel's direction from -> to of the mesh in dir (which
 * must exist): /dev/shm/sluice-UID-DEV-INODE-FROM-TO-CHANNEL, after dir's
 * device and inode numbers, so that meshes of different runs do not meet
 * and whoever removes dir can remove what a crash left.  Each end takes its
 * peer's file's name away once it mapped it.  -1 (errno) if dir is not there. */
int sl_shm_port_file(char *buf, size_t len, const char *dir, unsigned from, unsigned to, unsigned channel);

/*
 * Channel `channel`'s link from node to peer, with files named after dir
 * (the mesh's directory, the same string on every node), carrying frames
 * of up to max_frame bytes in nbufs buffers (a power of two, 32 to 65536)
 * per direction, a few of them kept for last words (port.h send_last).
 * Makes this end's file; the peer's is mapped by sl_shm_port_wait_up().
 * NULL with a message in err.  Control path only.
 */
struct sl_port *sl_shm_port_open(const char *dir, unsigned node, unsigned peer, unsigned channel,
				 uint32_t max_frame, uint32_t nbufs, char *err, size_t errlen);

/* Map the peer's end once it exists, waiting up to timeout_ms for the
 * peer's dataplane to make it.  0, or -1 with a message in err.  Receive
 * only after it: frames sent before wait in the ring. */
int sl_shm_port_wait_up(struct sl_port *port, unsigned timeout_ms, char *err, size_t errlen);

/* Whether port is one of these (and not, say, a DPDK port). */
bool sl_shm_port_is(const struct sl_port *port);

#endif
