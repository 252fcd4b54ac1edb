/*
 * gdma_nocuda.c: the CUDA half of gdma.h in a build without nvcc.  The
 * engine keeps one interface: asking for the CUDA backend, registering GPU
 * memory or staging from it fails with -ENOTSUP and says how to get a build
 * that can, and every pointer is plain host memory.
 */
#include "gdma_impl.h"

#include <errno.h>
#include <string.h>

#define NO_CUDA "gpu_dma: this sluice was built without CUDA; rebuild where nvcc is found " \
		"(meson setup -Dcuda=enabled) to use GPU buffers"

static int nocuda_open(struct sl_gdma *g)
{
	return sl_gdma_fail(g->why, sizeof(g->why), -ENOTSUP, NO_CUDA);
}

const struct gdma_backend_ops sl_gdma_cuda_ops = { .open = nocuda_open };

int sl_gdma_mem_query(const void *p, uint64_t len, struct sl_gdma_mem_info *info, char *err, size_t errlen)
{
	(void)p, (void)len, (void)err, (void)errlen;
	memset(info, 0, sizeof(*info));
	info->kind = SL_GDMA_MEM_PAGEABLE;
	info->device = -1;
	return 0;
}

int sl_gdma_mem_check(const void *p, uint64_t len, int device, char *err, size_t errlen)
{
	(void)p, (void)len, (void)device;
	return sl_gdma_fail(err, errlen, -ENOTSUP, NO_CUDA);
}

int sl_gdma_ipc_export(const void *p, uint64_t len, struct sl_gdma_ipc *out, char *err, size_t errlen)
{
	(void)p, (void)len, (void)out;
	return sl_gdma_fail(err, errlen, -ENOTSUP, NO_CUDA);
}

int sl_gdma_ipc_import(const struct sl_gdma_ipc *in, void **base, void **p, char *err, size_t errlen)
{
	(void)in, (void)base, (void)p;
	return sl_gdma_fail(err, errlen, -ENOTSUP, NO_CUDA);
}

int sl_gdma_ipc_close(void *base, char *err, size_t errlen)
{
	(void)base;
	return sl_gdma_fail(err, errlen, -ENOTSUP, NO_CUDA);
}

int sl_gdma_host_register(void *p, uint64_t len, char *err, size_t errlen)
{
	(void)p, (void)len;
	return sl_gdma_fail(err, errlen, -ENOTSUP, NO_CUDA);
}

int sl_gdma_host_unregister(void *p, char *err, size_t errlen)
{
	(void)p;
	return sl_gdma_fail(err, errlen, -ENOTSUP, NO_CUDA);
}

int sl_gdma_stager_open(struct sl_gdma_stager **s, int device, uint32_t nbufs, uint64_t buf_bytes, char *err,
			size_t len)
{
	(void)device, (void)nbufs, (void)buf_bytes;
	*s = NULL;
	return sl_gdma_fail(err, len, -ENOTSUP, NO_CUDA);
}

/* No stager can exist in this build: these are never reached with one. */
void sl_gdma_stager_close(struct sl_gdma_stager *s)
{
	(void)s;
}

int sl_gdma_stage(struct sl_gdma_stager *s, const void *dev_src, uint64_t bytes, uint32_t *buf, char *err,
		  size_t len)
{
	(void)s, (void)dev_src, (void)bytes, (void)buf;
	return sl_gdma_fail(err, len, -ENOTSUP, NO_CUDA);
}

int sl_gdma_stage_ready(struct sl_gdma_stager *s, uint32_t buf)
{
	(void)s, (void)buf;
	return -ENOTSUP;
}

void *sl_gdma_stage_buf(struct sl_gdma_stager *s, uint32_t buf)
{
	(void)s, (void)buf;
	return NULL;
}

void sl_gdma_stage_release(struct sl_gdma_stager *s, uint32_t buf)
{
	(void)s, (void)buf;
}

int sl_gdma_dev_alloc(struct sl_gdma *g, uint64_t bytes, void **p, char *err, size_t errlen)
{
	(void)g, (void)bytes, (void)p;
	return sl_gdma_fail(err, errlen, -ENOTSUP, NO_CUDA);
}

void sl_gdma_dev_free(struct sl_gdma *g, void *p)
{
	(void)g, (void)p;
}
