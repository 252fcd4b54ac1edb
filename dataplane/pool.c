/*
 * pool.c: size-class blocks from a touched arena, then from malloc
 * (pool.h says why).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pool.h"
#include "sluice/errmsg.h"
#include "sluice/touch.h"

#define BIG UINT32_MAX /* class of a block larger than the largest class */

/* Under AddressSanitizer, arena bytes not handed out are poisoned, as
 * malloc's would be: a block's user may use its whole size (dp_pool_cap),
 * and an overrun past it, or a use after dp_pool_put, is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Before each block; a free block's link sits in its first bytes. */
struct dp_pool_block {
	uint64_t size;     /* bytes after this header */
	uint32_t cls;      /* size class, or BIG */
	uint16_t heap;     /* from malloc, not the arena */
	uint16_t own;      /* malloc'd and last handed out as an own buffer */
};

struct dp_pool_free_link {
	struct dp_pool_block *next;
};

_Static_assert(sizeof(struct dp_pool_block) == 16, "blocks stay 16-byte aligned");

static struct dp_pool_block *hdr_of(const void *blk)
{
	return (struct dp_pool_block *)((uintptr_t)blk - sizeof(struct dp_pool_block));
}

static struct dp_pool_free_link *link_of(struct dp_pool_block *b)
{
	return (struct dp_pool_free_link *)(b + 1);
}

int dp_pool_init(struct dp_pool *p, char *err, size_t len)
{
	void *a = mmap(NULL, DP_POOL_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	memset(p, 0, sizeof(*p));
	if (a == MAP_FAILED) {
		sl_errmsg_format(err, len, "cannot map the engine's %u-byte copy pool: %s", DP_POOL_BYTES, strerror(errno));
		return -1;
	}
	sl_touch(a, DP_POOL_BYTES);
	POISON(a, DP_POOL_BYTES);
	p->base = p->next = a;
	p->end = p->base + DP_POOL_BYTES;
	return 0;
}

void dp_pool_fini(struct dp_pool *p)
{
	for (unsigned c = 0; c < DP_POOL_CLASSES; c++)
		for (struct dp_pool_block *b = p->free[c], *next; b; b = next) {
			UNPOISON(b, sizeof(*b) + sizeof(struct dp_pool_free_link));
			next = link_of(b)->next;
			if (b->heap)
				free(b);
		}
	if (p->base) {
		UNPOISON(p->base, DP_POOL_BYTES);
		munmap(p->base, DP_POOL_BYTES);
	}
	memset(p, 0, sizeof(*p));
}

/* Class c holds 2^(MIN_SHIFT + c/2) bytes, half as much again when c is
 * odd: 64, 96, 128, 192, ...  With powers of two alone, a 4 KiB packet and
 * its stash header took an 8 KiB block, and a 3-rank root's early packets
 * of 4 KiB reduces (two leaves ~1000 calls ahead) overflowed the arena: the
 * malloc'd rest faulted in, 20-30 us a call over a 1000-call run, 4-5 us
 * with room (perf/ALGORITHMS.md, small3). */
static size_t class_size(uint32_t c)
{
	size_t base = (size_t)1 << (DP_POOL_MIN_SHIFT + c / 2);

	return c & 1 ? base + base / 2 : base;
}

static uint32_t class_of(size_t len)
{
	if (len <= (size_t)1 << DP_POOL_MIN_SHIFT)
		return 0;
	uint32_t s = 63 - (uint32_t)__builtin_clzll(len - 1); /* 2^s < len <= 2^(s+1) */
	uint32_t c = 2 * (s - DP_POOL_MIN_SHIFT) + (len <= (size_t)3 << (s - 1) ? 1 : 2);

	return c < DP_POOL_CLASSES ? c : BIG;
}

static void *get(struct dp_pool *p, size_t len, bool own)
{
	uint32_t c = class_of(len);
	size_t size = c == BIG ? len : class_size(c);
	struct dp_pool_block *b;

	if (c != BIG && (b = p->free[c])) {
		UNPOISON(b, sizeof(*b) + size);
		p->free[c] = link_of(b)->next;
		if (b->heap)
			p->kept -= b->size;
		if (b->own)
			p->own_free[c]--;
		b->own = own && b->heap;
		return b + 1;
	}
	if (!own && c < DP_POOL_ARENA_CLASSES && (size_t)(p->end - p->next) >= sizeof(*b) + size) {
		b = (struct dp_pool_block *)p->next;
		p->next += sizeof(*b) + size;
		UNPOISON(b, sizeof(*b) + size);
		*b = (struct dp_pool_block){ .size = size, .cls = c };
		return b + 1;
	}
	if (size > SIZE_MAX - sizeof(*b) || !(b = malloc(sizeof(*b) + size)))
		return NULL;
	*b = (struct dp_pool_block){ .size = size, .cls = c, .heap = 1, .own = own };
	p->from_heap++;
	return b + 1;
}

void *dp_pool_get(struct dp_pool *p, size_t len)
{
	return get(p, len, false);
}

void *dp_pool_get_kept(struct dp_pool *p, size_t len)
{
	return get(p, len, true);
}

void dp_pool_put(struct dp_pool *p, void *blk)
{
	struct dp_pool_block *b;

	if (!blk)
		return;
	b = hdr_of(blk);
	if (b->heap && (b->cls == BIG || p->kept + b->size > DP_POOL_KEEP_BYTES ||
			(b->own && p->own_free[b->cls] >= DP_POOL_KEEP_OWN))) {
		free(b);
		return;
	}
	if (b->heap)
		p->kept += b->size;
	if (b->own)
		p->own_free[b->cls]++;
	link_of(b)->next = p->free[b->cls];
	p->free[b->cls] = b;
	POISON(b, sizeof(*b) + b->size);
}

size_t dp_pool_cap(const void *blk)
{
	return hdr_of(blk)->size;
}

size_t dp_pool_used(const struct dp_pool *p)
{
	return (size_t)(p->next - p->base);
}
