/*
 * eal.c: EAL bring-up for one dataplane instance.
 *
 * Everything EAL needs to know is decided here, once, from sl_eal_cfg and
 * what the machine has: no PCI scan (the VM's own NIC is not ours), hugepages
 * only when enough are free and mounted (they are shared with everything else
 * on the host), a file prefix of our own so two dataplanes on one host never
 * share /var/run/dpdk/<prefix>, and an lcore map that pins only the engine.
 * With hugepages and cfg.zero_copy the memory is laid out so that memif's
 * zero-copy clients can share it (and kept usable after the driver closes
 * its files: mem_fds).
 */
#include "eal.h"
#include "eal_intr.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_memory.h>

#include <sluice/errmsg.h>

#define SL_EAL_MAIN_LCORE 0u
#define SL_EAL_ENGINE_LCORE 1u
#define SL_EAL_DEFAULT_MEM_MB 512u
/* Descriptor numbers kept free below EAL's in the zero-copy layout (see
 * hold_low_fds), per link opened after EAL (a memif link takes about 10) and
 * at least. */
#define SL_EAL_FD_GAP_PER_LINK 16u
#define SL_EAL_FD_GAP_MIN 256u

/* EAL may keep pointers into argv after rte_eal_init returns, so it lives until stop. */
static char **eal_argv;
static int eal_argc;

/* EAL allows one rte_eal_init per process, failed or not, and no restart after cleanup. */
static enum { EAL_UNUSED, EAL_RUNNING, EAL_SPENT } eal_state;
static bool huge_layout; /* EAL runs on hugepages */

/*
 * The file of each hugepage memseg list as EAL numbers it (fd) and our own
 * duplicate of it (keep), in the zero-copy layout.  22.11's memif closes
 * EAL's fd once a zero-copy client has connected (memif_connect, "close
 * memseg file"), so the next zero-copy client would send the server a stale
 * or reused descriptor; sl_eal_restore_mem_fds() puts the file back.
 */
static struct mem_fd {
	int fd, keep;
} mem_fds[RTE_MAX_MEMSEG_LISTS];
static unsigned n_mem_fds;
static bool zero_copy_layout;

/*
 * Hold the lowest free descriptor numbers open on /dev/null (as many as the
 * links will use, up to half the limit) while EAL starts, so that EAL's files
 * get numbers above that block, which the caller closes once EAL is up.  A
 * number memif closes is then not the lowest free one: what the process
 * opens meanwhile (other links' sockets, eventfds, memfds) takes the block
 * below it, and
 * sl_eal_restore_mem_fds() finds it still free (without the block 9 of 20
 * runs of 3 nodes x 4 channels found it taken, with it none).  Sets *fds to
 * a malloc'd array; returns how many are held.
 */
static unsigned hold_low_fds(unsigned links, int **fds)
{
	struct rlimit lim;
	unsigned n = 0, max = SL_EAL_FD_GAP_PER_LINK * links;

	max = max > SL_EAL_FD_GAP_MIN ? max : SL_EAL_FD_GAP_MIN;
	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur / 2 < max)
		max = (unsigned)(lim.rlim_cur / 2);
	*fds = calloc(max, sizeof(**fds));
	while (*fds != NULL && n < max && ((*fds)[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		n++;
	return n;
}

void sl_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	sl_errmsg_vformat(err, errlen, fmt, ap);
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

/* rte_memseg_walk callback: keep each list's file once (all its segments share it). */
static int keep_mem_fd(const struct rte_memseg_list *msl, const struct rte_memseg *ms, void *arg)
{
	int fd = rte_memseg_get_fd_thread_unsafe(ms);

	(void)msl;
	(void)arg;
	for (unsigned i = 0; i < n_mem_fds; i++)
		if (mem_fds[i].fd == fd)
			return 0;
	if (fd < 0 || n_mem_fds == RTE_DIM(mem_fds))
		return -1;
	mem_fds[n_mem_fds].fd = fd;
	mem_fds[n_mem_fds].keep = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return mem_fds[n_mem_fds++].keep < 0 ? -1 : 0;
}

/* The pid at the end of a "sluice-...-<pid>" name, or 0. */
static pid_t prefix_pid(const char *name)
{
	const char *dash = strrchr(name, '-');
	char *end;
	long pid;

	if (strncmp(name, "sluice-", 7) != 0 || dash == NULL || dash[1] == '\0')
		return 0;
	pid = strtol(dash + 1, &end, 10);
	return *end == '\0' && pid > 0 && pid <= INT_MAX ? (pid_t)pid : 0;
}

/* Whether a process holds a lock on dir's EAL config file (a primary does,
 * while it runs: one in another pid namespace looks dead to kill()). */
static bool config_locked(const char *dir)
{
	char path[PATH_MAX];
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd;
	bool locked;

	if (snprintf(path, sizeof(path), "%s/config", dir) >= (int)sizeof(path) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	locked = fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK;
	close(fd);
	return locked;
}

unsigned sl_eal_reap(const char *root)
{
	DIR *d = opendir(root);
	struct dirent *de;
	unsigned gone = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		pid_t pid = prefix_pid(de->d_name);
		char path[PATH_MAX];
		DIR *sub;

		if (pid == 0 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", root, de->d_name);
		if (config_locked(path) || (sub = opendir(path)) == NULL)
			continue;
		/* EAL's files only (config, fbarray_*, hugepage_info, mp_socket): no subdirectories */
		for (struct dirent *f; (f = readdir(sub)) != NULL;)
			if (f->d_name[0] != '.')
				unlinkat(dirfd(sub), f->d_name, 0);
		closedir(sub);
		gone += rmdir(path) == 0;
	}
	closedir(d);
	return gone;
}

/* Where EAL puts <prefix>'s runtime directory (eal_get_runtime_dir's rule). */
static void runtime_root(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	snprintf(buf, len, "%s/dpdk", getuid() == 0 ? "/var/run" : xdg != NULL ? xdg : "/tmp");
}

int sl_eal_start(const struct sl_eal_cfg *cfg, unsigned *engine_lcore, char *err, size_t errlen)
{
	char root[PATH_MAX];
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
	/* A prefix has a pid in it, so a killed dataplane's directory stays for good: 14,000 on one test machine */
	runtime_root(root, sizeof(root));
	sl_eal_reap(root);
	/* Enough free to cover what --no-huge would have been given, or not worth it. */
	unsigned long huge_mb = cfg->huge ? huge_free_mb() : 0;
	huge = huge_mb >= mem_mb && hugetlbfs_mounted();

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
	if (huge && cfg->zero_copy) {
		/*
		 * memif zero-copy shares each memseg list as one file (it insists on
		 * --single-file-segments, which EAL refuses with --huge-unlink);
		 * --in-memory keeps those files off the filesystem instead, so that
		 * still nothing is left behind.  The memory sized for us up front,
		 * and kept: EAL has no need to grow or shrink a list through the
		 * file memif closes (see mem_fds).
		 */
		rc |= push_arg(strdup("--in-memory"));
		rc |= push_arg(strdup("--single-file-segments"));
		rc |= push_arg(strdup("-m"));
		rc |= asprintf(&eal_argv[eal_argc++], "%u", mem_mb) < 0 ? -1 : 0;
	} else if (huge) {
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
	int *held = NULL;
	unsigned nheld = huge && cfg->zero_copy ? hold_low_fds(cfg->links, &held) : 0;

	memcpy(argv_copy, eal_argv, sizeof(*eal_argv) * eal_argc);
	argv_copy[eal_argc] = NULL;
	rc = rte_eal_init(eal_argc, argv_copy);
	while (nheld > 0)
		close(held[--nheld]);
	free(held);
	if (rc < 0) {
		int e = rte_errno;
		char args[1024];

		join_argv(args, sizeof(args));
		if (huge)
			/* EAL's own hints ("permission denied", "run as root") mislead then */
			sl_set_err(err, errlen, "rte_eal_init failed (%s) on hugepages: %lu MiB were free when "
				   "it began, %lu now; if they went meanwhile, another process took them or "
				   "their reservation was given back: run again, or without hugepages "
				   "(sluiced --no-huge) [args: %s]", rte_strerror(e), huge_mb, huge_free_mb(), args);
		else
			sl_set_err(err, errlen, "rte_eal_init failed (%s): %s [args: %s]", rte_strerror(e),
				   init_hint(e), args);
		eal_state = EAL_SPENT;
		free_argv();
		return -1;
	}
	eal_state = EAL_RUNNING;
	*engine_lcore = SL_EAL_ENGINE_LCORE;
	huge_layout = huge;
	zero_copy_layout = huge && cfg->zero_copy;
	if (zero_copy_layout && rte_memseg_walk(keep_mem_fd, NULL) != 0) {
		sl_set_err(err, errlen, "sl_eal_start: cannot duplicate the hugepage files' descriptors (%u "
			   "kept, out of descriptors?); run without zero-copy (--no-zero-copy)", n_mem_fds);
		sl_eal_stop();
		return -1;
	}
	return 0;
}

bool sl_eal_huge(void)
{
	return eal_state == EAL_RUNNING && huge_layout;
}

bool sl_eal_zero_copy(void)
{
	return eal_state == EAL_RUNNING && zero_copy_layout;
}

int sl_eal_restore_mem_fds(char *err, size_t errlen)
{
	for (unsigned i = 0; i < n_mem_fds; i++) {
		struct stat have, want;
		int fd = mem_fds[i].fd;

		if (fstat(mem_fds[i].keep, &want) != 0)
			continue; /* cannot happen: keep is ours */
		if (fstat(fd, &have) == 0) {
			if (have.st_dev == want.st_dev && have.st_ino == want.st_ino)
				continue;
		} else if (errno == EBADF) {
			/* the lowest free number from fd on, atomically: fd itself if still free */
			int got = fcntl(mem_fds[i].keep, F_DUPFD_CLOEXEC, fd);
			if (got == fd)
				continue;
			if (got >= 0)
				close(got);
		}
		sl_set_err(err, errlen, "hugepage file descriptor %d was closed by memif and is now taken by "
			   "another file: no more zero-copy links in this process", fd);
		return -1;
	}
	return 0;
}

void sl_eal_stop(void)
{
	char dir[PATH_MAX];

	if (eal_state != EAL_RUNNING)
		return;
	eal_state = EAL_SPENT;
	for (; n_mem_fds > 0; n_mem_fds--)
		close(mem_fds[n_mem_fds - 1].keep);
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	/* 22.11's interrupt thread outlives cleanup: let it take in the ports' teardown first (eal_intr.h). */
	sl_eal_settle_intr_thread();
	rte_eal_cleanup();
	/* EAL leaves its (by now empty) per-prefix directory; with a pid in the prefix they pile up. */
	rmdir(dir);
	free_argv();
}
