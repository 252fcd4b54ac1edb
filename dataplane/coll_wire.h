/*
 * coll_wire.h: what a data packet's header says of its call, read by
 * coll_run.c (applying packets), coll_stash.c (keeping early ones) and
 * coll_timeout.c (a timed-out call's hint).
 */
#ifndef SLUICE_COLL_WIRE_H
#define SLUICE_COLL_WIRE_H

#include "dp.h"

#define KIND_ALGO_SHIFT 5 /* wire kind = opcode | algorithm << 5 */

static inline bool is_rooted(uint32_t opcode)
{
	return opcode == SL_OP_BROADCAST || opcode == SL_OP_REDUCE || opcode == SL_OP_GATHER ||
	       opcode == SL_OP_SCATTER;
}

/* comm's rank on node, other than this rank's own; -1: none. */
static inline int rank_of_node(const struct dp_comm *comm, uint16_t node)
{
	for (uint32_t r = 0; r < comm->nranks; r++)
		if (comm->node[r] == node && r != comm->rank)
			return (int)r;
	return -1;
}

static inline bool packet_is_p2p(const struct sl_hdr *h)
{
	return (h->kind & ((1u << KIND_ALGO_SHIFT) - 1)) == SL_OP_SEND;
}

/* Whether the packet h from rank src belongs to k. */
static inline bool packet_is_for(const struct dp_coll *k, const struct sl_hdr *h, int src)
{
	if (packet_is_p2p(h))
		return k->cmd.opcode == SL_OP_RECV && k->cmd.root == (uint32_t)src && k->seq == h->seq;
	return !dp_is_p2p(k->cmd.opcode) && k->seq == h->seq;
}

/* How many calls past this rank's posts h's call is: 0 for the next one,
 * negative for one posted already. */
static inline int32_t calls_ahead(const struct dp_comm *comm, const struct sl_hdr *h, int src)
{
	uint32_t next = packet_is_p2p(h) ? comm->p2p_recv_seq[src] : comm->next_seq;

	return (int32_t)(h->seq - next);
}

/* Not posted yet here, but it will be: keep it. */
static inline bool packet_is_early(const struct dp_comm *comm, const struct sl_hdr *h, int src)
{
	return calls_ahead(comm, h, src) >= 0;
}

#endif
