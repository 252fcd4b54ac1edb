/*
 * transport.h: sluice's reliable transport between dataplanes.
 *
 * One flow per remote node.  Messages (contiguous byte ranges with a header
 * template) are cut into DATA packets of at most cfg.payload bytes, each with
 * the flow's next PSN.  The receiver applies each PSN exactly once, in any
 * order (direct placement: every packet names its offset), and answers with
 * ACKs carrying a cumulative PSN and a SACK bitmap.  The sender keeps at most
 * cfg.window packets in flight per flow (less when congestion control or the
 * receiver's credit says so), retransmits selectively (SACK holes and RTO,
 * never go-back-N) by rebuilding packets from the message's source bytes,
 * and declares a flow dead when nothing it sends is acknowledged for
 * cfg.dead_ns.
 *
 * Against incast, a receiver shares its receive budget (cfg.rx_credit
 * packets) among the senders active at it and grants each its share in
 * every ACK.  DATA goes out ECN-capable; CE marks that queues put on it are
 * echoed in ACKs and fed to congestion control.  A receiver whose engine
 * cannot take more holds the sender's window rather than refusing packets
 * into loss recovery (SL_DELIVER_HOLD, sl_tp_resume: tp_hold.c).  A flow is
 * spread over every route to its peer (one per port) times cfg.entropies
 * UDP source ports: its paths.  A path that stops delivering is marked dead, its packets are sent
 * again on the others, and it is probed until it answers.
 *
 * Pure C: frames move through struct sl_port, time through struct sl_clock.
 */
#ifndef SLUICE_TRANSPORT_H
#define SLUICE_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "cc.h"
#include "port.h"
#include "wire.h"

#define SL_MAX_NODES 256
#define SL_MAX_PORTS 8
#define SL_MAX_WINDOW 256 /* the SACK bitmap's width */

struct sl_tp_config {
	uint16_t local_node;  /* this dataplane's node id */
	uint32_t payload;     /* max payload bytes per DATA packet; a multiple of 16 */
	uint32_t window;      /* max DATA packets in flight per flow, <= SL_MAX_WINDOW */
	uint64_t rto_min_ns;  /* retransmission timeout floor */
	uint64_t rto_max_ns;  /* and ceiling, after exponential backoff; an RTT sample above
				 it is a stalled peer, not the link, and is dropped */
	uint64_t dead_ns;     /* no ACK progress this long: the peer is dead */
	bool crc;             /* send a CRC32C trailer on every port (else only on ports
				 that ask for one: struct sl_port's crc) */
	const struct sl_cc_ops *cc; /* congestion control (&sl_cc_swift), NULL: the window */
	uint64_t cc_target_ns;      /* its target delay */
	uint32_t rx_credit;   /* receive budget in packets, shared among the senders active here */
	uint32_t init_credit; /* packets a flow may send before the peer's first ACK grants credit */
	uint8_t entropies;    /* paths (UDP source ports) per route, 1..SL_MAX_PATHS */
	uint32_t ack_every;   /* a receiver acknowledges in-order DATA once this many packets
				 (or a quarter of its grant) arrived, 1: every burst; */
	uint64_t ack_delay_ns; /* ... or this long after the first one it has not */
};

/* Defaults: payload from the port's frame size (room left for a CRC trailer),
 * window 256, RTO 1 ms..100 ms, dead 30 s, no CRC, no congestion control
 * (target 50 us once one is chosen), receive budget 256 packets, initial
 * credit 64, 4 paths per route, an ACK per 8 packets or 10 us (and at once
 * for what a sender waits for, or what loss recovery needs: tp_input.c). */
void sl_tp_config_default(struct sl_tp_config *cfg, uint16_t local_node, uint32_t max_frame);

/* A message to send.  The caller owns it and keeps it (and src) alive and
 * unchanged until the acked callback, or until sl_tp_cancel. */
/* What a message's hdr.seq numbers on hdr.comm, in an order its receiver
 * posts them in, so that a park (sl_tp_park) may hold it back. */
enum sl_tp_order {
	SL_TP_UNORDERED, /* nothing a park names (a control message) */
	SL_TP_CALLS,     /* the caller's calls */
	SL_TP_SENDS,     /* the caller's sends to dst_node (a pair's point-to-point order) */
};

struct sl_tp_msg {
	/* the caller's */
	uint16_t dst_node;
	struct sl_hdr hdr;     /* template: comm, seq, step, kind, dtype_op, count, flags;
				  offset = byte offset of src[0]; len = total bytes (0 allowed:
				  one packet with no payload is sent) */
	const uint8_t *src;
	void *owner;           /* for the caller's callbacks */
	bool ack_late;         /* the caller does not wait for the acked callback (it let the
				  message go already): its last packet does not ask the receiver
				  to answer at once, so its ACK may come with the next delayed one */
	enum sl_tp_order order; /* what hdr.seq numbers: its receiver's park of them
				  (sl_tp_park) may hold the message back */
	/* the transport's */
	uint32_t next_off;     /* bytes already cut into packets */
	uint32_t unacked;      /* packets sent and not yet acknowledged */
	bool queued;
	struct sl_tp_msg *next;
};

/* What the receiver's engine did with a packet.  HOLD and RETRY are its
 * backpressure: the sender's window closes (SL_F_HOLD) until the engine calls
 * sl_tp_resume, and what the sender has out beyond it waits there, so that a
 * receiver that cannot keep up costs neither retransmissions nor paths. */
enum sl_deliver_result {
	SL_DELIVER_DONE = 0,  /* applied (or rejected for good): acknowledge it */
	SL_DELIVER_RETRY = 1, /* cannot apply yet: not acknowledged, and the sender's window
				 ends at it; it is sent again once the window reopens */
	SL_DELIVER_HOLD = 2,  /* applied, but send no more: the sender's window ends after it */
};

struct sl_tp_callbacks {
	/* A DATA packet, exactly once per PSN; or a last word (h->type
	 * SL_T_LAST: sl_tp_send_last), whose result is not read.  payload
	 * holds h->len bytes. */
	enum sl_deliver_result (*deliver)(void *arg, const struct sl_hdr *h, const uint8_t *payload);
	/* Every packet of m is acknowledged: m and its source may be reused. */
	void (*acked)(void *arg, struct sl_tp_msg *m);
	/* The peer has not acknowledged anything for dead_ns. */
	void (*flow_dead)(void *arg, uint16_t node);
	void *arg;
};

struct sl_tp_stats {
	uint64_t data_tx, data_rx, bytes_tx, bytes_rx; /* tx: built and queued for a port, retx
							   included; rx: delivered (SL_DELIVER_DONE) */
	uint64_t ack_tx, ack_rx;
	uint64_t ack_delayed;           /* of ack_tx, sent when their delay ran out (cfg.ack_delay_ns)
					   or their engine went to sleep (sl_tp_flush_acks) */
	uint64_t retx_rto, retx_sack;   /* retransmissions by cause: timeout, SACK holes (overdue
					   below a PSN that arrived: tp_loss.c), */
	uint64_t retx_tlp;              /* and tail-loss probes */
	uint64_t rx_dup;                /* DATA for a PSN already applied */
	uint64_t rx_void;               /* void DATA (cancelled message): PSN marked, nothing delivered */
	uint64_t rx_out_of_window;      /* DATA beyond the receive window, dropped unanswered */
	uint64_t ack_beyond;            /* ACKs of PSNs never sent (stale or forged), ignored */
	uint64_t rx_retry;              /* DATA the engine could not apply yet */
	uint64_t rx_malformed;          /* failed sl_wire_parse other than NOT_SLUICE */
	uint64_t rx_bad_crc;            /* of which the CRC32C trailer did not match */
	uint64_t rx_foreign;            /* not sluice, or from/to a node we have no flow with */
	uint64_t tx_no_buf;             /* a poll found no tx buffer */
	uint64_t tx_bursts;             /* frames handed to a port (tx_burst calls; on af_packet a
					   system call each) */
	uint64_t tx_refused;            /* of which the port took not all: the rest stays staged */
	uint64_t ctl_refused;           /* ACKs and probes not queued: the port's send queue full
					   or no tx buffer; an ACK stays owed and goes again at the
					   next port's turn or poll, a probe at the next timer scan */
	uint64_t flows_dead;
	uint64_t credit_stalls;         /* polls in which a flow's window allowed a send and the
					   receiver's credit did not (once per flow and poll) */
	uint64_t held_waits;            /* the same while the receiver held the window (SL_F_HOLD):
					   its engine is full, and a sender that runs ahead of it
					   waits here every poll, however much credit it is granted */
	uint64_t paced_waits;           /* times a paced flow was put on the timing wheel until its next send */
	uint64_t rx_ce;                 /* DATA that arrived CE-marked (a queue on the way was full) */
	uint64_t ack_ce;                /* ACKs received that echoed CE marks (congestion control told) */
	uint64_t path_deaths, path_revivals; /* paths declared dead, and brought back by a probe */
	uint64_t retx_path;             /* packets sent again because their path died */
	uint64_t probes_tx;             /* probes sent on dead paths */
	uint64_t holds;                 /* windows this receiver closed (HOLD or RETRY while open) */
	uint64_t held_resent;           /* packets a receiver held out that went again when it reopened */
	uint64_t window_probes;         /* probes asking a receiver that holds our window (or parks
					   our messages) for its state, in case the ACK that reopened
					   it was lost */
	uint64_t parks;                 /* times this receiver parked a sender's calls (sl_tp_park) */
	uint64_t last_tx, last_rx;      /* last words (sl_tp_send_last) handed to a port, and delivered */
	uint64_t last_refused;          /* last words a port did not take (its kept room used up too,
					   or it keeps none and is full): lost */
};

struct sl_tp;

struct sl_tp *sl_tp_create(const struct sl_tp_config *cfg, const struct sl_clock *clock,
			   const struct sl_tp_callbacks *cb);
void sl_tp_destroy(struct sl_tp *tp);

/* Choose congestion control (NULL: the fixed window) before any route is
 * added, for a transport whose creator left it out.  0, or -1 once flows exist
 * or with a zero target. */
int sl_tp_set_cc(struct sl_tp *tp, const struct sl_cc_ops *cc, uint64_t target_ns);
/* Add a port (up to SL_MAX_PORTS); returns its index, or -1. */
int sl_tp_add_port(struct sl_tp *tp, struct sl_port *port);
/* Reach node through port index port_idx at addr; opens the flow.  Another
 * port to the same node adds cfg.entropies more paths to its flow (the same
 * port again changes the address).  0, or -1 (no such port, no room for
 * SL_MAX_PATHS paths, no memory). */
int sl_tp_add_route(struct sl_tp *tp, uint16_t node, uint16_t port_idx, const struct sl_addr *addr);
bool sl_tp_node_alive(const struct sl_tp *tp, uint16_t node);
/* How long node has sent nothing at all (no DATA, no ACK, no ACK progress)
 * while what was sent to it waits (1 at least); 0 while nothing waits on
 * it, or it has no flow.  A caller whose own timeout is shorter names a silent peer by it. */
uint64_t sl_tp_node_silent_ns(const struct sl_tp *tp, uint16_t node);
/* When anything (DATA or an ACK) last came from node, on the transport's
 * clock; 0 if nothing ever has, or it has no flow. */
uint64_t sl_tp_node_heard_ns(const struct sl_tp *tp, uint16_t node);

/* Queue m.  -1 when the node is unknown or dead. */
int sl_tp_send(struct sl_tp *tp, struct sl_tp_msg *m);
/* Control message m (SL_F_CTRL, one packet) once more as a last word
 * (wire.h SL_T_LAST), outside its flow's stream, handed to the port now,
 * dead node or not: for a message the stream can no longer deliver (the
 * flow died, or the caller stops with it unacknowledged).  The receiver
 * delivers it unordered and may see it twice (the stream's copy too): only
 * for messages whose delivery is idempotent.  It goes into room the port
 * keeps for last words (port.h send_last), past ordinary frames that filled
 * a ring its stopped peer does not read.  False (counted in last_refused)
 * when the node is unknown, m is no control message or carries more than
 * SL_TP_LAST_MAX bytes, or the port did not take it. */
#define SL_TP_LAST_MAX 1024
bool sl_tp_send_last(struct sl_tp *tp, const struct sl_tp_msg *m);
/* The engine can take packets again: reopen every window a HOLD or RETRY
 * closed (the ACKs that say so go out in the next poll).  Cheap when none is
 * closed; a lost reopening is found by the sender's window probe. */
void sl_tp_resume(struct sl_tp *tp);
/* The same for node's window only (no-op when it is not held or unknown). */
void sl_tp_resume_node(struct sl_tp *tp, uint16_t node);
/* Receiver: ask node's sender to hold back its messages of order on comm
 * from seq on (calls, or sends to this node, that this engine has not
 * posted, or posted the recv of) and send the rest: the flow is one for
 * every communicator, and a call posted here may wait behind a large one
 * that is not (wire.h, SL_F_PARK).  What it has out already still comes.
 * Up to SL_PARKS_MAX parks a flow, each from its own seq (a park of comm
 * and order again moves its seq): false when that many others are parked
 * there, when node has no flow, or for SL_TP_SENDS when node's sender has
 * not said it parks sends (a build from before them, SL_F_SENDS_PARK).  A
 * park of calls takes a park of sends' slot when none is free (the sends
 * come on then, as from an older sender).  Lasts until sl_tp_unpark. */
bool sl_tp_park(struct sl_tp *tp, uint16_t node, uint32_t comm, enum sl_tp_order order, uint32_t seq);
/* A call (order SL_TP_CALLS) or a recv from node (SL_TP_SENDS) of comm is
 * posted here, or comm is gone: lift node's park of them (no-op when there
 * is none). */
void sl_tp_unpark(struct sl_tp *tp, uint16_t node, uint32_t comm, enum sl_tp_order order);
/* Sender: whether queued m waits for its receiver to post its call or
 * recv (the receiver's sl_tp_park); *seq then says from which call or
 * send of m's communicator the receiver parks them.  For a failure's
 * message. */
bool sl_tp_msg_parked(const struct sl_tp *tp, const struct sl_tp_msg *m, uint32_t *seq);
/* Receiver: whether it parks node's calls on comm (sl_tp_park), from *seq on. */
bool sl_tp_parking(const struct sl_tp *tp, uint16_t node, uint32_t comm, uint32_t *seq);
/* Forget m: unqueue it, and send its in-flight packets' PSNs empty if they
 * must be retransmitted.  No callback for m afterwards. */
void sl_tp_cancel(struct sl_tp *tp, struct sl_tp_msg *m);

/* A received frame that the deliver callback kept where it lies. */
struct sl_tp_frame {
	struct sl_pkt pkt;
	uint16_t port;
};
/* From the deliver callback only: keep the frame being delivered (its
 * payload stays valid) instead of the transport's freeing it after the
 * callback, if its port lets a receiver hold frames and fewer than
 * port->rx_keep of them are held now.  True: *f names it, and the caller
 * gives it back with sl_tp_free_frame (before sl_tp_destroy). */
bool sl_tp_keep_frame(struct sl_tp *tp, struct sl_tp_frame *f);
void sl_tp_free_frame(struct sl_tp *tp, struct sl_tp_frame *f);

/* One pass: receive on every port, send ACKs, send queued data, run timers.
 * Returns packets moved, 0 when there was nothing to do (for idle back-off). */
uint32_t sl_tp_poll(struct sl_tp *tp);
/* The same at now_ns, the transport's clock as the caller read it just
 * before (an embedded application's wait reads it anyway): the pass then
 * reads none.  A time before the last pass's is taken as that one's. */
uint32_t sl_tp_poll_at(struct sl_tp *tp, uint64_t now_ns);
/* Send now every ACK that waits for its delay (cfg.ack_delay_ns), for a
 * caller about to stop polling for longer than that (an engine going to
 * sleep); returns how many went.  Cheap when none waits. */
uint32_t sl_tp_flush_acks(struct sl_tp *tp);
/* The clock as the running (or last) poll read it: for what its callbacks
 * and the rest of the pass stamp, without another clock read (one costs 40
 * to 200 ns on these VMs, and a pass took five, and one per packet). */
uint64_t sl_tp_poll_ns(const struct sl_tp *tp);

const struct sl_tp_stats *sl_tp_get_stats(const struct sl_tp *tp);

/* One flow's sender state, for tests and live views. */
struct sl_tp_flow_info {
	double cwnd;          /* packets in flight allowed now (the window without cc) */
	uint64_t pace_ns;     /* gap between sends when paced, else 0 */
	uint64_t srtt_ns, rto_ns;
	uint32_t in_flight;   /* PSNs sent and not yet retired */
	uint32_t held;        /* of those, packets the receiver holds out (SL_F_HOLD) */
	uint32_t credit;      /* packets the peer lets us have in flight (from snd_una) */
	uint32_t paths, paths_alive;
	/* where each side stands, for a hung flow's post-mortem: the PSNs in
	 * flight [snd_una, snd_nxt), what arrived in order from the peer
	 * (rcv_cum), and how long ago its last DATA and ACK came (0: never) */
	uint32_t snd_una, snd_nxt, rcv_cum;
	uint64_t data_ago_ns, ack_ago_ns;
	/* whether its ACKs moved the oldest PSN: RTO retransmissions to it, its
	 * ACKs that retired nothing while packets were out, and its DATA that
	 * arrived twice (the engine's counters sum over every peer); our ACKs
	 * and probes to it that its port refused (stats.ctl_refused) */
	uint32_t rto_retx, acks_idle, dup_rx, acks_refused;
};
/* 0, or -1 when there is no flow to node. */
int sl_tp_flow_info(const struct sl_tp *tp, uint16_t node, struct sl_tp_flow_info *out);

/* Frames built for port_idx that the port has not taken yet (it refused them). */
uint16_t sl_tp_port_staged(const struct sl_tp *tp, uint16_t port_idx);

/* One path of a flow. */
struct sl_tp_path_info {
	uint16_t port_idx, entropy; /* the port it leaves by, its UDP source port */
	bool alive;
	uint64_t srtt_ns;           /* 0 before its first sample */
	uint32_t in_flight;
	uint64_t tx, lost;          /* packets sent on it, and of those sent again */
	uint32_t deaths, revivals;
};
/* 0, or -1 when there is no flow to node or it has no path i. */
int sl_tp_path_info(const struct sl_tp *tp, uint16_t node, unsigned i, struct sl_tp_path_info *out);

#endif
