/*
 * park.h: where an embedded engine's thread waits while its application
 * drives the engine (engine.c park), and the alarm that ends the wait.
 *
 * The thread must come back within a holdoff of the application's last
 * drive (a call nobody waits for then is late by at most that), but not
 * while the application still drives: a park that ran out on its own
 * clock took the application's core every holdoff for a wake-up that
 * only parked again, and the call it fell in took 60-80 us longer
 * (2-rank send/recv and 3-rank all-to-all at 1 MiB: every 5th and every
 * 3rd call, perf/ALGORITHMS.md big34).  So the alarm belongs to the
 * driver: each drive keeps it at least half a holdoff ahead, and it goes
 * off only once the application has not driven for that long.
 */
#ifndef SLUICE_PARK_H
#define SLUICE_PARK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The application drove the engine this recently: its thread stays off.
 * Each time it looks costs a wake-up, about 20 us of the core on these VMs
 * (and 60-80 us of the call it falls in); sl_dp_embedded_release calls it
 * back sooner. */
#define DP_DRIVEN_HOLDOFF_NS 1000000

struct dp_park {
	int alarm_fd;              /* a timerfd on CLOCK_MONOTONIC */
	int bell_fd;               /* an eventfd: a hand-back or a control request rings it */
	_Atomic uint64_t alarm_at; /* when the alarm was last set to go off (CLOCK_MONOTONIC ns) */
};

/* 0, or -1 with the reason in err. */
int dp_park_open(struct dp_park *p, char *err, size_t len);
void dp_park_close(struct dp_park *p);
/* The application drove at now: push the alarm to now + the holdoff when
 * it would go off within half a holdoff (a system call per half holdoff
 * at most, however often it drives). */
void dp_park_driven(struct dp_park *p, uint64_t now);
/* The engine's thread, about to wait: the alarm goes off by at the latest
 * (or later, where a drive since pushed it there). */
void dp_park_arm(struct dp_park *p, uint64_t at);
/* Wait for the alarm or the bell.  Whether the alarm ended it (ran out). */
bool dp_park_wait(struct dp_park *p);
/* End the thread's wait now, or its next one if it is not waiting yet. */
void dp_park_ring(struct dp_park *p);

#endif
