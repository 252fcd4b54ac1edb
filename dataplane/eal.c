/*
 * eal.c: EAL bring-up for one dataplane instance.
 *
 * Everything EAL needs to know is decided here, once, from sl_eal_cfg and
 * what the machine has: no PCI scan (the VM's own NIC is not ours), hugepages
 * only when enough are free and mounted (they are shared with everything else
 * on the host), a file prefix of our own so two dataplanes on one host never
 * share /var/run/dpdk/<prefix>, and an lcore map that pins only the engine.
 */
#include "eal.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

#define SL_EAL_MAIN_LCORE 0u
#define SL_EAL_ENGINE_LCORE 1u
#define SL_EAL_DEFAULT_MEM_MB 512u

/* EAL may keep pointers into argv after rte_eal_init returns, so it lives until stop. */
static char **eal_argv;
static int eal_argc;

/* EAL allows one rte_eal_init per process, failed or not, and no restart after cleanup. */
static enum { EAL_UNUSED, EAL_RUNNING, EAL_SPENT } eal_state;

void sl_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Free hugepage memory in MiB per /proc/meminfo (0 when none or unreadable). */
static unsigned long huge_free_mb(void)
{
	unsigned long free_pages = 0, page_kb = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		sscanf(line, "HugePages_Free: %lu", &free_pages);
		sscanf(line, "Hugepagesize: %lu kB", &page_kb);
	}
	fclose(f);
	return free_pages * page_kb / 1024;
}

/* EAL needs a hugetlbfs mount to map hugepages from, not just reserved pages. */
static bool hugetlbfs_mounted(void)
{
	char dev[256], dir[256], type[64];
	bool found = false;
	FILE *f = fopen("/proc/mounts", "r");

	if (f == NULL)
		return false;
	while (!found && fscanf(f, "%255s %255s %63s %*[^\n]", dev, dir, type) == 3)
		found = strcmp(type, "hugetlbfs") == 0;
	fclose(f);
	return found;
}

/* Write set as "(0-3,6)" into buf: EAL's --lcores group syntax. */
static int format_cpuset(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;
	int cpu = 0;

	off += snprintf(buf + off, len - off, "(");
	while (cpu < CPU_SETSIZE && off < len) {
		int last;

		if (!CPU_ISSET(cpu, set)) {
			cpu++;
			continue;
		}
		for (last = cpu; last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set); last++)
			;
		off += snprintf(buf + off, len - off, "%s%d", off > 1 ? "," : "", cpu);
		if (last > cpu && off < len)
			off += snprintf(buf + off, len - off, "-%d", last);
		cpu = last + 1;
	}
	if (off < len)
		off += snprintf(buf + off, len - off, ")");
	return off < len ? 0 : -1;
}

/* The n-th CPU of allowed at or after first, wrapping around; -1 if none. */
static int nth_allowed_cpu(const cpu_set_t *allowed, int first, unsigned n)
{
	for (int k = 0; k < CPU_SETSIZE; k++) {
		int cpu = (first + k) % CPU_SETSIZE;
		if (CPU_ISSET(cpu, allowed) && n-- == 0)
			return cpu;
	}
	return -1;
}

/*
 * "--lcores=0@(main set),1@(engine 0's set),2@(engine 1's set)...".  The
 * main lcore (the calling thread, which EAL re-pins to its set) floats over
 * the CPUs we may use, minus the engines', so it never competes with a
 * poller; only the engines are pinned, engine c to the c-th allowed CPU from
 * engine_cpu on.  Without engine_cpu every engine floats.
 */
static char *lcores_arg(int engine_cpu, unsigned engines, char *err, size_t errlen)
{
	cpu_set_t allowed, main_set, engine_set[SL_EAL_MAX_ENGINES];
	char main_str[512], engine_str[512], *arg, *more;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
		sl_set_err(err, errlen, "sched_getaffinity: %s", strerror(errno));
		return NULL;
	}
	main_set = allowed;
	for (unsigned c = 0; c < engines; c++)
		engine_set[c] = allowed;
	if (engine_cpu >= 0) {
		if (engine_cpu >= CPU_SETSIZE || !CPU_ISSET(engine_cpu, &allowed)) {
			sl_set_err(err, errlen,
				"engine CPU %d is not in this thread's allowed CPUs (%d usable); "
				"pick another or -1 for any", engine_cpu, CPU_COUNT(&allowed));
			return NULL;
		}
		for (unsigned c = 0; c < engines; c++) {
			int cpu = nth_allowed_cpu(&allowed, engine_cpu, c % (unsigned)CPU_COUNT(&allowed));
			CPU_ZERO(&engine_set[c]);
			CPU_SET(cpu, &engine_set[c]);
			CPU_CLR(cpu, &main_set);
		}
		if (CPU_COUNT(&main_set) == 0)
			main_set = allowed;
	}
	if (format_cpuset(&main_set, main_str, sizeof(main_str)) != 0 ||
	    asprintf(&arg, "--lcores=%u@%s", SL_EAL_MAIN_LCORE, main_str) < 0) {
		sl_set_err(err, errlen, "cannot format the lcore map");
		return NULL;
	}
	for (unsigned c = 0; c < engines; c++) {
		if (format_cpuset(&engine_set[c], engine_str, sizeof(engine_str)) != 0 ||
		    asprintf(&more, "%s,%u@%s", arg, SL_EAL_ENGINE_LCORE + c, engine_str) < 0) {
			free(arg);
			sl_set_err(err, errlen, "cannot format the lcore map");
			return NULL;
		}
		free(arg);
		arg = more;
	}
	return arg;
}

static void free_argv(void)
{
	for (int i = 0; i < eal_argc; i++)
		free(eal_argv[i]);
	free(eal_argv);
	eal_argv = NULL;
	eal_argc = 0;
}

static int push_arg(char *arg)
{
	if (arg == NULL)
		return -1;
	eal_argv[eal_argc++] = arg;
	return 0;
}

static const char *init_hint(int e)
{
	switch (e) {
	case EALREADY:
		return "EAL runs once per process: it is already running, or was stopped and cannot restart";
	case EACCES:
		return "run as root (EAL needs /var/run/dpdk and, with hugepages, hugetlbfs)";
	case ENOMEM:
	case EFAULT:
		return "not enough memory: lower the port's ring/pool sizes, raise mem_mb, or free hugepages";
	case ENODEV:
		return "a --vdev did not probe: check its devargs and that the driver plugin is installed";
	case EINVAL:
		return "EAL rejected an argument: see its log line above";
	default:
		return "see EAL's log lines above";
	}
}

static void join_argv(char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < eal_argc && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s", i ? " " : "", eal_argv[i]);
}

int sl_eal_start(const struct sl_eal_cfg *cfg, unsigned *engine_lcore, char *err, size_t errlen)
{
	unsigned mem_mb = cfg->mem_mb ? cfg->mem_mb : SL_EAL_DEFAULT_MEM_MB;
	const char *log_level = cfg->log_level ? cfg->log_level : "*:error";
	size_t nvdev = 0;
	bool huge;
	int rc = 0;

	if (cfg->prefix == NULL || cfg->prefix[0] == '\0') {
		sl_set_err(err, errlen, "sl_eal_start: a file prefix is required (one per dataplane instance)");
		return -1;
	}
	if (cfg->engines > SL_EAL_MAX_ENGINES) {
		sl_set_err(err, errlen, "sl_eal_start: %u engines, at most %u", cfg->engines, SL_EAL_MAX_ENGINES);
		return -1;
	}
	if (eal_state != EAL_UNUSED) {
		sl_set_err(err, errlen, "sl_eal_start: %s", init_hint(EALREADY));
		return -1;
	}
	while (cfg->vdevs != NULL && cfg->vdevs[nvdev] != NULL)
		nvdev++;
	/* Enough free to cover what --no-huge would have been given, or not worth it. */
	huge = cfg->huge && huge_free_mb() >= mem_mb && hugetlbfs_mounted();

	eal_argv = calloc(16 + nvdev, sizeof(*eal_argv));
	if (eal_argv == NULL) {
		sl_set_err(err, errlen, "sl_eal_start: out of memory");
		return -1;
	}
	rc |= push_arg(strdup("sluice"));
	rc |= push_arg(strdup("--no-pci"));
	/* sluice keeps its own counters in shared memory; no extra socket or thread. */
	rc |= push_arg(strdup("--no-telemetry"));
	/* The prefix keeps runtime files (and, with hugepages, the shared config) apart. */
	rc |= push_arg(strdup("--file-prefix"));
	rc |= push_arg(strdup(cfg->prefix));
	if (huge) {
		/* Unlink hugepage files once mapped: nothing is left behind if we crash. */
		rc |= push_arg(strdup("--huge-unlink"));
	} else {
		rc |= push_arg(strdup("--no-huge"));
		rc |= push_arg(strdup("-m"));
		rc |= asprintf(&eal_argv[eal_argc++], "%u", mem_mb) < 0 ? -1 : 0;
		/* Nothing to share without hugepages: no config file, no IPC socket. */
		rc |= push_arg(strdup("--no-shconf"));
	}
	if (rc == 0)
		rc = push_arg(lcores_arg(cfg->engine_cpu, cfg->engines ? cfg->engines : 1, err, errlen));
	else
		sl_set_err(err, errlen, "sl_eal_start: out of memory");
	if (rc != 0) {
		free_argv();
		return -1;
	}
	rc |= asprintf(&eal_argv[eal_argc++], "--log-level=%s", log_level) < 0 ? -1 : 0;
	for (size_t i = 0; i < nvdev; i++)
		rc |= asprintf(&eal_argv[eal_argc++], "--vdev=%s", cfg->vdevs[i]) < 0 ? -1 : 0;
	if (rc != 0) {
		sl_set_err(err, errlen, "sl_eal_start: out of memory");
		free_argv();
		return -1;
	}

	/* rte_eal_init permutes its argv: hand it a copy of the pointer array. */
	char *argv_copy[eal_argc + 1];
	memcpy(argv_copy, eal_argv, sizeof(*eal_argv) * eal_argc);
	argv_copy[eal_argc] = NULL;
	if (rte_eal_init(eal_argc, argv_copy) < 0) {
		int e = rte_errno;
		char args[1024];

		join_argv(args, sizeof(args));
		sl_set_err(err, errlen, "rte_eal_init failed (%s): %s [args: %s]", rte_strerror(e),
			init_hint(e), args);
		eal_state = EAL_SPENT;
		free_argv();
		return -1;
	}
	eal_state = EAL_RUNNING;
	*engine_lcore = SL_EAL_ENGINE_LCORE;
	return 0;
}

void sl_eal_stop(void)
{
	char dir[PATH_MAX];

	if (eal_state != EAL_RUNNING)
		return;
	eal_state = EAL_SPENT;
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	/* EAL leaves its (by now empty) per-prefix directory; with a pid in the prefix they pile up. */
	rmdir(dir);
	free_argv();
}
