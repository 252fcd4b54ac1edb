/*
 * fold.h: any rank count on a power-of-two group, for the recursive
 * algorithms (algo_rd.c, algo_rhd.c).  With p the largest power of two up
 * to n and rem = n - p, the ranks below 2 * rem pair up: the even one of a
 * pair hands its input to the odd one before the exchange (the fold) and
 * gets the result back after it (the unfold); the odd one takes part as
 * virtual rank r / 2, and every rank from 2 * rem up as r - rem.
 */
#ifndef SLUICE_FOLD_H
#define SLUICE_FOLD_H

#include <stdint.h>

struct sl_fold {
	uint32_t p, rem;  /* group size, ranks folded out */
	uint32_t log2p;   /* steps of the exchange */
	int64_t vrank;    /* this rank's place in the group; -1 when folded out */
	int64_t partner;  /* the other rank of this rank's pair; -1 when unpaired */
};

void sl_fold_init(struct sl_fold *f, uint32_t nranks, uint32_t rank);

/* The real rank of virtual rank v. */
static inline uint32_t sl_fold_real(const struct sl_fold *f, uint32_t v)
{
	return v < f->rem ? 2 * v + 1 : v + f->rem;
}

#endif
