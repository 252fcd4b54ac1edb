/*
 * test_stall_watch.c: the server's watch over an engine's loop
 * (dataplane/stall_watch.h), on real threads of this process: one blocked
 * in poll(), one spinning, one spinning that gets no CPU, and a loop that
 * keeps moving.  Time is given, so the test waits only for the threads to
 * get where they are going (and the spinning one for its CPU time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stall_watch.h"

#define S 1000000000ull

static _Atomic int tid;
static _Atomic bool quit;

static void *blocked(void *arg)
{
	(void)arg;
	atomic_store(&tid, (int)syscall(SYS_gettid));
	poll(NULL, 0, 5000);
	return NULL;
}

static void *spinning(void *arg)
{
	(void)arg;
	atomic_store(&tid, (int)syscall(SYS_gettid));
	while (!atomic_load_explicit(&quit, memory_order_relaxed))
		;
	return NULL;
}

/* Spinning at SCHED_IDLE on the caller's CPU (arg), which a spinning
 * caller keeps: it waits for the CPU, runnable, as a starved engine does. */
static void *starved(void *arg)
{
	cpu_set_t one;
	struct sched_param none = { 0 };

	CPU_ZERO(&one);
	CPU_SET(*(int *)arg, &one);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
	return spinning(NULL);
}

/* This thread's CPU time. */
static uint64_t own_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * S + (uint64_t)ts.tv_nsec;
}

/* The thread's state letter, from /proc (after the command name's ')'). */
static char state_of(int t)
{
	char path[64], buf[256];
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", t);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return '?';
	}
	fclose(f);
	p = strrchr(buf, ')');
	return p && p[1] ? p[2] : '?';
}

static int start(pthread_t *th, void *(*fn)(void *), void *arg, char want)
{
	atomic_store(&tid, 0);
	atomic_store(&quit, false);
	assert_int_equal(pthread_create(th, NULL, fn, arg), 0);
	for (int i = 0; i < 2000 && (!atomic_load(&tid) || state_of(atomic_load(&tid)) != want); i++)
		usleep(1000);
	assert_int_equal(state_of(atomic_load(&tid)), want);
	return atomic_load(&tid);
}

static void a_blocked_engine_is_named_then_its_return(void **state)
{
	struct dp_stall_watch w = { 0 };
	char msg[768];
	pthread_t th;
	int t = start(&th, blocked, NULL, 'S');

	(void)state;
	assert_false(dp_stall_check(&w, 7, t, 10 * S, msg, sizeof(msg)));
	assert_false(dp_stall_check(&w, 7, t, 11 * S, msg, sizeof(msg)));
	assert_true(dp_stall_check(&w, 7, t, 12 * S + S / 2, msg, sizeof(msg)));
	printf("# %s\n", msg);
	assert_non_null(strstr(msg, "has not come round for 2.5 s"));
	/* poll is system call 7 on x86-64 and aarch64 has none: the number is the kernel's own */
	assert_non_null(strstr(msg, "waits in the kernel, in system call"));
	assert_false(dp_stall_check(&w, 7, t, 13 * S, msg, sizeof(msg))); /* said once */
	assert_true(dp_stall_check(&w, 8, t, 14 * S, msg, sizeof(msg)));
	assert_string_equal(msg, "the engine came round again after 4.0 s");
	assert_false(dp_stall_check(&w, 9, t, 15 * S, msg, sizeof(msg)));
	pthread_cancel(th);
	pthread_join(th, NULL);
}

static void a_spinning_engine_is_named(void **state)
{
	struct dp_stall_watch w = { 0 };
	char msg[768];
	pthread_t th;
	int t = start(&th, spinning, NULL, 'R');

	(void)state;
	assert_false(dp_stall_check(&w, 3, t, S, msg, sizeof(msg)));
	/* a loop has the CPU time a pass would have taken (a loaded machine gives it slowly) */
	for (int i = 0; i < 1000 && dp_cpu_mark(t).ns - w.ran.ns < 2 * DP_STARVED_NS; i++)
		usleep(10000);
	assert_true(dp_stall_check(&w, 3, t, 4 * S, msg, sizeof(msg)));
	printf("# %s\n", msg);
	assert_non_null(strstr(msg, "is running: a loop that does not return"));
	atomic_store(&quit, true);
	pthread_join(th, NULL);
}

/* Runnable all along but given next to no CPU time (a loaded machine): it
 * waits for a CPU, and is not called a loop. */
static void a_starved_engine_is_named_so(void **state)
{
	struct dp_stall_watch w = { 0 };
	char msg[768];
	pthread_t th;
	cpu_set_t was, one;
	int cpu = sched_getcpu();

	(void)state;
	assert_true(cpu >= 0);
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(was), &was), 0);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
	int t = start(&th, starved, &cpu, 'R');
	assert_false(dp_stall_check(&w, 3, t, S, msg, sizeof(msg)));
	for (uint64_t from = own_cpu_ns(); own_cpu_ns() - from < 10 * DP_STARVED_NS;)
		; /* this thread keeps the CPU they share: the other runs only when nothing else would */
	assert_true(dp_stall_check(&w, 3, t, 4 * S, msg, sizeof(msg)));
	printf("# %s\n", msg);
	assert_non_null(strstr(msg, "is ready to run but has had"));
	assert_non_null(strstr(msg, "it waits for one (the machine is overloaded"));
	atomic_store(&quit, true);
	pthread_join(th, NULL);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(was), &was), 0);
}

/* A stall whose whole process was stopped is seen only as it ends: it is
 * kept, with the CPU time the thread had, for a client whose wait ran out
 * in it (the dataplane's STALLED answer), within the window asked for. */
static void an_ended_stall_is_kept_for_a_late_question(void **state)
{
	struct dp_stall_watch w = { 0 };
	char msg[768];
	pthread_t th;
	int t = start(&th, blocked, NULL, 'S');

	(void)state;
	assert_false(dp_stall_check(&w, 7, t, 10 * S, msg, sizeof(msg)));
	assert_false(dp_stall_ended(&w, 10 * S, 5 * S, msg, sizeof(msg)));
	assert_false(dp_stall_check(&w, 8, t, 14 * S, msg, sizeof(msg))); /* unreported: said nothing */
	assert_true(dp_stall_ended(&w, 14 * S + S / 2, 5 * S, msg, sizeof(msg)));
	printf("# %s\n", msg);
	assert_non_null(strstr(msg, "came round again 0.5 s ago, after 4.0 s without a pass: its thread had "));
	assert_non_null(strstr(msg, "so it was hardly run"));
	assert_false(dp_stall_check(&w, 9, t, 15 * S, msg, sizeof(msg))); /* 1 s: no stall, the last one stays */
	assert_true(dp_stall_ended(&w, 19 * S, 5 * S, msg, sizeof(msg)));
	assert_false(dp_stall_ended(&w, 19 * S + 1, 5 * S, msg, sizeof(msg)));
	pthread_cancel(th);
	pthread_join(th, NULL);
}

/* Looks far apart while the engine stands still: the watch's own process
 * did not run (stopped, or starved with it); its next pass forgets it. */
static void looks_far_apart_are_counted_until_a_pass(void **state)
{
	struct dp_stall_watch w = { 0 };
	char msg[768];

	(void)state;
	assert_false(dp_stall_check(&w, 7, 1, 10 * S, msg, sizeof(msg)));
	assert_false(dp_stall_check(&w, 7, 1, 10 * S + S / 10, msg, sizeof(msg)));
	assert_true(w.unseen_ns < DP_UNSEEN_NS);
	(void)dp_stall_check(&w, 7, 1, 14 * S + S / 10, msg, sizeof(msg));
	assert_int_equal(w.unseen_ns, 4 * S);
	(void)dp_stall_check(&w, 7, 1, 14 * S + S / 5, msg, sizeof(msg));
	assert_int_equal(w.unseen_ns, 4 * S); /* the longest gap, not the latest */
	(void)dp_stall_check(&w, 8, 1, 14 * S + S / 2, msg, sizeof(msg));
	assert_int_equal(w.unseen_ns, 0);
}

static void a_moving_or_unstarted_engine_is_quiet(void **state)
{
	struct dp_stall_watch w = { 0 };
	char msg[768];

	(void)state;
	for (uint64_t i = 1; i < 10; i++)
		assert_false(dp_stall_check(&w, i, 1, i * 3 * S, msg, sizeof(msg)));
	w = (struct dp_stall_watch){ 0 };
	for (uint64_t i = 1; i < 10; i++)
		assert_false(dp_stall_check(&w, 0, 0, i * 3 * S, msg, sizeof(msg)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_blocked_engine_is_named_then_its_return),
		cmocka_unit_test(a_spinning_engine_is_named),
		cmocka_unit_test(a_starved_engine_is_named_so),
		cmocka_unit_test(an_ended_stall_is_kept_for_a_late_question),
		cmocka_unit_test(looks_far_apart_are_counted_until_a_pass),
		cmocka_unit_test(a_moving_or_unstarted_engine_is_quiet),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
