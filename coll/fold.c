/* fold.c: placing a rank on the power-of-two group of fold.h. */
#include "fold.h"

void sl_fold_init(struct sl_fold *f, uint32_t nranks, uint32_t rank)
{
	*f = (struct sl_fold){ .p = 1 };
	while (2 * (uint64_t)f->p <= nranks) {
		f->p *= 2;
		f->log2p++;
	}
	f->rem = nranks - f->p;
	if (rank >= 2 * f->rem) {
		f->vrank = rank - f->rem;
		f->partner = -1;
	} else {
		f->vrank = rank % 2 ? (int64_t)(rank / 2) : -1;
		f->partner = rank ^ 1;
	}
}
