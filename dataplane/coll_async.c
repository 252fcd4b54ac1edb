/*
 * coll_async.c: collectives whose packets a reducer applies later.
 *
 * When a collective's buffers are GPU memory the engine cannot touch them:
 * each accepted packet becomes a work item on the GPU's gpu_dma reducer (a
 * persistent kernel reducing straight into device memory), and the
 * schedule is gated (schedule.h): a chunk counts as arrived only once the
 * ticket of its last packet is done, so a forward never reads, and the next
 * contribution in the reduction order never races, memory the kernel is
 * still writing.  Sends of device memory go through the GPU's stager: a
 * device-to-host copy into a pinned buffer per chunk, sent once it lands
 * and given back once acknowledged.
 *
 * --gate-host runs host collectives through the same path with gpu_dma's
 * CPU consumer, so that everything here is tested on machines without a GPU.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "dp.h"

#define NO_STAGE UINT32_MAX
#define DRAIN_NS 2000000000ull /* a reducer that applies nothing for this long at teardown has failed */

/* ---- one reducer per GPU ---- */

static int gdev_open(struct dp_engine *e, int gpu, struct dp_gdev **out, char *why)
{
	struct sl_gdma_cfg cfg = { .backend = gpu < 0 ? SL_GDMA_CPU : SL_GDMA_CUDA, .device = gpu,
				   .blocks = e->gpu_blocks, .arena_bytes = DP_ARENA_BYTES };
	struct dp_gdev *d = calloc(1, sizeof(*d));
	const char *idle = getenv("SLUICE_GPU_IDLE_US"); /* how long the kernel outlives its work */
	char err[256];

	if (idle && atoll(idle) > 0)
		cfg.idle_ns = (uint64_t)atoll(idle) * 1000;

	if (!d) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "the dataplane is out of memory for a reducer");
		return -ENOMEM;
	}
	d->device = gpu;
	if (sl_gdma_open(&d->g, &cfg, err, sizeof(err)) != 0 ||
	    (gpu >= 0 && sl_gdma_stager_open(&d->st, gpu, DP_STAGE_BUFS, 64ull * e->payload, err, sizeof(err)) != 0)) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "dataplane node %u cannot reduce into GPU %d: %s", e->node, gpu, err);
		if (d->g)
			sl_gdma_close(d->g);
		free(d);
		return -ENODEV;
	}
	*out = d;
	return 0;
}

int dp_gdev_for(struct dp_engine *e, int gpu, struct dp_gdev **gdev, char *why)
{
	struct dp_gdev **slot = gpu < 0 ? &e->cpu_gdev : &e->gdev[gpu];

	*gdev = NULL;
	if (gpu < 0 && !e->gate_host)
		return 0;
	if (gpu >= DP_MAX_GPUS) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "GPU %d is past the %u this dataplane serves", gpu, DP_MAX_GPUS);
		return -EINVAL;
	}
	if (!*slot) {
		int rc = gdev_open(e, gpu, slot, why);
		if (rc)
			return rc;
		e->gdevs++;
	}
	*gdev = *slot;
	return 0;
}

static void gdev_close(struct dp_gdev *d)
{
	if (!d)
		return;
	sl_gdma_dev_free(d->g, d->kept);
	sl_gdma_close(d->g);
	if (d->st)
		sl_gdma_stager_close(d->st);
	free(d);
}

void dp_gdev_close_all(struct dp_engine *e)
{
	for (unsigned i = 0; i < DP_MAX_GPUS; i++) {
		gdev_close(e->gdev[i]);
		e->gdev[i] = NULL;
	}
	gdev_close(e->cpu_gdev);
	e->cpu_gdev = NULL;
	e->gdevs = 0;
}

/* Fail every collective running on d once its reducer has died. */
static void gdev_failed(struct dp_engine *e, struct dp_gdev *d)
{
	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		struct dp_comm *comm = &e->comms[i];
		for (struct dp_coll *k = comm->live ? comm->colls : NULL; k; k = k->next) {
			if (k->gdev == d) {
				dp_comm_fail(e, comm, SLUICE_ERR_SYSTEM, k->seq,
					     "the GPU reducer of dataplane node %u failed: %s", e->node,
					     sl_gdma_error(d->g));
				break;
			}
		}
	}
}

static uint32_t one_progress(struct dp_engine *e, struct dp_gdev *d, uint64_t now)
{
	uint32_t n;

	if (!d)
		return 0;
	n = sl_gdma_progress(d->g, now);
	if (sl_gdma_error(d->g))
		gdev_failed(e, d);
	return n;
}

uint32_t dp_gdev_progress(struct dp_engine *e)
{
	if (!e->gdevs) /* host memory only: walking 17 empty slots was ~100 instructions a pass */
		return 0;
	uint64_t now = sl_tp_poll_ns(e->tp);
	uint32_t n = one_progress(e, e->cpu_gdev, now);

	for (unsigned i = 0; i < DP_MAX_GPUS; i++)
		n += one_progress(e, e->gdev[i], now);
	return n;
}

/* ---- a collective's memory ---- */

/* Device scratch outlives its collective: a fresh allocation stops the
 * reducer's kernel first (dp_async_alloc), which a call per allocation
 * would pay in relaunches. */
static bool take_kept(struct dp_coll *k, uint64_t bytes)
{
	struct dp_gdev *d = k->gdev;

	if (!d->kept || d->kept_bytes < bytes)
		return false;
	k->dev_owned = d->kept;
	k->dev_owned_bytes = d->kept_bytes;
	d->kept = NULL;
	return true;
}

/* Keep the larger of k's scratch and the kept one, up to DP_GPU_KEEP_BYTES;
 * free the other.  Only scratch the kernel is done with comes here. */
static void keep(struct dp_coll *k)
{
	struct dp_gdev *d = k->gdev;

	if (k->dev_owned_bytes > DP_GPU_KEEP_BYTES || (d->kept && d->kept_bytes >= k->dev_owned_bytes)) {
		sl_gdma_dev_free(d->g, k->dev_owned);
	} else {
		if (d->kept)
			sl_gdma_dev_free(d->g, d->kept);
		d->kept = k->dev_owned;
		d->kept_bytes = k->dev_owned_bytes;
	}
}

int dp_async_alloc(struct dp_coll *k, uint64_t scratch, uint64_t snap, char *why)
{
	int gpu = k->gdev->device;

	k->stage_of = malloc((k->nmsgs ? k->nmsgs : 1) * sizeof(*k->stage_of));
	k->pend_cap = k->sched.chunks_left + 1;
	k->pend = malloc(k->pend_cap * sizeof(*k->pend));
	if (!k->stage_of || !k->pend) {
		sl_errmsg_format(why, SL_ERRMSG_LEN, "the dataplane is out of memory for a GPU collective");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < k->nmsgs; i++)
		k->stage_of[i] = NO_STAGE;
	if (gpu < 0 || scratch + snap == 0)
		return 0; /* the CPU stand-in's scratch is the host's (coll_run.c) */
	if (!take_kept(k, scratch + snap)) {
		/* The allocation waits for its stream: let our kernel go first.
		 * compute-sanitizer seemed to run kernels one at a time, so the
		 * wait could be on our own kernel, which only this thread stops;
		 * and the next launch, after it, sees the new memory. */
		sl_gdma_stop(k->gdev->g);
		if (sl_gdma_dev_alloc(k->gdev->g, scratch + snap, &k->dev_owned, why, SL_ERRMSG_LEN) != 0)
			return -ENOMEM;
		k->dev_owned_bytes = scratch + snap;
	}
	k->buf[SL_BUF_SCRATCH] = k->dev_owned;
	if (snap)
		k->buf[SL_BUF_SEND] = (uint8_t *)k->dev_owned + scratch;
	return 0;
}

/* ---- the in-place snapshot ---- */

/*
 * The input copy that in-place schedules run on (schedule.h) is reducer
 * work like any packet: copy items, posted as the ring has room, and until
 * the last is done the collective neither sends nor takes packets (which
 * would write the input before it is copied).  It was a blocking copy on a
 * stream of the engine's own: 7-11 us more per in-place call up to 4 KiB
 * on an H200 (perf/GPU-NOTES.md section 9).
 */
#define SNAP_POST_BYTES (1ull << 20) /* the most one post asks the ring's room for */

/* Post what the ring has room for; false once posting failed (k failed). */
static bool snap_post(struct dp_engine *e, struct dp_coll *k, bool *all)
{
	const uint8_t *src;
	uint8_t *dst;
	uint64_t len;
	uint32_t ticket;
	char err[256];

	while ((*all = !dp_snap_next(k, SNAP_POST_BYTES, &src, &dst, &len)) == false) {
		struct sl_gdma_work w = { .dst = dst, .src = src, .count = len, .dtype = SL_UINT8,
					  .kind = SL_GDMA_COPY };
		if (!sl_gdma_has_room(k->gdev->g, &w, false))
			break;
		if (sl_gdma_post(k->gdev->g, &w, &ticket, err, sizeof(err)) != 0) {
			dp_comm_fail(e, k->comm, SLUICE_ERR_INTERNAL, k->seq, "%s #%u on rank %u: posting the copy "
				     "of an in-place input to the reducer failed: %s", sl_coll_name(k->cmd.opcode),
				     k->seq, k->comm->rank, err);
			return false;
		}
		k->last_ticket = ticket;
		k->ticketed = true;
		k->snap_off += len;
	}
	return true;
}

/* Whether k's snapshot is taken; posts more of it on the way. */
static bool snapped(struct dp_engine *e, struct dp_coll *k)
{
	bool all;

	if (!snap_post(e, k, &all) || !all || !sl_gdma_done(k->gdev->g, k->last_ticket))
		return false;
	k->snapping = false;
	return true;
}

/* ---- receiving ---- */

bool dp_async_room(struct dp_coll *k, uint64_t bytes, bool copy)
{
	struct sl_gdma_work w = { .count = bytes ? bytes : 1, .dtype = SL_UINT8 };

	return sl_gdma_has_room(k->gdev->g, &w, copy);
}

int dp_async_post(struct dp_engine *e, struct dp_coll *k, const struct sl_action *a, const uint8_t *payload,
		  uint64_t len, bool copy)
{
	uint32_t esize = (uint32_t)sl_dtype_size(k->cmd.dtype), ticket;
	struct sl_gdma_work w = {
		.dst = k->buf[a->buf] + a->off, .a = k->buf[a->opnd_buf] + a->opnd_off, .src = payload,
		.count = len / esize, .dtype = k->cmd.dtype, .op = k->cmd.redop,
		.kind = a->apply == SL_APPLY_COPY ? SL_GDMA_COPY : SL_GDMA_REDUCE,
		.avg_div = k->cmd.redop == SL_AVG && a->finishes ? k->comm->nranks : 0,
		.payload_first = a->payload_first,
	};
	char err[256];
	int rc;

	if (len == 0)
		return 0;
	rc = copy ? sl_gdma_post_copy(k->gdev->g, &w, &ticket, err, sizeof(err))
		  : sl_gdma_post(k->gdev->g, &w, &ticket, err, sizeof(err));
	if (rc != 0) {
		/* room was checked first, so even -EAGAIN is a failure here */
		dp_comm_fail(e, k->comm, SLUICE_ERR_INTERNAL, k->seq, "%s #%u on rank %u: posting to the reducer "
			     "failed: %s", sl_coll_name(k->cmd.opcode), k->seq, k->comm->rank, err);
		return rc;
	}
	k->last_ticket = ticket;
	k->ticketed = true;
	return 0;
}

void dp_async_chunk_posted(struct dp_coll *k, const struct sl_action *a)
{
	struct dp_pending *p = &k->pend[k->pend_tail++ % k->pend_cap];

	*p = (struct dp_pending){ .ticket = k->last_ticket, .recv = a->recv, .chunk = a->chunk,
				  .ticketed = k->ticketed };
}

bool dp_async_reap(struct dp_engine *e, struct dp_coll *k)
{
	bool moved = false;

	if (k->snapping) {
		if (!snapped(e, k))
			return false;
		moved = true; /* packets deferred meanwhile may go now */
	}
	while (k->pend_head != k->pend_tail) {
		struct dp_pending *p = &k->pend[k->pend_head % k->pend_cap];
		if (p->ticketed && !sl_gdma_done(k->gdev->g, p->ticket))
			break;
		sl_sched_chunk_applied(&k->sched, p->recv, p->chunk);
		k->pend_head++;
		moved = true;
	}
	if (moved)
		k->last_progress_ns = sl_tp_poll_ns(e->tp);
	if (k->deferred && sl_gdma_reaped(k->gdev->g) != k->seen_reaped) {
		k->seen_reaped = sl_gdma_reaped(k->gdev->g);
		moved = true;
	}
	return moved;
}

/* ---- sending ---- */

bool dp_async_send(struct dp_engine *e, struct dp_coll *k, struct sl_tp_msg *m, const uint8_t *src, uint64_t len)
{
	uint32_t i = (uint32_t)(m - k->msgs), buf;
	char err[256];
	int rc;

	if (!k->gdev->st) {
		m->src = src;
		return true;
	}
	rc = sl_gdma_stage(k->gdev->st, src, len, &buf, err, sizeof(err));
	if (rc == -EAGAIN)
		return false;
	if (rc != 0) {
		dp_comm_fail(e, k->comm, SLUICE_ERR_SYSTEM, k->seq, "%s #%u on rank %u: staging a chunk of GPU "
			     "memory failed: %s", sl_coll_name(k->cmd.opcode), k->seq, k->comm->rank, err);
		return false;
	}
	k->stage_of[i] = buf;
	m->src = NULL; /* set once the copy has landed */
	return true;
}

bool dp_async_landed(struct dp_engine *e, struct dp_coll *k, struct sl_tp_msg *m)
{
	uint32_t buf = k->stage_of[m - k->msgs];
	int ready;

	if (buf == NO_STAGE)
		return true;
	ready = sl_gdma_stage_ready(k->gdev->st, buf);
	if (ready < 0)
		dp_comm_fail(e, k->comm, SLUICE_ERR_SYSTEM, k->seq, "%s #%u on rank %u: a device-to-host copy of "
			     "a chunk failed", sl_coll_name(k->cmd.opcode), k->seq, k->comm->rank);
	if (ready <= 0)
		return false;
	m->src = sl_gdma_stage_buf(k->gdev->st, buf);
	return true;
}

void dp_async_acked(struct dp_coll *k, struct sl_tp_msg *m)
{
	uint32_t i = (uint32_t)(m - k->msgs);

	if (k->stage_of[i] != NO_STAGE) {
		sl_gdma_stage_release(k->gdev->st, k->stage_of[i]);
		k->stage_of[i] = NO_STAGE;
	}
}

/* ---- teardown ---- */

void dp_async_fini(struct dp_coll *k)
{
	struct sl_gdma *g = k->gdev->g;
	uint64_t start = 0, now;

	/* The kernel may still write the buffers (a failed collective, a
	 * destroyed communicator): wait for what was posted, so that neither
	 * our scratch nor the application's memory is written after this. */
	while (k->ticketed && !sl_gdma_done(g, k->last_ticket) && !sl_gdma_error(g)) {
		now = dp_now_ns(NULL);
		if (!start)
			start = now;
		if (now - start > DRAIN_NS)
			break;
		sl_gdma_progress(g, now);
	}
	for (uint32_t i = 0; k->stage_of && i < k->msgs_used; i++)
		if (k->stage_of[i] != NO_STAGE)
			sl_gdma_stage_release(k->gdev->st, k->stage_of[i]);
	if (k->dev_owned && (!k->ticketed || sl_gdma_done(g, k->last_ticket)))
		keep(k);
	else if (k->dev_owned)
		sl_gdma_dev_free(k->gdev->g, k->dev_owned);
	k->dev_owned = NULL;
	free(k->stage_of);
	free(k->pend);
}
