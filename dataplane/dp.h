/*
 * dp.h: the dataplane's internal types, shared by the engine (which owns
 * every table below and is the only thread that walks them) and the control
 * server (which prepares objects, hands them to the engine through the
 * control ring, and waits until the engine has taken or released them).
 */
#ifndef SLUICE_DP_H
#define SLUICE_DP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <sluice/abi.h>
#include <sluice/spsc.h>

#include "schedule.h"
#include "transport.h"

#define DP_MAX_CLIENTS 32
#define DP_MAX_COMMS 64
#define DP_STASH_MAX 4096 /* early packets kept per communicator */

struct dp_region {
	uint8_t *base;  /* the dataplane's mapping of the client's memory */
	uint64_t size;
	bool live;
};

struct dp_client {
	bool live;
	uint32_t id;
	pid_t pid;
	struct sl_client_page *page;
	size_t page_len;
	struct sl_spsc submit;    /* consumer side */
	struct sl_spsc complete;  /* producer side */
	struct dp_region regions[SL_MAX_REGIONS];
	uint32_t ncomms;          /* communicators it created and still holds */
};

/* An early packet: it arrived before its rank posted the collective. */
struct dp_stashed {
	struct sl_hdr hdr;
	uint8_t *payload;
	struct dp_stashed *next;
};

struct dp_coll;

struct dp_comm {
	bool live;
	uint64_t key;
	uint32_t key32;           /* the low 32 bits, carried in every packet */
	uint32_t rank, nranks;
	uint16_t node[SL_MAX_RANKS];
	struct dp_client *client;
	uint32_t next_seq;        /* sequence number of the next collective posted */
	/* point-to-point: sends and recvs match by (peer, sequence per pair), outside next_seq */
	uint32_t p2p_send_seq[SL_MAX_RANKS]; /* next send to each rank */
	uint32_t p2p_recv_seq[SL_MAX_RANKS]; /* next recv from each rank */
	struct dp_coll *colls;    /* running collectives, oldest first */
	struct dp_stashed *stash; /* early packets, oldest first */
	uint32_t nstash;
	int32_t failed;           /* sluice_result_t once the communicator is broken */
	char why[SL_ERRMSG_LEN];
	struct sl_tp_msg *abort_msgs; /* [nranks], the abort notices it sent */
};

struct dp_coll {
	struct dp_comm *comm;
	struct dp_coll *next;
	struct sl_cmd cmd;
	uint32_t seq;             /* in the communicator; for SEND and RECV, in the pair */
	uint8_t *buf[SL_NBUFS];   /* send, recv and scratch, as the schedule names them */
	uint8_t *owned;           /* scratch and the in-place copy of the input, freed with it */
	struct sl_sched sched;
	struct dp_stashed *deferred; /* packets that came before their turn in the reduction order */
	struct sl_vmeta *vmeta;   /* ALLTOALLV: the client's counts, copied at post */
	struct sl_tp_msg *msgs;   /* one per send chunk, allocated at post */
	uint32_t nmsgs, msgs_used, msgs_unacked;
	uint64_t last_progress_ns;
	int32_t status;           /* SLUICE_OK until it fails */
	char why[SL_ERRMSG_LEN];
};

struct dp_counters {
	uint64_t colls_posted, colls_done, colls_failed;
	uint64_t cmd_rejected;       /* descriptors that failed validation */
	uint64_t rx_unknown_comm;    /* packets for a communicator we do not have */
	uint64_t rx_bad_coll;        /* packets outside their collective's schedule */
	uint64_t rx_mismatch;        /* packets whose call differs from ours */
	uint64_t stashed;            /* packets that arrived before their collective */
};

/* Control operations, from the server thread to the engine. */
enum dp_ctl_op {
	DP_CTL_ADD_CLIENT = 1,
	DP_CTL_DEL_CLIENT,
	DP_CTL_ADD_REGION,
	DP_CTL_DEL_REGION,
	DP_CTL_ADD_COMM,
	DP_CTL_DEL_COMM,
};

struct dp_ctl_req {
	uint32_t op;
	uint32_t client;      /* client index */
	uint32_t index;       /* region or comm index */
	uint32_t pad;
	void *obj;            /* what to add (prepared by the server) */
	_Atomic int32_t *done; /* set to 1 + result by the engine */
	char *why;            /* SL_ERRMSG_LEN bytes for a refusal */
};

struct dp_engine {
	struct sl_tp *tp;
	uint16_t node;
	uint32_t payload;
	uint64_t timeout_ns;      /* a collective with no progress this long fails */
	struct sl_clock clock;
	struct sl_spsc ctl;       /* server -> engine, both sides in this process */
	void *ctl_mem;
	struct dp_client clients[DP_MAX_CLIENTS];
	struct dp_comm comms[DP_MAX_COMMS];
	struct dp_counters count;
	_Atomic bool stop;
	_Atomic bool busy;        /* a thread is inside dp_engine_poll */
	_Atomic uint64_t driven_ns; /* when the application last drove the engine (embedded) */
	uint32_t running;         /* collectives posted and not finished */
	uint64_t next_timer_ns;
};

/* engine.c */
struct dp_engine_cfg {
	uint16_t node;         /* this dataplane's node id */
	uint32_t max_frame;    /* the smallest max_frame of its ports */
	uint32_t payload;      /* bytes per packet; 0 = as much as max_frame allows */
	uint64_t timeout_ns;   /* no progress this long fails a collective or a peer */
	uint32_t window;       /* packets in flight per peer; 0 = the transport's default */
	uint64_t rto_min_ns;   /* retransmission timeout floor; 0 = the transport's default */
};

/* Set up the engine and its transport; ports and routes are added after. */
int dp_engine_init(struct dp_engine *e, const struct dp_engine_cfg *cfg, char *err, size_t len);
void dp_engine_fini(struct dp_engine *e);
/* The polling loop; returns when e->stop is set. */
int dp_engine_run(void *engine);
/* One pass of the loop: returns work done (0 = idle).  Used by the loop and by tests. */
uint32_t dp_engine_poll(struct dp_engine *e);
/* One pass, unless another thread is in one (embedded mode: the engine
 * thread and the application's wait both drive the engine). */
int32_t dp_engine_try_poll(struct dp_engine *e); /* work done, or -1: another thread is in it */
/* Queue a control request; req->done is set to 1 + result once applied.  False when full. */
bool dp_engine_ctl_post(struct dp_engine *e, struct dp_ctl_req *req);
/* From the server thread: hand a request to the engine and wait for its answer. */
int32_t dp_engine_call(struct dp_engine *e, struct dp_ctl_req *req);
uint64_t dp_now_ns(void *unused);

/* coll_run.c */
void dp_coll_post(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *cmd);
uint32_t dp_colls_progress(struct dp_engine *e);
enum sl_deliver_result dp_deliver(void *engine, const struct sl_hdr *h, const uint8_t *payload);
void dp_msg_acked(void *engine, struct sl_tp_msg *m);
void dp_flow_dead(void *engine, uint16_t node);
void dp_comm_release(struct dp_engine *e, struct dp_comm *comm);

#endif
