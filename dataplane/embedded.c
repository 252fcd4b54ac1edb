/*
 * embedded.c: the dataplane on threads of the application's own process.
 *
 * libsluice dlopens this library and calls sl_dp_embedded_start with
 * sluiced's flags; a new thread runs dp_main (EAL makes it the main lcore
 * and starts the engine lcore beside it), and the application then attaches
 * through the returned socket path exactly as it would to a daemon.  While
 * the application waits for a collective it drives the engine itself
 * (sl_dp_embedded_drive), so a waiting rank needs no wake-up.  DPDK
 * cannot start twice in one process, so neither can this.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_lcore.h>

#include <sluice/drive.h>
#include <sluice/errmsg.h>

#include "dp.h"
#include "dp_main.h"

#define MAX_ARGS 64

static struct {
	pthread_t thread;
	bool started;
	_Atomic bool stop, ready, failed;
	_Atomic bool no_lcore_left; /* rte_thread_register failed once */
	int argc;
	char *argv[MAX_ARGS + 1];
	char buf[2048];
	char err[512];
} emb;

static void *embedded_thread(void *unused)
{
	(void)unused;
	if (dp_main(emb.argc, emb.argv, &emb.stop, &emb.ready, emb.err, sizeof(emb.err)) != 0)
		atomic_store(&emb.failed, true);
	return NULL;
}

/* Split args on spaces into emb.argv, after a program name. */
static int split_args(const char *args, char *err, size_t err_len)
{
	char *save, *tok;

	if (strlen(args) >= sizeof(emb.buf)) {
		sl_errmsg_format(err, err_len, "embedded dataplane arguments are longer than %zu bytes", sizeof(emb.buf) - 1);
		return -1;
	}
	strcpy(emb.buf, args);
	emb.argc = 0;
	emb.argv[emb.argc++] = "sluiced-embedded";
	for (tok = strtok_r(emb.buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (emb.argc == MAX_ARGS) {
			sl_errmsg_format(err, err_len, "more than %d embedded dataplane arguments", MAX_ARGS);
			return -1;
		}
		emb.argv[emb.argc++] = tok;
	}
	emb.argv[emb.argc] = NULL;
	return 0;
}

int sl_dp_embedded_start(const char *args, char *sock_path, size_t sock_len, char *err, size_t err_len)
{
	char full[2048];

	if (emb.started) {
		sl_errmsg_format(err, err_len, "an embedded dataplane already ran in this process (DPDK starts once "
				 "per process): call sluice_init once, or attach to a sluiced");
		return -1;
	}
	/* The socket is private to this process unless the caller names one. */
	if (strstr(args ? args : "", "--socket"))
		snprintf(full, sizeof(full), "%s", args);
	else
		snprintf(full, sizeof(full), "%s --socket /tmp/sluice-embedded-%d.sock", args ? args : "",
			 (int)getpid());
	if (split_args(full, err, err_len) != 0)
		return -1;
	for (int i = 1; i < emb.argc; i++)
		if (strcmp(emb.argv[i], "--socket") == 0 && i + 1 < emb.argc)
			snprintf(sock_path, sock_len, "%s", emb.argv[i + 1]);
	if (pthread_create(&emb.thread, NULL, embedded_thread, NULL) != 0) {
		sl_errmsg_format(err, err_len, "cannot start the embedded dataplane's thread");
		return -1;
	}
	emb.started = true;
	while (!atomic_load(&emb.ready) && !atomic_load(&emb.failed))
		usleep(1000);
	if (atomic_load(&emb.failed)) {
		pthread_join(emb.thread, NULL);
		sl_errmsg_format(err, err_len, "embedded dataplane: %s", emb.err);
		return -1;
	}
	return 0;
}

void sl_dp_embedded_stop(void)
{
	if (!emb.started || atomic_load(&emb.failed))
		return;
	atomic_store(&emb.stop, true);
	pthread_join(emb.thread, NULL);
}

/* One engine pass from the application's thread: work done, SL_DRIVE_BUSY
 * when the engine's own thread is in a pass (the caller should yield to
 * it), or SL_DRIVE_YIELDED when the pass found nothing and this thread gave
 * its core away (drive.h).  now_ns is the caller's CLOCK_MONOTONIC time:
 * its wait loop reads the clock, and after an idle pass that kept the core
 * may hand the same time again (ctl/internal.h, SL_WAIT_STALE_TURNS). */
int32_t sl_dp_embedded_drive(int64_t now_ns)
{
	struct dp_engine *e = atomic_load_explicit(&dp_running_engine, memory_order_acquire);

	if (!e)
		return 0;
	/* An lcore id gives this thread its own mempool cache: without one every
	 * buffer the pass allocates or frees goes through the pool's shared ring.
	 * If EAL has no lcore left, the pass still works, only slower, and no
	 * thread asks again.  (No __thread flag here: see this_tid in engine.c.) */
	if (rte_lcore_id() == LCORE_ID_ANY && !atomic_load_explicit(&emb.no_lcore_left, memory_order_relaxed) &&
	    rte_thread_register() != 0)
		atomic_store_explicit(&emb.no_lcore_left, true, memory_order_relaxed);
	uint64_t now = (uint64_t)now_ns;
	atomic_store_explicit(&e->driven_ns, now, memory_order_relaxed);
	atomic_store_explicit(&e->drove_ns, now, memory_order_relaxed);
	/* If the engine's thread sleeps (idle.c), peers' frames need not wake
	 * it while this thread drives: it would only take this core. */
	if (atomic_load_explicit(&e->idle.wake->sleeping, memory_order_relaxed))
		atomic_store_explicit(&e->idle.wake->sleeping, 0, memory_order_relaxed);
	int32_t work = dp_engine_try_poll(e, now); /* the pass reads no clock of its own */
	/* Ranks that share a core: the peer this wait waits for may be the one
	 * that needs the core (3 ranks on 2 cores spun 0.4-2.5 ms per 8-byte
	 * all-reduce, 33 us when yielding). */
	if (work == 0 && e->idle.cfg.yield_app) {
		e->idle.count.app_yields++;
		sched_yield();
		return SL_DRIVE_YIELDED; /* the caller's clock is stale now */
	}
	return work < 0 ? SL_DRIVE_BUSY : work;
}

/* The application stops driving (its wait returned).  With collectives
 * still in flight (not only lingering ones) the engine's thread takes over
 * now; without, it may stay parked for the rest of its holdoff, which spares
 * a wake-up per call.  more: the application has other calls in flight and
 * most likely waits for them next (a grouped send's wait, then its recv's).
 * It keeps the engine then where ranks share cores (yield_app) or where the
 * engine's thread is parked (it parks between calls, engine.c): the woken
 * thread only took the core from a rank, for the next wait to park it again
 * (3 ranks on 2 cores: an 8-byte grouped send/recv took 40 us, not 6; 2
 * ranks, 1.7-2.3x the time).  The park runs out DRIVEN_HOLDOFF_NS after the
 * last drive, so a call nobody waits for is late by at most that.  An
 * engine's thread that is up (spinning, or asleep on the wire) is told. */
void sl_dp_embedded_release(bool more)
{
	struct dp_engine *e = atomic_load_explicit(&dp_running_engine, memory_order_acquire);
	bool expected = false, running;

	if (!e || (more && (e->idle.cfg.yield_app || atomic_load(&e->parked))))
		return;
	atomic_store(&e->driven_ns, 0);
	/* e->running belongs to whoever is in a pass: take a pass's place to read it */
	if (!atomic_compare_exchange_strong_explicit(&e->busy, &expected, true, memory_order_acquire,
						     memory_order_relaxed))
		return; /* a pass is running: the engine's thread is not parked, or another thread drives */
	running = e->running > e->lingering; /* lingering calls can wait for the next pass */
	atomic_store_explicit(&e->busy, false, memory_order_release);
	if (running && atomic_load(&e->parked)) {
		atomic_fetch_add(&e->park_seq, 1);
		syscall(SYS_futex, &e->park_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	} else if (running) {
		dp_wake_force(e->idle.wake); /* it may sleep, unkicked since this thread drove */
	}
	if (running) /* the engine's thread waits for the wire alone now: asleep when idle */
		atomic_store_explicit(&e->drove_ns, 0, memory_order_relaxed);
}
