/*
 * gdma_cuda.c: the CUDA backend of the reducer.  The ring lives in pinned,
 * mapped host memory; a persistent kernel (gdma_kernel.cu) on its own
 * non-blocking stream consumes it.
 *
 * The kernel's life, and why: a kernel that never ends would make every
 * cudaDeviceSynchronize of the application (which waits for all streams of
 * the context, non-blocking ones too) hang.  So the kernel runs while work
 * flows and exits when the engine says so: sl_gdma_progress sets the ring's
 * stop word once nothing has been outstanding for idle_ns, and the next post
 * launches it again (a launch per burst of work, never per chunk; a post
 * that finds the kernel still exiting is launched by the progress that sees
 * it gone).  The
 * application's synchronize therefore returns at most idle_ns after the last
 * chunk it depends on was applied.  Should the engine be unable to say so
 * (blocked in another CUDA call), each block exits by itself after
 * self_exit_ns without work, and progress relaunches the kernel for any work
 * posted meanwhile.  Being non-blocking, the stream never
 * serializes with the application's legacy default stream.  The same holds
 * for the calls that synchronize the whole device implicitly (cudaFree,
 * cudaFreeHost, cudaHostUnregister): they wait for the kernel too, so they
 * return once the engine lets it go idle; a thread that is itself the
 * engine's only driver must call sl_gdma_stop before them.  At exit an
 * atexit handler sets every stop word, so the runtime's teardown finds the
 * kernels ended; if the process dies, the driver ends them with its context.
 *
 * Every call that picks a device restores the caller's current device: in
 * embedded mode the engine may run on the application's own thread.
 */
#include "gdma_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "gdma_kernel.h"

struct cuda_state {
	int device;
	cudaStream_t stream;     /* non-blocking: the kernel's alone */
	cudaStream_t aux;        /* non-blocking: the engine's scratch allocations */
	void *ring_dev;          /* the ring's shared part as the device sees it */
	bool posted;             /* work posted since the last progress */
	bool stopping;           /* told to stop, not yet seen to exit */
	uint64_t last_busy_ns;   /* when progress last saw work outstanding */
	uint64_t last_check_ns;  /* when progress last asked whether the kernel lives */
	struct sl_gdma *next;    /* the list the atexit handler walks */
};

#define CHECK_EVERY_NS 1000000ull /* how often a busy kernel is asked whether it died */
#define SELF_EXIT_MIN_NS 10000000ull /* a block's own idle exit: well after the engine's */

static uint64_t self_exit_ns(const struct sl_gdma *g)
{
	if (g->cfg.idle_ns > UINT64_MAX / 10)
		return UINT64_MAX;
	return g->cfg.idle_ns * 10 > SELF_EXIT_MIN_NS ? g->cfg.idle_ns * 10 : SELF_EXIT_MIN_NS;
}

/* ---- bookkeeping ---- */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;
static struct sl_gdma *live;

/* At exit, tell every kernel to stop before the CUDA runtime tears down. */
static void stop_all_at_exit(void)
{
	pthread_mutex_lock(&live_lock);
	for (struct sl_gdma *g = live; g; g = ((struct cuda_state *)g->state)->next)
		__atomic_store_n(&g->ring.sh->stop, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&live_lock);
}

static void register_atexit(void)
{
	atexit(stop_all_at_exit);
}

static void live_add(struct sl_gdma *g)
{
	pthread_once(&live_once, register_atexit);
	pthread_mutex_lock(&live_lock);
	((struct cuda_state *)g->state)->next = live;
	live = g;
	pthread_mutex_unlock(&live_lock);
}

static void live_del(struct sl_gdma *g)
{
	pthread_mutex_lock(&live_lock);
	for (struct sl_gdma **p = &live; *p; p = &((struct cuda_state *)(*p)->state)->next)
		if (*p == g) {
			*p = ((struct cuda_state *)g->state)->next;
			break;
		}
	pthread_mutex_unlock(&live_lock);
}

static int cuda_fail(struct sl_gdma *g, int rc, cudaError_t e, const char *what)
{
	struct cuda_state *st = g->state;

	return sl_gdma_fail(g->why, sizeof(g->why), rc, "gpu_dma: %s on CUDA device %d failed: %s (%s)", what,
			    st->device, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Make st->device current; *prev is what to restore. */
static cudaError_t enter(const struct cuda_state *st, int *prev)
{
	cudaError_t e = cudaGetDevice(prev);

	return e == cudaSuccess ? cudaSetDevice(st->device) : e;
}

static void leave(int prev)
{
	cudaSetDevice(prev);
}

/* ---- opening ---- */

static int check_device(struct sl_gdma *g)
{
	struct cuda_state *st = g->state;
	int n = 0, uva = 0, hostptr = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n == 0)
		return sl_gdma_fail(g->why, sizeof(g->why), -ENODEV, "gpu_dma: no CUDA device to reduce on "
				    "(%s): run where a GPU and its driver are present, or use the CPU backend",
				    e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices");
	if (st->device < 0 || st->device >= n)
		return sl_gdma_fail(g->why, sizeof(g->why), -ENODEV, "gpu_dma: CUDA device %d does not exist "
				    "(this machine has %d)", st->device, n);
	cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, st->device);
	cudaDeviceGetAttribute(&hostptr, cudaDevAttrCanUseHostPointerForRegisteredMem, st->device);
	if (!uva || !hostptr)
		return sl_gdma_fail(g->why, sizeof(g->why), -ENOTSUP, "gpu_dma: CUDA device %d cannot use host "
				    "pointers of pinned memory directly (unified addressing %d, host pointers %d); "
				    "the work ring needs both", st->device, uva, hostptr);
	return 0;
}

/* On the current device: can every block be resident at once? */
static int check_blocks(struct sl_gdma *g)
{
	struct cuda_state *st = g->state;
	uint32_t max_blocks = 0;
	cudaError_t e = (cudaError_t)sl_gdma_kernel_max_blocks(g->cfg.threads, &max_blocks);

	if (e != cudaSuccess)
		return cuda_fail(g, -EIO, e, "asking how many consumer blocks fit");
	if (g->cfg.blocks > g->cfg.slots)
		return sl_gdma_fail(g->why, sizeof(g->why), -EINVAL, "gpu_dma: %u consumer blocks need at least "
				    "as many ring slots (have %u)", g->cfg.blocks, g->cfg.slots);
	if (g->cfg.blocks > max_blocks)
		return sl_gdma_fail(g->why, sizeof(g->why), -EINVAL, "gpu_dma: %u blocks of %u threads cannot all "
				    "be resident on CUDA device %d (at most %u): the persistent kernel needs them all",
				    g->cfg.blocks, g->cfg.threads, st->device, max_blocks);
	return 0;
}

static int make_ring(struct sl_gdma *g)
{
	struct cuda_state *st = g->state;
	size_t bytes = sl_gdma_ring_bytes(g->cfg.slots) + g->cfg.arena_bytes; /* the ring, then the arena */
	void *mem = NULL;
	cudaError_t e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);

	if (e != cudaSuccess)
		return cuda_fail(g, -EIO, e, "creating the consumer's stream");
	e = cudaStreamCreateWithFlags(&st->aux, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		cudaStreamDestroy(st->stream);
		return cuda_fail(g, -EIO, e, "creating the scratch allocations' stream");
	}
	e = cudaHostAlloc(&mem, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
	if (e == cudaSuccess) {
		sl_gdma_ring_init(&g->ring, mem, g->cfg.slots, 0);
		e = cudaHostGetDevicePointer(&st->ring_dev, mem, 0);
		if (e == cudaSuccess)
			return 0;
		cudaFreeHost(mem);
	}
	cudaStreamDestroy(st->aux);
	cudaStreamDestroy(st->stream);
	return cuda_fail(g, mem ? -EIO : -ENOMEM, e,
			 mem ? "mapping the work ring for the device" : "allocating the pinned work ring and landing arena");
}

static int cuda_open(struct sl_gdma *g)
{
	struct cuda_state *st = calloc(1, sizeof(*st));
	int prev = 0, rc;
	cudaError_t e;

	if (!st)
		return sl_gdma_fail(g->why, sizeof(g->why), -ENOMEM, "gpu_dma: out of memory");
	st->device = g->cfg.device;
	g->state = st;
	rc = check_device(g);
	if (rc == 0) {
		e = enter(st, &prev);
		rc = e != cudaSuccess ? cuda_fail(g, -EIO, e, "selecting the device") : check_blocks(g);
		if (rc == 0)
			rc = make_ring(g);
		if (e == cudaSuccess)
			leave(prev);
	}
	if (rc) {
		free(st);
		g->state = NULL;
		return rc;
	}
	live_add(g);
	return 0;
}

/* ---- the kernel's life ---- */

/* Ask the kernel to stop: it finishes the item in hand, no more. */
static void request_stop(struct sl_gdma *g)
{
	struct cuda_state *st = g->state;

	if (!g->running || st->stopping)
		return;
	__atomic_store_n(&g->ring.sh->stop, 1, __ATOMIC_RELEASE);
	st->stopping = true;
}

/* Whether the stopping kernel has exited (waiting for it if wait); once it
 * has, the stop word is cleared for the next launch. */
static bool stopped(struct sl_gdma *g, bool wait)
{
	struct cuda_state *st = g->state;
	cudaError_t e = wait ? cudaStreamSynchronize(st->stream) : cudaStreamQuery(st->stream);

	if (e == cudaErrorNotReady)
		return false;
	__atomic_store_n(&g->ring.sh->stop, 0, __ATOMIC_RELEASE);
	st->stopping = false;
	g->running = false;
	if (e != cudaSuccess) {
		g->failed = true;
		cuda_fail(g, -EIO, e, "the persistent reduction kernel");
	}
	return true;
}

/* Stop the kernel and wait for it. */
static int stop_kernel(struct sl_gdma *g)
{
	if (g->running) {
		request_stop(g);
		stopped(g, true);
	}
	return g->failed ? -EIO : 0;
}

/* Launch from the oldest unreaped ticket: the kernel skips any it finds done,
 * so work is applied once across a stop and restart. */
static int launch(struct sl_gdma *g)
{
	struct cuda_state *st = g->state;
	int prev;
	cudaError_t e = enter(st, &prev);

	if (e == cudaSuccess) {
		e = (cudaError_t)sl_gdma_kernel_launch(st->ring_dev, g->cfg.slots, g->ring.tail, g->ring.head,
						       g->epoch, self_exit_ns(g), g->cfg.blocks, g->cfg.threads,
						       st->stream);
		leave(prev);
	}
	if (e != cudaSuccess) {
		g->failed = true;
		return cuda_fail(g, -EIO, e, "launching the persistent reduction kernel");
	}
	g->running = true;
	return 0;
}

/* A post while the kernel is stopping waits for progress to relaunch it. */
static int cuda_kick(struct sl_gdma *g)
{
	struct cuda_state *st = g->state;

	st->posted = true;
	return g->running ? 0 : launch(g);
}

/* A kernel that ended unasked either faulted or had its blocks exit idle
 * (self_exit_ns) while work was being posted: that work is relaunched. */
static void check_alive(struct sl_gdma *g, uint64_t now_ns)
{
	struct cuda_state *st = g->state;
	cudaError_t e;

	if (now_ns - st->last_check_ns < CHECK_EVERY_NS)
		return;
	st->last_check_ns = now_ns;
	e = cudaStreamQuery(st->stream);
	if (e == cudaErrorNotReady)
		return;
	g->running = false;
	if (e != cudaSuccess) {
		g->failed = true;
		cuda_fail(g, -EIO, e, "the persistent reduction kernel");
	} else if (sl_gdma_ring_pending(&g->ring)) {
		launch(g);
	}
}

/* An idle kernel is told to stop and left to exit on its own: the engine
 * never blocks on the GPU here.  Its wait could be on a kernel not yet
 * started, queued behind others (compute-sanitizer seemed to run kernels
 * one at a time; a full GPU delays them) that only engines stuck in such
 * waits would stop: with two channels under memcheck, that hung. */
static void cuda_progress(struct sl_gdma *g, uint64_t now_ns)
{
	struct cuda_state *st = g->state;

	if (st->stopping) {
		if (stopped(g, false) && !g->failed && sl_gdma_ring_pending(&g->ring)) {
			st->last_busy_ns = now_ns;
			launch(g);
		}
		return;
	}
	if (!g->running)
		return;
	if (st->posted || sl_gdma_ring_pending(&g->ring)) {
		st->posted = false;
		st->last_busy_ns = now_ns;
		check_alive(g, now_ns);
	} else if (now_ns - st->last_busy_ns >= g->cfg.idle_ns) {
		request_stop(g);
	}
}

static int cuda_stop(struct sl_gdma *g)
{
	return stop_kernel(g);
}

static void cuda_close(struct sl_gdma *g)
{
	struct cuda_state *st = g->state;

	stop_kernel(g);
	live_del(g);
	cudaStreamDestroy(st->aux);
	cudaStreamDestroy(st->stream);
	cudaFreeHost(g->ring.sh);
	free(st);
}

/* ---- the engine's device scratch ---- */

/* On the reducer's own aux stream, made when it opened: a stream made later,
 * on the data path, takes the context's write lock, and under
 * compute-sanitizer that waited forever for another engine's stream query,
 * itself waiting for a kernel that only the blocked engine would stop. */
int sl_gdma_dev_alloc(struct sl_gdma *g, uint64_t bytes, void **p, char *err, size_t errlen)
{
	struct cuda_state *st = g->state;
	int prev = -1;
	cudaError_t e;

	if (g->ops != &sl_gdma_cuda_ops)
		return sl_gdma_fail(err, errlen, -EINVAL, "gpu_dma: device scratch asked of a CPU reducer");
	if ((e = enter(st, &prev)) == cudaSuccess && (e = cudaMallocAsync(p, bytes ? bytes : 1, st->aux)) == cudaSuccess)
		e = cudaStreamSynchronize(st->aux);
	if (prev >= 0)
		leave(prev);
	if (e != cudaSuccess)
		return sl_gdma_fail(err, errlen, -ENOMEM, "gpu_dma: allocating %llu bytes on GPU %d failed: %s",
				    (unsigned long long)bytes, st->device, cudaGetErrorString(e));
	return 0;
}

void sl_gdma_dev_free(struct sl_gdma *g, void *p)
{
	struct cuda_state *st = g->state;
	int prev = -1;

	if (!p || g->ops != &sl_gdma_cuda_ops)
		return;
	if (enter(st, &prev) == cudaSuccess)
		cudaFreeAsync(p, st->aux);
	if (prev >= 0)
		leave(prev);
}

const struct gdma_backend_ops sl_gdma_cuda_ops = {
	.open = cuda_open, .close = cuda_close, .kick = cuda_kick, .progress = cuda_progress, .stop = cuda_stop,
	.restart = request_stop,
};
