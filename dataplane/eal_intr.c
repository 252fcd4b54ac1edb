/*
 * eal_intr.c: running work on EAL's interrupt thread, and waiting for it to
 * sleep (see eal_intr.h for why).
 *
 * Both go through pipes of our own registered there as interrupt sources,
 * for good: their handles live in malloc's memory, which outlives cleanup.
 * Not EAL's alarms: once one has been set, rte_eal_cleanup unregisters the
 * alarm's source just before it unmaps EAL's memory, and the thread wakes to
 * rebuild its wait list from handles in that memory (memif's, see
 * sl_eal_settle_intr_thread) while it goes: the server crashed so in 2 of 6
 * runs.
 */
#include "eal_intr.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <rte_interrupts.h>

#define SL_EAL_INTR_WARN_MS 10000u

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait for the interrupt thread to set *done; say once when it takes long. */
static void wait_done(const bool *done, const char *what)
{
	uint64_t warn_at = ms_now() + SL_EAL_INTR_WARN_MS;

	while (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
		if (warn_at != 0 && ms_now() >= warn_at) {
			fprintf(stderr, "sluice: EAL's interrupt thread has not %s for %u s (a driver's "
				"callback there is stuck, or the machine starves it); still waiting\n",
				what, SL_EAL_INTR_WARN_MS / 1000);
			warn_at = 0;
		}
		usleep(100);
	}
}

/* A pipe registered as an interrupt source: cb runs there when a byte is written to fds[1]. */
static int add_source(int fds[2], rte_intr_callback_fn cb)
{
	struct rte_intr_handle *h = NULL;

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
		return -1;
	h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
	/* EXT: EAL calls back without reading, the callback takes the byte. */
	if (h == NULL || rte_intr_fd_set(h, fds[0]) != 0 || rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) != 0 ||
	    rte_intr_callback_register(h, cb, fds) != 0) {
		rte_intr_instance_free(h);
		close(fds[0]);
		close(fds[1]);
		fds[0] = fds[1] = -1;
		return -1;
	}
	return 0; /* h stays: the source may refer to it */
}

/* Take the byte that woke us, or EAL calls back for ever (level-triggered). */
static bool take_byte(const int *fds)
{
	char c;

	return read(fds[0], &c, 1) == 1;
}

struct intr_job {
	void (*fn)(void *arg);
	void *arg;
	bool done;
};

static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static int job_pipe[2] = { -1, -1 };
static struct intr_job *job_now;

static void run_job(void *fds)
{
	struct intr_job *job;

	if (!take_byte(fds))
		return;
	job = __atomic_load_n(&job_now, __ATOMIC_ACQUIRE);
	job->fn(job->arg);
	__atomic_store_n(&job->done, true, __ATOMIC_RELEASE);
}

void sl_eal_on_intr_thread(void (*fn)(void *arg), void *arg, const char *what)
{
	struct intr_job job = { .fn = fn, .arg = arg };

	pthread_mutex_lock(&job_lock);
	__atomic_store_n(&job_now, &job, __ATOMIC_RELEASE);
	/* These fail only short of memory or descriptors: run here then, as before. */
	if ((job_pipe[0] < 0 && add_source(job_pipe, run_job) != 0) || write(job_pipe[1], "j", 1) != 1)
		fn(arg);
	else
		wait_done(&job.done, what);
	pthread_mutex_unlock(&job_lock);
}

static int settle_pipe[2] = { -1, -1 };
static bool settled;

static void mark_settled(void *fds)
{
	if (take_byte(fds))
		__atomic_store_n(&settled, true, __ATOMIC_RELEASE);
}

void sl_eal_settle_intr_thread(void)
{
	/* A new source reaches the thread's wait list only by a rebuild, which takes in every change before it. */
	if (settle_pipe[0] >= 0 || add_source(settle_pipe, mark_settled) != 0 || write(settle_pipe[1], "s", 1) != 1)
		return; /* short of memory or descriptors: cleanup goes on unsettled, as before */
	wait_done(&settled, "taken in the ports' teardown");
}
