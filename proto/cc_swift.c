/*
 * cc_swift.c: delay-based congestion control after Swift (Kumar et al.,
 * SIGCOMM 2020), per-ACK rules:
 *   - delay below target: additive increase, ai packets per RTT (ai * acked
 *     / cwnd per ACK; below one packet, ai * acked, so a paced flow recovers
 *     quickly);
 *   - delay above target: multiplicative decrease in proportion to the
 *     excess, cwnd *= max(1 - beta * (delay - target) / delay, 1 - max_mdf),
 *     at most once per RTT so that one queue build-up is not punished for
 *     every packet it delays;
 *   - a loss found by SACK: decrease by max_mdf, again at most once per RTT,
 *     but only while the latest delay is above target: a queue fills past
 *     the target before it overflows, so a loss at low delay is the wire's
 *     (random loss), and cutting for it only idles the link (Swift's paper
 *     cuts on every fast recovery: its fabric loses only to queues);
 *     every timeout: decrease by max_mdf;
 *   - a congestion mark from the path (ECN CE) counts as a delay above
 *     target: the queue is building somewhere we cannot time.
 * Below one packet the flow sends one packet every rtt / cwnd (pacing).
 */
#include "cc.h"

void sl_cc_params_default(struct sl_cc_params *p, uint64_t target_ns, uint32_t window)
{
	*p = (struct sl_cc_params){ .target_ns = target_ns, .ai = 1.0, .beta = 0.8, .max_mdf = 0.5,
				    .min_cwnd = 0.01, .max_cwnd = window };
}

static void clamp_and_pace(struct sl_cc *cc)
{
	if (cc->cwnd < cc->p.min_cwnd)
		cc->cwnd = cc->p.min_cwnd;
	if (cc->cwnd > cc->p.max_cwnd)
		cc->cwnd = cc->p.max_cwnd;
	cc->pace_ns = cc->cwnd < 1 ? (uint64_t)((double)cc->rtt_ns / cc->cwnd) : 0;
}

static bool can_decrease(const struct sl_cc *cc, uint64_t now_ns)
{
	return !cc->decreased || now_ns - cc->last_decrease_ns >= cc->rtt_ns;
}

static void decrease(struct sl_cc *cc, double factor, uint64_t now_ns)
{
	double floor = 1 - cc->p.max_mdf;

	cc->cwnd *= factor > floor ? factor : floor;
	cc->last_decrease_ns = now_ns;
	cc->decreased = true;
}

static void swift_init(struct sl_cc *cc, const struct sl_cc_params *p)
{
	*cc = (struct sl_cc){ .cwnd = p->max_cwnd, .rtt_ns = p->target_ns, .p = *p };
}

static void swift_on_ack(struct sl_cc *cc, uint32_t acked, uint64_t delay_ns, bool ce,
			 uint64_t now_ns)
{
	if (delay_ns)
		cc->rtt_ns = delay_ns;
	bool over = ce || (delay_ns && delay_ns > cc->p.target_ns);

	if (!over) {
		cc->cwnd += cc->cwnd >= 1 ? cc->p.ai * acked / cc->cwnd : cc->p.ai * acked;
	} else if (can_decrease(cc, now_ns)) {
		double excess = delay_ns > cc->p.target_ns ?
					(double)(delay_ns - cc->p.target_ns) / (double)delay_ns : 1;
		decrease(cc, 1 - cc->p.beta * excess, now_ns);
	}
	clamp_and_pace(cc);
}

static void swift_on_loss(struct sl_cc *cc, uint64_t now_ns)
{
	if (cc->rtt_ns > cc->p.target_ns && can_decrease(cc, now_ns))
		decrease(cc, 1 - cc->p.max_mdf, now_ns);
	clamp_and_pace(cc);
}

static void swift_on_timeout(struct sl_cc *cc, uint64_t now_ns)
{
	decrease(cc, 1 - cc->p.max_mdf, now_ns); /* not once-per-RTT: each expiry is news */
	clamp_and_pace(cc);
}

const struct sl_cc_ops sl_cc_swift = {
	.name = "swift",
	.init = swift_init,
	.on_ack = swift_on_ack,
	.on_loss = swift_on_loss,
	.on_timeout = swift_on_timeout,
};
