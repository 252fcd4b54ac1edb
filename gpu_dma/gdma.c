/*
 * gdma.c: the reducer's front end, the same for every backend: fills in the
 * configuration, checks each piece of work, splits large work into items of
 * at most split_bytes (so that several consumers share it), and turns ring
 * tickets into "done".  It also keeps the landing arena: pinned memory after
 * the ring where sl_gdma_post_copy puts payloads whose own memory (a packet
 * buffer) goes back to the port at once; space is handed out in FIFO order
 * and returned as tickets are reaped, which happens in ticket order.  Also
 * the CPU backend, which applies the ring's items in sl_gdma_progress with
 * coll/'s reductions.
 */
#include "gdma_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/errmsg.h>

int sl_gdma_fail(char *err, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		sl_errmsg_vformat(err, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* ---- configuration ---- */

static int fill_cfg(struct sl_gdma_cfg *c, char *err, size_t len)
{
	if (!c->slots)
		c->slots = 4096;
	if (!c->blocks)
		c->blocks = 8;
	if (!c->threads)
		c->threads = 512;
	if (!c->split_bytes)
		c->split_bytes = 64 << 10;
	if (!c->idle_ns)
		c->idle_ns = 1000000;
	if (!c->arena_bytes)
		c->arena_bytes = 16 << 20;
	c->arena_bytes = (c->arena_bytes + 63) & ~(uint64_t)63;
	if (c->slots < 2 || (c->slots & (c->slots - 1)) || c->slots > (1u << 24))
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: ring slots %u must be a power of two "
				    "from 2 to 2^24", c->slots);
	if (c->split_bytes % 16)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: split_bytes %u must be a multiple of 16 "
				    "(so that split items stay aligned)", c->split_bytes);
	if (c->threads > 1024 || c->threads % 32)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: threads %u per block must be a multiple "
				    "of 32 up to 1024", c->threads);
	return 0;
}

int sl_gdma_open(struct sl_gdma **out, const struct sl_gdma_cfg *cfg, char *err, size_t len)
{
	struct sl_gdma *g = calloc(1, sizeof(*g));
	int rc;

	*out = NULL;
	if (!g)
		return sl_gdma_fail(err, len, -ENOMEM, "gpu_dma: out of memory for the reducer");
	g->cfg = *cfg;
	rc = fill_cfg(&g->cfg, err, len);
	if (rc) {
		free(g);
		return rc;
	}
	g->arena_end = calloc(g->cfg.slots, sizeof(*g->arena_end));
	if (!g->arena_end) {
		free(g);
		return sl_gdma_fail(err, len, -ENOMEM, "gpu_dma: out of memory for the reducer");
	}
	g->ops = cfg->backend == SL_GDMA_CUDA ? &sl_gdma_cuda_ops : &sl_gdma_cpu_ops;
	rc = g->ops->open(g);
	if (rc) {
		sl_gdma_fail(err, len, rc, "%s", g->why);
		free(g->arena_end);
		free(g);
		return rc;
	}
	g->arena = (uint8_t *)g->ring.sh + sl_gdma_ring_bytes(g->cfg.slots);
	*out = g;
	return 0;
}

void sl_gdma_close(struct sl_gdma *g)
{
	if (!g)
		return;
	g->ops->close(g);
	free(g->arena_end);
	free(g);
}

/* ---- posting ---- */

static int check_work(const struct sl_gdma_work *w, char *err, size_t len)
{
	size_t esize = sl_dtype_size(w->dtype);

	if (!sl_reduce_supported(w->dtype, w->op))
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: unknown datatype %d or op %d in the work",
				    (int)w->dtype, (int)w->op);
	if (w->kind != SL_GDMA_REDUCE && w->kind != SL_GDMA_COPY)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: unknown work kind %d", (int)w->kind);
	if (w->count == 0 || w->count > UINT64_MAX / esize / 2)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: element count %llu is zero or too large",
				    (unsigned long long)w->count);
	if (!w->dst || !w->src || (w->kind == SL_GDMA_REDUCE && !w->a))
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: work with a NULL %s pointer",
				    !w->dst ? "dst" : !w->src ? "src" : "a");
	return 0;
}

static struct sl_gdma_item piece(const struct sl_gdma_work *w, uint64_t first, uint64_t count)
{
	uint64_t off = first * sl_dtype_size(w->dtype);

	return (struct sl_gdma_item){
		.dst = (uint64_t)(uintptr_t)w->dst + off,
		.a = w->kind == SL_GDMA_COPY ? 0 : (uint64_t)(uintptr_t)w->a + off,
		.src = (uint64_t)(uintptr_t)w->src + off,
		.count = count,
		.avg_div = w->avg_div,
		.dtype = (uint8_t)w->dtype,
		.op = (uint8_t)(w->op == SL_AVG ? SL_SUM : w->op),
		.kind = (uint8_t)w->kind,
		.swap = w->payload_first,
	};
}

/* Reap, and give back the arena space of every reaped ticket. */
static uint32_t reap(struct sl_gdma *g)
{
	uint32_t n = sl_gdma_ring_reap(&g->ring);

	if (n)
		g->arena_tail = g->arena_end[(g->ring.tail - 1) & g->ring.mask];
	return n;
}

/* Checks shared by both posts: 0 and the number of items w makes. */
static int admit(struct sl_gdma *g, const struct sl_gdma_work *w, uint64_t *pieces, char *err, size_t len)
{
	int rc = check_work(w, err, len);
	uint64_t per;

	if (rc)
		return rc;
	if (g->failed)
		return sl_gdma_fail(err, len, -EIO, "%s", g->why);
	per = g->cfg.split_bytes / sl_dtype_size(w->dtype); /* the type is known good now */
	*pieces = (w->count + per - 1) / per;
	if (*pieces > g->cfg.slots)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: %llu elements make %llu items, more than "
				    "the ring's %u slots: raise slots or split_bytes",
				    (unsigned long long)w->count, (unsigned long long)*pieces, g->cfg.slots);
	reap(g);
	return *pieces > g->cfg.slots - sl_gdma_ring_pending(&g->ring) ? -EAGAIN : 0;
}

/* Push w's items (room was checked); every one records the arena's head. */
static int push(struct sl_gdma *g, const struct sl_gdma_work *w, uint64_t pieces, uint32_t *ticket, char *err,
		size_t len)
{
	uint64_t per = g->cfg.split_bytes / sl_dtype_size(w->dtype);
	int rc = g->ops->kick(g);

	if (rc)
		return sl_gdma_fail(err, len, rc, "%s", g->why);
	for (uint64_t i = 0; i < pieces; i++) {
		uint64_t first = i * per;
		struct sl_gdma_item it = piece(w, first, w->count - first < per ? w->count - first : per);
		it.epoch = g->epoch;
		sl_gdma_ring_push(&g->ring, &it, ticket);
		g->arena_end[*ticket & g->ring.mask] = g->arena_head;
	}
	return 0;
}

int sl_gdma_post(struct sl_gdma *g, const struct sl_gdma_work *w, uint32_t *ticket, char *err, size_t len)
{
	uint64_t pieces;
	int rc = admit(g, w, &pieces, err, len);

	return rc ? rc : push(g, w, pieces, ticket, err, len);
}

/* Whether the arena has bytes free in one piece: *skip is what the
 * allocation must jump over at the arena's end, *need its rounded size. */
static bool arena_fits(const struct sl_gdma *g, uint64_t bytes, uint64_t *skip, uint64_t *need)
{
	uint64_t size = g->cfg.arena_bytes, off = g->arena_head % size;

	*need = (bytes + 63) & ~(uint64_t)63;
	*skip = off + *need > size ? size - off : 0;
	return g->arena_head + *skip + *need - g->arena_tail <= size;
}

/* bytes of arena, 64-byte aligned (so items stay on the kernel's 16-byte
 * path), never straddling its end; NULL when that much is still in use. */
static uint8_t *arena_alloc(struct sl_gdma *g, uint64_t bytes)
{
	uint64_t skip, need;
	uint8_t *p;

	if (!arena_fits(g, bytes, &skip, &need))
		return NULL;
	g->arena_head += skip;
	p = g->arena + g->arena_head % g->cfg.arena_bytes;
	g->arena_head += need;
	return p;
}

int sl_gdma_post_copy(struct sl_gdma *g, const struct sl_gdma_work *w, uint32_t *ticket, char *err, size_t len)
{
	struct sl_gdma_work landed = *w;
	uint64_t pieces, bytes = w->count * sl_dtype_size(w->dtype);
	uint8_t *p;
	int rc = admit(g, w, &pieces, err, len);

	if (rc)
		return rc;
	if (bytes > g->cfg.arena_bytes)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: a payload of %llu bytes is larger than the "
				    "landing arena (%llu bytes): raise arena_bytes or post smaller pieces",
				    (unsigned long long)bytes, (unsigned long long)g->cfg.arena_bytes);
	p = arena_alloc(g, bytes);
	if (!p)
		return -EAGAIN;
	memcpy(p, w->src, bytes);
	landed.src = p;
	return push(g, &landed, pieces, ticket, err, len);
}

bool sl_gdma_has_room(struct sl_gdma *g, const struct sl_gdma_work *w, bool copy)
{
	uint64_t per = g->cfg.split_bytes / sl_dtype_size(w->dtype), bytes = w->count * sl_dtype_size(w->dtype);
	uint64_t skip, need;

	reap(g);
	if ((w->count + per - 1) / per > g->cfg.slots - sl_gdma_ring_pending(&g->ring))
		return false;
	return !copy || bytes > g->cfg.arena_bytes || arena_fits(g, bytes, &skip, &need);
}

/* ---- completion ---- */

uint32_t sl_gdma_progress(struct sl_gdma *g, uint64_t now_ns)
{
	uint32_t n = reap(g);

	g->ops->progress(g, now_ns);
	return n + reap(g);
}

bool sl_gdma_done(const struct sl_gdma *g, uint32_t ticket)
{
	return sl_gdma_ring_passed(&g->ring, ticket);
}

uint32_t sl_gdma_pending(const struct sl_gdma *g)
{
	return sl_gdma_ring_pending(&g->ring);
}

uint32_t sl_gdma_reaped(const struct sl_gdma *g)
{
	return g->ring.tail;
}

int sl_gdma_stop(struct sl_gdma *g)
{
	return g->ops->stop(g);
}

void sl_gdma_restart(struct sl_gdma *g)
{
	g->epoch++;
	if (g->ops->restart)
		g->ops->restart(g);
}

bool sl_gdma_running(const struct sl_gdma *g)
{
	return g->running;
}

const char *sl_gdma_error(const struct sl_gdma *g)
{
	return g->failed ? g->why : NULL;
}

/* ---- the CPU backend ---- */

static int cpu_open(struct sl_gdma *g)
{
	size_t bytes = sl_gdma_ring_bytes(g->cfg.slots) + g->cfg.arena_bytes;
	void *mem = aligned_alloc(64, bytes);

	if (!mem)
		return sl_gdma_fail(g->why, sizeof(g->why), -ENOMEM, "gpu_dma: out of memory for a "
				    "ring of %u slots (%zu bytes)", g->cfg.slots, bytes);
	sl_gdma_ring_init(&g->ring, mem, g->cfg.slots, 0);
	g->cpu = (struct sl_gdma_cursor){ .next = 0, .stride = 1 };
	return 0;
}

static void cpu_close(struct sl_gdma *g)
{
	free(g->ring.sh);
}

static int cpu_kick(struct sl_gdma *g)
{
	(void)g;
	return 0;
}

/* Apply everything posted: the engine posted it from this same loop. */
static void cpu_progress(struct sl_gdma *g, uint64_t now_ns)
{
	(void)now_ns;
	sl_gdma_cpu_consume(g->ring.sh, g->ring.mask, &g->cpu, UINT32_MAX);
}

static int cpu_stop(struct sl_gdma *g)
{
	(void)g;
	return 0;
}

const struct gdma_backend_ops sl_gdma_cpu_ops = {
	.open = cpu_open, .close = cpu_close, .kick = cpu_kick, .progress = cpu_progress, .stop = cpu_stop,
};
