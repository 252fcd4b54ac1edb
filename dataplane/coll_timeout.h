/*
 * coll_timeout.h: why a posted call timed out (coll_timeout.c); dp.h has
 * dp_coll_waited_rank, which wait_notes.c asks too.  Only the engine's
 * thread calls these.
 */
#ifndef SLUICE_COLL_TIMEOUT_H
#define SLUICE_COLL_TIMEOUT_H

#include "dp.h"

/* Why rank r (on node) fails its peers: silence (what did not come from
 * it, "nothing was acknowledged" or "nothing came from it") for silent_ns. */
void dp_silent_peer_sentence(char *why, size_t size, int r, uint16_t node, const char *silence, uint64_t silent_ns);
/* A timer pass over k (running or lingering): once it made no progress for
 * its communicator's timeout, fail the communicator, saying why. */
void dp_coll_check_timeout(struct dp_engine *e, struct dp_coll *k, uint64_t now);

#endif
