/*
 * comm_close.c: a communicator's destroy, which waits for its peers'
 * closing words (close_ready says why) and then releases it
 * (coll_run.c dp_comm_release).
 */

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "coll_stash.h"
#include "comm_close.h"
#include "comm_fail.h"

/* The communicator is going: a failure no call has reported, on any
 * channel, is reported to its destroy (why: SL_ERRMSG_LEN bytes); then it
 * is released.  A channel that ran none of a failed call's slices (a peer
 * split a call this rank did not: their counts differed) heard of the
 * failure only from its peers, and the client has already. */
static int32_t comm_close_now(struct dp_engine *e, struct dp_comm *comm, char *why)
{
	int32_t res = 0;

	if (comm->failed != SLUICE_OK && !failure_heard(comm)) {
		sl_errmsg_copy(why, SL_ERRMSG_LEN, comm->why);
		res = DP_CTL_STATUS + comm->failed;
	}
	dp_comm_release(e, comm);
	return res;
}

/*
 * A destroy completes once this rank's calls are over and every live peer
 * has said the same (its closing word), or has failed.  A rank's calls can
 * end before another rank sees that they differed (rooted calls send no
 * checks between ranks that exchange no data, schedule.c), and that rank's
 * abort notice may still be on its way: the closing words bring it, or
 * its failure, before any destroy reports success.  They carry how many
 * collectives each rank ran: a call that only one rank made is reported
 * too.  A peer that never destroys holds this one timeout_ns at most.
 */
static bool close_ready(struct dp_engine *e, struct dp_comm *comm, uint64_t now)
{
	if (!comm->closing_sent) {
		comm->closing_sent = true;
		dp_send_notices(e, comm, comm->next_seq, NOTICE_CLOSING);
		dp_stash_late_release(e, comm); /* the peers' closing words may be held */
	}
	if (comm->failed != SLUICE_OK || now - comm->close_since_ns >= dp_comm_timeout(e, comm))
		return true;
	for (uint32_t r = 0; r < comm->nranks; r++)
		if (r != comm->rank && !comm->peer_closed[r] && sl_tp_node_alive(e->tp, comm->node[r]))
			return false;
	for (uint32_t r = 0; r < comm->nranks; r++) {
		if (comm->peer_closed[r] && comm->peer_seq[r] != comm->next_seq) {
			comm_fail(e, comm, SLUICE_ERR_MISMATCH, comm->next_seq, false,
				  "rank %u made %u collective calls on this communicator but rank %u made %u: "
				  "every rank must make the same calls in the same order",
				  r, comm->peer_seq[r], comm->rank, comm->next_seq);
			break;
		}
	}
	return true;
}

void dp_comm_close_try(struct dp_engine *e, struct dp_comm *comm, uint64_t now)
{
	_Atomic int32_t *done = comm->close_done;

	if (!close_ready(e, comm, now)) {
		e->closing += !comm->close_waiting;
		comm->close_waiting = true;
		return;
	}
	e->closing -= comm->close_waiting;
	comm->close_waiting = false;
	comm->close_done = NULL;
	dp_ctl_answer(done, comm_close_now(e, comm, comm->close_why));
}

/* Destroys waiting for closing words: a timer pass looks for the timeout
 * and for peers that died. */
void dp_comm_close_timers(struct dp_engine *e, uint64_t now)
{
	for (unsigned i = 0; i < DP_MAX_COMMS && e->closing; i++) {
		struct dp_comm *comm = &e->comms[i];
		if (comm->live && comm->close_waiting)
			dp_comm_close_try(e, comm, now);
	}
}

int32_t dp_comm_close(struct dp_engine *e, struct dp_comm *comm, struct dp_ctl_req *r)
{
	if (comm->colls) {
		sl_errmsg_format(r->why, SL_ERRMSG_LEN, "the communicator has collectives running: "
				 "wait for them before destroying it");
		return 1;
	}
	comm->close_done = r->done;
	comm->close_why = r->why;
	comm->close_since_ns = sl_tp_poll_ns(e->tp);
	if (!comm->linger)
		dp_comm_close_try(e, comm, comm->close_since_ns);
	return DP_CTL_LATER;
}
