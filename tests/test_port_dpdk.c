/*
 * test_port_dpdk.c: the DPDK port over a real net_memif link between two
 * processes, each with its own EAL, as two dataplanes on one host run.
 *
 * A client sends 10000 frames of mixed sizes up to max_frame, each carrying
 * its sequence number and a byte pattern derived from it; a server checks
 * every byte, order and count, and that no frame arrived chained (the port
 * must size memif's buffers for max_frame).  Then a burst of 8 KB frames
 * measures throughput (printed, never asserted: these machines are noisy).
 * The server runs EAL on a thread of its own, as embedded mode does, and the
 * client starts first, so connecting before the server listens is covered.
 * Both ends stop polling before either closes: memif in DPDK 22.11 can crash
 * a receiver whose peer disconnects under it.  Each then closes its port and
 * cleans up EAL, which sluiced never does: a double free in DPDK's heap
 * (port teardown racing memif's interrupt thread) fails the run, and a
 * child's crash is reported with its stack.  Needs root.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_launch.h>
#include <rte_log.h>
#include <rte_lcore.h>

#include "eal.h"
#include "port_dpdk.h"

#ifndef TEST_MAX_FRAME
#define TEST_MAX_FRAME (8192 + 90)
#endif
#define N_MIXED 10000u
#define N_BULK 100000u
#define BULK_LEN 8192u
#define BURST 32
#define HOLD_MAX 16384u /* more than a port's tx pool holds */
/* How long a side may go without progress (a frame sent or received)
 * before it gives up: on a loaded machine either process may get a core
 * for a few milliseconds in a hundred, so the whole run's length says
 * nothing; a side that stopped does not recover within this. */
#define STALL_NS (20ull * 1000000000ull)
#define LINK_UP_MS 30000u /* as sluiced's default link wait (its --timeout): EAL and memif's handshake are slow under load */
/* The parent's backstop: more than a side's stalls and link wait can add up to */
#define RUN_NS (150ull * 1000000000ull)

/* Frame: Ethernet header, then kind, sequence number and length, then the pattern. */
#define ETHERTYPE_LOCAL 0x88b5 /* IEEE local experimental */
#define OFF_KIND 14
#define OFF_SEQ 18
#define OFF_LEN 22
#define HDR_LEN 26

enum kind { K_DATA = 1, K_BYE, K_BYE_ACK, K_FIN };

struct side {
	const char *role;  /* "server" or "client" */
	char devargs[256];
	char prefix[64];
	int engine_cpu;
	struct sl_port *port;
	int rc;            /* the run's result: 0 ok */
	char *stage;       /* where the child is, in memory the parent sees: a hang names its step */
};

#define STAGE_LEN 64

static void set_stage(struct side *s, const char *what)
{
	snprintf(s->stage, STAGE_LEN, "%s", what);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Every frame length from the sequence number alone: edges first, then spread. */
static uint32_t frame_len(uint32_t seq)
{
	static const uint32_t edges[] = { 60, 64, 1514, 2047, 2048, 2049, 2176, 4096, 8000, 8192,
					  TEST_MAX_FRAME - 1, TEST_MAX_FRAME };
	uint32_t h = seq * 2654435761u;

	if (seq >= N_MIXED)
		return BULK_LEN;
	if (seq % 16 < sizeof(edges) / sizeof(edges[0]))
		return edges[seq % 16];
	return 60 + (h >> 8) % (TEST_MAX_FRAME - 60 + 1);
}

static uint8_t pattern(uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 131u + i * 7u + (i >> 8));
}

static void fill_frame(struct sl_pkt *p, const uint8_t *mac, enum kind k, uint32_t seq)
{
	uint32_t len = k == K_DATA ? frame_len(seq) : 60;

	memset(p->data, 0xff, 6);
	memcpy(p->data + 6, mac, 6);
	p->data[12] = ETHERTYPE_LOCAL >> 8;
	p->data[13] = ETHERTYPE_LOCAL & 0xff;
	put32(p->data + OFF_KIND, k);
	put32(p->data + OFF_SEQ, seq);
	put32(p->data + OFF_LEN, len);
	/* The bulk phase measures the port, not the pattern: header only. */
	if (k == K_DATA && seq < N_MIXED)
		for (uint32_t i = HDR_LEN; i < len; i++)
			p->data[i] = pattern(seq, i);
	p->len = len;
}

/* Send one control frame, retrying while the ring is full. */
static int send_ctl(struct sl_port *port, enum kind k)
{
	struct sl_pkt p;
	uint64_t deadline = now_ns() + STALL_NS;

	if (port->ops->alloc(port, &p, 1) != 1)
		return -1;
	fill_frame(&p, port->mac, k, 0);
	while (port->ops->tx_burst(port, &p, 1) != 1)
		if (now_ns() > deadline) {
			port->ops->free(port, &p, 1);
			return -1;
		}
	return 0;
}

/* Poll until a control frame of kind k arrives; anything else is an error. */
static int wait_ctl(struct sl_port *port, enum kind k)
{
	uint64_t deadline = now_ns() + STALL_NS;
	struct sl_pkt p;

	while (now_ns() < deadline) {
		if (port->ops->rx_burst(port, &p, 1) == 0)
			continue;
		uint32_t got = get32(p.data + OFF_KIND);
		port->ops->free(port, &p, 1);
		if (got != (uint32_t)k) {
			fprintf(stderr, "expected control frame %d, got %u\n", k, got);
			return -1;
		}
		return 0;
	}
	fprintf(stderr, "timed out waiting for control frame %d\n", k);
	return -1;
}

static int run_sender(void *arg)
{
	struct side *s = arg;
	struct sl_port *port = s->port;
	struct sl_pkt pend[BURST];
	uint16_t npend = 0;
	uint32_t seq = 0;
	uint64_t deadline = now_ns() + STALL_NS;

	while (seq < N_MIXED + N_BULK || npend > 0) {
		if (now_ns() > deadline) {
			fprintf(stderr, "sender: nothing sent for %llu s, at seq %u\n", STALL_NS / 1000000000ull, seq);
			return -1;
		}
		/* Unsent frames stay pending and go first next time (tx_full). */
		uint16_t want = (uint16_t)RTE_MIN((uint32_t)(BURST - npend), N_MIXED + N_BULK - seq);
		uint16_t got = port->ops->alloc(port, pend + npend, want);
		for (uint16_t i = 0; i < got; i++)
			fill_frame(&pend[npend + i], port->mac, K_DATA, seq++);
		npend += got;
		uint16_t sent = port->ops->tx_burst(port, pend, npend);
		if (sent)
			deadline = now_ns() + STALL_NS;
		memmove(pend, pend + sent, (npend - sent) * sizeof(pend[0]));
		npend -= sent;
	}
	/* Goodbye: BYE, wait for BYE_ACK, FIN, then stop polling for good. */
	if (send_ctl(port, K_BYE) != 0 || wait_ctl(port, K_BYE_ACK) != 0 || send_ctl(port, K_FIN) != 0)
		return -1;
	printf("# sender: %lu frames, %lu refused by a full ring and retried\n",
	       (unsigned long)port->stats.tx_pkts, (unsigned long)port->stats.tx_full);
	return 0;
}

static int check_frame(const struct sl_pkt *p, uint32_t expect_seq)
{
	uint32_t seq = get32(p->data + OFF_SEQ);
	uint32_t len = frame_len(seq);

	if (get32(p->data + OFF_KIND) != K_DATA || seq != expect_seq || p->len != len ||
	    get32(p->data + OFF_LEN) != len) {
		fprintf(stderr, "receiver: frame kind %u seq %u len %u, expected seq %u len %u\n",
			get32(p->data + OFF_KIND), seq, p->len, expect_seq, frame_len(expect_seq));
		return -1;
	}
	if (seq < N_MIXED)
		for (uint32_t i = HDR_LEN; i < len; i++)
			if (p->data[i] != pattern(seq, i)) {
				fprintf(stderr, "receiver: seq %u len %u: byte %u is %#x, not %#x\n",
					seq, len, i, p->data[i], pattern(seq, i));
				return -1;
			}
	return 0;
}

static int run_receiver(void *arg)
{
	struct side *s = arg;
	struct sl_port *port = s->port;
	struct sl_pkt pkts[BURST];
	uint32_t expect = 0;
	uint64_t t_bulk = 0, t_end = 0;
	uint64_t deadline = now_ns() + STALL_NS;
	struct rusage ru0, ru1;
	int rc = 0;
	/* Hold every tx buffer the port has while receiving: frames waiting to
	 * leave must never take the buffers it receives into. */
	struct sl_pkt *held = malloc(HOLD_MAX * sizeof(*held));
	uint32_t nheld = 0;

	if (!held)
		return -1;
	for (uint16_t got; nheld < HOLD_MAX && (got = port->ops->alloc(port, held + nheld,
			(uint16_t)RTE_MIN(BURST, HOLD_MAX - nheld))) > 0;)
		nheld += got;
	if (nheld == HOLD_MAX) {
		fprintf(stderr, "receiver: the tx pool did not run dry within %u buffers\n", HOLD_MAX);
		rc = -1;
	}
	while (rc == 0 && expect < N_MIXED + N_BULK) {
		if (now_ns() > deadline) {
			fprintf(stderr, "receiver: nothing received for %llu s, with %u of %u frames (holding %u tx "
				"buffers)\n", STALL_NS / 1000000000ull, expect, N_MIXED + N_BULK, nheld);
			rc = -1;
			break;
		}
		/* Never past the last data frame: BYE may follow it in the same burst. */
		uint16_t n = port->ops->rx_burst(port, pkts,
						 (uint16_t)RTE_MIN((uint32_t)BURST, N_MIXED + N_BULK - expect));
		if (n)
			deadline = now_ns() + STALL_NS;
		for (uint16_t i = 0; i < n && rc == 0; i++)
			rc = check_frame(&pkts[i], expect++);
		if (expect > N_MIXED && t_bulk == 0) {
			t_bulk = now_ns();
			getrusage(RUSAGE_THREAD, &ru0);
		}
		port->ops->free(port, pkts, n);
	}
	t_end = now_ns();
	getrusage(RUSAGE_THREAD, &ru1);
	port->ops->free(port, held, (uint16_t)nheld);
	free(held);
	if (rc != 0)
		return rc;
	if (wait_ctl(port, K_BYE) != 0 || send_ctl(port, K_BYE_ACK) != 0 || wait_ctl(port, K_FIN) != 0)
		return -1;

	double secs = (double)(t_end - t_bulk) / 1e9;
	double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
			      ru0.ru_stime.tv_sec) +
		     (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
			      ru0.ru_stime.tv_usec) / 1e6;
	uint32_t nb = N_BULK - 1; /* frames after the first bulk one was seen */
	printf("# receiver: %u frames ok, max_frame %u, rx_chained %lu, dropped %lu\n", expect,
	       port->max_frame, (unsigned long)port->stats.rx_chained,
	       (unsigned long)sl_dpdk_port_rx_dropped(port));
	printf("# memif %u B frames: %.0f frames/s, %.2f Gbit/s (receiver CPU %.0f%%)\n", BULK_LEN,
	       nb / secs, nb * (double)BULK_LEN * 8 / secs / 1e9, 100 * cpu / secs);
	if (port->stats.rx_chained != 0 || sl_dpdk_port_rx_dropped(port) != 0) {
		fprintf(stderr, "receiver: frames arrived chained: memif bsize not sized for max_frame\n");
		return -1;
	}
	return 0;
}

/* Run fn on the engine lcore; the main lcore sleeps meanwhile (rte_eal_wait_lcore spins). */
static int run_on_engine(lcore_function_t *fn, struct side *s, unsigned lcore)
{
	if (rte_eal_remote_launch(fn, s, lcore) != 0)
		return -1;
	while (rte_eal_get_lcore_state(lcore) != WAIT)
		usleep(1000);
	return rte_eal_wait_lcore(lcore);
}

/*
 * EAL's log, on its way to stderr, is watched for rte_free's "Invalid
 * memory": a double free in DPDK's heap, which port teardown racing memif's
 * interrupt thread made in most runs and which now and then crashed or hung
 * the process after.
 */
static bool bad_free_seen;

static ssize_t watch_log(void *cookie, const char *buf, size_t len)
{
	(void)cookie;
	if (memmem(buf, len, "Invalid memory", strlen("Invalid memory")) != NULL)
		__atomic_store_n(&bad_free_seen, true, __ATOMIC_RELAXED);
	return (ssize_t)fwrite(buf, 1, len, stderr);
}

static void watch_eal_log(void)
{
	FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){ .write = watch_log });

	if (f != NULL) {
		setvbuf(f, NULL, _IOLBF, 0);
		rte_openlog_stream(f);
	}
}

/* One dataplane's life: EAL, port, link, traffic, goodbye, teardown. */
static void *side_main(void *arg)
{
	struct side *s = arg;
	bool server = strcmp(s->role, "server") == 0;
	struct sl_eal_cfg cfg = {
		.prefix = s->prefix, .engine_cpu = s->engine_cpu, .mem_mb = 512, .huge = true,
		.log_level = "*:error", .vdevs = NULL,
	};
	char err[512];
	unsigned lcore;

	s->rc = -1;
	set_stage(s, "starting EAL");
	if (sl_eal_start(&cfg, &lcore, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", s->role, err);
		return NULL;
	}
	watch_eal_log();
	if (sl_dpdk_port_open(s->devargs, UINT16_MAX, 512, 512, err, sizeof(err)) != NULL) {
		fprintf(stderr, "%s: a max_frame over the mbuf limit was accepted\n", s->role);
		goto out;
	}
	set_stage(s, "opening the port and waiting for the link");
	s->port = sl_dpdk_port_open(s->devargs, TEST_MAX_FRAME, 1024, 1024, err, sizeof(err));
	if (s->port == NULL || sl_port_wait_up(s->port, LINK_UP_MS, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", s->role, err);
		goto out;
	}
	if (!s->port->crc) { /* memif has no FCS: the transport must add its CRC trailer */
		fprintf(stderr, "%s: the port does not ask for a CRC trailer\n", s->role);
		goto out;
	}
	set_stage(s, "sending and checking frames");
	s->rc = run_on_engine(server ? run_receiver : run_sender, s, lcore);
	/* The sender closes last: its peer closes first once it saw FIN and stopped. */
	if (!server) {
		set_stage(s, "waiting for the peer to close");
		uint64_t deadline = now_ns() + 5000000000ull;

		while (sl_dpdk_port_link_up(s->port) && now_ns() < deadline)
			usleep(1000);
	}
out:
	set_stage(s, "closing the port");
	if (s->port != NULL)
		s->port->ops->close(s->port);
	set_stage(s, "cleaning up EAL");
	sl_eal_stop();
	set_stage(s, "exiting");
	if (__atomic_load_n(&bad_free_seen, __ATOMIC_RELAXED)) {
		fprintf(stderr, "%s: DPDK's heap saw a double free (\"Invalid memory\" above): the port's "
			"teardown raced memif's interrupt thread; see dataplane/eal_intr.h\n", s->role);
		s->rc = -1;
	}
	return NULL;
}

/*
 * cmocka catches SIGSEGV and its kin and exits with status 255 without a
 * word of where, which hid a child's crash in EAL cleanup (exit 255, as a
 * hang was reported too).  Children put back the handlers from before
 * cmocka's: the sanitizers' print the stack, and without them the parent
 * names the signal.
 */
static const int crash_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE };
static struct sigaction crash_actions[sizeof(crash_signals) / sizeof(crash_signals[0])];

static pid_t spawn(struct side *s, bool own_thread)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	for (size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); i++)
		sigaction(crash_signals[i], &crash_actions[i], NULL);
	if (own_thread) {
		/* Embedded mode: EAL and everything else on a thread we made. */
		pthread_t t;

		if (pthread_create(&t, NULL, side_main, s) != 0 || pthread_join(t, NULL) != 0)
			_exit(2);
	} else {
		side_main(s);
	}
	fflush(stdout);
	_exit(s->rc == 0 ? 0 : 1);
}

/* The two CPUs the engines get: distinct when there are two or more. */
static void pick_cpus(int *a, int *b)
{
	cpu_set_t set;
	int found = 0;

	*a = *b = -1;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
		if (CPU_ISSET(c, &set))
			*(found++ == 0 ? a : b) = c;
	if (*b < 0)
		*b = *a;
}

static void test_memif_two_processes(void **state)
{
	char dir[] = "/tmp/sluice-port-XXXXXX";
	char sock[128];
	struct side srv = { .role = "server" }, cli = { .role = "client" };
	char *stages = mmap(NULL, 2 * STAGE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pids[2];
	int status[2] = { -1, -1 };
	uint64_t deadline;

	(void)state;
	assert_true(stages != MAP_FAILED);
	cli.stage = stages;
	srv.stage = stages + STAGE_LEN;
	set_stage(&cli, "not started");
	set_stage(&srv, "not started");
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/n0-n1.sock", dir);
	snprintf(srv.devargs, sizeof(srv.devargs),
		 "net_memif0,role=server,socket=%s,socket-abstract=no", sock);
	snprintf(cli.devargs, sizeof(cli.devargs),
		 "net_memif0,role=client,socket=%s,socket-abstract=no", sock);
	snprintf(srv.prefix, sizeof(srv.prefix), "sluice-test-srv-%d", (int)getpid());
	snprintf(cli.prefix, sizeof(cli.prefix), "sluice-test-cli-%d", (int)getpid());
	pick_cpus(&srv.engine_cpu, &cli.engine_cpu);

	fflush(stdout);
	pids[0] = spawn(&cli, false);
	usleep(100000); /* let the client look for a server that is not there yet */
	pids[1] = spawn(&srv, true);
	assert_true(pids[0] > 0 && pids[1] > 0);

	deadline = now_ns() + RUN_NS;
	for (int left = 2; left > 0 && now_ns() < deadline;) {
		for (int i = 0; i < 2; i++)
			if (status[i] == -1 && waitpid(pids[i], &status[i], WNOHANG) == pids[i])
				left--;
		usleep(10000);
	}
	for (int i = 0; i < 2; i++) {
		const char *who = i == 0 ? "client" : "server", *stage = i == 0 ? cli.stage : srv.stage;

		if (status[i] == -1) {
			fprintf(stderr, "%s: did not exit within %llu s, killed while %s\n", who,
				RUN_NS / 1000000000ull, stage);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		} else if (!WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0) {
			fprintf(stderr, "%s: %s %d while %s\n", who,
				WIFSIGNALED(status[i]) ? "killed by signal" : "exit status",
				WIFSIGNALED(status[i]) ? WTERMSIG(status[i]) : WEXITSTATUS(status[i]), stage);
		}
	}
	/* A child that died could not remove its EAL runtime directory. */
	for (int i = 0; i < 2; i++) {
		char rt[128];

		snprintf(rt, sizeof(rt), "/var/run/dpdk/%s", i == 0 ? cli.prefix : srv.prefix);
		rmdir(rt);
	}
	unlink(sock);
	munmap(stages, 2 * STAGE_LEN);
	assert_int_equal(rmdir(dir), 0);
	assert_true(status[0] != -1 && WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0);
	assert_true(status[1] != -1 && WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 0);
}

/* Argument errors are caught before EAL is touched (it allows one init per process). */
static void test_eal_bad_args(void **state)
{
	struct sl_eal_cfg cfg = { .prefix = "sluice-test-bad", .engine_cpu = CPU_SETSIZE + 1 };
	char err[512] = "";
	unsigned lcore;

	(void)state;
	assert_int_equal(sl_eal_start(&cfg, &lcore, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "engine CPU"));
	cfg.prefix = NULL;
	assert_int_equal(sl_eal_start(&cfg, &lcore, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "prefix"));
}

static void make_run_dir(const char *root, const char *name, bool with_files)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, name);
	assert_int_equal(mkdir(path, 0700), 0);
	if (!with_files)
		return;
	for (const char *const *f = (const char *const[]){ "config", "mp_socket", "fbarray_memzone", NULL }; *f; f++) {
		char file[600];
		FILE *fp;

		snprintf(file, sizeof(file), "%s/%s", path, *f);
		assert_non_null(fp = fopen(file, "w"));
		fclose(fp);
	}
}

static bool run_dir_exists(const char *root, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	return stat(path, &st) == 0;
}

/* A process that holds a write lock on path (as an EAL primary holds its
 * config file) until killed. */
static pid_t hold_lock(const char *path)
{
	int ready[2];
	char c;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		int fd = open(path, O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no holder behind */
		if (fd < 0 || fcntl(fd, F_SETLK, &l) != 0 || write(ready[1], "k", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	close(ready[1]);
	return pid;
}

/* A killed dataplane's runtime directory goes at the next start; a live
 * one's (by its pid, or by its config lock when its pid means nothing
 * here), another program's and a name without a pid stay. */
static void test_eal_reaps_dead_runs(void **state)
{
	char root[] = "/tmp/sluice-reap-XXXXXX", dead[64], alive[64], gone_empty[64], elsewhere[64], path[600];
	pid_t child = fork(), holder;

	(void)state;
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_non_null(mkdtemp(root));
	snprintf(dead, sizeof(dead), "sluice-n0-%d", (int)child);
	snprintf(gone_empty, sizeof(gone_empty), "sluice-n12-%d", (int)child);
	snprintf(alive, sizeof(alive), "sluice-n1-%d", (int)getpid());
	make_run_dir(root, dead, true);
	make_run_dir(root, gone_empty, false);
	make_run_dir(root, alive, true);
	make_run_dir(root, "rte", true);
	make_run_dir(root, "sluice-n2-", false);
	make_run_dir(root, "sluice-n3-12x", false);
	/* a pid from another namespace: dead here, its primary alive */
	snprintf(elsewhere, sizeof(elsewhere), "sluice-n4-%d", (int)child);
	make_run_dir(root, elsewhere, true);
	snprintf(path, sizeof(path), "%s/%s/config", root, elsewhere);
	holder = hold_lock(path);

	assert_int_equal(sl_eal_reap(root), 2);
	assert_true(run_dir_exists(root, elsewhere));
	kill(holder, SIGKILL);
	assert_int_equal(waitpid(holder, NULL, 0), holder);
	assert_int_equal(sl_eal_reap(root), 1); /* its primary gone */
	assert_false(run_dir_exists(root, elsewhere));
	assert_false(run_dir_exists(root, dead));
	assert_false(run_dir_exists(root, gone_empty));
	assert_true(run_dir_exists(root, alive));
	assert_true(run_dir_exists(root, "rte"));
	assert_true(run_dir_exists(root, "sluice-n2-"));
	assert_true(run_dir_exists(root, "sluice-n3-12x"));
	assert_int_equal(sl_eal_reap(root), 0);
	snprintf(dead, sizeof(dead), "rm -rf %s", root);
	assert_int_equal(system(dead), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eal_bad_args),
		cmocka_unit_test(test_eal_reaps_dead_runs),
		cmocka_unit_test(test_memif_two_processes),
	};

	if (geteuid() != 0) {
		printf("# test_port_dpdk needs root (EAL, memif); skipped\n");
		return 77;
	}
	for (size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); i++)
		sigaction(crash_signals[i], NULL, &crash_actions[i]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
