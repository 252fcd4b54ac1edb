/*
 * fault.h: seeded, replayable network faults (drop, duplicate, corrupt,
 * reorder) applied to a stream of frames, and the SLUICE_FAULT spec that
 * configures them.  One engine serves both the in-memory test port
 * (memport.c) and the wrapper that puts faults on any real port
 * (fault_port.c): the frame decisions live here, what "send on", "lose" and
 * "copy" mean lives with the caller (struct sl_fault_sink).
 *
 * Every decision comes from one splitmix64 stream per direction, drawn in a
 * fixed order per frame, so the n-th frame offered always meets the same
 * fate for a given seed.
 */
#ifndef SLUICE_FAULT_H
#define SLUICE_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_FAULT_HOLD 64 /* frames one direction can hold back at once */

struct sl_fault_spec {
	double drop;            /* probability a frame is lost */
	double dup;             /* probability a frame is delivered twice */
	double corrupt;         /* probability one byte of a frame is flipped */
	double reorder;         /* probability a frame is held back ... */
	uint32_t reorder_depth; /* ... until 1..reorder_depth later frames passed it */
	uint64_t delay_ns;      /* every frame leaves this much later (fault_port only) */
	uint64_t seed;
};

/* What the engine did, for checking against what the receivers detected. */
struct sl_fault_counters {
	uint64_t frames;            /* offered */
	uint64_t dropped;
	uint64_t dropped_data;      /* of which sluice DATA: each needs a retransmission */
	uint64_t duplicated;
	uint64_t corrupted;         /* frames sent on with a flipped byte, copies included */
	uint64_t corrupted_covered; /* of which the flip lies in the sluice header, body or
				       CRC trailer: a receiver checking CRC32C rejects each */
	uint64_t reordered;         /* held back */
};

struct sl_fault_frame {
	uint8_t *data;
	uint32_t len;
	void *handle; /* the caller's buffer */
};

/* Where frames go.  emit: onwards; discard: lost; copy: a new buffer with
 * fr's bytes (false when none is free: the duplicate is not made). */
struct sl_fault_sink {
	void (*emit)(void *arg, struct sl_fault_frame fr);
	void (*discard)(void *arg, struct sl_fault_frame fr);
	bool (*copy)(void *arg, const struct sl_fault_frame *fr, struct sl_fault_frame *out);
	void *arg;
};

struct sl_fault_held {
	struct sl_fault_frame frame;
	uint32_t skip; /* later frames still to let pass */
};

/* One direction's state. */
struct sl_fault {
	struct sl_fault_spec spec;
	uint64_t rng;
	struct sl_fault_held held[SL_FAULT_HOLD];
	uint32_t n_held;
	struct sl_fault_counters count;
};

/* Start a direction; stream tells apart directions that share a seed. */
void sl_fault_init(struct sl_fault *f, const struct sl_fault_spec *spec, uint64_t stream);
/* Pass one frame through the faults; it ends in exactly one emit or discard
 * (now or, when held back, later). */
void sl_fault_apply(struct sl_fault *f, struct sl_fault_frame fr, const struct sl_fault_sink *sink);
/* Emit every held frame now (nothing else is coming to pass them). */
void sl_fault_flush(struct sl_fault *f, const struct sl_fault_sink *sink);
/* Whether spec injects anything at all. */
bool sl_fault_active(const struct sl_fault_spec *spec);

/*
 * Parse "drop:0.01,reorder:16,dup:0.001,corrupt:0.0001,delay:50us,seed:7":
 *   drop, dup, corrupt: probabilities per frame, 0 to 1
 *   reorder:N         every frame overtaken by 0..N-1 later ones, uniformly (N 1..64)
 *   delay:D           every frame leaves D later: a number with ns, us, ms or s
 *   seed:S            the generator's seed (default 1)
 * Keys in any order, each at most once; "" means no faults.  0, or -1 with
 * err naming the bad part and what is allowed.
 */
int sl_fault_parse(const char *text, struct sl_fault_spec *out, char *err, size_t errlen);

#endif
