/*
 * engine.c: the dataplane's polling loop.
 *
 * One engine runs on one pinned core (or an application thread when
 * embedded).  Each pass it takes control requests from the server thread,
 * drains every client's submission ring, polls the transport (ports in,
 * ACKs and data out, timers) and advances running collectives.  When a pass
 * finds nothing to do it backs off in stages (pause, yield, nap) so that an
 * oversubscribed machine still makes progress: on these 2-core machines
 * two dataplanes and two ranks share the cores.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "dp.h"
#include "stall_watch.h"

#define CTL_SLOTS 64
/* The application drove the engine this recently: its thread stays off.
 * Each time it looks costs a wake-up, about 20 us of the core on these VMs,
 * so it looks once per holdoff; sl_dp_embedded_release calls it back sooner. */
#define DRIVEN_HOLDOFF_NS 1000000

uint64_t dp_now_ns(void *unused)
{
	struct timespec ts;
	(void)unused;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A quarter of the machine's memory, at least DP_STASH_LIMIT_FLOOR. */
static uint64_t stash_limit_default(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	uint64_t quarter = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 4 : 0;

	return quarter > DP_STASH_LIMIT_FLOOR ? quarter : DP_STASH_LIMIT_FLOOR;
}

int dp_engine_init(struct dp_engine *e, const struct dp_engine_cfg *cfg, char *err, size_t len)
{
	struct sl_tp_config tc;
	struct sl_tp_callbacks cb = {
		.deliver = dp_deliver, .acked = dp_msg_acked, .flow_dead = dp_flow_dead, .arg = e,
	};

	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->ctl_lock, NULL);
	e->node = cfg->node;
	e->channel = cfg->channel;
	e->timeout_ns = cfg->timeout_ns;
	e->local_per_pass = cfg->local_per_pass ? cfg->local_per_pass : DP_LOCAL_PER_PASS;
	e->gate_host = cfg->gate_host;
	e->gpu_blocks = cfg->gpu_blocks;
	e->stash_limit = cfg->stash_limit ? cfg->stash_limit : stash_limit_default();
	e->clock = cfg->clock.now_ns ? cfg->clock : (struct sl_clock){ .now_ns = dp_now_ns };
	sl_tp_config_default(&tc, cfg->node, cfg->max_frame);
	if (cfg->payload) {
		if (cfg->payload % 16 || cfg->payload + SL_FRAME_OVERHEAD > cfg->max_frame) {
			sl_errmsg_format(err, len, "payload %u does not fit the ports' %u-byte frames or is not a "
					 "multiple of 16: pick at most %u", cfg->payload, cfg->max_frame,
					 (cfg->max_frame - SL_FRAME_OVERHEAD) & ~15u);
			return -1;
		}
		tc.payload = cfg->payload;
	}
	tc.dead_ns = cfg->timeout_ns;
	if (cfg->window)
		tc.window = cfg->window;
	if (cfg->rto_min_ns)
		tc.rto_min_ns = cfg->rto_min_ns;
	if (cfg->rx_credit)
		tc.rx_credit = cfg->rx_credit;
	if (cfg->paths)
		tc.entropies = cfg->paths;
	e->payload = tc.payload;
	struct dp_wake *wake = cfg->wake ? cfg->wake : dp_wake_open(NULL, cfg->node, cfg->channel, true, err, len);
	if (!wake)
		return -1;
	dp_idle_init(&e->idle, &cfg->idle, wake);
	e->idle.all_links_wake = cfg->all_links_wake;
	if (dp_pool_init(&e->pool, err, len) != 0)
		goto fail;
	e->tp = sl_tp_create(&tc, &e->clock, &cb);
	if (!e->tp) {
		sl_errmsg_format(err, len, "cannot create the transport (out of memory?)");
		goto fail;
	}
	e->ctl_mem = calloc(1, sl_spsc_bytes(CTL_SLOTS, sizeof(struct dp_ctl_req)));
	if (!e->ctl_mem || !sl_spsc_attach(&e->ctl, e->ctl_mem, CTL_SLOTS, sizeof(struct dp_ctl_req), false)) {
		sl_errmsg_format(err, len, "cannot allocate the engine's control ring");
		goto fail;
	}
	return 0;
fail:
	if (e->tp)
		sl_tp_destroy(e->tp);
	free(e->ctl_mem);
	dp_pool_fini(&e->pool);
	dp_wake_close(wake);
	return -1;
}

/* Let go of a region: unmap host memory, close an imported GPU buffer (its
 * collectives are gone, and their work drained, before this runs).  Closing
 * waits for every kernel of the context, the reducer's persistent one too,
 * which only this thread would let go: stop it first (the next post
 * restarts it). */
static void region_release(struct dp_engine *e, struct dp_region *r)
{
	if (r->gpu < 0) {
		if (r->owner)
			munmap(r->base, r->size);
	} else if (r->ipc_base) {
		/* every channel stops its kernel; the owner, released last, closes */
		if (e->gdev[r->gpu])
			sl_gdma_stop(e->gdev[r->gpu]->g);
		if (r->owner)
			sl_gdma_ipc_close(r->ipc_base, NULL, 0);
	}
	r->live = false;
}

static void client_unmap(struct dp_engine *e, struct dp_client *c)
{
	for (unsigned i = 0; i < SL_MAX_REGIONS; i++)
		if (c->regions[i].live)
			region_release(e, &c->regions[i]);
	if (c->page && c->owner)
		munmap(c->page, c->page_len);
	memset(c, 0, sizeof(*c));
}

void dp_engine_fini(struct dp_engine *e)
{
	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		if (e->comms[i].live)
			dp_comm_release(e, &e->comms[i]);
	for (unsigned i = 0; i < DP_MAX_CLIENTS; i++)
		if (e->clients[i].live)
			client_unmap(e, &e->clients[i]);
	dp_gdev_close_all(e);
	sl_tp_destroy(e->tp);
	dp_notices_free_all(e);
	free(e->ctl_mem);
	pthread_mutex_destroy(&e->ctl_lock);
	dp_coll_free_all(e);
	dp_pool_fini(&e->pool);
	dp_wake_close(e->idle.wake);
}

/* ---- control requests (server threads -> engine) ---- */

bool dp_engine_ctl_post(struct dp_engine *e, struct dp_ctl_req *req)
{
	struct sl_spsc prod;
	bool queued;

	/* One producer at a time (each client has a server thread), so a fresh producer handle per call is safe. */
	pthread_mutex_lock(&e->ctl_lock);
	sl_spsc_attach(&prod, e->ctl_mem, CTL_SLOTS, sizeof(*req), true);
	queued = sl_spsc_enqueue(&prod, req);
	pthread_mutex_unlock(&e->ctl_lock);
	if (!queued)
		return false;
	/* A parked or sleeping engine would see it only after 1 ms, and a
	 * destroy waits for every rank's engine to see its own (closing words,
	 * coll_run.c).  The application that drove it waits for this answer:
	 * it drives no more (the order is park's, seq_cst). */
	atomic_store(&e->drove_ns, 0);
	atomic_store(&e->driven_ns, 0);
	if (atomic_load(&e->parked)) {
		atomic_fetch_add(&e->park_seq, 1);
		syscall(SYS_futex, &e->park_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	dp_wake_kick(e->idle.wake);
	return true;
}

/* One call's answer and what the engine reads of it, on the heap: a call
 * that gives up on its engine leaves them to the answer, if one comes. */
struct dp_ctl_call {
	_Atomic int32_t done; /* first: dp_ctl_answer frees an abandoned call through it */
	char why[SL_ERRMSG_LEN];
	union {
		struct dp_client client;
		struct dp_region region;
		struct dp_comm comm;
	} obj;
	struct dp_engine *e;
	struct dp_ctl_req q;  /* the request as the engine takes it */
	bool queued;          /* q is in e's ring: not yet while the ring is full */
};
#define CTL_ABANDONED INT32_MIN

void dp_ctl_answer(_Atomic int32_t *done, int32_t res)
{
	if (atomic_exchange_explicit(done, res + 1, memory_order_acq_rel) == CTL_ABANDONED)
		free(done); /* a struct dp_ctl_call */
}

static size_t ctl_obj_bytes(uint32_t op)
{
	switch (op) {
	case DP_CTL_ADD_CLIENT: return sizeof(struct dp_client);
	case DP_CTL_ADD_REGION: return sizeof(struct dp_region);
	case DP_CTL_ADD_COMM: return sizeof(struct dp_comm);
	}
	return 0;
}

pid_t dp_engine_holder(const struct dp_engine *e, bool *app)
{
	pid_t own = (pid_t)atomic_load(&e->tid), in_pass = (pid_t)atomic_load(&e->pass_tid);
	bool other = atomic_load(&e->busy) && in_pass != own;

	if (app)
		*app = other;
	return other ? in_pass : own;
}

/* Whether req's client gave a SLUICE_TIMEOUT (at HELLO) below e's timeout. */
static bool client_sooner(const struct dp_engine *e, const struct dp_ctl_req *req)
{
	return req->patience_ms && (uint64_t)req->patience_ms * 1000000 < e->timeout_ns;
}

/* How long a request waits for an engine that takes no pass: e's timeout,
 * or its client's SLUICE_TIMEOUT where that is shorter, so that the answer
 * (no_answer's) reaches the client before its own wait for it ends. */
static uint64_t patience_ns(const struct dp_engine *e, const struct dp_ctl_req *req)
{
	return client_sooner(e, req) ? (uint64_t)req->patience_ms * 1000000 : e->timeout_ns;
}

/* Whether e has taken no pass for limit_ns: *passes and *since are the
 * count last seen and when it was seen to move, *ran its thread's CPU time
 * when first seen standing still (read once a standstill, not each look:
 * a destroy looks every 20 us).  A slow engine that comes round (a long
 * control request, a destroy waiting for its peers) is waited for; its
 * peers give up on one that does not after as long. */
static bool engine_stuck(const struct dp_engine *e, uint64_t limit_ns, uint64_t *passes, uint64_t *since,
			 struct dp_cpu_mark *ran)
{
	uint64_t now = dp_now_ns(NULL), seen = atomic_load_explicit(&e->passes, memory_order_relaxed);

	if (seen != *passes) {
		*passes = seen;
		*since = now;
		ran->tid = 0;
		return false;
	}
	if (!ran->tid)
		*ran = dp_cpu_mark(dp_engine_holder(e, NULL));
	return now - *since >= limit_ns;
}

static const char *ctl_op_name(uint32_t op)
{
	static const char *const names[] = {
		[DP_CTL_ADD_CLIENT] = "to add a client", [DP_CTL_DEL_CLIENT] = "to let go of a client",
		[DP_CTL_ADD_REGION] = "to add a memory region", [DP_CTL_DEL_REGION] = "to remove a memory region",
		[DP_CTL_ADD_COMM] = "to add a communicator", [DP_CTL_DEL_COMM] = "to destroy a communicator",
	};

	return op < sizeof(names) / sizeof(names[0]) && names[op] ? names[op] : "of an unknown kind";
}

/* Why e does not come round: which engine, for how long (held_s, by
 * which measure), where the thread that holds it is (ran: its CPU time
 * when the engine last came round), what was not done (undone, may be
 * empty), and what to do. */
static void stuck_why(const struct dp_engine *e, double held_s, const char *measure, struct dp_cpu_mark ran,
		      const char *undone, char *why)
{
	char at[512];
	bool app;
	pid_t holder = dp_engine_holder(e, &app);

	dp_stall_where(holder, app ? "the application's thread" : "its thread", ran, at, sizeof(at));
	sl_errmsg_format(why, SL_ERRMSG_LEN, "channel %u's engine (dataplane node %u) has not come round for "
			 "%.1f s (%s): %s%s: %s", e->channel, e->node, held_s, measure, at, undone,
			 app ? "that thread drives the engine (embedded mode) and has not come out of its pass: find "
			 "what holds it there (a debugger, a signal handler, a lock), or end the application"
			     : "restart sluiced (its log says where the engine stopped)");
}

static int32_t no_answer(const struct dp_engine *e, struct dp_ctl_req *req, uint64_t since, struct dp_cpu_mark ran)
{
	char undone[64];

	snprintf(undone, sizeof(undone), "; the request %s was not applied", ctl_op_name(req->op));
	stuck_why(e, (dp_now_ns(NULL) - since) / 1e9, client_sooner(e, req) ? "the client's SLUICE_TIMEOUT" : "its timeout",
		  ran, undone, req->why);
	return DP_CTL_NO_ANSWER;
}

bool dp_engine_stalled(const struct dp_engine *e, uint64_t look_ns, const struct dp_stall_watch *seen, char *why)
{
	uint64_t passes = atomic_load_explicit(&e->passes, memory_order_relaxed), since = dp_now_ns(NULL), now;
	struct dp_cpu_mark ran = dp_cpu_mark(dp_engine_holder(e, NULL));
	char measure[192] = "as long as the dataplane looked";

	do {
		usleep(1000);
		if (atomic_load_explicit(&e->passes, memory_order_relaxed) != passes)
			return false;
	} while ((now = dp_now_ns(NULL)) - since < look_ns);
	if (seen && seen->since_ns && seen->passes == passes && seen->since_ns < since) {
		since = seen->since_ns;
		ran = seen->ran;
		if (seen->unseen_ns >= DP_UNSEEN_NS)
			snprintf(measure, sizeof(measure), "since the dataplane last saw it pass; for %.1f s of "
				 "that its whole process did not run: stopped by a signal or a debugger, or "
				 "starved", seen->unseen_ns / 1e9);
		else
			snprintf(measure, sizeof(measure), "since the dataplane last saw it pass");
	}
	stuck_why(e, (now - since) / 1e9, measure, ran, "", why);
	return true;
}

int32_t dp_ctl_late_answer(struct dp_ctl_call *call, bool give_up, char *why)
{
	int32_t done = 0;

	if (!call->queued)
		call->queued = dp_engine_ctl_post(call->e, &call->q);
	if (call->queued)
		done = atomic_load_explicit(&call->done, memory_order_acquire);
	if (!done && !give_up)
		return DP_CTL_NO_ANSWER;
	if (!done && call->queued && atomic_compare_exchange_strong(&call->done, &done, CTL_ABANDONED))
		return DP_CTL_NO_ANSWER; /* the answer frees it */
	if (done && why)
		memcpy(why, call->why, SL_ERRMSG_LEN);
	free(call);
	return done ? done - 1 : DP_CTL_NO_ANSWER;
}

int32_t dp_engine_call(struct dp_engine *e, struct dp_ctl_req *req, struct dp_ctl_call **late)
{
	struct dp_ctl_call *call = calloc(1, sizeof(*call));
	uint64_t passes = atomic_load_explicit(&e->passes, memory_order_relaxed), since = dp_now_ns(NULL);
	struct dp_cpu_mark ran = { 0 };
	int32_t res;

	if (!call) {
		sl_errmsg_format(req->why, SL_ERRMSG_LEN, "no memory for a control request: free memory");
		return 1;
	}
	if (req->obj)
		memcpy(&call->obj, req->obj, ctl_obj_bytes(req->op));
	call->e = e;
	call->q = *req;
	call->q.obj = req->obj ? &call->obj : NULL;
	call->q.done = &call->done;
	call->q.why = call->why;
	while ((res = dp_ctl_late_answer(call, false, req->why)) == DP_CTL_NO_ANSWER) {
		if (engine_stuck(e, patience_ns(e, req), &passes, &since, &ran)) {
			if (late) {
				*late = call;
				return no_answer(e, req, since, ran);
			}
			if ((res = dp_ctl_late_answer(call, true, req->why)) == DP_CTL_NO_ANSWER)
				return no_answer(e, req, since, ran);
			break; /* answered at the last moment */
		}
		usleep(call->queued ? 20 : 100);
	}
	return res;
}

static int32_t ctl_add_comm(struct dp_engine *e, struct dp_ctl_req *r)
{
	struct dp_comm *src = r->obj;

	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		if (e->comms[i].live && e->comms[i].key32 == src->key32) {
			sl_errmsg_format(r->why, SL_ERRMSG_LEN, "communicator key %#llx collides with one "
					 "this dataplane already runs: create the communicator again",
					 (unsigned long long)src->key);
			return 1;
		}
	}
	for (uint32_t i = 0; i < src->nranks; i++) {
		if (i != src->rank && !sl_tp_node_alive(e->tp, src->node[i])) {
			sl_errmsg_format(r->why, SL_ERRMSG_LEN, "rank %u runs on dataplane node %u, which this "
					 "dataplane (node %u) has no working link to: check sluiced's --nodes/--link "
					 "options", i, src->node[i], e->node);
			return 1;
		}
	}
	e->comms[r->index] = *src;
	if (!dp_comm_open_tables(&e->comms[r->index])) {
		memset(&e->comms[r->index], 0, sizeof(e->comms[r->index]));
		sl_errmsg_format(r->why, SL_ERRMSG_LEN, "no memory for the communicator's tables of early packets and "
				 "ended calls (%zu KiB): free memory, or destroy communicators no longer used",
				 DP_COMM_TABLES_BYTES >> 10);
		return 1;
	}
	e->comms[r->index].live = true;
	return 0;
}

static int32_t ctl_apply(struct dp_engine *e, struct dp_ctl_req *r)
{
	struct dp_client *c = &e->clients[r->client];

	switch (r->op) {
	case DP_CTL_ADD_CLIENT:
		*c = *(struct dp_client *)r->obj;
		c->live = true;
		if (r->client >= e->clients_end)
			e->clients_end = r->client + 1;
		return 0;
	case DP_CTL_DEL_CLIENT:
		for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
			struct dp_comm *comm = &e->comms[i];
			if (!comm->live || comm->client != c)
				continue;
			/* Not destroyed (sluice_finalize refuses that): its process died.
			 * Its peers are told, or their sends to it, acknowledged
			 * by this dataplane, would succeed with nobody to receive. */
			if (!comm->close_done)
				dp_comm_fail(e, comm, SLUICE_ERR_REMOTE, comm->next_seq,
					     "rank %u's process left without destroying the communicator: it "
					     "exited or was killed", comm->rank);
			dp_comm_release(e, comm);
		}
		client_unmap(e, c);
		while (e->clients_end && !e->clients[e->clients_end - 1].live)
			e->clients_end--;
		return 0;
	case DP_CTL_ADD_REGION:
		c->regions[r->index] = *(struct dp_region *)r->obj;
		c->regions[r->index].live = true;
		/* the running kernel predates the buffer: see sl_gdma_restart */
		if (c->regions[r->index].gpu >= 0 && e->gdev[c->regions[r->index].gpu])
			sl_gdma_restart(e->gdev[c->regions[r->index].gpu]->g);
		return 0;
	case DP_CTL_DEL_REGION:
		/* Collectives name regions by id; one still running on it keeps it. */
		for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
			/* (not the lingering ones: they read their own copies) */
			for (struct dp_coll *k = e->comms[i].live ? e->comms[i].colls : NULL; k; k = k->next) {
				if (k->comm->client == c && (k->cmd.send_region == r->index ||
							     k->cmd.recv_region == r->index)) {
					sl_errmsg_format(r->why, SL_ERRMSG_LEN, "region %u is in use by a running "
							 "collective: wait for it before freeing the memory", r->index);
					return 1;
				}
			}
		}
		region_release(e, &c->regions[r->index]);
		return 0;
	case DP_CTL_ADD_COMM:
		return ctl_add_comm(e, r);
	case DP_CTL_DEL_COMM:
		return dp_comm_close(e, &e->comms[r->index], r);
	}
	sl_errmsg_format(r->why, SL_ERRMSG_LEN, "unknown control request %u", r->op);
	return 1;
}

static uint32_t ctl_poll(struct dp_engine *e)
{
	struct dp_ctl_req r;
	uint32_t n = 0;

	while (sl_spsc_dequeue(&e->ctl, &r)) {
		int32_t res = ctl_apply(e, &r);
		if (res != DP_CTL_LATER)
			dp_ctl_answer(r.done, res);
		n++;
	}
	return n;
}

/* ---- submissions ---- */

static uint32_t clients_poll(struct dp_engine *e)
{
	struct sl_cmd cmd;
	uint32_t n = 0;

	/* Up to the highest live slot only: all 32 were ~170 instructions of a
	 * pass that a small call's leaf runs once a call (~6000 in all). */
	for (unsigned i = 0; i < e->clients_end; i++) {
		struct dp_client *c = &e->clients[i];
		if (!c->live)
			continue;
		/* A burst at most, so one busy client cannot starve the ports. */
		for (unsigned k = 0; k < 32 && sl_spsc_dequeue(&c->submit, &cmd); k++, n++)
			dp_coll_post(e, c, &cmd);
	}
	return n;
}

/* This thread's id, read once: a pass says who takes it.  Kept in a
 * pthread key, not __thread: libsluice dlopens this library in embedded
 * mode, where __thread data is a block malloc'd per thread, and GCC 12's
 * LeakSanitizer misreads a small one's bounds (when it starts 16 bytes past
 * a page) and crashed every embedded run at exit in CI's sanitizer build. */
static pthread_key_t tid_key;
static pthread_once_t tid_key_once = PTHREAD_ONCE_INIT;

static void tid_key_create(void)
{
	(void)pthread_key_create(&tid_key, NULL);
}

static pid_t this_tid(void)
{
	pthread_once(&tid_key_once, tid_key_create);
	pid_t tid = (pid_t)(intptr_t)pthread_getspecific(tid_key);

	if (!tid) {
		tid = (pid_t)syscall(SYS_gettid);
		(void)pthread_setspecific(tid_key, (void *)(intptr_t)tid);
	}
	return tid;
}

/* One pass; now_ns: the engine's clock as the caller read it, or 0. */
static uint32_t engine_pass(struct dp_engine *e, uint64_t now_ns)
{
	atomic_store_explicit(&e->pass_tid, this_tid(), memory_order_relaxed);

	uint32_t work = ctl_poll(e), posted = clients_poll(e);

	/* New calls hand their sends to the transport as they are posted
	 * (dp_coll_post), before its poll, which puts them on the wire: a small
	 * call takes one pass.  A gated call's sends wait for its input's
	 * snapshot instead, which a walk of the collectives sends once landed.
	 * Any other call needs no walk before the poll: ~330 instructions of a
	 * 3-rank gather leaf's ~6400 a call. */
	work += posted;
	if (posted && e->gated)
		work += dp_colls_progress(e);
	work += now_ns ? sl_tp_poll_at(e->tp, now_ns) : sl_tp_poll(e->tp);
	work += dp_gdev_progress(e);
	work += dp_colls_progress(e);
	/* one thread at a time is in a pass: no read-modify-write needed */
	atomic_store_explicit(&e->passes, atomic_load_explicit(&e->passes, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	return work;
}

uint32_t dp_engine_poll(struct dp_engine *e)
{
	return engine_pass(e, 0);
}

int32_t dp_engine_try_poll(struct dp_engine *e, uint64_t now_ns)
{
	bool expected = false;
	uint32_t work;

	if (!atomic_compare_exchange_strong_explicit(&e->busy, &expected, true, memory_order_acquire,
						     memory_order_relaxed))
		return -1;
	/* the caller's time is the engine's only on the engine's own clock (tests set others) */
	work = engine_pass(e, e->clock.now_ns == dp_now_ns ? now_ns : 0);
	atomic_store_explicit(&e->busy, false, memory_order_release);
	return (int32_t)(work > INT32_MAX ? INT32_MAX : work);
}

void dp_engine_flush_acks(struct dp_engine *e)
{
	bool expected = false;

	if (!atomic_compare_exchange_strong_explicit(&e->busy, &expected, true, memory_order_acquire,
						     memory_order_relaxed))
		return; /* another thread is in a pass: its poll sends them in time */
	sl_tp_flush_acks(e->tp);
	atomic_store_explicit(&e->busy, false, memory_order_release);
}

void dp_engine_last_words(struct dp_engine *e)
{
	bool got = false;

	if (!atomic_load_explicit(&e->aborts_out, memory_order_relaxed))
		return;
	/* an embedded application's pass, if one is in, ends within microseconds: a stuck one costs them */
	for (int i = 0; i < 1000 && !got; i++) {
		bool expected = false;
		got = atomic_compare_exchange_strong_explicit(&e->busy, &expected, true, memory_order_acquire,
							      memory_order_relaxed);
		if (!got)
			usleep(10);
	}
	if (!got)
		return;
	dp_notices_last_words(e, -1);
	atomic_store_explicit(&e->busy, false, memory_order_release);
}

/* Whether the engine has nothing to run but lingering calls, which can
 * wait for the next pass (as sl_dp_embedded_release counts it); false
 * while another thread is in a pass. */
static bool only_lingering(struct dp_engine *e)
{
	bool expected = false, idle;

	/* e->running belongs to whoever is in a pass: take a pass's place to read it */
	if (!atomic_compare_exchange_strong_explicit(&e->busy, &expected, true, memory_order_acquire,
						     memory_order_relaxed))
		return false;
	idle = e->running <= e->lingering;
	atomic_store_explicit(&e->busy, false, memory_order_release);
	return idle;
}

/*
 * While an embedded application spins in its wait call, it is the engine:
 * this thread parks until the application has not driven for a holdoff, or
 * hands the engine back with work left (sl_dp_embedded_release).  Parking
 * also when the application is mid-pass matters: it shares this core, and a
 * thread that spun here while the application was preempted in a pass kept
 * it off for whole scheduler ticks (4 ms) at a time.  Between two calls (an
 * ordinary hand-back, which keeps drove_ns) it parks as well while nothing
 * but lingering calls is left: when its park ran out there, it took a pass,
 * spun and yielded, and held the core of the application it shares 0.1-2 ms
 * once in every 10-20 park timeouts of a 2-rank broadcast
 * (perf/ALGORITHMS.md).
 */
static bool park(struct dp_engine *e, bool app_in_pass)
{
	uint64_t driven = atomic_load_explicit(&e->driven_ns, memory_order_relaxed), now;
	bool between = !driven && !app_in_pass && only_lingering(e);
	struct timespec ts = { 0, app_in_pass ? DRIVEN_HOLDOFF_NS : 0 };

	if (between)
		driven = atomic_load_explicit(&e->drove_ns, memory_order_relaxed);
	if (driven && (now = dp_now_ns(NULL)) - driven < DRIVEN_HOLDOFF_NS)
		ts.tv_nsec = (long)(driven + DRIVEN_HOLDOFF_NS - now);
	if (!ts.tv_nsec)
		return false;
	uint32_t seen = atomic_load(&e->park_seq);
	/* seq_cst with the hand-back and control requests: they clear driven_ns
	 * (a control request drove_ns first) then read parked.  Also in a pass:
	 * the application's drive set driven_ns before it, so 0 means one of
	 * them came and will not wake us. */
	atomic_store(&e->parked, true);
	if (atomic_load(&e->driven_ns) || (between && atomic_load(&e->drove_ns))) {
		if (between) /* no pass until the application drives again */
			dp_engine_flush_acks(e);
		e->idle.count.parks++;
		if (syscall(SYS_futex, &e->park_seq, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0) != 0 &&
		    errno == ETIMEDOUT)
			e->idle.count.parks_out++;
	} else if (app_in_pass) {
		sched_yield(); /* the pass is the application's last: let it finish */
	}
	atomic_store(&e->parked, false);
	return true;
}

int dp_engine_run(void *engine)
{
	struct dp_engine *e = engine;

	atomic_store(&e->tid, this_tid());
	while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
		if (park(e, false)) {
			dp_idle_busy(&e->idle);
			continue;
		}
		int32_t work = dp_engine_try_poll(e, 0);
		if (work < 0) /* the application is in a pass */
			park(e, true);
		if (work != 0)
			dp_idle_busy(&e->idle);
		else
			dp_idle(e);
	}
	return 0;
}
