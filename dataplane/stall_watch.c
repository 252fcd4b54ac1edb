/*
 * stall_watch.c: where a stuck engine's thread is (stall_watch.h), read
 * from /proc/self/task/TID: its state, the system call it is in, the kernel
 * function it sleeps in, the top of its kernel stack where readable, and
 * the CPU time it has had (schedstat).
 */
#include "stall_watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sluice/errmsg.h>

/* The first line of /proc/self/task/TID/NAME, without its newline; "" if unreadable. */
static const char *task_file(pid_t tid, const char *name, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, name);
	buf[0] = '\0';
	f = fopen(path, "r");
	if (!f)
		return buf;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return buf;
}

/* The top frames of the thread's kernel stack, "a < b < c" (root only). */
static const char *kernel_stack(pid_t tid, char *buf, size_t len)
{
	char path[64], line[128];
	size_t at = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stack", (int)tid);
	buf[0] = '\0';
	f = fopen(path, "r");
	if (!f)
		return buf;
	for (int i = 0; i < 4 && at + 1 < len && fgets(line, sizeof(line), f); i++) {
		char *fn = strchr(line, ' '); /* "[<0>] do_sys_poll+0x.../0x..." */
		fn = fn ? fn + 1 : line;
		fn[strcspn(fn, "+\n")] = '\0';
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? " < " : "", fn);
	}
	fclose(f);
	return buf;
}

struct dp_cpu_mark dp_cpu_mark(pid_t tid)
{
	char line[128];
	uint64_t ns = 0;

	if (tid)
		(void)sscanf(task_file(tid, "schedstat", line, sizeof(line)), "%" SCNu64, &ns);
	return (struct dp_cpu_mark){ tid, ns };
}

/* The CPU time thread tid has had since its mark; UINT64_MAX if unknown. */
static uint64_t ran_since(pid_t tid, struct dp_cpu_mark since)
{
	struct dp_cpu_mark now = dp_cpu_mark(tid);

	return since.tid == tid && since.ns && now.ns >= since.ns ? now.ns - since.ns : UINT64_MAX;
}

void dp_stall_where(pid_t tid, const char *who, struct dp_cpu_mark since, char *buf, size_t len)
{
	char stat[512], sc[128], wchan[64], stack[256];

	if (!tid) {
		sl_errmsg_format(buf, len, "no thread of its own runs it");
		return;
	}
	const char *state = strrchr(task_file(tid, "stat", stat, sizeof(stat)), ')');
	task_file(tid, "syscall", sc, sizeof(sc));
	sc[strcspn(sc, " ")] = '\0';
	task_file(tid, "wchan", wchan, sizeof(wchan));
	kernel_stack(tid, stack, sizeof(stack));
	if (!state || state[1] == '\0') {
		sl_errmsg_format(buf, len, "%s %d is gone", who, (int)tid);
		return;
	}
	if (state[2] != 'R' && strcmp(sc, "running") != 0) {
		bool in = wchan[0] && strcmp(wchan, "0") != 0;

		sl_errmsg_format(buf, len, "%s %d waits in the kernel, in system call %s%s%s%s%s%s", who, (int)tid,
				 sc[0] ? sc : "?", in ? " in " : "", in ? wchan : "", stack[0] ? " (" : "", stack,
				 stack[0] ? ")" : "");
		return;
	}
	uint64_t ran = ran_since(tid, since);

	if (ran < DP_STARVED_NS)
		sl_errmsg_format(buf, len, "%s %d is ready to run but has had %.1f ms of a CPU since it last came "
				 "round: it waits for one (the machine is overloaded: other processes hold the CPUs)",
				 who, (int)tid, ran / 1e6);
	else
		sl_errmsg_format(buf, len, "%s %d is running: a loop that does not return", who, (int)tid);
}

bool dp_stall_check(struct dp_stall_watch *w, uint64_t passes, pid_t tid, uint64_t now_ns,
		    char *msg, size_t len)
{
	char at[512];

	if (!w->since_ns) { /* first look */
		w->passes = passes;
		w->since_ns = w->looked_ns = now_ns;
		w->ran = dp_cpu_mark(tid);
		return false;
	}
	uint64_t gap = now_ns > w->looked_ns ? now_ns - w->looked_ns : 0;

	w->looked_ns = now_ns;
	w->unseen_ns = gap > w->unseen_ns ? gap : w->unseen_ns;
	if (passes != w->passes || !tid) {
		bool was = w->told;
		uint64_t took = now_ns - w->since_ns;

		if (took >= DP_STALL_NS && tid)
			w->last = (struct dp_stall_end){ now_ns, took, ran_since(tid, w->ran) };
		w->passes = passes;
		w->since_ns = now_ns;
		w->ran = dp_cpu_mark(tid);
		w->unseen_ns = 0;
		w->told = false;
		if (!was)
			return false;
		sl_errmsg_format(msg, len, "the engine came round again after %.1f s", took / 1e9);
		return true;
	}
	if (w->told || now_ns - w->since_ns < DP_STALL_NS)
		return false;
	w->told = true;
	dp_stall_where(tid, "its thread", w->ran, at, sizeof(at));
	sl_errmsg_format(msg, len, "the engine has not come round for %.1f s: %s; its peers will "
			 "find it silent", (now_ns - w->since_ns) / 1e9, at);
	return true;
}

bool dp_stall_ended(const struct dp_stall_watch *w, uint64_t now_ns, uint64_t window_ns, char *msg, size_t len)
{
	const struct dp_stall_end *l = &w->last;
	char ran[192] = "";

	if (!l->at_ns || now_ns < l->at_ns || now_ns - l->at_ns > window_ns)
		return false;
	/* the mark is the watch's last look before the stall: up to a look's
	 * interval (100 ms) of ordinary passes is counted in the stall */
	if (l->ran_ns < DP_STARVED_NS || l->ran_ns < l->took_ns / 8)
		snprintf(ran, sizeof(ran), ": its thread had %.1f ms of a CPU in that time, so it was hardly run "
			 "(its process stopped by a signal or a debugger, or the machine overloaded)", l->ran_ns / 1e6);
	else if (l->ran_ns != UINT64_MAX)
		snprintf(ran, sizeof(ran), ": its thread ran %.1f ms in that time, in a pass that did not return "
			 "(a loop or a slow call)", l->ran_ns / 1e6);
	sl_errmsg_format(msg, len, "came round again %.1f s ago, after %.1f s without a pass%s",
			 (now_ns - l->at_ns) / 1e9, l->took_ns / 1e9, ran);
	return true;
}
