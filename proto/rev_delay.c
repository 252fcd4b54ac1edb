/* rev_delay.c: an RTT sample less the ACK's queueing on its way back (rev_delay.h). */
#include "rev_delay.h"

/* a before b, modulo 2^32 (the stamps wrap every 71 minutes) */
static bool earlier(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

uint64_t sl_rev_forward_ns(struct sl_rev_min *m, uint64_t rtt_ns, uint32_t back_us, uint64_t now_ns)
{
	if (!rtt_ns)
		return 0;
	if (!m->have) {
		*m = (struct sl_rev_min){ .cur_us = back_us, .prev_us = back_us, .epoch_ns = now_ns, .have = true };
	} else if (now_ns - m->epoch_ns >= SL_REV_EPOCH_NS) {
		m->prev_us = m->cur_us;
		m->cur_us = back_us;
		m->epoch_ns = now_ns;
	} else if (earlier(back_us, m->cur_us)) {
		m->cur_us = back_us;
	}
	uint32_t least = earlier(m->prev_us, m->cur_us) ? m->prev_us : m->cur_us;
	uint32_t back = back_us - least;
	/* both stamps are whole microseconds: one of difference is rounding */
	uint64_t queued_ns = back > 1 ? (uint64_t)(back - 1) * 1000 : 0;
	return queued_ns < rtt_ns ? rtt_ns - queued_ns : 1;
}
