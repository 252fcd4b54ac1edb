/*
 * tp_internal.h: the transport's private state, shared by tp_core.c (life
 * cycle, poll loop), tp_input.c (receive), tp_output.c (send, ACKs,
 * retransmission) and tp_timer.c (RTT, RTO, dead peers).  Nothing here is
 * part of the API: users see only transport.h.
 */
#ifndef SLUICE_TP_INTERNAL_H
#define SLUICE_TP_INTERNAL_H

#include <stddef.h>

#include "transport.h"
#include "twheel.h"

#define TP_RX_BURST 32       /* frames taken from a port per poll */
#define TP_TXQ_LEN 64        /* frames staged per port before tx_burst */
/* ... or bytes: a receiver starts on a burst only once it is handed over,
 * and 32 frames of 16 KiB staged whole put the sender's copy of them and
 * the receiver's one after the other (perf/ALGORITHMS.md, big32). */
#define TP_TXQ_BYTES (64u << 10)
#define TP_FLOW_BURST 32     /* new DATA packets per flow per poll, for fairness */
#define TP_SCAN_NS 20000     /* timers are scanned at most this often */
#define TP_DUPTHRESH 3       /* SACKed PSNs above a hole that trigger fast retransmit */
#define TP_TLP_MIN_NS 20000  /* a tail-loss probe waits at least this (and 2 smoothed RTTs) */
#define TP_REO_MAX_QUARTERS 4 /* the reorder window widens up to this many quarter RTTs */
#define TP_REO_PERSIST 16    /* loss recoveries without a duplicate that narrow it again */
#define TP_MAP_WORDS (SL_MAX_WINDOW / 64)
#define TP_ACK_EVERY 8       /* in-order DATA packets per ACK (cfg.ack_every's default) */
#define TP_ACK_DELAY_NS 10000 /* and the longest an ACK waits for them: under TP_TLP_MIN_NS,
				  so that a sender's tail probe does not fire for a delayed ACK */
#define TP_INITIAL_CREDIT 64 /* packets a flow sends before the receiver's first ACK grants more */
#define TP_MIN_CREDIT 2      /* a receiver never grants an active sender less */
#define TP_RX_ACTIVE_NS 1000000 /* a sender is active at the receiver this long after its last DATA */
#define TP_PATH_DEAD_RTOS 3  /* consecutive timeouts of packets on a path that kill it */
#define TP_PATH_DEAD_LOSSES 16 /* or losses in a row */
#define TP_PATH_DEAD_RTTS 8  /* or smoothed RTTs (at least 2 RTO floors, and
				 TP_PATH_DEAD_RTOS estimated RTOs) of sending with no answer */
#define TP_WHEEL_SLOTS 1024  /* pacing wheel: 1024 slots of 1 us, a turn per millisecond */
#define TP_WHEEL_TICK_NS 1000
/* Both ends start a flow here, just below the wrap, so that every run
 * crosses it and a PSN comparison that forgets the wrap cannot hide. */
#define TP_FIRST_PSN 0xffffffc0u

/* PSNs are free-running 32-bit counters: compare by signed difference. */
static inline bool psn_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* One in-flight DATA packet, kept until acknowledged; enough to rebuild it. */
struct tp_slot {
	struct sl_tp_msg *msg; /* NULL: void (message cancelled or flow dead) */
	uint32_t off;          /* payload's offset within msg->src */
	uint32_t len;          /* payload bytes */
	uint64_t sent_ns;      /* last (re)transmission */
	uint16_t retx;         /* copies sent after the first: retransmissions, held ones sent again */
	uint8_t path;          /* the path it was last sent on */
	bool acked;
	bool held;             /* beyond the window its receiver holds (tp_hold.c): not lost, off
				  its path's load, sent again when the window reopens */
};

/* One way to the peer: a port (route) and a UDP source port (ECMP entropy). */
struct tp_path {
	uint16_t port_idx;       /* route: port and address */
	struct sl_addr addr;
	uint16_t entropy;        /* UDP source port */
	bool dead;               /* stopped delivering: no new data, probed until it answers */
	uint32_t in_flight;      /* unacknowledged packets last sent on it */
	uint64_t unproven_ns;    /* first send since the last proof that it delivers (an ACK of or
				    for a packet sent on it); 0: none */
	uint32_t rtos;           /* timeouts of its packets since the last proof */
	uint32_t lost_streak;    /* its packets sent again elsewhere since the last proof */
	uint32_t dead_us;        /* tp_now_us at death: only echoes of later sends revive it */
	uint64_t probe_ns;       /* dead: when to probe next */
	bool rtt_valid;
	uint64_t srtt_ns;        /* its own smoothed RTT (echo_path of the ACKs) */
	uint64_t tx, lost;       /* packets sent on it, and of those retransmitted later */
	uint32_t deaths, revivals;
};

/* A park: the receiver has not posted calls seq and after on communicator comm. */
struct tp_park {
	uint32_t comm, seq;
	enum sl_tp_order order; /* the messages it holds back: calls, or sends (a pair's seq) */
};

struct tp_flow {
	uint16_t node;           /* the peer */
	uint16_t route_idx;      /* its index in tp->routed[], and its bit in tp->sendable */
	struct tp_path paths[SL_MAX_PATHS]; /* every route x tp->cfg.entropies */
	uint8_t n_paths;
	uint8_t n_alive;         /* paths not dead; never 0 once a route exists */
	uint8_t path_rr;         /* where the next least-loaded search starts */
	bool dead;

	/* sender: PSNs [snd_una, snd_nxt) are in flight, slot = psn & slot_mask */
	uint32_t snd_una;        /* oldest unacknowledged PSN */
	uint32_t snd_nxt;        /* next PSN to assign */
	uint32_t credit_end;     /* the receiver accepts PSNs before this */
	struct tp_slot *slots;   /* slot_mask + 1 entries */
	struct sl_tp_msg *q_head, *q_tail; /* messages not fully cut yet */
	bool rtt_valid;          /* srtt/rttvar hold at least one sample */
	uint64_t srtt_ns, rttvar_ns; /* RFC 6298 estimator */
	uint64_t rto_ns;         /* current timeout, backed off on expiry */
	uint64_t rto_fired_ns;   /* when it last expired; 0: not since the last progress (tp_timer.c) */
	uint64_t progress_ns;    /* last ACK progress (or start of being busy) */
	uint64_t last_tx_ns;     /* last DATA (re)transmission */
	bool tlp_sent;           /* a tail-loss probe is out since the last progress */
	uint32_t sacked_end;     /* one past the highest PSN acknowledged: holes lie below it */
	uint64_t rack_sent_ns;   /* latest send time of a delivered packet never retransmitted */
	bool reordering_seen;    /* such a packet arrived after a higher PSN (tp_loss.c) */
	uint8_t reo_quarters;    /* reorder window's RTT part in quarter RTTs, less one: grown
				    by duplicates the peer reports (tp_loss_on_dsack) */
	uint8_t reo_persist;     /* recoveries left before it narrows back */
	uint64_t reo_grown_ns;   /* when it last grew: once per RTT at most */
	struct sl_cc cc;         /* congestion control state (cfg.cc) */
	uint64_t next_send_ns;   /* paced (cc.pace_ns): no new packet before this */
	struct sl_twheel_node pace_node; /* on tp->pacer while waiting for next_send_ns */
	bool held;               /* the peer's last ACK held our window (SL_F_HOLD) */
	uint32_t n_held;         /* slots held */
	uint64_t persist_ns;     /* window probe interval while held, doubling per probe */
	uint64_t persist_next_ns; /* and when the next one is due */
	uint64_t park_slots;     /* bit i: the peer's last ACK parks our messages of an order
				    on parks[i] (SL_F_PARK, SL_F_PARK_MORE): they wait queued */
	struct sl_tp_msg *park_skip; /* while parked: the queue up to it is parked, so the next
				    message to send is looked for after it (tp_output.c) */
	uint32_t ack_seen;       /* newest ACK number from the peer: an ACK sent before it
				    brings no credit or hold state (wire.h) */
	uint32_t rto_retx;       /* RTO retransmissions to the peer, */
	uint32_t acks_idle;      /* its ACKs that retired nothing while packets were out, */
	uint32_t dup_rx;         /* and DATA from it applied before (a hung flow's post-mortem) */

	/* receiver: PSNs before rcv_cum are applied; rcv_map marks those in
	 * [rcv_cum, rcv_cum + SL_MAX_WINDOW), bit psn % SL_MAX_WINDOW */
	uint32_t rcv_cum;
	uint64_t rcv_map[TP_MAP_WORDS];
	uint32_t rcv_echo_ts;    /* ts of the latest DATA, echoed by the next ACK */
	uint8_t rcv_echo_path;   /* and its path id */
	uint16_t ack_port;       /* the port it came in on: the ACK goes back there */
	uint16_t rcv_ce;         /* CE-marked DATA since the last ACK */
	uint64_t rcv_last_ns;    /* last DATA: the sender counts as active for a while */
	uint64_t ack_last_ns;    /* last ACK from the peer (a hung flow's post-mortem) */
	uint32_t rcv_grant;      /* credit granted in the last ACK */
	uint32_t rcv_new;        /* DATA applied since the last ACK: how far the grant may grow */
	bool ack_due;            /* on tp->ack_list: owes an ACK after this burst */
	bool probe_due;          /* ... and that ACK answers a probe (echo_path from it) */
	uint64_t ack_late_ns;    /* owes a delayed ACK, due then (0: none; tp_input.c) */
	bool rcv_dup;            /* a duplicate DATA arrived since the last ACK (SL_F_DSACK) */
	bool rcv_holding;        /* the engine held this sender: the window ends at rcv_hold_psn */
	uint32_t rcv_hold_psn;   /* until sl_tp_resume (tp_hold.c) */
	uint64_t rcv_park_slots; /* bit i: the engine parked the sender's calls or sends on
				    rcv_parks[i], until sl_tp_unpark (tp_hold.c) */
	bool rcv_sends_park;     /* the sender said it parks sends (SL_F_SENDS_PARK) */
	uint64_t rcv_park_unsaid; /* of those, parked or moved since an ACK named them: each is
				    named by an ACK of its own, in the same pass */
	uint8_t rcv_park_turn[2]; /* else the slot the next ACK names, if in use (else the next),
				    of the first SL_PARKS_LOW ([0]) and of the rest ([1]) */
	uint32_t ack_nxt;        /* ACK number of the next ACK or probe to the peer */
	uint32_t acks_refused;   /* ACKs and probes to it its port refused (stats.ctl_refused) */

	/* the parks' contents (sender: park_slots, receiver: rcv_park_slots),
	 * read only while parked: last, so that their 1 KiB does not come
	 * between the fields a packet or an ACK uses */
	struct tp_park parks[SL_PARKS_MAX];
	struct tp_park rcv_parks[SL_PARKS_MAX];
};

/* Frames built but not yet taken by a port's tx_burst. */
struct tp_txq {
	struct sl_pkt pkts[TP_TXQ_LEN];
	struct sl_addr src;      /* frames' source here: built once, at sl_tp_add_port, not a frame */
	uint16_t n;
	uint32_t bytes;          /* the staged frames' */
	bool no_buf;             /* alloc failed during this poll: stop asking */
	bool refused;            /* the port refused frames during this poll: they go again at
				    its end (or the next poll's start), not at every frame
				    staged behind them (perf/ALGORITHMS.md, ab33) */
	uint64_t full_ns;        /* when the port last refused frames (tp_timer.c) */
};

struct sl_tp {
	struct sl_tp_config cfg;
	struct sl_clock clock;
	struct sl_tp_callbacks cb;
	struct sl_tp_stats stats;
	uint64_t now_ns;         /* read once per poll */
	uint32_t slot_mask;      /* in-flight slots per flow, a power of two >= window, less
				    one: a power of two keeps psn -> slot consistent across the wrap */

	struct sl_port *ports[SL_MAX_PORTS];
	struct tp_txq txq[SL_MAX_PORTS];
	uint32_t kept[SL_MAX_PORTS];          /* received frames held by the deliver callback */
	uint16_t n_ports;
	const struct sl_pkt *rx_pkt;          /* the frame being delivered, NULL outside */
	uint16_t rx_port;
	bool rx_kept;                         /* ... which the callback kept */

	struct tp_flow *flows[SL_MAX_NODES]; /* by node; NULL: no route */
	uint16_t routed[SL_MAX_NODES];        /* nodes with a flow, in route order */
	uint16_t n_routed;
	uint16_t send_rr;                     /* routed[] index to start sending at */
	uint64_t sendable[SL_MAX_NODES / 64]; /* bit i: routed[i]'s flow has queued messages or
						 held slots; tp_send_data visits only these */
	uint16_t ack_list[SL_MAX_NODES];      /* flows owing an ACK */
	uint16_t n_ack;
	uint16_t n_late;                      /* flows owing a delayed ACK */
	uint64_t late_due_ns;                 /* none of them is due before this */
	uint64_t next_scan_ns;
	uint16_t rx_active;                   /* senders active at this receiver (>= 1) */
	struct sl_twheel pacer;               /* paced flows waiting for their next send */
};

static inline uint32_t tp_now_us(const struct sl_tp *tp)
{
	return (uint32_t)(tp->now_ns / 1000);
}

/* Whether f waits on its peer: packets out, or messages that wait for a
 * held window or a park.  Only then does its silence (no ACK progress
 * since progress_ns) count towards its death. */
static inline bool tp_flow_waits(const struct tp_flow *f)
{
	return f->snd_una != f->snd_nxt || ((f->held || f->park_slots) && f->q_head);
}

/* f has something to send: tp_send_data visits it until it has not (tp_output.c). */
static inline void tp_mark_sendable(struct sl_tp *tp, const struct tp_flow *f)
{
	tp->sendable[f->route_idx / 64] |= 1ull << (f->route_idx % 64);
}

static inline struct tp_slot *tp_slot(const struct sl_tp *tp, const struct tp_flow *f, uint32_t psn)
{
	return &f->slots[psn & tp->slot_mask];
}

static inline struct tp_path *tp_path_of(struct tp_flow *f, const struct tp_slot *s)
{
	return &f->paths[s->path];
}

/* tp_path.c */
int tp_path_add_route(struct sl_tp *tp, struct tp_flow *f, uint16_t port_idx,
		      const struct sl_addr *addr);
uint8_t tp_path_pick(struct tp_flow *f, int avoid);
const struct tp_path *tp_path_on_port(const struct tp_flow *f, uint16_t port_idx);
void tp_path_sent(struct sl_tp *tp, struct tp_flow *f, struct tp_slot *s, uint8_t path, bool retx);
void tp_path_acked(struct tp_flow *f, const struct tp_slot *s);
void tp_path_echo(struct sl_tp *tp, struct tp_flow *f, uint8_t path, uint32_t echo_ts, uint64_t rtt_ns);
uint32_t tp_path_scan(struct sl_tp *tp, struct tp_flow *f);
uint64_t tp_path_silence_limit(uint64_t srtt_ns, uint64_t rttvar_ns, uint64_t rto_min_ns);
uint16_t tp_entropy(const struct sl_tp *tp, uint16_t node, uint32_t salt);

/* tp_hold.c */
void tp_hold_rx(struct sl_tp *tp, struct tp_flow *f, uint32_t end);
void tp_hold_ack(const struct tp_flow *f, struct sl_ack *ack, uint16_t *flags);
void tp_hold_on_ack(struct sl_tp *tp, struct tp_flow *f, bool hold);
void tp_hold_release(struct tp_flow *f, struct tp_slot *s);
uint32_t tp_hold_resend(struct sl_tp *tp, struct tp_flow *f, uint32_t max);
uint32_t tp_hold_probe(struct sl_tp *tp, struct tp_flow *f);
void tp_park_ack(struct tp_flow *f, struct sl_hdr *h, struct sl_ack *ack);
void tp_park_on_ack(struct sl_tp *tp, struct tp_flow *f, const struct sl_hdr *h, const struct sl_ack *ack);

/* Sender: the park of f that holds m back, waiting for its receiver to post
 * its call (tp_hold.c), or NULL. */
static inline const struct tp_park *tp_park_of(const struct tp_flow *f, const struct sl_tp_msg *m)
{
	if (m->order == SL_TP_UNORDERED)
		return NULL;
	for (uint64_t slots = f->park_slots; slots; slots &= slots - 1) {
		const struct tp_park *p = &f->parks[__builtin_ctzll(slots)];
		if (m->hdr.comm == p->comm && m->order == p->order && (int32_t)(m->hdr.seq - p->seq) >= 0)
			return p;
	}
	return NULL;
}

/* tp_core.c */
void tp_unlink(struct tp_flow *f, struct sl_tp_msg *m, struct sl_tp_msg *prev);

/* tp_input.c */
uint32_t tp_rx_port(struct sl_tp *tp, uint16_t port_idx);
void tp_ack_due(struct sl_tp *tp, struct tp_flow *f);
void tp_ack_late_due(struct sl_tp *tp, uint64_t by);
void tp_ack_sent(struct sl_tp *tp, struct tp_flow *f);

/* tp_loss.c */
uint64_t tp_reorder_window(const struct tp_flow *f);
uint32_t tp_detect_losses(struct sl_tp *tp, struct tp_flow *f);
void tp_loss_on_dsack(struct sl_tp *tp, struct tp_flow *f);

/* tp_output.c */
uint32_t tp_flow_window(const struct sl_tp *tp, const struct tp_flow *f);
uint32_t tp_send_acks(struct sl_tp *tp);
bool tp_send_probe(struct sl_tp *tp, struct tp_flow *f, uint8_t path);
uint32_t tp_send_data(struct sl_tp *tp);
bool tp_retransmit(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, uint64_t *cause);
bool tp_emit_data(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, bool retx);
void tp_txq_push(struct sl_tp *tp, uint16_t port_idx);
void tp_txq_drop_all(struct sl_tp *tp);

/* Hand port_idx's staged frames over; a pass asks twice a port, and most
 * ports of the shm mesh (one a peer) have none: no call for them. */
static inline void tp_txq_flush(struct sl_tp *tp, uint16_t port_idx)
{
	if (tp->txq[port_idx].n)
		tp_txq_push(tp, port_idx);
}

/* tp_timer.c */
uint64_t tp_rtt_sample(struct sl_tp *tp, struct tp_flow *f, uint32_t echo_ts);
void tp_on_progress(struct sl_tp *tp, struct tp_flow *f);
uint32_t tp_run_timers(struct sl_tp *tp);
void tp_flow_init_timers(struct sl_tp *tp, struct tp_flow *f);

#endif
