/*
 * coll_stash.h: packets kept for later, and the senders of early ones
 * (coll_stash.c).  Only the engine's thread calls these.
 */
#ifndef SLUICE_COLL_STASH_H
#define SLUICE_COLL_STASH_H

#include "dp.h"

/* A packet kept for later, in its frame when in_place and the port lets
 * it, else copied: NULL when out of memory. */
struct dp_stashed *dp_packet_keep(struct dp_engine *e, const struct sl_hdr *h, const uint8_t *payload, bool in_place);
void dp_packet_put(struct dp_engine *e, struct dp_stashed *s);
/* A list of them, through next. */
void dp_packets_free(struct dp_engine *e, struct dp_stashed *s);

/* Keep h, from rank src of comm, for a call not posted here yet; what the
 * transport does with its sender: SL_DELIVER_DONE (taken, or dropped as
 * comm failed at the stash limit), SL_DELIVER_HOLD (taken, the sender held)
 * or SL_DELIVER_RETRY (refused, the sender held). */
enum sl_deliver_result dp_stash_packet(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h,
				       const uint8_t *payload);
/* k's early packets, oldest first through next, out of the stash: the
 * caller applies them, gives them back (dp_packet_put), then calls
 * dp_stash_drained. */
struct dp_stashed *dp_stash_take(const struct dp_coll *k);
/* Senders of comm whose early packets are down to their resume share go on. */
void dp_stash_drained(struct dp_engine *e, struct dp_comm *comm);
/* Call k is posted (after its early packets were taken): the senders
 * refused or parked for it go on (a recv's: its rank's sends), and those
 * it waits on that a stash holds are parked instead. */
void dp_stash_posted(struct dp_engine *e, const struct dp_coll *k);
/* A timer pass over posted call k: when it got nothing for a while, every
 * held stash lets its senders send a window more. */
void dp_stash_starves(struct dp_engine *e, const struct dp_coll *k, uint64_t now);
/* comm failed: its held and parked senders go on (its packets are dropped). */
void dp_stash_let_go(struct dp_engine *e, struct dp_comm *comm);
/* comm is gone: its early packets and tables freed, its senders let go. */
void dp_stash_close(struct dp_engine *e, struct dp_comm *comm);
/* comm's senders that were refused past DP_EAGER_MAX go on. */
void dp_stash_late_release(struct dp_engine *e, const struct dp_comm *comm);
/* The oldest early packet from peer of the other kind than k (its
 * collective against k's send/recv, or its send against k's collective),
 * or NULL. */
const struct sl_hdr *dp_stash_cross_kind(const struct dp_coll *k, int peer);

#endif
