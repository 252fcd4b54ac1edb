/*
 * pool.h: an engine's memory for the copies a small call makes (early
 * packets, a lingering call's sources) and for collectives' own buffers
 * (scratch, in-place input copies), taken from an arena that is
 * touched when the engine starts.  From malloc, a run of calls that grew
 * the heap faulted a fresh page in every few calls, 10-14 us each on the
 * VMs sluice is measured on (perf/ALGORITHMS.md, "stalls").  Blocks come in
 * powers of two and one and a half times those, and go back to their size's
 * free list; when the arena is used up, or for sizes above
 * DP_POOL_ARENA_CLASSES', they come from malloc, and up to
 * DP_POOL_KEEP_BYTES of those are kept for reuse.  Freed to glibc instead,
 * a root's megabytes of early packets, or a non-root's
 * lingering copy of its send, went back to the kernel (heap trimming, or
 * munmap) and faulted in again on the next call: a 3-rank gather of 4 MiB
 * took 5-6 ms instead of 0.7 (perf/ALGORITHMS.md, "pool keeps").
 */
#ifndef SLUICE_DP_POOL_H
#define SLUICE_DP_POOL_H

#include <stddef.h>
#include <stdint.h>

/* The arena, touched at start (40-80 ms here): a receive budget of early
 * packets (256 of 16 KiB, in 24 KiB blocks) and lingering calls' copies. */
#define DP_POOL_BYTES (16u << 20)
#define DP_POOL_KEEP_BYTES (32u << 20) /* malloc'd blocks kept for reuse beyond it */
/* Free own buffers kept per class, within DP_POOL_KEEP_BYTES.  A leaf's run
 * of ~256 lingering 64 KiB in-place calls kept 14.9 MiB of them, and as a
 * gather's root after it the rank's malloc'd early packets got fresh pages,
 * 500-900 faults and 4x the time a run; freed to glibc, their pages serve
 * again.  32 a class made a 32-in-flight sweep's next gather fault in 3 of
 * 3 runs (perf/ALGORITHMS.md, ownkeep). */
#define DP_POOL_KEEP_OWN 64
#define DP_POOL_MIN_SHIFT 6            /* sizes 64 B ... */
#define DP_POOL_ARENA_CLASSES 25       /* ... to 256 KiB from the arena ... */
#define DP_POOL_CLASSES 41             /* ... to 64 MiB; larger blocks are malloc'd and freed */

struct dp_pool_block;

struct dp_pool {
	uint8_t *base, *next, *end;   /* the arena; next: its first byte never handed out */
	struct dp_pool_block *free[DP_POOL_CLASSES];
	uint64_t kept;                /* bytes of malloc'd blocks on the free lists */
	uint32_t own_free[DP_POOL_CLASSES]; /* own buffers among them, per class */
	uint64_t from_heap;           /* blocks malloc'd: the arena used up, too large, or kept (own buffers) */
};

/* Map and touch the arena; -1 with err set when it cannot be mapped. */
int dp_pool_init(struct dp_pool *p, char *err, size_t len);
void dp_pool_fini(struct dp_pool *p);
/* A block of at least len bytes, 16-byte aligned; NULL when out of memory. */
void *dp_pool_get(struct dp_pool *p, size_t len);
/* The same, but from a free block of its class or malloc, never carving the
 * arena: for collectives' own buffers.  Carved blocks keep their class for
 * good, and a reduce's leaf of 3 ranks, running ahead in place at 64 KiB,
 * held ~256 such buffers in lingering calls: the whole arena, after which
 * that rank's early packets as a gather's root came from malloc, 600-950
 * fresh pages and 2-3x the time a 4 KiB call (perf/ALGORITHMS.md, regr17). */
void *dp_pool_get_kept(struct dp_pool *p, size_t len);
void dp_pool_put(struct dp_pool *p, void *blk);
/* Bytes the block can hold. */
size_t dp_pool_cap(const void *blk);
/* Bytes of the arena handed out so far (free or not). */
size_t dp_pool_used(const struct dp_pool *p);

#endif
