/*
 * comm_fail.h: a communicator's failure and its notices (comm_fail.c), as
 * the rest of the collectives' code (coll_run.c) uses them; dp.h has what
 * the engine's other files call.  Only the engine's thread calls these.
 */
#ifndef SLUICE_COMM_FAIL_H
#define SLUICE_COMM_FAIL_H

#include "dp.h"

/* What a failure relayed from another channel of a dataplane ends in. */
#define OTHER_CHANNEL " (on another channel of this dataplane)"

/* Break comm (comm_fail.c comm_vfail says how); notify: tell its peers. */
void dp_comm_fail_relayed(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq,
			 bool notify, bool relayed, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* The failures this dataplane finds itself (not relayed). */
#define comm_fail(e, comm, status, seq, notify, ...) \
	dp_comm_fail_relayed(e, comm, status, seq, notify, false, __VA_ARGS__)

/* To every live peer: an abort notice of the failure of call #seq, or this
 * rank's closing word (seq: the number of collectives it ran). */
void dp_send_notices(struct dp_engine *e, struct dp_comm *comm, uint32_t seq, uint16_t what);
/* Notice m is acknowledged, or its peer dead: true if that freed its set. */
bool dp_notice_done(struct dp_engine *e, struct sl_tp_msg *m);

/* A completion or refusal is carrying comm's failure to its client. */
static inline void note_failure_told(struct dp_comm *comm)
{
	comm->failure_told = true;
	if (comm->channels_failed)
		atomic_store_explicit(&comm->channels_failed->told, true, memory_order_release);
}

/* Whether the client has heard of comm's failure, on any channel (only of
 * this channel's once it renamed it). */
static inline bool failure_heard(const struct dp_comm *comm)
{
	return comm->failure_told || (!comm->renamed && comm->channels_failed &&
				      atomic_load_explicit(&comm->channels_failed->told, memory_order_acquire));
}

#endif
