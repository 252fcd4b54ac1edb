/*
 * gdma_impl.h: what gdma.c (the front end: checking, splitting, tickets)
 * shares with the backends that run the ring's consumer.  Private to gpu_dma/.
 */
#ifndef SLUICE_GDMA_IMPL_H
#define SLUICE_GDMA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gdma.h"

#define GDMA_ERRLEN 256

struct sl_gdma;

/* A backend owns the ring's memory and its consumer. */
struct gdma_backend_ops {
	/* Allocate the shared ring (ring_bytes(slots)) followed by the landing
	 * arena (cfg.arena_bytes) in one block, and set up the consumer's
	 * state; on failure fill g->why and return a negative errno. */
	int (*open)(struct sl_gdma *g);
	/* Stop the consumer, free everything open made. */
	void (*close)(struct sl_gdma *g);
	/* Before a post: make sure a consumer will see it (launch a kernel). */
	int (*kick)(struct sl_gdma *g);
	/* From sl_gdma_progress, after reaping. */
	void (*progress)(struct sl_gdma *g, uint64_t now_ns);
	/* Stop the consumer now; 0, or -EIO if it had failed. */
	int (*stop)(struct sl_gdma *g);
	/* Tell a running consumer to stop without waiting (NULL: nothing runs). */
	void (*restart)(struct sl_gdma *g);
};

struct sl_gdma {
	struct sl_gdma_cfg cfg;          /* with defaults filled in */
	struct sl_gdma_ring ring;        /* producer side */
	const struct gdma_backend_ops *ops;
	void *state;                     /* the backend's own */
	struct sl_gdma_cursor cpu;       /* the CPU backend's consumer */
	uint8_t *arena;                  /* the landing arena, right after the ring */
	uint64_t arena_head;             /* arena bytes ever handed out (free-running) */
	uint64_t arena_tail;             /* arena bytes ever given back */
	uint64_t *arena_end;             /* per slot: arena_head when its ticket was posted */
	uint32_t epoch;                  /* stamped on each item posted; sl_gdma_restart moves it */
	bool running;                    /* a consumer kernel is running (CUDA) */
	bool failed;                     /* the consumer died: posts refused */
	char why[GDMA_ERRLEN];           /* what failed */
};

extern const struct gdma_backend_ops sl_gdma_cpu_ops;
extern const struct gdma_backend_ops sl_gdma_cuda_ops; /* refuses without CUDA */

/* Format into err (may be NULL) and return rc. */
int sl_gdma_fail(char *err, size_t len, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
