/*
 * wait_notes.h: stall, cycle, path and ahead notes (wait_notes.c), as coll_run.c
 * uses them: it hands over the notes that come, gives each running call
 * its chance to note a stall, and at a call's timeout asks for a cycle to
 * name rather than a bare timeout.
 */
#ifndef SLUICE_DP_WAIT_NOTES_H
#define SLUICE_DP_WAIT_NOTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp.h"

/* A stall, cycle, path or ahead note (h->step; status 0) with text came from
 * rank src on comm: kept, acted on, passed on; a forged or stale one is
 * dropped. */
void dp_wait_note_came(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h, const char *text);

/* On a timer pass, for each running call k: once k has stalled (an eighth
 * of the timeout without progress), its stall note goes to the rank it
 * waits for, with the chains that wait for this rank; then a ping every
 * eighth, while that rank has nothing unacknowledged. */
void dp_note_stall(struct dp_engine *e, struct dp_coll *k, uint64_t now);

/* Asks peer (a rank k waits for, on another dataplane) whether it is
 * there: a ping, which its transport acknowledges, unless something sent
 * to it waits for an acknowledgement already (that one asks). */
void dp_ping(struct dp_engine *e, const struct dp_coll *k, int peer);

/* k has waited a timeout, for peer (-1: no one rank): true, with the
 * sentence in why, if the notes show a cycle of waits that k is part of or
 * waits on (SLUICE_ERR_MISMATCH, not a timeout).  *also: another
 * communicator that the cycle closes on, to fail too (its rank that waits
 * for this one hears of it at once), or NULL. */
bool dp_cycle_named(struct dp_engine *e, const struct dp_coll *k, int peer, char *why, size_t why_size,
		    struct dp_comm **also);

/* k has waited a timeout, and no cycle the notes show goes through its
 * wait: the call of k's client, stalled too, through which one goes (said
 * in why, as dp_cycle_named says it; *also as there), or NULL.  Chains go
 * along a rank's call stalled longest (passing_call), so one through a
 * later call, behind an older one stalled outside the cycle, came back
 * only to that later call, and the older, timing out first, named only
 * the rank it waits for: a true cause, but the hang is the cycle's. */
const struct dp_coll *dp_cycle_behind(struct dp_engine *e, const struct dp_coll *k, char *why, size_t why_size,
				      struct dp_comm **also);

/* k has waited a timeout for peer, of no cycle the notes show: the latest
 * ahead note of its wait (the path from it to the rank where its chain
 * stopped, which had not posted the last wait's counterpart), if one came
 * during k's stall; else NULL. */
const struct dp_wait_chain *dp_path_ahead(const struct dp_coll *k, int peer);

#endif
