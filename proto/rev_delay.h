/*
 * rev_delay.h: how long an ACK queued on its way back, from its own stamp.
 * A flow whose ACKs share a loaded link with the other direction's data sees
 * that wait in every RTT sample; a delay-based congestion control then backs
 * off for a queue its own packets never entered (two jobs through one host's
 * link both ways kept 0.61-0.83 of it: perf/ALGORITHMS.md, fair34).  The
 * ACK's header carries the receiver's clock at sending (sl_hdr.ts); now minus
 * that is the way back plus the clocks' offset, a constant, so the excess
 * over its recent minimum is the ACK's queueing.
 */
#ifndef SLUICE_REV_DELAY_H
#define SLUICE_REV_DELAY_H

#include <stdbool.h>
#include <stdint.h>

/* The minimum of the way back over the current and the previous epoch, so
 * that a clock drifting against the peer's is forgotten in two epochs. */
#define SL_REV_EPOCH_NS 10000000000ull /* 10 s */

struct sl_rev_min {
	uint32_t cur_us, prev_us; /* each epoch's least (now_us - ack ts), modulo 2^32 */
	uint64_t epoch_ns;        /* when the current epoch began */
	bool have;
};

/* The part of rtt_ns that is not the ACK's queueing, given back_us = the
 * receiver's now_us minus the ACK's ts (modulo 2^32); rtt_ns 0 (no sample)
 * stays 0, and the result is at least 1 ns. */
uint64_t sl_rev_forward_ns(struct sl_rev_min *m, uint64_t rtt_ns, uint32_t back_us, uint64_t now_ns);

#endif
