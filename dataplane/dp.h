/*
 * dp.h: the dataplane's internal types, shared by the engine (which owns
 * every table below and is the only thread that walks them) and the control
 * server (which prepares objects, hands them to the engine through the
 * control ring, and waits until the engine has taken or released them).
 */
#ifndef SLUICE_DP_H
#define SLUICE_DP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <sluice/abi.h>
#include <sluice/sluice.h>
#include <sluice/spsc.h>

#include "gdma.h"
#include "schedule.h"
#include "transport.h"
#include "pool.h"
#include "wait_chain.h"
#include "wake.h"

#define DP_MAX_CLIENTS 32
#define DP_MAX_COMMS 64
/* Chains of waits a communicator keeps from its peers' stall notes: a
 * rank waited for by several keeps the last few (each is passed on when it
 * comes, or when this rank's own call stalls). */
#define DP_CHAINS_KEPT 4
#define DP_STASH_MAX 4096 /* early packets kept per communicator (more while a posted call waits on their sender) */
/* A communicator holds a sender's window (SL_DELIVER_HOLD) from its share
 * of DP_STASH_HOLD early packets on (each of nranks - 1 senders the same)
 * until it is down to its share of DP_STASH_RESUME: what they still have
 * out (a window each, the receive budget shared) fits in the rest, so the
 * stash is not refused into (SL_DELIVER_RETRY) in the end. */
#define DP_STASH_HOLD (DP_STASH_MAX - 2 * SL_MAX_WINDOW)
#define DP_STASH_RESUME (DP_STASH_MAX / 2)
/* Payload bytes of early packets an engine takes past its communicators'
 * DP_STASH_MAX (while a posted call waits on their sender: coll_stash.c
 * stash_full), all communicators together, malloc'd once the pool's arena
 * is used: dp_engine.stash_limit.  Past it the communicator fails
 * (SLUICE_ERR_NO_MEMORY) rather than grow without bound: a sender that
 * ignores its held window (a misbehaving peer, or a forged one), each
 * packet for a call this rank has not posted, took another block for as
 * long as the call waited.  A legal order reached it too (a peer's call on
 * another communicator, posted there first, sending more than the limit
 * ahead of the one this rank waits on: perf/ALGORITHMS.md, soak21); now
 * that call is parked (coll_stash.c stash_park), on every communicator at
 * once (a flow parks SL_PARKS_MAX, at least DP_MAX_COMMS), but a peer of an
 * older build parks four at most, so the default stays a quarter of the
 * machine's memory, at least this floor, and sluiced --stash-limit /
 * SLUICE_STASH_LIMIT set it. */
#define DP_STASH_LIMIT_FLOOR (256ull << 20)
/* The same in payload bytes, for packets of calls past the next one, so
 * that senders running calls ahead stay in the pool's arena (pool.h):
 * counted in packets alone, each sender of 16 KiB packets had a share of
 * 28 MiB, and a 3-rank gather root whose leaves ran ahead took its early
 * packets from malloc, ~250 fresh pages a call, 2-6 ms each for the first
 * 20-40 calls of a size (perf/ALGORITHMS.md, stall).  Half the arena: its
 * blocks are up to 1.5 times the payload, and a held sender's packets in
 * flight still come. */
#define DP_STASH_HOLD_BYTES (DP_POOL_BYTES / 2)
#define DP_STASH_RESUME_BYTES (DP_STASH_HOLD_BYTES / 2)
/* A quarter of DP_STASH_MAX: a root whose peer ACKs its early packets runs
 * up to DP_STASH_MAX small calls ahead, and a post walks its bucket (64
 * buckets of 64 packets: a third of a 2-rank reduce's receiving side). */
#define DP_STASH_BUCKETS 1024
/* Rooted calls remembered after they end, for packets that come later: a
 * lazy check comes 1-2 ms after its call's post, when a rank of small calls
 * may be as far as DP_LINGER_ONE_MAX calls further. */
#define DP_DONE_CALLS DP_LINGER_ONE_MAX
/* Finished collectives' memory the engine keeps for reuse: about a
 * communicator's DP_LINGER_ONE_MAX small calls (~1.3 KiB each), which finish in
 * bursts as ACKs come; with 256 KiB kept, a leaf far ahead allocated and
 * built most calls anew (malloc, free and schedule building ~10% of its
 * samples). */
#define DP_COLL_KEEP_BYTES (4u << 20)
#define DP_COLL_MATCH_WALK 8 /* kept collectives a post looks through for its own schedule */
#define DP_LIKE_WALK 4 /* running, then lingering collectives a post looks through for a schedule to copy */
#define DP_GPU_KEEP_BYTES (64ull << 20) /* the largest device scratch a reducer keeps for the next collective */
/* A call whose send and recv buffers hold at most this many bytes may be
 * reported done before its sends are acknowledged (coll_run.c: lingering),
 * at most DP_LINGER_MAX of them per communicator, holding at most
 * DP_LINGER_BYTES of copies.  The root of a run of small rooted calls runs
 * this far ahead of its peers, as an MPI root does through socket buffers
 * (16 calls held it to its slowest peer's pace: 20-40x Open MPI's time).
 * A call that only sends, to one rank, and is no root (a gather's or
 * reduce's leaf, a send) may linger up to DP_LINGER_ONE_MAX, as far as its
 * receiver's stash share lets it (DP_STASH_HOLD / 2 at 3 ranks): with 256,
 * the leaf on the root's core of 3 ranks on 2 waited for the root every 256
 * calls, and its 1000 calls took as long as the root's.  Roots stay at 256:
 * that far ahead, 3-rank scatter and broadcast measured 1.15x slower out of
 * place, their leaf on the root's core stashing what the root ran ahead
 * (perf/ALGORITHMS.md, root3). */
#define DP_EAGER_MAX (64u << 10)
/* Where ranks share cores (dp_idle_cfg.yield_app), a collective's leaf that
 * only sends, to one rank (a gather's or reduce's), or a scatter's root, of
 * at least this many bytes, sends straight from the client's buffer and ends at its ACKs
 * instead of lingering on a copy (coll_run.c sends_acked).  There the CPU
 * per byte decides, and a lingering gather leaf's byte was copied twice at
 * the leaf (its copy, its frame) and twice at the root (its stash, its
 * destination): 3 ranks at 128 KiB took 17-24 us a call waiting against
 * 51-56 lingering.  A wait costs a round trip's yields, ~6 us: a 32 KiB
 * gather (leaves of 11 KiB) took 8.6-9.2 us waiting against 5.9-7.5
 * (perf/ALGORITHMS.md, gcopy32). */
#define DP_ACKED_SEND_MIN (32u << 10)
/* ... unless no ACK came this long: then it lingers on a copy after all.
 * A lost or reordered frame's ACK waits for a tail-loss probe (~0.1 ms):
 * with 1% drops and frames held back, such a gather's median call took
 * 123-137 us waiting, 4-16 giving up after 50 us (perf/ALGORITHMS.md,
 * gcopy32). */
#define DP_ACK_WAIT_NS 50000ull
/* Bytes of a call's local work (its own block, copied or reduced into
 * place; in place, the copy of its input and the packets deferred while it
 * was taken, or until an acknowledgement freed their destination) done in
 * one engine pass; the rest waits for the next passes,
 * which the work reported keeps coming.  Applied whole at post, a 2 GiB
 * all-gather's own block held the engine 2-4 s: no ACKs, no timers (the
 * stall watch named it).  16 MiB (a few ms) leaves every call of up
 * to 32 MiB a rank's block as it was (perf/ALGORITHMS.md, edge25). */
#define DP_LOCAL_PER_PASS (16ull << 20)
/* ... and while a copying call's sends are out (coll_run.c local_budget). */
#define DP_LOCAL_BESIDE_SENDS (256ull << 10)
/* An in-place all-to-all whose input is larger than this runs on its input
 * (coll_run.c runs_on_input) even where a pass would take its copy: the
 * copy went ahead of every send, and a peer's packet waiting for the
 * acknowledgement of the send that reads where it lands costs less.  2 and
 * 3 ranks, 512 KiB-1 MiB calls: 0.84-0.91 of the time.  At 256 KiB the
 * two were even (2 ranks 0.90-1.10, 3 ranks 1.02-1.08); below, the copy is
 * the cheaper: 2-rank 32 KiB calls took 3x as long on the input
 * (perf/ALGORITHMS.md, big33). */
#define DP_INPUT_GATE_MIN (256ull << 10)
#define DP_LINGER_MAX 256
#define DP_LINGER_ONE_MAX 2048
#define DP_LINGER_BYTES (4u << 20)
#define DP_MAX_GPUS 16
/* The GPU path's pinned memory per engine and GPU: staging buffers (one chunk
 * each, device to host) and the reducer's landing arena.  Both are what the
 * pipeline has in flight, a few hundred KiB at a time; kept small so that 8
 * channels' worth stays in the CPU's caches instead of streaming through
 * DRAM, which the engines share: 16 buffers and 4 MiB ran 1.15-1.3x faster
 * than 64 and 16 MiB on nvidia-h200-x2 (perf/GPU-NOTES.md section 12). */
#define DP_STAGE_BUFS 16
#define DP_ARENA_BYTES (4u << 20)

struct dp_region {
	uint8_t *base;  /* the dataplane's mapping of the client's memory */
	uint64_t size;
	bool live;
	bool owner;     /* this engine unmaps (or closes) it; the other channels' engines borrow it */
	int gpu;        /* -1: host memory; else device memory of this CUDA device */
	void *ipc_base; /* device memory opened from an IPC handle: what to close */
};

struct dp_client {
	bool live;
	uint32_t id;
	pid_t pid;
	struct sl_client_page *page;
	size_t page_len;
	bool owner;               /* this engine unmaps the page; the other channels' engines borrow it */
	bool drives;              /* this process (an embedded dataplane's application): its waits drive the engine */
	struct sl_channel_bell *bell; /* this engine's doorbell in the page */
	struct sl_spsc submit;    /* consumer side */
	struct sl_spsc complete;  /* producer side */
	struct dp_region regions[SL_MAX_REGIONS];
	uint32_t ncomms;          /* communicators it created and still holds */
};

/* An early packet: it arrived before its rank posted the collective. */
struct dp_stashed {
	struct sl_hdr hdr;
	uint8_t *payload;       /* in the frame when in_frame, else right after this */
	struct dp_stashed *next;
	bool in_frame;
	bool past_cap;          /* taken past DP_STASH_MAX: counted in dp_engine.stash_past_cap_bytes */
	struct sl_tp_frame frame;
};

struct dp_coll;

/* A reducer the engine posts packets to instead of applying them itself:
 * one per GPU that holds a registered buffer (a persistent CUDA kernel,
 * with a stager for sends), or the CPU stand-in that --gate-host uses to
 * run host collectives through the same asynchronous path. */
struct dp_gdev {
	struct sl_gdma *g;
	struct sl_gdma_stager *st; /* device-to-host copies for sends; NULL for the CPU */
	int device;                /* CUDA ordinal; -1 for the CPU stand-in */
	void *kept;                /* a finished collective's device scratch, for the next */
	uint64_t kept_bytes;
};

/* A chunk every packet of which is posted: applied once its ticket is done. */
struct dp_pending {
	uint32_t ticket, recv, chunk;
	bool ticketed; /* false: nothing was posted for it (empty), applied at once */
};

/* A communicator's first failure on any channel (dp_comm.channels_failed). */
struct dp_channels_failed {
	_Atomic int32_t claimed;  /* set by the one channel that writes the rest */
	_Atomic int32_t status;   /* 0, or its status, stored after why */
	/* a channel's call has carried a failure to the client: the channels
	 * that ran none of its calls do not report theirs again at destroy */
	_Atomic bool told;
	char why[SL_ERRMSG_LEN];
	/* why came from another channel and says so already (a peer's relay
	 * of its own other channel's failure): the channels that take it up do
	 * not say it again (coll_run.c check_channels); written with why */
	bool relayed;
};

struct dp_comm {
	bool live;
	uint64_t key;
	uint32_t key32;           /* the low 32 bits, carried in every packet */
	uint32_t rank, nranks;
	/* The client's SLUICE_TIMEOUT (COMM_CREATE), so that its calls fail with
	 * the reason before its own wait gives up; 0: the engine's (dp_comm_timeout). */
	uint64_t timeout_ns;
	uint16_t node[SL_MAX_RANKS];
	struct dp_client *client;
	uint32_t next_seq;        /* sequence number of the next collective posted */
	/* point-to-point: sends and recvs match by (peer, sequence per pair), outside next_seq */
	uint32_t p2p_send_seq[SL_MAX_RANKS]; /* next send to each rank */
	uint32_t p2p_recv_seq[SL_MAX_RANKS]; /* next recv from each rank */
	/* Running collectives, oldest first; those reported done that linger
	 * (coll_run.c) are apart, so that a pass, a post and an arriving packet
	 * do not walk the hundreds a run of small calls leaves behind. */
	struct dp_coll *colls, *colls_tail;
	struct dp_coll *linger, *linger_tail;
	uint32_t linger_ready;    /* lingering ones marked ready to finish */
	/* At most the least last_progress_ns of the lingering ones (ACKs only
	 * move theirs on): none can time out before this plus the timeout. */
	uint64_t linger_since_ns;
	/* Early packets, by sequence number modulo DP_STASH_BUCKETS, each
	 * bucket oldest first: a post looks in its own bucket only.  Made
	 * with the communicator (dp_comm_open_tables: the first 16 KiB of
	 * DP_COMM_TABLES_BYTES). */
	struct dp_stash_bucket {
		struct dp_stashed *head, *tail;
	} *stash;
	uint32_t nstash;
	/* Each sender is held on its own early packets (DP_STASH_HOLD shared
	 * out among the senders): a rank far ahead must not fill the stash
	 * and so hold the one whose packet the posted call waits for.  32 bits:
	 * past DP_STASH_MAX while a posted call waits (coll_stash.c stash_full). */
	uint32_t nstash_from[SL_MAX_RANKS];
	uint32_t stash_bytes_from[SL_MAX_RANKS]; /* their payload bytes */
	bool held_from[SL_MAX_RANKS];
	uint8_t held_kinds[SL_MAX_RANKS]; /* 1 << enum sl_tp_order of the packets its hold took: what
					     park_held_senders parks (calls, sends or both) */
	uint32_t hold_share, resume_share; /* a sender's shares, set with the stash (dp_comm_open_tables) */
	uint32_t hold_bytes, resume_bytes; /* ... of DP_STASH_HOLD_BYTES and DP_STASH_RESUME_BYTES */
	uint32_t stash_held;      /* senders whose windows it holds */
	bool parking;             /* it asked a sender to park its calls (coll_stash.c stash_park) */
	bool parking_sends;       /* or its sends: lifted each at its recv, all when comm goes */
	/* The calls of rooted collectives that ended here, by sequence number
	 * modulo DP_DONE_CALLS, as their packets carry them (kind 0: none), so
	 * that a packet that comes after its call ended is still compared with
	 * it (schedule.c).  Made with the communicator (the 32 KiB after stash). */
	struct dp_done_call {
		uint32_t seq;
		uint8_t kind, dtype_op;
		uint64_t count;
	} *done;
	int32_t failed;           /* sluice_result_t once the communicator is broken */
	char why[SL_ERRMSG_LEN];
	bool failure_told;        /* a completion or refusal has carried `failed` to the client */
	bool renamed;             /* `failed` superseded a timeout the client may have heard (comm_vfail) */
	/* Shared by this communicator's copies on every channel: the first to
	 * fail stores its status and reason, and the others fail too at their
	 * next timer pass, so that a call's other slices do not wait for the
	 * timeout, and with that reason, whichever slice's error the client reads. */
	struct dp_channels_failed *channels_failed;
	uint32_t nlinger;         /* collectives on linger */
	uint64_t linger_bytes;    /* their copies' bytes */
	/* the client's destroy, answered once the lingering ones are gone and
	 * every live peer's closing word has come (the server waits on it) */
	_Atomic int32_t *close_done;
	char *close_why;
	uint64_t close_since_ns;  /* when the destroy came: it waits for peers timeout_ns at most */
	bool closing_sent;        /* this rank's closing word is out (comm_close.c) */
	bool close_waiting;       /* counted in dp_engine.closing */
	bool peer_closed[SL_MAX_RANKS]; /* closing words came from these peers ... */
	uint32_t peer_seq[SL_MAX_RANKS]; /* ... with the number of collectives each ran */
	/* The call each peer last said it waits in for this rank, stalled
	 * (wait_notes.c dp_note_stall): op 0 none.  At this rank's own timeout
	 * one that this rank has not posted (not both collectives) names the cycle. */
	struct dp_peer_wait {
		uint32_t seq;
		uint8_t op;
	} peer_wait[SL_MAX_RANKS];
	/* The chains of waits that came with stall notes on this communicator
	 * (wait_chain.h), the last DP_CHAINS_KEPT (n 0: none): passed on along
	 * this rank's stalled calls, and a cycle named from one at a timeout. */
	struct dp_wait_chain chains_in[DP_CHAINS_KEPT];
	uint8_t chains_next;      /* the slot the next one takes */
	/* The waits that rank cycle_from said lead from its own into a cycle
	 * (wait_notes.c cycle_came; n 0: none): its first cycle_path waits lead
	 * to the cycle (0: cycle_from is in it), the rest are the cycle.  This
	 * rank waits for it from outside the cycle, names the cycle at its own
	 * timeout, and tells the ranks that wait for it (tail_tell). */
	struct dp_wait_chain cycle_in;
	uint8_t cycle_path;
	uint16_t cycle_from;
	/* The latest ahead note (wait_notes.c ahead_came; n 0: none): the
	 * waits from this rank's own to the rank its chain stopped at, which
	 * had not posted the last one's counterpart, or closed on (a cycle
	 * this rank waits on from outside).  Named at this rank's timeout
	 * where nothing closer is known. */
	struct dp_wait_chain ahead;
};

struct dp_coll {
	struct dp_comm *comm;
	struct dp_coll *next, *prev; /* on comm->colls or comm->linger */
	struct sl_cmd cmd;
	uint32_t seq;             /* in the communicator; for SEND and RECV, in the pair */
	uint8_t *buf[SL_NBUFS];   /* send, recv and scratch, as the schedule names them */
	uint8_t *owned;           /* scratch and the in-place copy of the input, back to the pool with it */
	uint64_t owned_len;       /* its size */
	struct dp_stashed *deferred; /* packets that came before their turn in the reduction order */
	uint32_t ndeferred;       /* how many (coll_run.c defer bounds them) */
	uint32_t nmsgs, msgs_used, msgs_unacked;
	uint64_t posted_ns;
	uint64_t last_progress_ns;
	uint64_t noted_ns;        /* last_progress_ns when its stall was told to its peer (dp_note_stall) */
	uint64_t passed_ns;       /* ... when the chains held were passed along it, as the passing call */
	uint64_t looked_ns;       /* when it last looked whether it is the passing call (dp_note_stall) */
	uint64_t pinged_ns;       /* when it last asked the rank it waits for whether it is there (ditto) */
	uint64_t held_ns;         /* when its timeout began to wait for that rank's answer (coll_timeout.c verdict_held) */
	/* Gated collectives (device buffers, or --gate-host): packets are
	 * posted to a reducer, and the schedule hears of each chunk once its
	 * last ticket is done (dataplane/coll_async.c). */
	struct dp_gdev *gdev;     /* NULL: applied here, synchronously */
	struct dp_pending *pend;  /* FIFO of chunks waiting for their tickets */
	uint32_t pend_head, pend_tail, pend_cap;
	uint32_t last_ticket;     /* newest ticket posted for this collective */
	uint32_t seen_reaped;     /* the reducer's reaped count when deferred packets were last offered */
	bool ticketed;            /* last_ticket is set */
	uint32_t *stage_of;       /* per message: its stager buffer, or UINT32_MAX */
	uint32_t msgs_sent;       /* msgs[msgs_sent, msgs_used) wait for their staging copy */
	struct sl_send held;      /* a ready send that found no room (stager or reducer) */
	bool holding;
	void *dev_owned;          /* device scratch (and in-place input copy) */
	uint64_t dev_owned_bytes;
	/* Until the in-place copy of the input is taken (by the engine, a
	 * piece a pass, or by the reducer: coll_async.c), the collective
	 * neither sends nor takes packets. */
	bool snapping;
	const uint8_t *snap_src;  /* the client's input */
	uint64_t snap_piece, snap_off; /* how much of it is copied (gated: posted) */
	/* host: deferred packets may apply now (the input's copy is taken, or
	 * an acknowledged send freed their destination): offered again a
	 * budget a pass (coll_run.c issue_sends) */
	bool deferred_due;
	/* Large in-place all-to-all on the input itself, not on a copy
	 * (coll_run.c runs_on_input): per reception chunk, whether the send
	 * that reads its bytes is acknowledged, so that its packets may land;
	 * NULL for every other call. */
	uint8_t *src_free;
	/* and how many of its packets arrived before that and wait (when all
	 * have, the sends that pace on it go: sl_sched_chunk_arrived) */
	uint8_t *gate_held;
	struct dp_stashed **gate_wait; /* and those packets, offered again once it is */
	int32_t status;           /* SLUICE_OK until it fails */
	/* Reported done to the client, kept for the call checks still to come
	 * and the ACKs of its sends, which now read linger_copy instead of the
	 * client's buffers. */
	bool lingering;
	bool linger_ready;        /* counted in comm->linger_ready: it may finish */
	uint64_t linger_len;      /* linger_copy's bytes in this call */
	/* Kept when a finished collective is reused: coll_get clears only what
	 * stands above (a whole-struct literal built on the stack and copied
	 * was 10% of dp_coll_post's samples). */
	struct sl_sched sched;    /* reset, or rebuilt for another plan, by coll_new */
	bool to_one;              /* only sends, to one rank, and is no root: lingers DP_LINGER_ONE_MAX deep */
	struct sl_tp_msg *msgs;   /* one per send chunk, allocated at post */
	uint32_t msgs_cap;        /* msgs' length */
	uint8_t *linger_copy;     /* the bytes a lingering call's sends still read */
	uint64_t linger_cap;      /* its size */
	/* written with a failing status, read only then: three cache lines not cleared */
	char why[SL_ERRMSG_LEN];
};

struct dp_counters {
	uint64_t colls_posted, colls_done, colls_failed;
	uint64_t cmd_rejected;       /* descriptors that failed validation */
	uint64_t rx_unknown_comm;    /* packets for a communicator we do not have */
	uint64_t rx_bad_coll;        /* packets outside their collective's schedule */
	uint64_t rx_mismatch;        /* packets whose call differs from ours */
	uint64_t stashed;            /* packets that arrived before their collective */
	uint64_t held_in_place;      /* early or deferred packets kept in their frames, not copied */
	uint64_t stashed_past_cap;   /* early packets taken past DP_STASH_MAX (a posted call waited on their sender) */
	uint64_t sends_released_at_gate; /* send chunks of calls on their input made ready when the reception
					    chunk they pace on arrived whole at the gate, before it landed
					    (coll_run.c gate_held) */
	uint64_t sends_pulled_at_gate;   /* and those made ready, still paced, when a peer's packet came to
					    wait for them at the gate (sl_sched_gate_pull) */
	uint64_t stash_overflows;    /* communicators failed at dp_engine.stash_limit */
	long page_faults;            /* the engine thread's, while it ran (dp_main.c engine_main) */
	uint64_t sched_built;        /* calls whose schedule was built, neither kept with a finished
					collective nor copied from a running one */
	uint64_t owned_allocs;       /* calls whose own buffer (scratch, in-place input copy) took
					fresh memory, none of its size being kept (coll_run.c owned_get) */
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
	uint32_t patience_ms; /* give up on an engine that takes no pass this long, if below its timeout_ns */
	void *obj;            /* what to add (prepared by the server) */
	_Atomic int32_t *done; /* set to 1 + result by the engine */
	char *why;            /* SL_ERRMSG_LEN bytes for a refusal */
};

/* What an idle engine does (idle.c). */
#define DP_LINK_WAIT_AFTER_NS 1000000 /* idle this long, spin included, before waiting on rx_fds */
#define DP_LINK_WAIT_NS 200000       /* a wait on them ends by then: timers, clients' posts */
struct dp_idle_cfg {
	bool busy_poll;         /* never sleep: the engine has a core of its own */
	bool yield_app;         /* ranks share cores: an idle engine that would sleep does so at once, without spinning
				   first; embedded, an application's pass that finds no work yields its core */
	uint64_t spin_ns;       /* idle this long before sleeping; 0: the default */
	uint64_t max_sleep_ns;  /* one sleep lasts at most this; 0: the default */
	unsigned n_rx_fds;      /* every link's descriptor that polls readable while a frame waits */
	int rx_fds[SL_MAX_PORTS]; /* (af_packet's sockets); 0 unless all links have one */
};

struct dp_idle {
	struct dp_idle_cfg cfg;
	struct dp_wake *wake;   /* this engine's wake word, which it owns */
	bool all_links_wake;    /* every link's peer wakes it: it may sleep with collectives in flight */
	uint64_t since;         /* when the idle stretch began; 0: busy */
	uint32_t passes;        /* idle passes since the last clock read */
	struct {
		uint64_t sleeps;      /* waits begun */
		uint64_t woke_peer;   /* ended by a peer's frames (its kick) */
		uint64_t woke_client; /* ended by a client's doorbell */
		uint64_t timed_out;   /* ran out */
		uint64_t app_yields;  /* embedded: the application's idle passes that yielded (yield_app) */
		uint64_t parks;       /* embedded: waits while the application drove (engine.c) */
		uint64_t parks_out;   /* ... that ran out */
		uint64_t link_waits;  /* waits on the links' descriptors instead of a yield (rx_fds) */
		uint64_t link_frames; /* ... that a frame ended */
		uint64_t spins;       /* idle passes that neither slept nor yielded (none before a sleep with yield_app) */
	} count;
};

/* One engine per channel: its own core, links, transport and tables.  The
 * control server gives every engine the same clients, regions and
 * communicators (channel 0's engine owns the mappings). */
/* The abort notices a failing communicator sent (comm_fail.c).  They
 * outlive it: its client may destroy it at once, and a peer that has not
 * heard would wait out its timeout.  Freed once every one is acknowledged
 * or its peer is dead. */
struct dp_notices {
	struct dp_notices *next;
	uint32_t unacked;          /* notices still owed: their msgs' owner is set */
	uint32_t nranks;
	bool abort;                /* a failure's, owed by a peer that has not closed: counted in aborts_out */
	char why[DP_CHAIN_TEXT_LEN];   /* a failure's sentence, or a stall note's chain (longer) */
	struct sl_tp_msg msgs[];   /* [nranks] */
};

struct dp_engine {
	/* A posted all-to-allv's counts, read from its client's page (abi.h's
	 * layout) for its plan; its schedule keeps a copy (coll/schedule.h). */
	uint64_t vmeta[4 * SL_MAX_RANKS];
	struct sl_tp *tp;
	uint16_t node;
	uint32_t channel;         /* index among the dataplane's engines */
	uint32_t payload;
	uint64_t timeout_ns;      /* a collective with no progress this long fails */
	uint64_t local_per_pass;  /* bytes of a call's local transfers applied in one pass (DP_LOCAL_PER_PASS) */
	struct sl_clock clock;
	struct sl_spsc ctl;       /* server -> engine, both sides in this process */
	void *ctl_mem;
	struct dp_client clients[DP_MAX_CLIENTS];
	uint32_t clients_end;     /* one past the highest live client: a pass looks no further */
	struct dp_comm comms[DP_MAX_COMMS];
	struct dp_counters count;
	_Atomic bool stop;
	/* passes ended, whoever took them: the server watches it move
	 * (stall_watch.h, dp_engine_call).  Not dp_engine_run's rounds: while an
	 * embedded application's thread is inside a pass, the engine's own
	 * thread goes round without one */
	_Atomic uint64_t passes;
	_Atomic int tid;          /* the thread in dp_engine_run, once it runs */
	_Atomic int pass_tid;     /* the thread inside the pass now, or in the last one */
	pthread_mutex_t ctl_lock; /* the control ring's producers: one server thread a client */
	_Atomic bool busy;        /* a thread is inside dp_engine_poll */
	_Atomic uint64_t driven_ns; /* when the application last drove the engine (embedded); 0: handed back */
	_Atomic uint32_t park_seq;  /* the engine's thread parks on it while the application drives */
	_Atomic bool parked;        /* ... and says so: the hand-back wakes it only then */
	/* the application's last pass (embedded), kept after an ordinary hand-back
	 * and 0 after one with work left or a control request: while it drives
	 * call after call, its engine's thread parks between its calls
	 * (engine.c) and yields rather than sleeps (idle.c) */
	_Atomic uint64_t drove_ns;
	uint32_t running;         /* collectives posted and not finished */
	uint32_t gated;           /* of which wait on a reducer (a GPU kernel), which wakes nobody */
	uint32_t lingering;       /* of which reported done to their clients */
	uint32_t closing;         /* communicators whose destroy waits for peers' closing words */
	uint32_t stash_holding;   /* communicators whose stash holds a sender (coll_stash.c stash_starves) */
	uint64_t stash_past_cap_bytes; /* payload of stashed packets taken past DP_STASH_MAX, at most
					  stash_limit (coll_stash.c stash_overflows) */
	uint64_t stash_limit;     /* DP_STASH_LIMIT_FLOOR's comment */
	struct dp_coll *coll_free; /* finished collectives to reuse, with their tables (coll_run.c) */
	uint64_t coll_free_bytes;  /* their memory, at most DP_COLL_KEEP_BYTES */
	struct dp_notices *notices; /* abort notices not yet acknowledged */
	/* of which carry a failure: the dataplane's stop waits for them
	 * (dp_main.c linger_for_peers), read from its thread */
	_Atomic uint32_t aborts_out;
	struct dp_pool pool;       /* packet copies and lingering calls' copies (pool.h) */
	struct dp_gdev *gdev[DP_MAX_GPUS]; /* opened on the first collective on that GPU */
	struct dp_gdev *cpu_gdev;  /* --gate-host's stand-in */
	uint32_t gdevs;            /* of these, opened: a pass with none looks at none */
	bool gate_host;            /* run host collectives through the CPU stand-in (tests) */
	uint32_t gpu_blocks;       /* blocks of each GPU reducer's kernel; 0 = gpu_dma's default */
	uint64_t next_timer_ns;
	struct dp_idle idle;
	bool late_held[SL_MAX_NODES]; /* senders held on early packets past eager (coll_stash.c late_refused) */
	uint32_t late_holding;     /* of these, set: with none, a post walks no comm's ranks for them */
};

/* engine.c */
struct dp_engine_cfg {
	uint16_t node;         /* this dataplane's node id */
	uint32_t channel;      /* which of the dataplane's engines this is */
	uint32_t max_frame;    /* the smallest max_frame of its ports */
	uint32_t payload;      /* bytes per packet; 0 = as much as max_frame allows */
	uint64_t timeout_ns;   /* no progress this long fails a collective or a peer */
	uint32_t window;       /* packets in flight per peer; 0 = the transport's default */
	uint64_t rto_min_ns;   /* retransmission timeout floor; 0 = the transport's default */
	bool gate_host;        /* host collectives through the asynchronous (GPU) path, on the CPU */
	uint32_t rx_credit;    /* receive budget shared among active senders; 0 = the default */
	uint8_t paths;         /* UDP source ports (paths) per link; 0 = the default */
	uint32_t gpu_blocks;   /* persistent blocks (SMs) of each GPU reducer; 0 = gpu_dma's default */
	uint64_t stash_limit;  /* bytes (DP_STASH_LIMIT_FLOOR's comment); 0 = a quarter of memory */
	uint64_t local_per_pass; /* bytes (DP_LOCAL_PER_PASS's comment); 0 = DP_LOCAL_PER_PASS */
	struct dp_idle_cfg idle;
	struct dp_wake *wake;  /* the engine's wake word, which it takes over; NULL: a private one */
	bool all_links_wake;   /* every link's peer kicks wake (dp_wake_port_wrap) */
	struct sl_clock clock; /* the engine's time; .now_ns NULL: CLOCK_MONOTONIC (dp_now_ns).
				  Tests step a fake one where real time would decide */
};

/* Set up the engine and its transport; ports and routes are added after. */
int dp_engine_init(struct dp_engine *e, const struct dp_engine_cfg *cfg, char *err, size_t len);
void dp_engine_fini(struct dp_engine *e);
/* The polling loop; returns when e->stop is set. */
int dp_engine_run(void *engine);
/* One pass of the loop: returns work done (0 = idle).  Used by the loop and by tests. */
uint32_t dp_engine_poll(struct dp_engine *e);
/* One pass, unless another thread is in one (embedded mode: the engine
 * thread and the application's wait both drive the engine); now_ns: the
 * time (CLOCK_MONOTONIC) the caller read just before, or 0 for the pass to
 * read it. */
int32_t dp_engine_try_poll(struct dp_engine *e, uint64_t now_ns); /* work done, or -1: another thread is in it */
/* Send the ACKs the transport delays (sl_tp_flush_acks) before this thread
 * stops polling for a while (sleeps or parks), unless another thread is in
 * a pass (which then polls on). */
void dp_engine_flush_acks(struct dp_engine *e);
/* The dataplane stops (the engine's thread has returned): its last words
 * (dp_notices_last_words), from the caller's thread. */
void dp_engine_last_words(struct dp_engine *e);
/* Queue a control request; req->done is set to 1 + result once applied
 * (0, 1: refused with the server's status, DP_CTL_STATUS + s: refused with
 * sluice_result_t s).  False when full.  Any thread may post. */
bool dp_engine_ctl_post(struct dp_engine *e, struct dp_ctl_req *req);
/* The engine answers a request: *done = 1 + res.  A call that gave up
 * waiting (dp_engine_call) left it to the answer to free. */
void dp_ctl_answer(_Atomic int32_t *done, int32_t res);
/* From a server thread: hand a request to the engine and wait for its
 * answer (its result, and req->why filled on a refusal), for as long as the
 * engine comes round: one that has taken no pass for its timeout_ns is
 * given up on, DP_CTL_NO_ANSWER with req->why saying which thread holds it
 * up and where.  The request may still be applied later, in order with the
 * others: with late NULL, nobody learns of it; else *late is the call, to
 * ask dp_ctl_late_answer about. */
struct dp_ctl_call;
int32_t dp_engine_call(struct dp_engine *e, struct dp_ctl_req *req, struct dp_ctl_call **late);
/* From a server thread: whether e takes no pass while it looks, look_ns;
 * then why (SL_ERRMSG_LEN bytes) says which engine, where the thread that
 * holds it is and what to do, as dp_engine_call's answer does.  seen (the
 * server's watch over e, a copy; NULL: none) may have seen it stand longer:
 * then why counts from its last pass, as a process stopped past a client's
 * timeout and starved after it does (its thread has had no CPU yet in the
 * look). */
struct dp_stall_watch;
bool dp_engine_stalled(const struct dp_engine *e, uint64_t look_ns, const struct dp_stall_watch *seen, char *why);
#define DP_CTL_NO_ANSWER 2
/* The answer to a call dp_engine_call handed back (its result, why filled
 * when not NULL; the call is freed), or DP_CTL_NO_ANSWER while the engine
 * has not answered; give_up: none will be asked for any more (the call is
 * left to the answer, or dropped when not even queued yet). */
int32_t dp_ctl_late_answer(struct dp_ctl_call *call, bool give_up, char *why);
/* The thread that holds e up: the one inside its pass, else its own (0:
 * none runs it); *app (app may be NULL): an embedded application's
 * thread, inside a pass. */
pid_t dp_engine_holder(const struct dp_engine *e, bool *app);
uint64_t dp_now_ns(void *unused);

/* idle.c */
void dp_idle_init(struct dp_idle *d, const struct dp_idle_cfg *cfg, struct dp_wake *wake);
/* The engine's pass found no work: spin, and after a while sleep until woken. */
void dp_idle(struct dp_engine *e);
/* Its counters, one line on stderr (sluiced -v). */
void dp_idle_print(const struct dp_engine *e);
/* A pass found work: the next idle stretch starts afresh. */
static inline void dp_idle_busy(struct dp_idle *d)
{
	d->since = 0;
}

/* No progress this long fails a call of comm (or ends its destroy's wait). */
static inline uint64_t dp_comm_timeout(const struct dp_engine *e, const struct dp_comm *comm)
{
	return comm->timeout_ns ? comm->timeout_ns : e->timeout_ns;
}

/* coll_run.c */
void dp_coll_post(struct dp_engine *e, struct dp_client *c, const struct sl_cmd *cmd);
static inline bool dp_is_p2p(uint32_t opcode)
{
	return opcode == SL_OP_SEND || opcode == SL_OP_RECV;
}
/* A lingering k that may finish now (acknowledged and checked, or failed)
 * is counted, so that the next pass looks at the linger list for it.
 * Inline: an ACK marks its call, and an exported call is not inlined in
 * this PIC library. */
static inline void dp_linger_mark(struct dp_coll *k)
{
	if (!k->lingering || k->linger_ready ||
	    (k->status == SLUICE_OK && !(sl_sched_recv_done(&k->sched) && k->msgs_unacked == 0)))
		return;
	k->linger_ready = true;
	k->comm->linger_ready++;
}
uint32_t dp_colls_progress(struct dp_engine *e);
void dp_coll_free_all(struct dp_engine *e);
enum sl_deliver_result dp_deliver(void *engine, const struct sl_hdr *h, const uint8_t *payload);
void dp_msg_acked(void *engine, struct sl_tp_msg *m);
void dp_flow_dead(void *engine, uint16_t node);
/* A communicator's tables of early packets and of ended rooted calls, one mapping. */
#define DP_COMM_TABLES_BYTES \
	(DP_STASH_BUCKETS * sizeof(struct dp_stash_bucket) + DP_DONE_CALLS * sizeof(struct dp_done_call))
/* Make comm's tables as it is added (coll_stash.c says why then); false when out of memory. */
bool dp_comm_open_tables(struct dp_comm *comm);
void dp_comm_release(struct dp_engine *e, struct dp_comm *comm);

/* comm_close.c: a communicator's destroy */
/* The client destroys comm (request r): refused (1, r->why) while calls run,
 * done at once, or DP_CTL_LATER: answered through r->done once the calls that
 * linger are gone.  A failure no call reported is reported then (DP_CTL_STATUS
 * + its status). */
int32_t dp_comm_close(struct dp_engine *e, struct dp_comm *comm, struct dp_ctl_req *r);
#define DP_CTL_LATER (-1)
#define DP_CTL_STATUS 256

/* comm_fail.c: a communicator's failure, and the notices to its peers */
/* Control messages (SL_F_CTRL), told apart by their step: abort and closing
 * carry the communicator's failure status (count) and reason; a stall note,
 * a cycle note, a path note, a ping and an ahead note (wait_notes.c) carry status 0, so a
 * peer from before them ignores them. */
enum { NOTICE_ABORT, NOTICE_CLOSING, NOTICE_STALL, NOTICE_CYCLE, NOTICE_PATH, NOTICE_PING, NOTICE_AHEAD };
/* hdr (its step, seq, kind and count) with text to rank `to`, or to every
 * live peer (-1). */
void dp_notices_send(struct dp_engine *e, struct dp_comm *comm, int to, struct sl_hdr hdr, const char *text);
void dp_notices_free_all(struct dp_engine *e);
/* The failures' notices (dp_notices.abort) not acknowledged yet, once more
 * as last words (wire.h SL_T_LAST), which no window holds back and a port
 * keeps after its sender exits: to node, whose flow died, or (node < 0) to
 * every peer owing one, as the dataplane stops. */
void dp_notices_last_words(struct dp_engine *e, int node);
/* Fail comm (every running collective with it) and tell its peers. */
void dp_comm_fail(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq, const char *fmt,
		  ...) __attribute__((format(printf, 5, 6)));

/* coll_timeout.c: why a posted call timed out */
/* The rank k waits for (-1: none), and how, in waiting ("for rank 2"; for
 * acknowledgements, every rank that owes them: "for ranks 2 and 3 to
 * acknowledge"); the first of those. */
int dp_coll_waited_rank(const struct dp_coll *k, char *waiting, size_t size);

/* coll_async.c: gated collectives */
/* The reducer for a collective on gpu (-1: host buffers, gated only with
 * --gate-host): NULL with *why when it cannot be had, *gdev NULL when the
 * collective is applied synchronously. */
int dp_gdev_for(struct dp_engine *e, int gpu, struct dp_gdev **gdev, char *why);
uint32_t dp_gdev_progress(struct dp_engine *e);
void dp_gdev_close_all(struct dp_engine *e);
/* Scratch (and room for the in-place copy of the input) for a gated collective on a GPU. */
int dp_async_alloc(struct dp_coll *k, uint64_t scratch, uint64_t snap, char *why);
/* The in-place copy of k's input still to take (k->snapping; host: a piece
 * each pass in coll_run.c, gated: posted to the reducer by dp_async_reap):
 * the next span of at most most bytes of sl_sched_snapshot's pieces, from
 * the client's input to k's copy; false when all was taken. */
bool dp_snap_next(struct dp_coll *k, uint64_t most, const uint8_t **src, uint8_t **dst, uint64_t *len);
/* Whether bytes (one work item) can be posted now. */
bool dp_async_room(struct dp_coll *k, uint64_t bytes, bool copy);
/* Post a's work for payload; 0 or fails the communicator. */
int dp_async_post(struct dp_engine *e, struct dp_coll *k, const struct sl_action *a, const uint8_t *payload,
		  uint64_t len, bool copy);
/* The chunk of a (chunk_full) is posted: hear of it once applied. */
void dp_async_chunk_posted(struct dp_coll *k, const struct sl_action *a);
/* Move applied chunks into the schedule; whether deferred packets may now
 * fit (a chunk was applied: their turn; the reducer freed room; or the
 * input's copy is done). */
bool dp_async_reap(struct dp_engine *e, struct dp_coll *k);
/* Stage (or send) a ready chunk of a gated collective: false when it has to wait. */
bool dp_async_send(struct dp_engine *e, struct dp_coll *k, struct sl_tp_msg *m, const uint8_t *src, uint64_t len);
/* Whether m's staging copy has landed (its src is then set). */
bool dp_async_landed(struct dp_engine *e, struct dp_coll *k, struct sl_tp_msg *m);
void dp_async_acked(struct dp_coll *k, struct sl_tp_msg *m);
/* Before freeing k: wait for its posted work, give back its buffers. */
void dp_async_fini(struct dp_coll *k);

#endif
