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

#define TP_RX_BURST 32       /* frames taken from a port per poll */
#define TP_TXQ_LEN 64        /* frames staged per port before tx_burst */
#define TP_FLOW_BURST 32     /* new DATA packets per flow per poll, for fairness */
#define TP_SCAN_NS 20000     /* timers are scanned at most this often */
#define TP_DUPTHRESH 3       /* SACKed PSNs above a hole that trigger fast retransmit */
#define TP_TLP_MIN_NS 20000  /* a tail-loss probe waits at least this (and 2 smoothed RTTs) */
#define TP_MAP_WORDS (SL_MAX_WINDOW / 64)
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
	uint16_t retx;         /* retransmissions so far */
	bool acked;
};

struct tp_flow {
	uint16_t node;           /* the peer */
	uint16_t port_idx;       /* route: port and address */
	struct sl_addr addr;
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
	uint64_t progress_ns;    /* last ACK progress (or start of being busy) */
	uint64_t last_tx_ns;     /* last DATA (re)transmission */
	bool tlp_sent;           /* a tail-loss probe is out since the last progress */
	struct sl_cc cc;         /* congestion control state (cfg.cc) */
	uint64_t next_send_ns;   /* paced (cc.pace_ns): no new packet before this */

	/* receiver: PSNs before rcv_cum are applied; rcv_map marks those in
	 * [rcv_cum, rcv_cum + SL_MAX_WINDOW), bit psn % SL_MAX_WINDOW */
	uint32_t rcv_cum;
	uint64_t rcv_map[TP_MAP_WORDS];
	uint32_t rcv_echo_ts;    /* ts of the latest DATA, echoed by the next ACK */
	bool ack_due;            /* on tp->ack_list: owes an ACK after this burst */
};

/* Frames built but not yet taken by a port's tx_burst. */
struct tp_txq {
	struct sl_pkt pkts[TP_TXQ_LEN];
	uint16_t n;
	bool no_buf;             /* alloc failed during this poll: stop asking */
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
	uint16_t n_ports;

	struct tp_flow *flows[SL_MAX_NODES]; /* by node; NULL: no route */
	uint16_t routed[SL_MAX_NODES];        /* nodes with a flow, in route order */
	uint16_t n_routed;
	uint16_t send_rr;                     /* routed[] index to start sending at */
	uint16_t ack_list[SL_MAX_NODES];      /* flows owing an ACK */
	uint16_t n_ack;
	uint64_t next_scan_ns;
};

static inline uint32_t tp_now_us(const struct sl_tp *tp)
{
	return (uint32_t)(tp->now_ns / 1000);
}

static inline struct tp_slot *tp_slot(const struct sl_tp *tp, const struct tp_flow *f, uint32_t psn)
{
	return &f->slots[psn & tp->slot_mask];
}

/* tp_input.c */
uint32_t tp_rx_port(struct sl_tp *tp, uint16_t port_idx);

/* tp_output.c */
uint32_t tp_flow_window(const struct sl_tp *tp, const struct tp_flow *f);
uint32_t tp_send_acks(struct sl_tp *tp);
uint32_t tp_send_data(struct sl_tp *tp);
bool tp_retransmit(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, uint64_t *cause);
void tp_txq_flush(struct sl_tp *tp, uint16_t port_idx);
void tp_txq_drop_all(struct sl_tp *tp);

/* tp_timer.c */
uint64_t tp_rtt_sample(struct sl_tp *tp, struct tp_flow *f, uint32_t echo_ts);
void tp_on_progress(struct sl_tp *tp, struct tp_flow *f);
uint32_t tp_run_timers(struct sl_tp *tp);
void tp_flow_init_timers(struct sl_tp *tp, struct tp_flow *f);

#endif
