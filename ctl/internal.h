/*
 * internal.h: what the files of ctl/ share with each other and with nothing
 * else: the context, communicator and request structures, the error and
 * logging helpers, configuration, the attach-socket call, the lookup of
 * registered memory, and the TCP bootstrap.  None of it is exported from
 * libsluice (libsluice.map keeps every sl_ symbol local).
 */
#ifndef SLUICE_CTL_INTERNAL_H
#define SLUICE_CTL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>
#include <time.h>

#include "sluice/abi.h"
#include "sluice/drive.h"
#include "sluice/sluice.h"

#define SL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

/* ---- error.c ---- */

/* Store "what failed, where, what to do" as this thread's last error; return result. */
sluice_result_t sl_fail(sluice_result_t result, const char *fmt, ...) SL_PRINTF(2, 3);
const char *sl_datatype_name(sluice_datatype_t dtype);
const char *sl_op_name(sluice_redop_t op);

static inline int64_t sl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- config.c: environment and logging ---- */

#define SL_SOCKET_DEFAULT "/run/sluice/sluiced.sock"
#define SL_TIMEOUT_DEFAULT 60
#define SL_TIMEOUT_MAX 86400
#define SL_HOST_MAX 256

enum sl_log_level { SL_LOG_NONE, SL_LOG_WARN, SL_LOG_INFO, SL_LOG_TRACE };

/* Subsystems for SLUICE_DEBUG_SUBSYS; WARN lines print whatever the mask. */
enum sl_subsys {
	SL_SUB_INIT = 1u << 0, /* attach, detach, embedded engine */
	SL_SUB_ENV = 1u << 1,  /* configuration */
	SL_SUB_MEM = 1u << 2,  /* registered memory */
	SL_SUB_BOOT = 1u << 3, /* TCP rendezvous */
	SL_SUB_COMM = 1u << 4, /* communicators */
	SL_SUB_COLL = 1u << 5, /* submissions and completions */
	SL_SUB_TUNING = 1u << 6, /* the planner's choices and predicted costs */
};

struct sl_config {
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* SLUICE_SOCKET */
	bool embedded;             /* SLUICE_EMBEDDED */
	const char *embedded_args; /* SLUICE_EMBEDDED_ARGS, "" when unset */
	const char *dp_lib;        /* SLUICE_DP_LIB, NULL when unset */
	int timeout_s;             /* SLUICE_TIMEOUT */
	bool busy_poll;            /* SLUICE_BUSY_POLL: an embedded wait drives the engine until done */
	bool yield;                /* SLUICE_YIELD: ranks share cores, a wait sleeps without spinning first */
};

/* Read and check every variable sluice_init needs, SLUICE_DEBUG* included. */
sluice_result_t sl_config_load(struct sl_config *cfg);
/* SLUICE_TIMEOUT alone, for code that runs without a context. */
sluice_result_t sl_config_timeout(int *seconds);
/* Rank and world size from SLUICE_RANK/SLUICE_WORLD_SIZE or a launcher's variables. */
sluice_result_t sl_config_rank_world(int *rank, int *nranks);
/* "host:port" from SLUICE_ROOT, or MASTER_ADDR and MASTER_PORT. */
sluice_result_t sl_config_root(char *root, size_t len);
/* Split spec ("host:port"); source names where it came from, for the message. */
sluice_result_t sl_parse_hostport(const char *spec, const char *source, char *host, size_t host_len,
				  uint16_t *port);

bool sl_log_on(enum sl_log_level level, unsigned subsys);
void sl_log(enum sl_log_level level, unsigned subsys, const char *fmt, ...) SL_PRINTF(3, 4);
/* The rank shown in log lines (the last communicator this process joined). */
void sl_log_set_rank(int rank);

#define SL_LOG(level, subsys, ...)                         \
	do {                                               \
		if (sl_log_on(level, subsys))              \
			sl_log(level, subsys, __VA_ARGS__); \
	} while (0)
#define SL_INFO(subsys, ...) SL_LOG(SL_LOG_INFO, subsys, __VA_ARGS__)
#define SL_TRACE(subsys, ...) SL_LOG(SL_LOG_TRACE, subsys, __VA_ARGS__)

/* ---- the context (attach.c), requests (coll.c), memory (mem.c) ---- */

#define SL_MAX_REQS (SL_SUBMIT_SLOTS * 4)
/* sluice_last_error's buffer, and those that carry one on (error.c says why this size) */
#define SL_LAST_ERROR_LEN 1024u
#define SL_VMETA_UNITS (SL_VMETA_BYTES / SL_VMETA_UNIT) /* pieces of the page's all-to-allv counts area */
/* Zero-byte ranges name this region (see abi.h): no registration needed. */
#define SL_REGION_NONE UINT32_MAX

enum sl_req_state {
	SL_REQ_FREE = 0,  /* slot unused */
	SL_REQ_POSTED,    /* submitted, no completion yet */
	SL_REQ_DONE,      /* completion reaped, result not yet taken */
	SL_REQ_ABANDONED, /* the waiter gave up; freed when the completion comes */
	SL_REQ_GROUPED,   /* made inside a group: submitted at sluice_group_end */
};

struct sluice_req {
	struct sluice_ctx *ctx;
	struct sluice_comm *comm;
	uint64_t tag;             /* echoed by the dataplane in struct sl_cpl */
	enum sl_req_state state;
	unsigned parts_left;      /* channels whose completion has not come yet */
	int32_t status;           /* sluice_result_t: the first part's failure, else OK */
	int send_slot, recv_slot; /* region table slots kept busy, -1 for none */
	int vmeta_unit;           /* all-to-allv: its first unit of the counts area, -1 for none */
	unsigned vmeta_units;     /* and how many */
};

struct sl_region {
	bool used;     /* slot taken (base may still be NULL while registering) */
	void *base;    /* our mapping */
	size_t size;   /* bytes the caller asked for */
	size_t mapped; /* bytes mapped (size rounded up to pages) */
	uint32_t id;   /* the dataplane's region id */
	uint32_t busy; /* collectives in flight that use it */
	bool device;   /* the application's GPU memory (sluice_mem_register), not ours to unmap */
};

struct sluice_ctx {
	struct sl_config cfg;
	int sock;                     /* attach socket */
	bool ctl_broken;              /* a request timed out: replies may be out of step */
	bool embedded;                /* holds a reference on the embedded engine */
	int32_t (*drive)(int64_t now_ns); /* embedded: one engine pass here (waits spin on it), at the
					   * caller's sl_now_ns(); work done, or sluice/drive.h's answers */
	void (*release)(bool more);   /* embedded: a wait stops driving, the engine's thread takes over
				       * (more: the context has other calls in flight) */
	uint32_t client_id;           /* from HELLO */
	struct sl_client_page *page;  /* the client page, mapped shared */
	unsigned nch;                 /* the dataplane's channels (HELLO's answer) */
	uint32_t payload;             /* its bytes of data per packet (HELLO's answer) */
	struct sl_spsc submit[SL_MAX_CHANNELS];   /* our producer sides */
	struct sl_spsc complete[SL_MAX_CHANNELS]; /* our consumer sides */
	pthread_mutex_t call_lock;    /* one socket request at a time */
	pthread_mutex_t lock;         /* rings, requests, regions, ncomms */
	struct sl_region regions[SL_MAX_REGIONS];
	struct sluice_req reqs[SL_MAX_REQS];
	uint64_t next_tag;            /* per-context increasing request tag */
	int64_t next_hup_check;       /* when to next poll the socket for a dead dataplane */
	unsigned ncomms;              /* communicators alive */
	unsigned inflight;            /* requests of all its comms posted and not yet completed */
	uint64_t vmeta_busy[SL_VMETA_UNITS / 64]; /* bit per unit of the page's counts area in use */
	_Atomic uint64_t naps, spins; /* wait turns that slept, and that spun first (none with cfg.yield) */
	/* reqs[i]'s reason when its status is not OK, kept out of reqs, whose
	 * pages sluice_init faults in: only a failure faults in the page it
	 * writes, not 624 KiB at every attach (perf/ALGORITHMS.md, odds23) */
	char req_msgs[SL_MAX_REQS][SL_ERRMSG_LEN];
};

struct sluice_comm {
	struct sluice_ctx *ctx;
	uint32_t handle;   /* the dataplane's communicator handle */
	int rank, nranks;
	uint64_t key;
	unsigned inflight; /* requests posted and not yet completed */
	unsigned channels; /* channels every rank's dataplane has (the fewest of them) */
	double link_latency_us, link_gbps; /* agreed by link_probe.c; 0: not measured */
};

/* One request over the attach socket: msg (and fd, or -1) out, *reply back
 * within sl_ctl_wait_s. */
sluice_result_t sl_ctl_call(struct sluice_ctx *ctx, struct sl_ctl_msg *msg, int fd,
			    struct sl_ctl_reply *reply);
/* A daemon touches every page of an area it registers: 3-5 s a GiB on the
 * 2-core VMs, more under load.  REG's answer may take this much longer per
 * GiB (or part of one) than SLUICE_TIMEOUT. */
#define SL_REG_S_PER_GIB 10
/* Past SLUICE_TIMEOUT, for what the dataplane itself bounds by the same
 * timeout (a call, a destroy waiting for its peers, a request to an engine
 * that takes no pass): its answer, with the reason, comes first. */
#define SL_WAIT_MARGIN_S 2

/* A wait's turn reads the clock unless the turn before was an idle pass or
 * a spin that kept the core (0.1-0.3 us): its time serves again, up to this
 * many turns in a row.  A read took 10% of a small call's samples
 * (perf/ALGORITHMS.md, small31); the engine's pass takes the time it is
 * given, which is so never older than these few idle turns. */
#define SL_WAIT_STALE_TURNS 3

/* Seconds the answer to msg may take: timeout_s (SLUICE_TIMEOUT) and
 * SL_WAIT_MARGIN_S; for REG SL_REG_S_PER_GIB more per GiB of its area, a
 * day more at most; SL_WAIT_MARGIN_S alone for STALLED. */
int64_t sl_ctl_wait_s(int timeout_s, const struct sl_ctl_msg *msg);

/* Where [ptr, ptr + bytes) lies in registered memory; what names it in the message. */
struct sl_range {
	uint32_t region; /* dataplane region id, SL_REGION_NONE for zero bytes */
	uint64_t off;    /* byte offset inside the region */
	int slot;        /* our table slot, -1 for zero bytes */
};
/* Caller holds ctx->lock. */
sluice_result_t sl_mem_find(struct sluice_ctx *ctx, const char *what, const void *ptr, size_t bytes,
			    struct sl_range *out);
/* Whether ptr lies in registered GPU memory (caller holds ctx->lock). */
bool sl_mem_is_device(const struct sluice_ctx *ctx, const void *ptr);
/* Unmap every region (finalize: the dataplane drops them with the client). */
void sl_mem_unmap_all(struct sluice_ctx *ctx);

/* ---- coll.c, collectives.c, plan.c: posting collectives ---- */

/* One call of the public API, checked and ready to post. */
struct sl_call {
	const char *fn;          /* "sluice_allgather", for messages */
	uint32_t opcode;         /* enum sl_opcode */
	const void *send;
	void *recv;
	size_t count;
	sluice_datatype_t dtype;
	sluice_redop_t op;       /* SLUICE_SUM where the collective does not reduce */
	int root;                /* root, or the peer of a send or recv; 0 where unused */
	uint64_t send_bytes, recv_bytes; /* this rank's buffers, from sl_cmd_bytes */
	const size_t *v[4];      /* all-to-allv: send counts, send displs, recv counts, recv displs */
	uint32_t algo;           /* enum sl_algo_id for sluice's own calls; 0: the planner's choice */
	bool device;             /* its buffers are GPU memory (sl_coll_post finds out) */
};

/* Plan, describe and submit a checked call (held until sluice_group_end inside a group). */
sluice_result_t sl_coll_post(struct sluice_comm *comm, const struct sl_call *call, sluice_req_t **req);

struct sl_plan {
	uint32_t algo;        /* enum sl_algo_id */
	uint32_t chunk_bytes; /* 0 = the dataplane's default */
	unsigned parts;       /* channels the call is split over, slice p on channel p */
	double cost_us;       /* the model's prediction for one slice (TUNING's) */
};
/* Pick the algorithm and chunk size for call on comm (SLUICE_ALGO and
 * SLUICE_CHUNK_SIZE override the cost model); logs under TUNING. */
sluice_result_t sl_plan_pick(const struct sluice_comm *comm, const struct sl_call *call, struct sl_plan *out);
/* Slice p of parts of a split call: its first element and element count. */
void sl_plan_slice(const struct sl_call *call, unsigned parts, unsigned p, uint64_t *first, uint64_t *count);
/* Check a call's arguments (naming c.fn in errors) and post it: collectives.c. */
sluice_result_t sl_coll_call(sluice_comm_t *comm, struct sl_call c, sluice_req_t **req);
/* Measure comm's links and agree on them with its other ranks: link_probe.c. */
sluice_result_t sl_link_probe(struct sluice_comm *comm);
/* The planner's configuration is valid (else the error, naming fn). */
sluice_result_t sl_plan_config(const char *fn);
/* Whether communicators should measure their links (link_probe.c). */
bool sl_plan_wants_probe(void);

/* ---- bootstrap.c: TCP rendezvous among the ranks of one communicator ---- */

struct sl_boot {
	int rank, nranks;
	int timeout_s;
	int fd;                  /* non-root: the connection to the root */
	int peer[SL_MAX_RANKS];  /* root: each rank's connection, -1 for none */
	uint64_t key;            /* the communicator key root chose */
	uint32_t node[SL_MAX_RANKS]; /* each rank's dataplane node id */
	uint32_t channels;       /* the fewest channels any rank's dataplane has */
};

/* Meet every rank at host:port (rank 0 listens there); fill b->key, b->node
 * and b->channels (this rank's dataplane has channels). */
sluice_result_t sl_boot_exchange(struct sl_boot *b, const char *host, uint16_t port, int rank,
				 int nranks, uint32_t node, uint32_t channels, int timeout_s);
/* Wait for every rank; each brings its own result and all return the first failure. */
sluice_result_t sl_boot_barrier(struct sl_boot *b, sluice_result_t mine);
void sl_boot_close(struct sl_boot *b);

#endif
