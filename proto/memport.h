/*
 * memport.h: an in-memory port for tests: a pair of ports joined back to
 * back inside one process, with seeded, replayable faults (drop, duplicate,
 * reorder, corrupt) on what crosses, and optionally a rate limit that makes
 * a queue.  Single-threaded: both ends are polled from the same thread.
 */
#ifndef SLUICE_MEMPORT_H
#define SLUICE_MEMPORT_H

#include "port.h"

struct sl_memport_faults {
	double drop;      /* probability a frame is lost */
	double dup;       /* probability a frame is delivered twice */
	double reorder;   /* probability a frame is held back behind later ones */
	double corrupt;   /* probability one byte of a frame is flipped */
	uint64_t seed;
};

/* Make two joined ports a and b carrying frames up to max_frame bytes.
 * Each direction queues up to depth frames; tx_burst refuses more (the caller
 * keeps them), counted as tx_full, and send_last takes a few more. */
int sl_memport_pair(struct sl_port **a, struct sl_port **b, uint32_t max_frame, uint32_t depth,
		    const struct sl_memport_faults *faults);
/* A rate limit, possibly shared by several links (a switch port several
 * senders go through, as in incast), with optionally a buffer that overflows
 * and an ECN threshold, as a switch queue's.  The caller owns it. */
struct sl_memport_bottleneck {
	uint64_t bytes_per_s;
	struct sl_clock clock;
	uint64_t busy_until_ns; /* the last frame's departure; start at 0 */
	uint64_t buffer_ns;     /* a frame that would wait longer than this is lost (0: no limit) */
	uint64_t ecn_ns;        /* an ECN-capable frame that waits longer than this is marked CE
				   (0: never) */
	/* what it did */
	uint64_t dropped, marked;
	uint64_t max_wait_ns;   /* the longest wait of a frame it let in */
};

/* Make the link out of end go through b (NULL: no limit): frames leave one
 * after the other at b's rate and wait in the link's FIFO (depth frames,
 * then tail drop) meanwhile, so senders that outrun it see delay grow. */
void sl_memport_set_bottleneck(struct sl_port *end, struct sl_memport_bottleneck *b);
/* Cut (down) or mend the pair's cable: while cut, whatever either end sends
 * is lost (frames already on the way still arrive). */
void sl_memport_set_down(struct sl_port *end, bool down);
/* Frees both ends of a pair.  */
void sl_memport_pair_free(struct sl_port *a, struct sl_port *b);
/* Buffers of p's pair that users hold (allocated or received, not yet sent
 * or freed): 0 once every user is done, else something leaked. */
uint32_t sl_memport_held(const struct sl_port *p);

#endif
