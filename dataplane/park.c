/*
 * park.c: the parked thread's alarm and bell (park.h says why the alarm
 * is the driver's).  A timerfd, since the driver moves it without waking
 * the thread (a futex's timeout cannot be moved), and an eventfd beside
 * it for the wake-ups that cannot wait.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <sluice/errmsg.h>

#include "park.h"

int dp_park_open(struct dp_park *p, char *err, size_t len)
{
	*p = (struct dp_park){ .alarm_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC),
			       .bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) };
	if (p->alarm_fd >= 0 && p->bell_fd >= 0)
		return 0;
	sl_errmsg_format(err, len, "cannot make the engine's park %s: %s (out of file descriptors?)",
			 p->alarm_fd < 0 ? "alarm (timerfd)" : "bell (eventfd)", strerror(errno));
	dp_park_close(p);
	return -1;
}

void dp_park_close(struct dp_park *p)
{
	if (p->alarm_fd >= 0)
		close(p->alarm_fd);
	if (p->bell_fd >= 0)
		close(p->bell_fd);
	p->alarm_fd = p->bell_fd = -1;
}

/* Setting the timer also forgets an alarm that went off unread: the next
 * wait does not end on a stale one. */
static void set_alarm(struct dp_park *p, uint64_t at)
{
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)(at / 1000000000),
						.tv_nsec = (long)(at % 1000000000) } };

	atomic_store_explicit(&p->alarm_at, at, memory_order_relaxed);
	timerfd_settime(p->alarm_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

void dp_park_driven(struct dp_park *p, uint64_t now)
{
	if (now + DP_DRIVEN_HOLDOFF_NS / 2 > atomic_load_explicit(&p->alarm_at, memory_order_relaxed))
		set_alarm(p, now + DP_DRIVEN_HOLDOFF_NS);
}

void dp_park_arm(struct dp_park *p, uint64_t at)
{
	if (atomic_load_explicit(&p->alarm_at, memory_order_relaxed) < at)
		set_alarm(p, at);
}

bool dp_park_wait(struct dp_park *p)
{
	struct pollfd fds[2] = { { .fd = p->alarm_fd, .events = POLLIN }, { .fd = p->bell_fd, .events = POLLIN } };
	uint64_t v;

	while (poll(fds, 2, -1) < 0 && errno == EINTR)
		;
	/* both read, so neither ends the next wait at once (nonblocking: one not gone off reads nothing) */
	bool rang = read(p->bell_fd, &v, sizeof(v)) == sizeof(v);
	bool alarm = read(p->alarm_fd, &v, sizeof(v)) == sizeof(v);
	return alarm && !rang;
}

void dp_park_ring(struct dp_park *p)
{
	uint64_t one = 1;
	ssize_t r = write(p->bell_fd, &one, sizeof(one));

	(void)r; /* only a full counter (2^64 - 2 rings unread) refuses, and then it rings already */
}
