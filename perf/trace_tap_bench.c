/*
 * trace_tap_bench.c: the trace tap's cost per frame, measured where it is
 * paid: bursts of full-size sluice frames sent and received through an
 * in-memory port pair (a copy per frame, as memif's copy mode does), bare,
 * through a detached tap, and through an attached one (headers only, the
 * ring drained between bursts as sluice-trace would from another core, its
 * time not counted).  Prints the best of many runs for each, since shared
 * machines only ever add time: a stable figure where busbw swings 3x.
 *
 * usage: trace-tap-bench [FRAME_BYTES] [RUNS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dp.h"
#include "memport.h"
#include "trace_tap.h"

#define BURST 32
#define BURSTS_PER_RUN 2000

struct bench {
	struct sl_port *a, *b;
	struct dp_trace trace;
	struct sl_port *tap;
	struct sl_trace_page *page; /* while attached */
	struct sl_spsc cons;
	uint8_t slot[4096];
	uint32_t frame;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One burst out of tx and into the other end; returns ns spent in the port calls,
 * and adds the time spent building the frames (the sender's payload copy) to *build. */
static uint64_t burst(struct bench *k, struct sl_port *tx, uint64_t *build)
{
	static const struct sl_addr s = { { 2, 0, 0, 0, 0, 1 }, 1 }, d = { { 2, 0, 0, 0, 0, 2 }, 2 };
	static uint8_t payload[65536];
	static uint32_t psn;
	struct sl_pkt pk[BURST];
	uint16_t n = tx->ops->alloc(tx, pk, BURST);
	uint64_t tb = now_ns();

	for (uint16_t i = 0; i < n; i++) {
		struct sl_hdr h = { .version = SL_WIRE_VERSION, .type = SL_T_DATA, .psn = psn++,
				    .len = k->frame - SL_FRAME_OVERHEAD };
		pk[i].len = sl_wire_build(pk[i].data, pk[i].cap, &s, &d, 1, &h, payload, NULL);
	}
	uint64_t t0 = now_ns();
	*build += t0 - tb;
	uint16_t sent = tx->ops->tx_burst(tx, pk, n);
	uint16_t got = k->b->ops->rx_burst(k->b, pk, BURST);
	uint64_t t = now_ns() - t0;
	k->b->ops->free(k->b, pk, got);
	if (sent < n)
		tx->ops->free(tx, pk + sent, (uint16_t)(n - sent));
	while (k->cons.sh && sl_spsc_dequeue(&k->cons, k->slot))
		;
	return t;
}

/* Best ns per frame in the port calls over runs; *build_best likewise for building frames. */
static double best_ns_per_frame(struct bench *k, struct sl_port *tx, int runs, double *build_best)
{
	double best = 1e30;

	*build_best = 1e30;
	for (int r = 0; r < runs; r++) {
		uint64_t t = 0, build = 0;
		for (int i = 0; i < BURSTS_PER_RUN; i++)
			t += burst(k, tx, &build);
		double per = (double)t / (BURSTS_PER_RUN * BURST), bper = (double)build / (BURSTS_PER_RUN * BURST);
		best = per < best ? per : best;
		*build_best = bper < *build_best ? bper : *build_best;
	}
	return best;
}

static void attach(struct bench *k)
{
	struct dp_engine e = { 0 };
	struct sl_ctl_msg m = { .type = SL_CTL_TRACE_ATTACH };
	struct sl_ctl_reply r = { 0 };
	int fd = dp_trace_attach(&k->trace, &e, &m, &r);

	if (fd < 0) {
		fprintf(stderr, "trace-tap-bench: %s\n", r.msg);
		exit(1);
	}
	size_t bytes = (size_t)lseek(fd, 0, SEEK_END);
	struct sl_trace_page *pg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	k->page = pg;
	if (pg == MAP_FAILED || pg->slot_size > sizeof(k->slot) ||
	    !sl_spsc_attach(&k->cons, (void *)((uint8_t *)pg + pg->ring_off), pg->slots, pg->slot_size, false)) {
		fprintf(stderr, "trace-tap-bench: cannot map the trace ring\n");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	static struct bench k;
	struct sl_memport_faults none = { 0 };
	int runs = argc > 2 ? atoi(argv[2]) : 30;

	k.frame = argc > 1 ? (uint32_t)atoi(argv[1]) : 8192 + SL_FRAME_OVERHEAD;
	if (k.frame < SL_FRAME_OVERHEAD || k.frame > 65536 || runs < 1 ||
	    sl_memport_pair(&k.a, &k.b, k.frame, 4 * BURST, &none) != 0) {
		fprintf(stderr, "usage: trace-tap-bench [FRAME_BYTES %u..65536] [RUNS]\n", SL_FRAME_OVERHEAD);
		return 2;
	}
	k.tap = dp_trace_tap(&k.trace, k.a, 1);
	double build, unused;
	best_ns_per_frame(&k, k.a, 3, &unused); /* warm caches and the pool */
	double bare = best_ns_per_frame(&k, k.a, runs, &build);
	double detached = best_ns_per_frame(&k, k.tap, runs, &unused);
	attach(&k);
	double attached = best_ns_per_frame(&k, k.tap, runs, &unused);
	printf("%u-byte frames, bursts of %d, best of %d runs, ns per frame through tx+rx of an in-memory\n"
	       "port pair (which passes pointers: the bare figure is the port layer's floor, not a link's):\n",
	       k.frame, BURST, runs);
	printf("  bare port         %8.1f\n", bare);
	printf("  tap, detached     %8.1f  (%+.1f ns per frame)\n", detached, detached - bare);
	printf("  tap, attached     %8.1f  (%+.1f ns per frame, headers only; ring drops %llu)\n", attached,
	       attached - bare, (unsigned long long)atomic_load(&k.page->dropped[0]));
	printf("  for scale: building one such frame (the sender's payload copy) takes %.1f ns here\n", build);
	dp_trace_detach(&k.trace);
	sl_memport_pair_free(k.a, k.b);
	return 0;
}
