/*
 * abi.h: everything that crosses the line between libsluice (the
 * application) and the dataplane.  Nothing else does.
 *
 * 1. The attach socket: a unix SOCK_SEQPACKET socket; each request is one
 *    struct sl_ctl_msg (plus a file descriptor for HELLO and REG), each
 *    answer one struct sl_ctl_reply.
 * 2. The client page: one shared memory file per client, created by the
 *    client and passed with HELLO, holding for each channel (an engine of
 *    the dataplane, on its own core and links) a submission ring (client ->
 *    dataplane, struct sl_cmd) and a completion ring (dataplane -> client,
 *    struct sl_cpl), plus the words both sides sleep and wake on, and an
 *    area for all-to-allv's counts (struct sl_cmd's meta_off).  A
 *    dataplane runs 1 to SL_MAX_CHANNELS channels (HELLO's reply says how
 *    many); the page always has room for the most.
 * 3. Registered memory: shared memory files the client passes with REG, or
 *    GPU memory (REG of kind SL_REGION_DEVICE: the client's address, used as
 *    it is by a dataplane in the client's own process, and the buffer's CUDA
 *    IPC handle, which another process opens).
 *    Commands name buffers as (region id, byte offset); the dataplane checks
 *    every range against that client's own regions before touching it.  A
 *    buffer of per-rank blocks spaced by a block stride (a channel's slice)
 *    ranges from its first block's start to its last block's end, gaps
 *    included.
 *
 * Bump SL_ABI_VERSION on any change to this file.
 */
#ifndef SLUICE_ABI_H
#define SLUICE_ABI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "spsc.h"
#include "trace.h"

#define SL_ABI_VERSION 13
#define SL_ABI_MAGIC 0x534c4345u /* "SLCE" */

#define SL_SUBMIT_SLOTS 256u
#define SL_COMPLETE_SLOTS 256u
#define SL_MAX_RANKS 256u
#define SL_MAX_REGIONS 64u
/* A failure's sentence in a completion or a control reply: room for the
 * longest the dataplane makes (a stash overrun's, about 450 bytes) with a
 * peer's "rank R reported: " and "(on another channel ...)" around it.  It
 * was 192 and cut those mid-word.  624 makes struct sl_cpl 10 cache lines;
 * a success writes none of it, a failure all of it (errmsg.h). */
#define SL_ERRMSG_LEN 624u
#define SL_MAX_CHANNELS 8u

/* ---- rings ---- */

enum sl_opcode {
	SL_OP_ALLREDUCE = 1,
	SL_OP_ALLGATHER = 2,      /* count: elements each rank contributes */
	SL_OP_REDUCE_SCATTER = 3, /* count: elements each rank receives */
	SL_OP_BROADCAST = 4,      /* root */
	SL_OP_REDUCE = 5,         /* root */
	SL_OP_ALLTOALL = 6,       /* count: elements to each peer */
	SL_OP_BARRIER = 7,        /* count 0, no buffers */
	SL_OP_SEND = 8,           /* root: the peer; matched by (peer, sequence per pair) */
	SL_OP_RECV = 9,           /* root: the peer */
	SL_OP_GATHER = 10,        /* root; count: elements each rank contributes */
	SL_OP_SCATTER = 11,       /* root; count: elements each rank receives */
	SL_OP_ALLTOALLV = 12,     /* count unused; per-peer counts and displacements in meta */
	SL_OP_COUNT
};

/* Algorithms, chosen by libsluice's planner (sl_cmd.algo). */
enum sl_algo_id {
	SL_ALGO_ID_RING = 1,   /* bandwidth: pipelined neighbour steps */
	SL_ALGO_ID_DIRECT = 2, /* latency: one step, straight to the destination */
	SL_ALGO_ID_RD = 3,     /* recursive doubling (all-reduce) */
	SL_ALGO_ID_RHD = 4,    /* recursive halving/doubling (all-reduce, reduce-scatter, all-gather) */
	SL_ALGO_ID_TREE = 5,   /* binomial tree (broadcast, reduce) */
	SL_ALGO_ID_PAIRWISE = 6, /* pairwise exchange (all-to-all) */
	SL_ALGO_ID_COUNT
};

/* One collective, written by the client into its submission ring. */
struct sl_cmd {
	uint64_t req;         /* client's tag, echoed in the completion */
	uint32_t opcode;      /* enum sl_opcode */
	uint32_t comm;        /* handle from COMM_CREATE */
	uint64_t count;       /* elements */
	uint32_t dtype;       /* sluice_datatype_t */
	uint32_t redop;       /* sluice_redop_t */
	uint32_t root;        /* rooted collectives; the peer rank of SEND and RECV */
	/* A zero-byte range may name any region; libsluice sends UINT32_MAX, offset 0. */
	uint32_t send_region; /* region ids from REG */
	uint32_t recv_region;
	uint32_t algo;        /* enum sl_algo_id; 0 = the dataplane's (ring where it applies, else direct) */
	uint64_t send_off;    /* byte offsets within the regions */
	uint64_t recv_off;
	uint32_t chunk_bytes; /* pipeline unit; 0 = the dataplane's default.  Runs as sl_chunk_used's */
	uint32_t meta_off;    /* ALLTOALLV: its counts' byte offset in the page's counts area (sl_vmeta_len) */
	/* Bytes from one per-rank block to the next in the buffers that hold
	 * nranks blocks (all-gather's recv, reduce-scatter's send, both of
	 * all-to-all, gather's recv, scatter's send); 0 = count * element size,
	 * back to back.  A channel's slice of such a call holds elements
	 * [first, first + count) of every block: its blocks are a whole
	 * block apart.  At least count * element size; 0 for other opcodes. */
	uint64_t block_stride;
};

/* The chunk a command's chunk_bytes runs with on a dataplane of payload
 * bytes per packet (HELLO's answer): whole packets, at most 64 of them (a
 * chunk's packets are one 64-bit mask's), 32 for 0. */
static inline uint64_t sl_chunk_used(uint32_t chunk_bytes, uint32_t payload)
{
	uint64_t pkts = chunk_bytes ? (chunk_bytes + (uint64_t)payload - 1) / payload : 32;

	return (pkts > 64 ? 64 : pkts) * payload;
}

/* ALLTOALLV's arguments, in elements: four arrays of nranks entries one
 * after the other (send counts, send displacements, recv counts, recv
 * displacements), in the client page's counts area, which the client
 * carves in SL_VMETA_UNIT pieces; the dataplane copies them at post.  In
 * the page, not in memory registered at the first all-to-allv: that was
 * SL_MAX_RANKS entries for each of 64 calls in flight, 512 KiB mapped and
 * faulted in by both sides, 3-4 ms of a context's first call
 * (perf/ALGORITHMS.md, a2av21). */
#define SL_VMETA_UNIT 64u
#define SL_VMETA_BYTES (32u << 10) /* 512 units: 4 calls of 256 ranks at once, 512 of 2 */
enum { SL_VMETA_SEND_COUNT, SL_VMETA_SEND_DISPL, SL_VMETA_RECV_COUNT, SL_VMETA_RECV_DISPL };

static inline uint64_t sl_vmeta_len(uint32_t nranks)
{
	return 4 * (uint64_t)nranks * sizeof(uint64_t);
}

/*
 * Bytes of the send and recv buffers a command names on one rank (sizes
 * follow NCCL's: e.g. all-gather's recv holds nranks blocks; only the root
 * has a recv buffer in reduce and gather, a send buffer in broadcast and
 * scatter).  A buffer of nranks blocks spans (nranks - 1) * stride + the
 * block, stride 0 meaning blocks back to back.  False when the sizes
 * overflow 64 bits or the opcode is unknown.
 */
static inline bool sl_cmd_bytes(uint32_t opcode, uint64_t count, uint64_t esize, uint32_t nranks,
				uint32_t rank, uint32_t root, uint64_t stride, uint64_t *send, uint64_t *recv)
{
	uint64_t b, nb, all;

	/* Overflow checks without division: two divides were most of a small
	 * call's argument checks. */
	if (esize == 0 || nranks == 0 || __builtin_mul_overflow(count, esize, &b) ||
	    __builtin_mul_overflow(b, (uint64_t)nranks, &all))
		return false;
	if (stride == 0)
		stride = b;
	if (__builtin_mul_overflow(stride, (uint64_t)(nranks - 1), &nb) || __builtin_add_overflow(nb, b, &nb))
		return false;
	switch (opcode) {
	case SL_OP_ALLREDUCE: *send = b; *recv = b; return true;
	case SL_OP_ALLGATHER: *send = b; *recv = nb; return true;
	case SL_OP_REDUCE_SCATTER: *send = nb; *recv = b; return true;
	case SL_OP_BROADCAST: *send = rank == root ? b : 0; *recv = b; return true;
	case SL_OP_REDUCE: *send = b; *recv = rank == root ? b : 0; return true;
	case SL_OP_ALLTOALL: *send = nb; *recv = nb; return true;
	case SL_OP_BARRIER: *send = 0; *recv = 0; return true;
	case SL_OP_SEND: *send = b; *recv = 0; return true;
	case SL_OP_RECV: *send = 0; *recv = b; return true;
	case SL_OP_GATHER: *send = b; *recv = rank == root ? nb : 0; return true;
	case SL_OP_SCATTER: *send = rank == root ? nb : 0; *recv = b; return true;
	default: return false; /* ALLTOALLV's sizes come from its counts: sl_vmeta_bytes */
	}
}

/* Whether the opcode's buffers hold per-rank blocks (that block_stride spaces). */
static inline bool sl_op_blocked(uint32_t opcode)
{
	return opcode == SL_OP_ALLGATHER || opcode == SL_OP_REDUCE_SCATTER || opcode == SL_OP_ALLTOALL ||
	       opcode == SL_OP_GATHER || opcode == SL_OP_SCATTER;
}

/* One finished collective, written by the dataplane. */
struct sl_cpl {
	uint64_t req;              /* the command's tag */
	int32_t status;            /* sluice_result_t */
	uint32_t reserved;
	char msg[SL_ERRMSG_LEN];   /* why, when status is not SLUICE_OK; not written otherwise */
};
_Static_assert(sizeof(struct sl_cpl) % 64 == 0, "a completion slot is whole cache lines");

/* A channel's engine naps on its doorbell when idle: the client rings it after submitting. */
struct sl_channel_bell {
	alignas(SL_CACHE_LINE) _Atomic uint32_t doorbell; /* futex word, bumped per submission */
	_Atomic uint32_t engine_napping;                   /* engine is (about to be) in futex_wait */
	/* CLOCK_MONOTONIC ns of the latest progress of any of the client's calls on this
	 * channel, published on the engine's timer passes: the dataplane times a call
	 * out from its last progress, and so does the client's own wait */
	_Atomic uint64_t progress_ns;
	/* CLOCK_MONOTONIC ns until which a call of the client's that timed out
	 * waits for its peer's answer before the dataplane says why it failed
	 * (a long timeout's verdict may wait longer than the client's margin):
	 * the client's own wait runs at least its margin past it */
	_Atomic uint64_t verdict_ns;
};

/* The client page.  Its all-to-allv counts area follows at
 * sl_page_vmeta_off(), each channel's rings at sl_page_submit_off(ch)
 * and sl_page_complete_off(ch). */
struct sl_client_page {
	uint32_t magic;          /* SL_ABI_MAGIC */
	uint32_t version;        /* SL_ABI_VERSION */
	/* the client sleeps on cpl_seq when it is set: every channel's engine bumps it and wakes */
	alignas(SL_CACHE_LINE) _Atomic uint32_t cpl_seq;   /* futex word, bumped per completion */
	_Atomic uint32_t client_sleeping;                   /* client is (about to be) in futex_wait */
	struct sl_channel_bell bell[SL_MAX_CHANNELS];
};

static inline size_t sl_page_align(size_t n)
{
	return (n + SL_CACHE_LINE - 1) & ~(size_t)(SL_CACHE_LINE - 1);
}

/* The counts area follows the page's header: the client faults it in with its rings. */
static inline size_t sl_page_vmeta_off(void)
{
	return sl_page_align(sizeof(struct sl_client_page));
}

/* One channel's two rings, cache-line aligned. */
static inline size_t sl_page_channel_bytes(void)
{
	return sl_page_align(sl_spsc_bytes(SL_SUBMIT_SLOTS, sizeof(struct sl_cmd))) +
	       sl_page_align(sl_spsc_bytes(SL_COMPLETE_SLOTS, sizeof(struct sl_cpl)));
}

static inline uint32_t sl_page_submit_off(uint32_t ch)
{
	return (uint32_t)(sl_page_vmeta_off() + SL_VMETA_BYTES + ch * sl_page_channel_bytes());
}

static inline uint32_t sl_page_complete_off(uint32_t ch)
{
	return (uint32_t)(sl_page_submit_off(ch) + sl_page_align(sl_spsc_bytes(SL_SUBMIT_SLOTS, sizeof(struct sl_cmd))));
}

static inline size_t sl_page_bytes(void)
{
	return sl_page_submit_off(SL_MAX_CHANNELS);
}

/* Bytes of ALLTOALLV's buffers, from its counts v (sl_vmeta_len): the
 * furthest end of any peer's block.  False when an end overflows 64 bits. */
static inline bool sl_vmeta_bytes(const uint64_t *v, uint32_t nranks, uint64_t esize, uint64_t *send,
				  uint64_t *recv)
{
	const uint64_t *sc = v + SL_VMETA_SEND_COUNT * nranks, *sd = v + SL_VMETA_SEND_DISPL * nranks;
	const uint64_t *rc = v + SL_VMETA_RECV_COUNT * nranks, *rd = v + SL_VMETA_RECV_DISPL * nranks;
	uint64_t limit = esize ? UINT64_MAX / esize : 0;

	*send = *recv = 0;
	for (uint32_t r = 0; r < nranks; r++) {
		if (sd[r] > limit || sc[r] > limit - sd[r] || rd[r] > limit || rc[r] > limit - rd[r])
			return false;
		if (sc[r] && (sd[r] + sc[r]) * esize > *send)
			*send = (sd[r] + sc[r]) * esize;
		if (rc[r] && (rd[r] + rc[r]) * esize > *recv)
			*recv = (rd[r] + rc[r]) * esize;
	}
	return true;
}

/* ---- attach socket ---- */

enum sl_ctl_type {
	SL_CTL_HELLO = 1,        /* fd: client page.  reply.value = client id, reply.channels */
	SL_CTL_REG = 2,          /* fd: memory file of a.size bytes (host), or none (device).
				    reply.value = region id */
	SL_CTL_DEREG = 3,        /* a.region */
	SL_CTL_COMM_CREATE = 4,  /* c.*; reply.value = comm handle */
	SL_CTL_COMM_DESTROY = 5, /* a.comm */
	SL_CTL_INFO = 6,         /* reply.node = this dataplane's node id, reply.channels */
	SL_CTL_TRACE_ATTACH = 7, /* t.*; no HELLO needed.  Reply carries the trace ring's memfd
				    (trace.h); the tracer stays attached until it closes the socket */
	SL_CTL_STALLED = 8,      /* is an engine stuck?  SLUICE_ERR_TIMEOUT and msg saying which and
				    where its thread is, or SLUICE_OK (libsluice asks at a wait's timeout) */
};

enum sl_region_kind {
	SL_REGION_HOST = 0,   /* a shared memory file */
	SL_REGION_DEVICE = 1, /* CUDA device memory */
};

#define SL_DEV_HANDLE_BYTES 88

struct sl_ctl_msg {
	uint32_t type;    /* enum sl_ctl_type */
	uint32_t version; /* SL_ABI_VERSION */
	union {
		struct {
			uint64_t size;
			uint32_t region;
			uint32_t comm;
			uint32_t kind;        /* REG: enum sl_region_kind */
			int32_t gpu;          /* REG of device memory: its CUDA device ordinal */
			uint64_t addr;        /* REG of device memory: the client's pointer */
			uint8_t handle[SL_DEV_HANDLE_BYTES]; /* ... and its IPC handle (gpu_dma's sl_gdma_ipc) */
			/* HELLO: the client's SLUICE_TIMEOUT; where it is below the
			 * dataplane's --timeout, the dataplane gives up on an engine that
			 * takes no pass this long while it holds one of the client's
			 * requests, and answers with what holds it up (0: none given) */
			uint32_t timeout_ms;
		} a;
		struct {
			uint64_t key;                 /* same on every rank of the communicator */
			uint32_t rank;
			uint32_t nranks;
			uint32_t node[SL_MAX_RANKS];  /* dataplane node id of each rank */
			/* the client's SLUICE_TIMEOUT: its calls on this communicator fail after
			 * this long without progress, and its destroy waits this long for peers
			 * (0: the dataplane's own --timeout) */
			uint32_t timeout_ms;
		} c;
		struct {
			uint32_t snap;                /* DATA payload bytes to keep (0: headers only) */
			uint32_t reserved;
			struct sl_trace_filter filter; /* what the engine keeps */
		} t;
	};
};

struct sl_ctl_reply {
	int32_t status;           /* sluice_result_t */
	uint32_t value;           /* client id, region id or comm handle */
	uint32_t node;            /* this dataplane's node id */
	uint32_t channels;        /* its channels (engines), 1 to SL_MAX_CHANNELS */
	uint32_t payload;         /* bytes of data per packet: sl_chunk_used's */
	char msg[SL_ERRMSG_LEN];  /* why, when status is not SLUICE_OK */
};

#endif
