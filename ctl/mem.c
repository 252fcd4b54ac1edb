/*
 * mem.c: memory the dataplane can reach.  sluice_mem_alloc maps a fresh
 * shared memory file and registers it with the dataplane (REG passes the
 * file descriptor); collectives name buffers as (region id, offset), which
 * sl_mem_find works out and checks, so that a buffer from anywhere else is
 * refused with a clear error before it reaches the dataplane.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdma.h"
#include "internal.h"

/* Take a free table slot (marked used, not yet filled), or -1. */
static int slot_reserve(struct sluice_ctx *ctx)
{
	int slot = -1;

	pthread_mutex_lock(&ctx->lock);
	for (unsigned i = 0; i < SL_MAX_REGIONS && slot < 0; i++) {
		if (!ctx->regions[i].used) {
			memset(&ctx->regions[i], 0, sizeof(ctx->regions[i]));
			ctx->regions[i].used = true;
			slot = (int)i;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return slot;
}

static void slot_release(struct sluice_ctx *ctx, int slot)
{
	pthread_mutex_lock(&ctx->lock);
	memset(&ctx->regions[slot], 0, sizeof(ctx->regions[slot]));
	pthread_mutex_unlock(&ctx->lock);
}

/* Map size bytes of a new memory file and register it; fills everything but the table. */
static sluice_result_t map_and_register(struct sluice_ctx *ctx, size_t size, struct sl_region *r)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct sl_ctl_msg msg = {.type = SL_CTL_REG};
	struct sl_ctl_reply reply;
	sluice_result_t res;
	int fd;

	r->size = size;
	r->mapped = (size + page - 1) / page * page;
	fd = memfd_create("sluice-buffer", MFD_CLOEXEC);
	if (fd < 0)
		return sl_fail(SLUICE_ERR_SYSTEM, "sluice_mem_alloc: memfd_create failed: %s", strerror(errno));
	if (ftruncate(fd, (off_t)r->mapped) != 0) {
		res = sl_fail(SLUICE_ERR_NO_MEMORY, "sluice_mem_alloc: sizing a %zu-byte buffer failed: %s",
			      size, strerror(errno));
		close(fd);
		return res;
	}
	r->base = mmap(NULL, r->mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (r->base == MAP_FAILED) {
		r->base = NULL;
		res = sl_fail(SLUICE_ERR_NO_MEMORY, "sluice_mem_alloc: mapping a %zu-byte buffer failed: %s",
			      size, strerror(errno));
		close(fd);
		return res;
	}
	msg.a.size = r->mapped;
	res = sl_ctl_call(ctx, &msg, fd, &reply);
	close(fd);
	if (res != SLUICE_OK) {
		munmap(r->base, r->mapped);
		r->base = NULL;
		return res;
	}
	r->id = reply.value;
	return SLUICE_OK;
}

sluice_result_t sluice_mem_alloc(sluice_ctx_t *ctx, size_t size, void **ptr)
{
	struct sl_region r = {.used = true};
	sluice_result_t res;
	int slot;

	if (!ctx || !ptr || size == 0 || size > SIZE_MAX / 2)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "sluice_mem_alloc(ctx %p, size %zu, ptr %p): pass a context, a size from 1 byte "
			       "up, and where to store the pointer",
			       (void *)ctx, size, (void *)ptr);
	slot = slot_reserve(ctx);
	if (slot < 0)
		return sl_fail(SLUICE_ERR_NO_MEMORY,
			       "sluice_mem_alloc: all %u registered regions are in use: allocate fewer, larger "
			       "buffers and carve them up",
			       SL_MAX_REGIONS);
	res = map_and_register(ctx, size, &r);
	if (res != SLUICE_OK) {
		slot_release(ctx, slot);
		return res;
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->regions[slot] = r;
	pthread_mutex_unlock(&ctx->lock);
	SL_INFO(SL_SUB_MEM, "region %u: %zu bytes at %p", r.id, size, r.base);
	*ptr = r.base;
	return SLUICE_OK;
}

/* Describe GPU memory to the dataplane: its address (for one in this
 * process) and its IPC handle (for sluiced).  Fills msg, or says why not. */
static sluice_result_t describe_device(void *ptr, size_t size, struct sl_ctl_msg *msg)
{
	struct sl_gdma_mem_info info;
	struct sl_gdma_ipc h;
	char err[256];

	_Static_assert(sizeof(h) == SL_DEV_HANDLE_BYTES, "abi.h's device handle is gpu_dma's sl_gdma_ipc");
	if (sl_gdma_mem_query(ptr, size, &info, err, sizeof(err)) != 0)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_mem_register: %s", err);
	if (info.kind != SL_GDMA_MEM_DEVICE || sl_gdma_mem_check(ptr, size, info.device, err, sizeof(err)) != 0)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "sluice_mem_register(%p, %zu bytes): %s", ptr, size,
			       info.kind == SL_GDMA_MEM_DEVICE ? err :
			       info.kind == SL_GDMA_MEM_MANAGED ? "managed memory cannot be shared with the dataplane: "
							   "allocate it with cudaMalloc" :
			       "this is host memory (or this sluice was built without CUDA): host buffers come from "
			       "sluice_mem_alloc, GPU buffers from cudaMalloc");
	if (sl_gdma_ipc_export(ptr, size, &h, err, sizeof(err)) != 0)
		return sl_fail(SLUICE_ERR_SYSTEM, "sluice_mem_register: %s", err);
	msg->a.kind = SL_REGION_DEVICE;
	msg->a.gpu = info.device;
	msg->a.addr = (uint64_t)(uintptr_t)ptr;
	memcpy(msg->a.handle, &h, sizeof(h));
	return SLUICE_OK;
}

sluice_result_t sluice_mem_register(sluice_ctx_t *ctx, void *ptr, size_t size)
{
	struct sl_ctl_msg msg = {.type = SL_CTL_REG};
	struct sl_ctl_reply reply;
	struct sl_region r = {.used = true, .base = ptr, .size = size, .device = true};
	sluice_result_t res;
	int slot;

	if (!ctx || !ptr || size == 0)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "sluice_mem_register(ctx %p, ptr %p, size %zu): pass a context, a GPU buffer and "
			       "its size from 1 byte up", (void *)ctx, ptr, size);
	if ((res = describe_device(ptr, size, &msg)) != SLUICE_OK)
		return res;
	msg.a.size = size;
	if ((slot = slot_reserve(ctx)) < 0)
		return sl_fail(SLUICE_ERR_NO_MEMORY,
			       "sluice_mem_register: all %u registered regions are in use: register fewer, "
			       "larger buffers and carve them up", SL_MAX_REGIONS);
	if ((res = sl_ctl_call(ctx, &msg, -1, &reply)) != SLUICE_OK) {
		slot_release(ctx, slot);
		return res;
	}
	r.id = reply.value;
	pthread_mutex_lock(&ctx->lock);
	ctx->regions[slot] = r;
	pthread_mutex_unlock(&ctx->lock);
	SL_INFO(SL_SUB_MEM, "region %u: %zu bytes of GPU %d memory at %p", r.id, size, msg.a.gpu, ptr);
	return SLUICE_OK;
}

/* Unlink the region starting at ptr from the table, unless collectives still use it. */
static sluice_result_t region_take(struct sluice_ctx *ctx, const void *ptr, bool device, struct sl_region *out)
{
	struct sl_region *r = NULL;
	uint32_t busy = 0;

	pthread_mutex_lock(&ctx->lock);
	for (unsigned i = 0; i < SL_MAX_REGIONS && !r; i++)
		if (ctx->regions[i].used && ctx->regions[i].base == ptr)
			r = &ctx->regions[i];
	if (r && r->device != device)
		r = NULL;
	if (r && (busy = r->busy) == 0) {
		*out = *r;
		memset(r, 0, sizeof(*r));
	}
	pthread_mutex_unlock(&ctx->lock);
	if (!r)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       device ? "sluice_mem_deregister: %p is not a pointer sluice_mem_register took (or it "
					"was deregistered already): pass exactly what was registered"
				      : "sluice_mem_free: %p is not a pointer sluice_mem_alloc returned (or it was "
					"freed already): pass exactly what sluice_mem_alloc gave",
			       ptr);
	if (busy > 0)
		return sl_fail(SLUICE_ERR_INVALID_USAGE,
			       "%s: buffer %p is used by %u collective%s in flight: sluice_wait for them first",
			       device ? "sluice_mem_deregister" : "sluice_mem_free", ptr, busy, busy == 1 ? "" : "s");
	return SLUICE_OK;
}

/* Tell the dataplane that region r is gone. */
static sluice_result_t region_drop(struct sluice_ctx *ctx, const struct sl_region *r)
{
	struct sl_ctl_msg msg = {.type = SL_CTL_DEREG};
	struct sl_ctl_reply reply;

	msg.a.region = r->id;
	SL_INFO(SL_SUB_MEM, "region %u freed", r->id);
	return sl_ctl_call(ctx, &msg, -1, &reply);
}

sluice_result_t sluice_mem_deregister(sluice_ctx_t *ctx, void *ptr)
{
	struct sl_region r;
	sluice_result_t res;

	if (!ctx || !ptr)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_mem_deregister(ctx %p, ptr %p): both are needed",
			       (void *)ctx, ptr);
	res = region_take(ctx, ptr, true, &r);
	return res != SLUICE_OK ? res : region_drop(ctx, &r);
}

sluice_result_t sluice_mem_free(sluice_ctx_t *ctx, void *ptr)
{
	struct sl_region r = {.used = false};
	sluice_result_t res;

	if (!ctx || !ptr)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_mem_free(ctx %p, ptr %p): both are needed",
			       (void *)ctx, ptr);
	res = region_take(ctx, ptr, false, &r);
	if (res != SLUICE_OK)
		return res;
	res = region_drop(ctx, &r);
	/* Unmapped even when DEREG fails: the dataplane holds its own mapping, never ours. */
	munmap(r.base, r.mapped);
	return res;
}

bool sl_mem_is_device(const struct sluice_ctx *ctx, const void *ptr)
{
	uintptr_t p = (uintptr_t)ptr;

	for (unsigned i = 0; ptr && i < SL_MAX_REGIONS; i++) {
		const struct sl_region *r = &ctx->regions[i];
		if (r->base && p >= (uintptr_t)r->base && p - (uintptr_t)r->base < r->size)
			return r->device;
	}
	return false;
}

sluice_result_t sl_mem_find(struct sluice_ctx *ctx, const char *what, const void *ptr, size_t bytes,
			    struct sl_range *out)
{
	uintptr_t p = (uintptr_t)ptr;

	if (bytes == 0) {
		*out = (struct sl_range){.region = SL_REGION_NONE, .off = 0, .slot = -1};
		return SLUICE_OK;
	}
	for (unsigned i = 0; i < SL_MAX_REGIONS; i++) {
		const struct sl_region *r = &ctx->regions[i];
		uintptr_t base = (uintptr_t)r->base;

		if (r->base && p >= base && p - base <= r->size && bytes <= r->size - (p - base)) {
			*out = (struct sl_range){.region = r->id, .off = p - base, .slot = (int)i};
			return SLUICE_OK;
		}
	}
	return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
		       "%s %p (%zu bytes) is not inside memory from sluice_mem_alloc: allocate collective "
		       "buffers with sluice_mem_alloc",
		       what, ptr, bytes);
}

void sl_mem_unmap_all(struct sluice_ctx *ctx)
{
	for (unsigned i = 0; i < SL_MAX_REGIONS; i++) {
		if (ctx->regions[i].base && !ctx->regions[i].device)
			munmap(ctx->regions[i].base, ctx->regions[i].mapped);
		memset(&ctx->regions[i], 0, sizeof(ctx->regions[i]));
	}
}
