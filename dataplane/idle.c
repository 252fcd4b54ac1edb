/*
 * idle.c: what an engine does when a pass finds no work.
 *
 * It spins for a short while (the next frame or submission is usually a
 * few microseconds away), then sleeps until a peer or a client wakes it
 * (wake.h) or its sleep runs out (timers: retransmission, collective
 * timeouts).  Polling flat out cost too much on shared cores: three
 * dataplanes and three ranks on two cores spent most of the time taking
 * the CPU from each other.  --busy-poll keeps it up (yielding the core
 * when idle) for engines with a core of their own.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dp.h"

#define SPIN_NS 50000           /* idle this long before sleeping */
#define MAX_SLEEP_NS 1000000    /* then sleep at most this long: timers fire late by at most this */
#define CLOCK_EVERY 64          /* idle passes between clock reads (a read costs 100 ns here) */
#define FALLBACK_NAP_NS 50000   /* kernels without futex_waitv (before 5.16) nap this long */
#define APP_DRIVES_NS 1000000   /* an embedded application that drove this recently still drives */

void dp_idle_init(struct dp_idle *d, const struct dp_idle_cfg *cfg, struct dp_wake *wake)
{
	*d = (struct dp_idle){ .cfg = *cfg, .wake = wake };
	if (!d->cfg.spin_ns)
		d->cfg.spin_ns = SPIN_NS;
	if (!d->cfg.max_sleep_ns)
		d->cfg.max_sleep_ns = MAX_SLEEP_NS;
}

/* Say we sleep on every word that can wake us, look for work once more,
 * and wait on all the words at once unless the look found some. */
static void sleep_once(struct dp_engine *e)
{
	struct dp_idle *d = &e->idle;
	struct futex_waitv w[1 + DP_MAX_CLIENTS] = { 0 };
	unsigned n = 1;
	struct timespec until;
	long r;

	atomic_store(&d->wake->sleeping, 1);
	w[0] = (struct futex_waitv){ .val = atomic_load(&d->wake->seq), .uaddr = (uintptr_t)&d->wake->seq,
				     .flags = FUTEX_32 };
	for (unsigned i = 0; i < DP_MAX_CLIENTS; i++) {
		struct sl_channel_bell *b = e->clients[i].live ? e->clients[i].bell : NULL;
		if (!b)
			continue;
		atomic_store(&b->engine_napping, 1);
		w[n++] = (struct futex_waitv){ .val = atomic_load(&b->doorbell), .uaddr = (uintptr_t)&b->doorbell,
					       .flags = FUTEX_32 };
	}
	if (dp_engine_try_poll(e, 0) == 0) {
		dp_engine_flush_acks(e); /* a delayed ACK would wait for the wake-up */
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)d->cfg.max_sleep_ns;
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		d->count.sleeps++; /* before: a test knows from it that the engine is asleep */
		r = syscall(SYS_futex_waitv, w, n, 0, &until, CLOCK_MONOTONIC);
		if (r == 0)
			d->count.woke_peer++;
		else if (r > 0)
			d->count.woke_client++;
		else if (errno == EAGAIN) /* a word moved before the wait began: its waker was first */
			++*(atomic_load(&d->wake->seq) != w[0].val ? &d->count.woke_peer : &d->count.woke_client);
		else if (errno == ETIMEDOUT)
			d->count.timed_out++;
		else if (errno == ENOSYS)
			nanosleep(&(struct timespec){ .tv_nsec = FALLBACK_NAP_NS }, NULL);
	}
	for (unsigned i = 0; i < DP_MAX_CLIENTS; i++)
		if (e->clients[i].live && e->clients[i].bell)
			atomic_store(&e->clients[i].bell->engine_napping, 0);
	atomic_store(&d->wake->sleeping, 0);
}

/* Stay up, giving the core away, when told to; when a frame from a link
 * whose peer cannot wake us would wait for the sleep to run out (a
 * collective is in flight, or a destroy waits for closing words), or a
 * reducer's work would (a GPU kernel applies a gated collective's chunks
 * and wakes nobody: a sleep would hold each chunk up to MAX_SLEEP_NS); and
 * while an embedded application drives call after call: waking this thread
 * for its frames would only take the application's core (its wait hands
 * the engine back when it has to wait long). */
static bool app_drives(const struct dp_engine *e, uint64_t now)
{
	uint64_t drove = atomic_load_explicit(&e->drove_ns, memory_order_relaxed);

	return drove && now - drove < APP_DRIVES_NS;
}

static bool stay_up(const struct dp_engine *e, uint64_t now)
{
	return e->idle.cfg.busy_poll || ((e->running || e->closing) && (!e->idle.all_links_wake || e->gated)) ||
	       app_drives(e, now);
}

/* Up only for frames from links whose peers cannot wake us, while each
 * link's descriptor says when one arrives (af_packet's sockets): wait on
 * them rather than yield.  A yield handed the core to any runnable thread
 * (another engine, a rank, a compiler) for its slice: over veth, 3 hosts
 * on 2 cores, yields took 2-18% of the engines' CPU and a frame waited in
 * its ring 296 us (median) for its engine (perf/ALGORITHMS.md, veth33).
 * Waiting, 4 MiB all-reduce took 19 ms a call against 36 (medians) with
 * a third less CPU (veth34).
 * A frame's arrival wakes the wait; timers and clients' posts (whose
 * doorbells ring only a sleeping engine) wait DP_LINK_WAIT_NS at most.  Only
 * while a call that its client waits for runs (with nothing but lingering
 * calls, done for their clients, the next post is near), and once the idle
 * stretch is DP_LINK_WAIT_AFTER_NS old, a peer's stall rather than a gap
 * between frames: woken from waits after 50 us, 3 hosts' 8-byte all-reduce
 * took 165-266 us a call against 141-177, and after 150 us a 3-to-1 incast
 * at 200 Mbit/s fell to 0.30-0.47 of the rate in 2 of 5 rounds (a guess:
 * Swift's RTT takes the wake-ups in; perf/ALGORITHMS.md, veth34). */
static bool waits_on_links(const struct dp_engine *e, uint64_t now)
{
	const struct dp_idle *d = &e->idle;

	return d->cfg.n_rx_fds && e->running > e->lingering && now - d->since >= DP_LINK_WAIT_AFTER_NS &&
	       !d->cfg.busy_poll && !e->gated && !app_drives(e, now);
}

static void wait_on_links(struct dp_engine *e)
{
	struct dp_idle *d = &e->idle;
	struct pollfd p[SL_MAX_PORTS];

	for (unsigned i = 0; i < d->cfg.n_rx_fds; i++)
		p[i] = (struct pollfd){ .fd = d->cfg.rx_fds[i], .events = POLLIN };
	dp_engine_flush_acks(e); /* a delayed ACK would wait for the wake-up */
	d->count.link_waits++;
	if (ppoll(p, d->cfg.n_rx_fds, &(struct timespec){ .tv_nsec = DP_LINK_WAIT_NS }, NULL) > 0)
		d->count.link_frames++;
}

/* Whether an idle pass keeps spinning: while the idle stretch is younger
 * than spin_ns (the clock is read every CLOCK_EVERY passes).  Sharing the
 * core (yield_app), an engine that would sleep when a stretch starts sleeps
 * at once: the process it waits for may need the core.  3 ranks on 2 cores as daemons:
 * spinning 50 us first cost 1.5-2x the time and the CPU of an 8-byte call
 * (perf/ALGORITHMS.md). */
static bool spin_on(const struct dp_engine *e, struct dp_idle *d, uint64_t *now)
{
	if (d->cfg.yield_app && !d->since) { /* looked at once per idle stretch: a clock read costs */
		*now = dp_now_ns(NULL);
		if (!stay_up(e, *now))
			return false; /* since stays 0: the next idle pass looks again */
		d->since = *now;
	}
	__builtin_ia32_pause();
	if (++d->passes % CLOCK_EVERY)
		return true;
	*now = dp_now_ns(NULL);
	if (!d->since)
		d->since = *now;
	return *now - d->since < d->cfg.spin_ns;
}

void dp_idle(struct dp_engine *e)
{
	struct dp_idle *d = &e->idle;
	uint64_t now;

	if (spin_on(e, d, &now)) {
		d->count.spins++;
		return;
	}
	if (!stay_up(e, now))
		sleep_once(e);
	else if (waits_on_links(e, now))
		wait_on_links(e);
	else
		sched_yield();
}

void dp_idle_print(const struct dp_engine *e)
{
	const struct dp_idle *d = &e->idle;

	fprintf(stderr, "sluiced node %u: idle: %s, slept %llu times (woken by a peer %llu, by a client %llu, "
		"ran out %llu); parked while the application drove %llu times (ran out %llu); "
		"embedded waits yielded %llu times; waited on the links %llu times (a frame came %llu); "
		"idle passes spun %llu\n", e->node,
		d->cfg.busy_poll ? "busy-polled" :
		d->all_links_wake ? "slept, also with collectives in flight" : "slept when no collective was in flight",
		(unsigned long long)d->count.sleeps, (unsigned long long)d->count.woke_peer,
		(unsigned long long)d->count.woke_client, (unsigned long long)d->count.timed_out,
		(unsigned long long)d->count.parks, (unsigned long long)d->count.parks_out,
		(unsigned long long)d->count.app_yields, (unsigned long long)d->count.link_waits,
		(unsigned long long)d->count.link_frames, (unsigned long long)d->count.spins);
}
