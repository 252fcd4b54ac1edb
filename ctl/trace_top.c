/*
 * trace_top.c: `sluice-trace top`: a live view of what the dataplanes send,
 * refreshed every interval: per flow (one per peer dataplane and
 * direction) and per communicator, Gbit/s, packets/s, retransmissions/s,
 * RTT and packets in flight, and the trace rings' drops.
 *
 * Rates come from the trace ring (headers only); RTT too, from each ACK's
 * echoed timestamp (the sender's own monotonic clock in microseconds, the
 * clock the ring's records carry); the congestion window, smoothed RTT and
 * packets in flight are the transport's own, which the engine copies into
 * the trace page about every millisecond while packets arrive.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace_cli.h"

#define MAX_COMMS 64

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct flow_stat {
	uint64_t bytes[2], pkts[2], retx;  /* [SL_TRACE_RX/TX] */
	uint64_t rtt_sum_us, rtt_n, rtt_max_us;
	uint64_t drops_seen;               /* the ring's counter at the last refresh */
};

struct comm_stat {
	uint32_t key32;
	uint64_t bytes, pkts, retx;
	uint32_t seq_max;
};

struct top {
	struct tr_source src[TR_MAX_SOURCES];
	unsigned nsrc;
	struct flow_stat flows[TR_MAX_SOURCES][SL_TRACE_MAX_PORTS];
	struct comm_stat comms[MAX_COMMS];
	unsigned ncomms;
	uint8_t *rec;
};

static struct comm_stat *comm_stat(struct top *t, uint32_t key32)
{
	for (unsigned i = 0; i < t->ncomms; i++)
		if (t->comms[i].key32 == key32)
			return &t->comms[i];
	if (t->ncomms == MAX_COMMS)
		return NULL;
	t->comms[t->ncomms] = (struct comm_stat){ .key32 = key32 };
	return &t->comms[t->ncomms++];
}

static void account(struct top *t, unsigned si, const struct sl_trace_rec *r)
{
	struct flow_stat *f = &t->flows[si][r->port];
	struct sl_trace_pkt p;
	bool tx = r->dir == SL_TRACE_TX;

	f->bytes[tx] += r->len;
	f->pkts[tx]++;
	if (!sl_trace_peek(r->data, r->caplen, &p))
		return;
	if (p.type == SL_TRACE_T_ACK && !tx && p.has_ack) {
		/* echo_ts is this dataplane's own clock, in microseconds, as the record's */
		uint64_t rtt = (uint32_t)(r->ts_ns / 1000) - p.echo_ts;
		f->rtt_sum_us += rtt;
		f->rtt_n++;
		f->rtt_max_us = rtt > f->rtt_max_us ? rtt : f->rtt_max_us;
		return;
	}
	if (p.type != SL_TRACE_T_DATA || !tx)
		return;
	f->retx += (p.flags & SL_TRACE_F_RETX) != 0;
	struct comm_stat *c = comm_stat(t, p.comm);
	if (c) {
		c->bytes += r->len;
		c->pkts++;
		c->retx += (p.flags & SL_TRACE_F_RETX) != 0;
		c->seq_max = p.seq > c->seq_max ? p.seq : c->seq_max;
	}
}

static void drain(struct top *t)
{
	struct sl_trace_rec *r = (struct sl_trace_rec *)t->rec;

	for (unsigned i = 0; i < t->nsrc; i++) {
		tr_sync_comms(&t->src[i]);
		while (tr_next(&t->src[i], r))
			if (r->port < t->src[i].nports)
				account(t, i, r);
	}
}

/* The transport's own figures for a flow, as the engine last copied them ("-": none yet). */
struct transport_cols {
	char srtt[16], cwnd[16], infl[16], credit[16], paths[16];
};

static void transport_view(const struct sl_trace_flow *fl, struct transport_cols *c)
{
	*c = (struct transport_cols){ "-", "-", "-", "-", "-" };
	if (!atomic_load_explicit(&fl->updated_ns, memory_order_acquire))
		return;
	uint64_t paths = atomic_load_explicit(&fl->paths, memory_order_relaxed);
	snprintf(c->srtt, sizeof(c->srtt), "%.1f", (double)atomic_load_explicit(&fl->srtt_ns, memory_order_relaxed) / 1e3);
	snprintf(c->cwnd, sizeof(c->cwnd), "%.1f", (double)atomic_load_explicit(&fl->cwnd_milli, memory_order_relaxed) / 1e3);
	snprintf(c->infl, sizeof(c->infl), "%" PRIu64, (uint64_t)atomic_load_explicit(&fl->in_flight, memory_order_relaxed));
	snprintf(c->credit, sizeof(c->credit), "%" PRIu64, (uint64_t)atomic_load_explicit(&fl->credit, memory_order_relaxed));
	snprintf(c->paths, sizeof(c->paths), "%u/%u", (unsigned)(paths >> 16 & 0xffff), (unsigned)(paths & 0xffff));
}

static void print_flows(struct top *t, double secs)
{
	printf("%-16s %-3s %9s %10s %8s %14s %8s %8s %9s %7s %6s %10s\n", "FLOW", "DIR", "Gbit/s", "pkt/s",
	       "retx/s", "RTT us avg/max", "srtt us", "cwnd", "in-flight", "credit", "paths", "ring-drops");
	for (unsigned i = 0; i < t->nsrc; i++) {
		const struct tr_source *s = &t->src[i];
		for (unsigned p = 0; p < s->nports; p++) {
			struct flow_stat *f = &t->flows[i][p];
			uint64_t drops = tr_dropped(s, p);
			char name[32], rtt[32] = "-";
			struct transport_cols c;
			snprintf(name, sizeof(name), "node%u->node%u", s->node, s->ports[p].peer_node);
			if (f->rtt_n)
				snprintf(rtt, sizeof(rtt), "%" PRIu64 "/%" PRIu64, f->rtt_sum_us / f->rtt_n, f->rtt_max_us);
			transport_view(&s->page->flows[p], &c);
			printf("%-16s %-3s %9.3f %10.0f %8.0f %14s %8s %8s %9s %7s %6s %10" PRIu64 "\n", name, "tx",
			       (double)f->bytes[1] * 8 / secs / 1e9, (double)f->pkts[1] / secs, (double)f->retx / secs,
			       rtt, c.srtt, c.cwnd, c.infl, c.credit, c.paths, drops - f->drops_seen);
			printf("%-16s %-3s %9.3f %10.0f\n", "", "rx", (double)f->bytes[0] * 8 / secs / 1e9,
			       (double)f->pkts[0] / secs);
			/* per interval; in-flight state carries over */
			f->drops_seen = drops;
			memset(f->bytes, 0, sizeof(f->bytes));
			memset(f->pkts, 0, sizeof(f->pkts));
			f->retx = f->rtt_sum_us = f->rtt_n = f->rtt_max_us = 0;
		}
	}
}

static void print_comms(struct top *t, double secs)
{
	printf("%-12s %9s %10s %8s %10s  (DATA sent by the attached dataplanes)\n", "COMM", "Gbit/s", "pkt/s",
	       "retx/s", "last-seq");
	for (unsigned i = 0; i < t->ncomms; i++) {
		struct comm_stat *c = &t->comms[i];
		printf("%#-12" PRIx32 " %9.3f %10.0f %8.0f %10" PRIu32 "\n", c->key32, (double)c->bytes * 8 / secs / 1e9,
		       (double)c->pkts / secs, (double)c->retx / secs, c->seq_max);
		c->bytes = c->pkts = c->retx = 0;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice-trace top [--socket PATH]... [--interval S] [--iterations N]\n"
		   "  --socket PATH     a dataplane's attach socket (repeatable; default: the only one running)\n"
		   "  --interval S      refresh every S seconds (default 1)\n"
		   "  --iterations N    stop after N refreshes (default: until Ctrl-C)\n"
		   "RTT: from the ACK echoes in the trace; srtt, cwnd, in-flight, credit (the peer's grant) and\n"
		   "paths (alive/all): the transport's own.\n");
}

static int parse(int argc, char **argv, const char **socks, unsigned *nsocks, double *interval, long *iters)
{
	static const struct option longs[] = {
		{ "socket", required_argument, NULL, 's' }, { "interval", required_argument, NULL, 'i' },
		{ "iterations", required_argument, NULL, 'n' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t n;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 's':
			if (*nsocks == TR_MAX_SOURCES)
				return -1;
			socks[(*nsocks)++] = optarg;
			break;
		case 'i': *interval = strtod(optarg, &end); if (*end) *interval = 0; break;
		case 'n': if (tr_parse_num(optarg, "--iterations", LONG_MAX, &n)) return -1; *iters = (long)n; break;
		case 'h': usage(stdout); exit(0);
		default: return -1;
		}
	}
	if (optind < argc || !(*interval > 0) || *iters < 0) {
		fprintf(stderr, "sluice-trace top: --interval wants seconds > 0, and no other arguments\n");
		return -1;
	}
	return 0;
}

static int attach(struct top *t, const char **socks, unsigned nsocks)
{
	static char found[108];
	char err[512];
	struct sl_trace_filter all = { 0 };
	uint32_t slot_max = 0;

	if (nsocks == 0) {
		if (tr_find_socket(found, sizeof(found), err, sizeof(err)) != 0) {
			fprintf(stderr, "sluice-trace top: %s\n", err);
			return -1;
		}
		socks[nsocks++] = found;
	}
	for (t->nsrc = 0; t->nsrc < nsocks; t->nsrc++) {
		if (tr_attach(&t->src[t->nsrc], socks[t->nsrc], 0, &all, err, sizeof(err)) != 0) {
			fprintf(stderr, "sluice-trace top: %s\n", err);
			return -1;
		}
		if (t->src[t->nsrc].slot_size > slot_max)
			slot_max = t->src[t->nsrc].slot_size;
	}
	t->rec = malloc(slot_max);
	return t->rec ? 0 : -1;
}

int tr_cmd_top(int argc, char **argv)
{
	static struct top t;
	const char *socks[TR_MAX_SOURCES];
	unsigned nsocks = 0;
	double interval = 1;
	long iters = 0;
	struct sigaction sa = { .sa_handler = on_signal };
	int rc = 2;

	if (parse(argc, argv, socks, &nsocks, &interval, &iters) != 0) {
		usage(stderr);
		return 2;
	}
	if (attach(&t, socks, nsocks) == 0) {
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		bool tty = isatty(STDOUT_FILENO);
		double last = now_s();
		for (long n = 0; !stop_requested && (iters == 0 || n < iters);) {
			drain(&t);
			double now = now_s();
			if (now - last < interval) {
				usleep(1000);
				continue;
			}
			printf("%ssluice-trace top: %u dataplane(s), every %.1f s\n", tty ? "\033[H\033[2J" : "",
			       t.nsrc, interval);
			print_flows(&t, now - last);
			print_comms(&t, now - last);
			fflush(stdout);
			last = now;
			n++;
		}
		rc = 0;
	}
	for (unsigned i = 0; i < t.nsrc; i++)
		tr_detach(&t.src[i]);
	free(t.rec);
	return rc;
}
