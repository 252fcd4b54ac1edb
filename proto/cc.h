/*
 * cc.h: congestion control behind one table of functions, as Linux's
 * tcp_congestion_ops: the transport tells the controller what happened on a
 * flow (ACKs with their delay, losses, timeouts) and asks it how many packets
 * may be in flight and, below one packet, how far apart to send them.
 * Controllers: sl_cc_swift (cc_swift.c).  Without one, a flow keeps the
 * configured fixed window.
 */
#ifndef SLUICE_CC_H
#define SLUICE_CC_H

#include <stdbool.h>
#include <stdint.h>

struct sl_cc_params {
	uint64_t target_ns;  /* Swift: the delay to hold the queue at */
	double ai;           /* additive increase, packets per RTT */
	double beta;         /* multiplicative decrease per unit of excess delay */
	double max_mdf;      /* largest decrease at once (0.5: halve) */
	double min_cwnd;     /* below one packet the flow is paced */
	double max_cwnd;     /* the transport's window */
};

/* One flow's controller state: the window and pacing the transport obeys,
 * plus what the controller keeps for itself. */
struct sl_cc {
	double cwnd;              /* packets in flight allowed; < 1: one, paced */
	uint64_t pace_ns;         /* with cwnd < 1: gap between sends, else 0 */
	uint64_t rtt_ns;          /* latest delay sample */
	uint64_t last_decrease_ns;
	bool decreased;           /* last_decrease_ns is valid */
	struct sl_cc_params p;
};

struct sl_cc_ops {
	const char *name;
	void (*init)(struct sl_cc *cc, const struct sl_cc_params *p);
	/* acked packets newly acknowledged; delay_ns the RTT this ACK measured
	 * (0: none, e.g. only retransmissions acked); ce: the path marked congestion */
	void (*on_ack)(struct sl_cc *cc, uint32_t acked, uint64_t delay_ns, bool ce, uint64_t now_ns);
	/* packets were found lost (once per ACK or timer scan that finds any: tp_loss.c) */
	void (*on_loss)(struct sl_cc *cc, uint64_t now_ns);
	/* the retransmission timer expired */
	void (*on_timeout)(struct sl_cc *cc, uint64_t now_ns);
};

extern const struct sl_cc_ops sl_cc_swift;

/* Swift's defaults for a given target delay and window. */
void sl_cc_params_default(struct sl_cc_params *p, uint64_t target_ns, uint32_t window);

#endif
