/*
 * comm_fail.c: a communicator's failure, and the notices that carry it to
 * its peers.
 *
 * The first failure breaks the communicator, as in NCCL: every running and
 * lingering call of it fails with it (a named mismatch may replace a bare
 * timeout), its senders are let go, the dataplane's other channels hear of
 * it, and the peers get an abort notice.  The same notices carry a rank's
 * closing word and wait_notes.c's notes; each is kept until its peer
 * acknowledges it or dies.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "coll_stash.h"
#include "comm_fail.h"

void dp_notices_send(struct dp_engine *e, struct dp_comm *comm, int to, struct sl_hdr hdr, const char *text)
{
	struct dp_notices *n = calloc(1, sizeof(*n) + comm->nranks * sizeof(n->msgs[0]));

	if (!n)
		return; /* the peers will time out instead */
	n->nranks = comm->nranks;
	/* one packet carries it (on_notice reads it whole): a smaller --payload cuts it */
	sl_errmsg_copy(n->why, e->payload < sizeof(n->why) ? e->payload : sizeof(n->why), text);
	hdr.type = SL_T_DATA;
	hdr.flags = SL_F_CTRL;
	hdr.comm = comm->key32;
	hdr.len = (uint32_t)strlen(n->why) + 1;
	for (uint32_t r = 0; r < comm->nranks; r++) {
		struct sl_tp_msg *m = &n->msgs[r];
		if (r == comm->rank || (to >= 0 && r != (uint32_t)to) || !sl_tp_node_alive(e->tp, comm->node[r]))
			continue;
		m->dst_node = comm->node[r];
		m->hdr = hdr;
		m->src = (const uint8_t *)n->why;
		m->owner = n;
		n->unacked++;
		/* a failure's, to a peer that has not closed (a closed one is
		 * done with the communicator): the stop waits for it */
		n->abort |= hdr.count != 0 && !comm->peer_closed[r];
		sl_tp_send(e->tp, m);
	}
	if (!n->unacked) {
		free(n);
		return;
	}
	if (n->abort)
		atomic_fetch_add_explicit(&e->aborts_out, 1, memory_order_relaxed);
	n->next = e->notices;
	e->notices = n;
}

/* To every live peer: an abort notice of the failure of call #seq, or this
 * rank's closing word (seq: the number of collectives it ran). */
void dp_send_notices(struct dp_engine *e, struct dp_comm *comm, uint32_t seq, uint16_t what)
{
	dp_notices_send(e, comm, -1, (struct sl_hdr){ .seq = seq, .step = what, .count = (uint64_t)(int64_t)comm->failed },
			comm->why);
}

/* Notice m is acknowledged, or its peer dead: true if that freed its set. */
bool dp_notice_done(struct dp_engine *e, struct sl_tp_msg *m)
{
	struct dp_notices *n = m->owner, **p;

	m->owner = NULL;
	if (--n->unacked)
		return false;
	for (p = &e->notices; *p != n; p = &(*p)->next)
		;
	*p = n->next;
	if (n->abort)
		atomic_fetch_sub_explicit(&e->aborts_out, 1, memory_order_relaxed);
	free(n);
	return true;
}

void dp_notices_last_words(struct dp_engine *e, int node)
{
	for (struct dp_notices *n = e->notices; n; n = n->next) {
		for (uint32_t r = 0; r < n->nranks && n->abort; r++) {
			const struct sl_tp_msg *m = &n->msgs[r];
			if (m->owner && (node < 0 || m->dst_node == node))
				sl_tp_send_last(e->tp, m);
		}
	}
}

/* After the transport is gone (nothing of theirs is in flight any more). */
void dp_notices_free_all(struct dp_engine *e)
{
	while (e->notices) {
		struct dp_notices *n = e->notices;
		e->notices = n->next;
		free(n);
	}
}

/* Break comm with status and why; every running collective fails with it.
 * relayed: why came from another channel of a dataplane and says so
 * (OTHER_CHANNEL), marked so where the failure is shared with this
 * dataplane's other channels (check_channels). */
static void comm_vfail(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq,
		       bool notify, bool relayed, const char *fmt, va_list ap) __attribute__((format(printf, 7, 0)));

void dp_comm_fail_relayed(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq,
			 bool notify, bool relayed, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	comm_vfail(e, comm, status, seq, notify, relayed, fmt, ap);
	va_end(ap);
}

void dp_comm_fail(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	comm_vfail(e, comm, status, seq, true, false, fmt, ap);
	va_end(ap);
}

/* A cycle or mismatch (SLUICE_ERR_MISMATCH) named after comm failed with a
 * timeout supersedes it, although the client may have heard the timeout
 * already: the calls not finished yet carry the name, the peers hear it
 * (their own timeouts give way to it too), the destroy reports it unless a
 * call did, and libsluice prefers it among a call's slices (coll.c,
 * req_note).  A timeout names no cause where another channel, or a peer,
 * sees the cycle (a call split over channels whose peer ran it on the first
 * alone: it_mismatch --channels --p2p); whichever came first stood, and a
 * bare one came first in about every other run. */
static void comm_vfail(struct dp_engine *e, struct dp_comm *comm, int32_t status, uint32_t seq,
		       bool notify, bool relayed, const char *fmt, va_list ap)
{
	int32_t was = comm->failed;

	if (was != SLUICE_OK && !(was == SLUICE_ERR_TIMEOUT && status == SLUICE_ERR_MISMATCH))
		return;
	comm->failed = status;
	sl_errmsg_vformat(comm->why, sizeof(comm->why), fmt, ap);
	if (was != SLUICE_OK) {
		comm->renamed = true;
		comm->failure_told = false;
	} else {
		dp_stash_let_go(e, comm); /* its packets are taken and dropped from now on */
	}
	if (comm->channels_failed && was == SLUICE_OK) {
		struct dp_channels_failed *cf = comm->channels_failed;
		int32_t none = 0;
		if (atomic_compare_exchange_strong(&cf->claimed, &none, 1)) {
			memcpy(cf->why, comm->why, sizeof(cf->why));
			cf->relayed = relayed;
			atomic_store_explicit(&cf->status, status, memory_order_release);
		}
	}
	fprintf(stderr, "sluiced node %u: communicator %#" PRIx64 " rank %u failed: %s\n", e->node,
		comm->key, comm->rank, comm->why);
	for (int l = 0; l < 2; l++) {
		for (struct dp_coll *k = l ? comm->linger : comm->colls; k; k = k->next) {
			if (k->status == SLUICE_OK || k->status == was) {
				k->status = status;
				memcpy(k->why, comm->why, sizeof(k->why));
			}
			dp_linger_mark(k);
		}
	}
	if (notify)
		dp_send_notices(e, comm, seq, NOTICE_ABORT);
}
