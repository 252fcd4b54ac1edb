/*
 * membw.c: sluice-membw, how a machine's memory bandwidth divides between
 * pinned threads.  Each engine of a K-channel dataplane copies and checks
 * every payload byte several times (frame build, memif's copies, the CRC
 * check), so K engines at once share one memory system.  This tool shows
 * that share without sluice: memcpy by 1, 2, 4 ... N threads on CPUs 0..N-1,
 * each its own buffers, per-thread and total GB/s (wall clock, 0.6 s each).
 *
 *   sluice-membw [BYTES [MAX_THREADS]]   scaling table (BYTES like 64M; default 64M, all CPUs)
 *   sluice-membw --hog N FIRST SECONDS   N copying threads on CPUs FIRST..FIRST+N-1,
 *                                        to run next to a benchmark (GPU-NOTES.md 12)
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS_MAX 256

struct copier {
	pthread_t thread;
	int cpu;
	size_t bytes;
	double gbps; /* result */
	int failed;
};

static atomic_int started, stopping;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *copy_loop(void *arg)
{
	struct copier *c = arg;
	cpu_set_t set;
	char *src, *dst;
	double t0;
	size_t copied = 0;

	CPU_ZERO(&set);
	CPU_SET(c->cpu, &set);
	src = aligned_alloc(4096, c->bytes);
	dst = aligned_alloc(4096, c->bytes);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0 || !src || !dst) {
		c->failed = 1;
		free(src);
		free(dst);
		return NULL;
	}
	/* touch both before timing so that page faults are not counted */
	memset(src, 1, c->bytes);
	memset(dst, 2, c->bytes);
	while (!atomic_load(&started))
		;
	t0 = now_s();
	while (!atomic_load(&stopping)) {
		memcpy(dst, src, c->bytes);
		copied += c->bytes;
	}
	c->gbps = (double)copied / (now_s() - t0) / 1e9;
	free(src);
	free(dst);
	return NULL;
}

/* n copiers on CPUs first..first+n-1 for secs; 0, or -1 with a message. */
static int run_copiers(struct copier *c, int n, int first, size_t bytes, double secs)
{
	struct timespec warm = { 0, 100000000 }, span;

	atomic_store(&started, 0);
	atomic_store(&stopping, 0);
	for (int i = 0; i < n; i++) {
		c[i] = (struct copier){ .cpu = first + i, .bytes = bytes };
		if (pthread_create(&c[i].thread, NULL, copy_loop, &c[i]) != 0) {
			fprintf(stderr, "sluice-membw: cannot start thread %d\n", i);
			atomic_store(&started, 1);
			atomic_store(&stopping, 1);
			for (int j = 0; j < i; j++)
				pthread_join(c[j].thread, NULL);
			return -1;
		}
	}
	nanosleep(&warm, NULL);
	atomic_store(&started, 1);
	span.tv_sec = (time_t)secs;
	span.tv_nsec = (long)((secs - (double)span.tv_sec) * 1e9);
	nanosleep(&span, NULL);
	atomic_store(&stopping, 1);
	for (int i = 0; i < n; i++) {
		pthread_join(c[i].thread, NULL);
		if (c[i].failed) {
			fprintf(stderr, "sluice-membw: thread on CPU %d could not pin itself or allocate %zu bytes twice\n",
				c[i].cpu, bytes);
			return -1;
		}
	}
	return 0;
}

/* "64M", "1G", "4096": bytes, or 0 if not a size */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;

	if (end == s || (shift && end[1]) || (!shift && *end))
		return 0;
	return (size_t)v << shift;
}

static int usage(void)
{
	fprintf(stderr, "usage: sluice-membw [BYTES [MAX_THREADS]]\n"
			"       sluice-membw --hog N FIRST_CPU SECONDS\n");
	return 2;
}

int main(int argc, char **argv)
{
	static struct copier c[THREADS_MAX];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (argc == 5 && strcmp(argv[1], "--hog") == 0) {
		int n = atoi(argv[2]), first = atoi(argv[3]);
		double secs = atof(argv[4]), total = 0;

		if (n < 1 || n > THREADS_MAX || first < 0 || first + n > cpus || secs <= 0)
			return usage();
		if (run_copiers(c, n, first, 64u << 20, secs) != 0)
			return 1;
		for (int i = 0; i < n; i++)
			total += c[i].gbps;
		printf("hog: %d threads on CPUs %d-%d copied %.1f GB/s in all\n", n, first, first + n - 1, total);
		return 0;
	}
	if (argc > 3 || (argc > 1 && argv[1][0] == '-'))
		return usage();
	size_t bytes = argc > 1 ? parse_size(argv[1]) : 64u << 20;
	int max = argc > 2 ? atoi(argv[2]) : (int)cpus;

	if (bytes < 4096 || max < 1 || max > THREADS_MAX || max > cpus)
		return usage();
	printf("# memcpy of %zu B buffers, threads pinned to CPUs 0..N-1, 0.6 s each\n", bytes);
	printf("# threads  per-thread GB/s  slowest  total GB/s\n");
	for (int n = 1;; n = n * 2 > max && n < max ? max : n * 2) {
		double total = 0, slowest = 1e300;

		if (run_copiers(c, n, 0, bytes, 0.6) != 0)
			return 1;
		for (int i = 0; i < n; i++) {
			total += c[i].gbps;
			slowest = c[i].gbps < slowest ? c[i].gbps : slowest;
		}
		printf("%9d  %15.1f  %7.1f  %10.1f\n", n, total / n, slowest, total);
		if (n == max)
			break;
	}
	return 0;
}
