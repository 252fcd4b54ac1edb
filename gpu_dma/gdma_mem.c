/*
 * gdma_mem.c: what the dataplane needs to know about an application's GPU
 * buffers.  Which kind of memory a pointer is, whether the reducer can write
 * it, and CUDA IPC handles flattened to bytes so that the attach socket can
 * carry a device buffer from the application to sluiced.  Also pinning the
 * mempool's host memory so the kernel reads payloads where they landed.
 */
#include "gdma_impl.h"

#include <errno.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

_Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(((struct sl_gdma_ipc *)0)->handle),
	       "struct sl_gdma_ipc holds a whole cudaIpcMemHandle_t");

typedef CUresult (*range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr p);

/* cuMemGetAddressRange through the runtime's entry-point lookup: linking
 * libcuda itself would make every program refuse to start on a machine
 * without the driver, where it should say "no GPU" instead. */
static range_fn address_range(void)
{
	static range_fn fn;
	enum cudaDriverEntryPointQueryResult q;

	if (!fn && (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&fn, 12000,
						     cudaEnableDefault, &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess))
		fn = NULL;
	return fn;
}

static int device_range(const void *p, uint64_t len, struct sl_gdma_mem_info *info, char *err, size_t errlen)
{
	range_fn fn = address_range();
	CUdeviceptr base = 0;
	size_t size = 0;
	uintptr_t at = (uintptr_t)p;

	if (!fn || fn(&base, &size, (CUdeviceptr)at) != CUDA_SUCCESS)
		return sl_gdma_fail(err, errlen, -EIO, "gpu_dma: could not find the allocation holding device "
				    "pointer %p (cuMemGetAddressRange)", p);
	info->base = (void *)(uintptr_t)base;
	info->size = size;
	if (len > size - (at - base))
		return sl_gdma_fail(err, errlen, -EFAULT, "gpu_dma: device range %p + %llu runs past the end of "
				    "its allocation (%p, %zu bytes)", p, (unsigned long long)len, info->base, size);
	return 0;
}

int sl_gdma_mem_query(const void *p, uint64_t len, struct sl_gdma_mem_info *info, char *err, size_t errlen)
{
	struct cudaPointerAttributes at;
	cudaError_t e = cudaPointerGetAttributes(&at, p);

	memset(info, 0, sizeof(*info));
	info->device = -1;
	if (e != cudaSuccess) {
		cudaGetLastError(); /* no driver or no device: nothing of it is GPU memory */
		return 0;
	}
	switch (at.type) {
	case cudaMemoryTypeHost:
		info->kind = SL_GDMA_MEM_PINNED;
		return 0;
	case cudaMemoryTypeDevice: {
		/* cuMemGetAddressRange needs the device's context current on this
		 * thread (the dataplane's server thread has none of its own) */
		int prev = -1, rc;
		info->kind = SL_GDMA_MEM_DEVICE;
		info->device = at.device;
		if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(at.device) != cudaSuccess)
			return sl_gdma_fail(err, errlen, -EIO, "gpu_dma: cannot make GPU %d current to inspect %p",
					    at.device, p);
		rc = device_range(p, len, info, err, errlen);
		cudaSetDevice(prev);
		return rc;
	}
	case cudaMemoryTypeManaged:
		info->kind = SL_GDMA_MEM_MANAGED;
		info->device = at.device;
		return 0;
	default:
		return 0;
	}
}

int sl_gdma_mem_check(const void *p, uint64_t len, int device, char *err, size_t errlen)
{
	struct sl_gdma_mem_info info;
	int rc = sl_gdma_mem_query(p, len, &info, err, errlen);

	if (rc)
		return rc;
	switch (info.kind) {
	case SL_GDMA_MEM_DEVICE:
		if (info.device == device)
			return 0;
		return sl_gdma_fail(err, errlen, -EFAULT, "gpu_dma: buffer %p is memory of GPU %d but the "
				    "reducer runs on GPU %d: use a communicator on GPU %d's dataplane, or "
				    "allocate the buffer on GPU %d", p, info.device, device, info.device, device);
	case SL_GDMA_MEM_PINNED:
		return 0;
	case SL_GDMA_MEM_MANAGED:
		return sl_gdma_fail(err, errlen, -EFAULT, "gpu_dma: buffer %p is managed memory "
				    "(cudaMallocManaged), which cannot be shared with the dataplane: allocate "
				    "it with cudaMalloc", p);
	default:
		return sl_gdma_fail(err, errlen, -EFAULT, "gpu_dma: buffer %p is ordinary host memory that "
				    "the GPU cannot reach: allocate it with sluice_mem_alloc or cudaMalloc", p);
	}
}

int sl_gdma_ipc_export(const void *p, uint64_t len, struct sl_gdma_ipc *out, char *err, size_t errlen)
{
	struct sl_gdma_mem_info info;
	cudaIpcMemHandle_t h;
	int rc = sl_gdma_mem_query(p, len, &info, err, errlen);
	cudaError_t e;

	if (rc)
		return rc;
	if (info.kind != SL_GDMA_MEM_DEVICE)
		return sl_gdma_fail(err, errlen, -EFAULT, "gpu_dma: only cudaMalloc'd device memory can be "
				    "exported to the dataplane, and %p is not", p);
	e = cudaIpcGetMemHandle(&h, info.base);
	if (e != cudaSuccess)
		return sl_gdma_fail(err, errlen, -EIO, "gpu_dma: exporting device buffer %p failed: %s (memory "
				    "from cudaMallocAsync pools or the VMM API needs another handle type)", p,
				    cudaGetErrorString(e));
	memset(out, 0, sizeof(*out));
	memcpy(out->handle, &h, sizeof(h));
	out->offset = (uint64_t)((uintptr_t)p - (uintptr_t)info.base);
	out->size = len;
	out->device = info.device;
	return 0;
}

int sl_gdma_ipc_import(const struct sl_gdma_ipc *in, void **base, void **p, char *err, size_t errlen)
{
	cudaIpcMemHandle_t h;
	int prev = 0;
	cudaError_t e = cudaGetDevice(&prev);

	memcpy(&h, in->handle, sizeof(h));
	if (e == cudaSuccess)
		e = cudaSetDevice(in->device);
	if (e == cudaSuccess) {
		e = cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess);
		cudaSetDevice(prev);
	}
	if (e != cudaSuccess)
		return sl_gdma_fail(err, errlen, -EIO, "gpu_dma: opening a device buffer exported from GPU %d "
				    "failed: %s (the exporter must still hold it, and IPC handles do not open in "
				    "the process that made them)", in->device, cudaGetErrorString(e));
	*p = (uint8_t *)*base + in->offset;
	return 0;
}

int sl_gdma_ipc_close(void *base, char *err, size_t errlen)
{
	cudaError_t e = cudaIpcCloseMemHandle(base);

	if (e != cudaSuccess)
		return sl_gdma_fail(err, errlen, -EIO, "gpu_dma: closing imported device buffer %p failed: %s",
				    base, cudaGetErrorString(e));
	return 0;
}

int sl_gdma_host_register(void *p, uint64_t len, char *err, size_t errlen)
{
	cudaError_t e = cudaHostRegister(p, len, cudaHostRegisterMapped | cudaHostRegisterPortable);

	if (e != cudaSuccess)
		return sl_gdma_fail(err, errlen, -EIO, "gpu_dma: pinning host memory %p + %llu for the GPU "
				    "failed: %s", p, (unsigned long long)len, cudaGetErrorString(e));
	return 0;
}

int sl_gdma_host_unregister(void *p, char *err, size_t errlen)
{
	cudaError_t e = cudaHostUnregister(p);

	if (e != cudaSuccess)
		return sl_gdma_fail(err, errlen, -EIO, "gpu_dma: unpinning host memory %p failed: %s", p,
				    cudaGetErrorString(e));
	return 0;
}
