/*
 * stall_watch.h: the server thread's watch over an engine's loop.  A polling
 * engine comes round every few microseconds, and never waits more than a
 * millisecond on purpose (idle.c); one that has not come round for
 * DP_STALL_NS is stuck in a call that does not return (a driver waiting in
 * the kernel, a loop), and its peers will soon say it stopped answering.
 * The watch says so once, with where its thread is, and again when it
 * comes back, so that such a run's log names the place.
 */
#ifndef SLUICE_DP_STALL_WATCH_H
#define SLUICE_DP_STALL_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DP_STALL_NS 2000000000ull

/* A pass takes microseconds: a thread that has had this much CPU time and
 * not come round is in a loop; one that has had less waits for a CPU (a
 * loaded machine), which /proc's state letter calls running too. */
#define DP_STARVED_NS 20000000ull

/* A thread's CPU time at a moment, from /proc/self/task/TID/schedstat. */
struct dp_cpu_mark {
	pid_t tid;   /* the thread (0: none) */
	uint64_t ns; /* the CPU time it had had by then (0: unknown) */
};

/* A stall that ended: when the engine came round again, after how long
 * without a pass, and the CPU time its thread had meanwhile (UINT64_MAX:
 * unknown). */
struct dp_stall_end {
	uint64_t at_ns, took_ns, ran_ns;
};

struct dp_stall_watch {
	uint64_t passes;        /* the engine's pass count when last seen to move */
	uint64_t since_ns;      /* ... and when */
	struct dp_cpu_mark ran; /* ... and its thread's CPU time then */
	bool told;              /* the stall was reported */
	struct dp_stall_end last; /* the latest stall of DP_STALL_NS or more to end (at_ns 0: none),
				     reported or not: its whole process stopped, the watch sees
				     only its end */
	uint64_t looked_ns;     /* the watch's latest look */
	uint64_t unseen_ns;     /* the longest time between two looks since the engine last
				   moved: the watch's own process did not run either */
};

/* Looks further apart than this (the server looks every 100 ms) mean the
 * watch's own process did not run: stopped by a signal or a debugger, or
 * starved with its engine. */
#define DP_UNSEEN_NS 1000000000ull

/* Thread tid's CPU time now (tid 0, or unreadable: ns 0). */
struct dp_cpu_mark dp_cpu_mark(pid_t tid);

/*
 * Look at an engine whose pass count is now passes, held up (if it is) by
 * thread tid (dp_engine_holder; 0: not started), at now_ns.  True when there is something to say: a stall
 * of DP_STALL_NS or more (where the thread is: blocked in the kernel, in
 * which system call and kernel function, or running), or the end of one
 * reported; msg holds it, without a trailing newline.
 */
bool dp_stall_check(struct dp_stall_watch *w, uint64_t passes, pid_t tid, uint64_t now_ns,
		    char *msg, size_t len);

/* The latest stall that ended within window_ns before now_ns, in words
 * that follow the engine's name ("came round again 0.2 s ago, after 4.3 s
 * without a pass: its thread had 0.0 ms of a CPU ..."): a client whose
 * wait ran out during it learns why.  False if none. */
bool dp_stall_ended(const struct dp_stall_watch *w, uint64_t now_ns, uint64_t window_ns, char *msg, size_t len);

/* Where thread tid is, in words that begin with who and tid ("its thread
 * 12"): blocked in the kernel (in which system call and kernel function),
 * running (in a loop, or waiting for a CPU: since, its mark when the stall
 * began, tells them apart; a mark of another thread or none reads as a
 * loop), or gone. */
void dp_stall_where(pid_t tid, const char *who, struct dp_cpu_mark since, char *buf, size_t len);

#endif
