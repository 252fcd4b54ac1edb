/*
 * trace_capture.c: `sluice-trace capture`: attach to one or more running
 * dataplanes, drain their trace rings and write one pcapng file (or one
 * line per packet on stdout), then print what the rings had to drop.
 *
 * The engine applies the cheap filters itself (communicator, sequence,
 * type, flow, retransmissions) so that a filtered capture costs it less;
 * the peer-rank filter needs the communicator table and runs here.  Records
 * of several dataplanes are merged in time order within each batch drained.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace_cli.h"

#define BATCH_BYTES (4u << 20) /* records drained per pass, all sources together */
#define IDLE_US 1000

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct cap_opts {
	const char *sockets[TR_MAX_SOURCES];
	unsigned nsockets;
	const char *out;        /* pcapng file, or NULL: text on stdout */
	const char *ready;      /* file to create once attached */
	uint32_t snap;
	struct sl_trace_filter flt;
	int rank;               /* peer rank filter, -1: any */
	double duration_s;      /* 0: until stopped */
	uint64_t count;         /* 0: no limit */
};

struct pending {
	uint64_t ts;
	struct tr_source *src;
	struct sl_trace_rec *rec;
};

struct capture {
	struct cap_opts o;
	struct tr_source src[TR_MAX_SOURCES];
	bool gone[TR_MAX_SOURCES];
	uint64_t written, kept_per_if[TR_MAX_SOURCES * SL_TRACE_MAX_PORTS];
	FILE *f;
	uint8_t *buf;
	struct pending *batch;
	uint32_t batch_max, slot_max;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-trace capture [--socket PATH]... [options]\n"
		"  --socket PATH    a dataplane's attach socket (repeatable; default: the only one running)\n"
		"  -w FILE          write pcapng to FILE (default: one line per packet on stdout)\n"
		"  --snap N         keep N bytes of each DATA payload (default 0: headers only, at most %u)\n"
		"  --comm KEY       only this communicator (key's low 32 bits, as in the packets; 0x.. ok)\n"
		"  --rank R         only packets to or from peer rank R\n"
		"  --seq N          only collective N of its communicator\n"
		"  --type data|ack  only DATA or only ACK packets\n"
		"  --flow NODE      only the flow with dataplane NODE\n"
		"  --retx-only      only retransmissions\n"
		"  --duration S     stop after S seconds\n"
		"  --count N        stop after N packets\n"
		"  --ready FILE     create FILE once attached (for scripts)\n"
		"ACKs belong to flows, not collectives: --comm and --seq keep them.\n"
		"Stops on Ctrl-C, the limits, or when every dataplane has gone.\n",
		SL_TRACE_MAX_SNAP);
}

static int parse_filter_opt(struct cap_opts *o, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 'C': if (tr_parse_num(arg, "--comm", UINT32_MAX, &v)) return -1;
		o->flt.match |= SL_TRACE_M_COMM; o->flt.comm = (uint32_t)v; return 0;
	case 'S': if (tr_parse_num(arg, "--seq", UINT32_MAX, &v)) return -1;
		o->flt.match |= SL_TRACE_M_SEQ; o->flt.seq = (uint32_t)v; return 0;
	case 'F': if (tr_parse_num(arg, "--flow", UINT16_MAX, &v)) return -1;
		o->flt.match |= SL_TRACE_M_NODE; o->flt.node = (uint16_t)v; return 0;
	case 'R': if (tr_parse_num(arg, "--rank", SL_TRACE_MAX_RANKS - 1, &v)) return -1;
		o->rank = (int)v; return 0;
	case 'x': o->flt.match |= SL_TRACE_M_RETX; return 0;
	case 'T':
		if (strcmp(arg, "data") && strcmp(arg, "ack")) {
			fprintf(stderr, "sluice-trace: --type wants data or ack, not '%s'\n", arg);
			return -1;
		}
		o->flt.match |= SL_TRACE_M_TYPE;
		o->flt.type = arg[0] == 'd' ? SL_TRACE_T_DATA : SL_TRACE_T_ACK;
		return 0;
	}
	return 1;
}

static int parse_opts(int argc, char **argv, struct cap_opts *o)
{
	static const struct option longs[] = {
		{ "socket", required_argument, NULL, 's' }, { "snap", required_argument, NULL, 'n' },
		{ "comm", required_argument, NULL, 'C' },   { "rank", required_argument, NULL, 'R' },
		{ "seq", required_argument, NULL, 'S' },    { "type", required_argument, NULL, 'T' },
		{ "flow", required_argument, NULL, 'F' },   { "retx-only", no_argument, NULL, 'x' },
		{ "duration", required_argument, NULL, 'd' }, { "count", required_argument, NULL, 'c' },
		{ "ready", required_argument, NULL, 'r' },  { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	char *end;
	int c, rc;

	*o = (struct cap_opts){ .rank = -1 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "w:h", longs, NULL)) != -1) {
		if ((rc = parse_filter_opt(o, c, optarg)) <= 0) {
			if (rc < 0)
				return -1;
			continue;
		}
		switch (c) {
		case 's':
			if (o->nsockets == TR_MAX_SOURCES) {
				fprintf(stderr, "sluice-trace: at most %u --socket\n", TR_MAX_SOURCES);
				return -1;
			}
			o->sockets[o->nsockets++] = optarg;
			break;
		case 'w': o->out = optarg; break;
		case 'r': o->ready = optarg; break;
		case 'n': if (tr_parse_num(optarg, "--snap", SL_TRACE_MAX_SNAP, &v)) return -1; o->snap = (uint32_t)v; break;
		case 'c': if (tr_parse_num(optarg, "--count", UINT64_MAX, &v)) return -1; o->count = v; break;
		case 'd':
			o->duration_s = strtod(optarg, &end);
			if (*optarg == '\0' || *end != '\0' || !(o->duration_s > 0)) {
				fprintf(stderr, "sluice-trace: --duration wants seconds > 0, not '%s'\n", optarg);
				return -1;
			}
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sluice-trace: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int attach_all(struct capture *k)
{
	static char found[108];
	char err[512];

	if (k->o.nsockets == 0) {
		if (tr_find_socket(found, sizeof(found), err, sizeof(err)) != 0) {
			fprintf(stderr, "sluice-trace: %s\n", err);
			return -1;
		}
		k->o.sockets[k->o.nsockets++] = found;
	}
	for (unsigned i = 0; i < k->o.nsockets; i++) {
		if (tr_attach(&k->src[i], k->o.sockets[i], k->o.snap, &k->o.flt, err, sizeof(err)) != 0) {
			fprintf(stderr, "sluice-trace: %s\n", err);
			while (i-- > 0)
				tr_detach(&k->src[i]);
			return -1;
		}
		k->src[i].ifbase = i ? k->src[i - 1].ifbase + k->src[i - 1].nports : 0;
		if (k->src[i].slot_size > k->slot_max)
			k->slot_max = k->src[i].slot_size;
	}
	return 0;
}

static int write_header(struct capture *k)
{
	struct tr_pcapng_if ifs[TR_MAX_IFS];
	static char names[TR_MAX_IFS][2][96];
	unsigned n = 0;

	for (unsigned i = 0; i < k->o.nsockets; i++) {
		const struct tr_source *s = &k->src[i];
		for (unsigned p = 0; p < s->nports; p++, n++) {
			snprintf(names[n][0], sizeof(names[n][0]), "node%u-port%u", s->node, p);
			snprintf(names[n][1], sizeof(names[n][1]), "sluice dataplane node %u, %s link to node %u",
				 s->node, s->ports[p].name, s->ports[p].peer_node);
			ifs[n] = (struct tr_pcapng_if){ names[n][0], names[n][1], s->slot_size };
		}
	}
	return tr_pcapng_header(k->f, ifs, n);
}

/* The CLI-side filter: the peer's rank needs the communicator table. */
static bool keep(const struct capture *k, const struct tr_source *s, const struct sl_trace_rec *rec)
{
	struct sl_trace_pkt p;

	if (k->o.rank < 0)
		return true;
	uint16_t peer = rec->port < s->nports ? s->ports[rec->port].peer_node : 0xffff;
	return sl_trace_peek(rec->data, rec->caplen, &p) && tr_rank_of(tr_comm_of(s, &p, peer), peer) == k->o.rank;
}

static int emit(struct capture *k, const struct pending *e)
{
	char note[TR_NOTE_LEN];
	const struct sl_trace_rec *rec = e->rec;
	uint32_t ifid = e->src->ifbase + rec->port;

	tr_describe(e->src, rec, note, sizeof(note));
	k->written++;
	k->kept_per_if[ifid]++;
	if (!k->f) {
		uint64_t rt = tr_realtime_ns(e->src, rec->ts_ns);
		printf("%" PRIu64 ".%09" PRIu64 " node%u-port%u %s\n", rt / 1000000000u, rt % 1000000000u,
		       e->src->node, rec->port, note);
		return 0;
	}
	return tr_pcapng_packet(k->f, ifid, tr_realtime_ns(e->src, rec->ts_ns), rec->data, rec->caplen, rec->len,
				rec->dir == SL_TRACE_TX, note);
}

static int by_time(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Whether a dataplane has hung up (it stopped): its ring is drained once more, then left. */
static bool hung_up(const struct tr_source *s)
{
	struct pollfd p = { .fd = s->sock, .events = POLLIN };

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLIN));
}

/* One pass: drain what every ring holds (up to a batch), write it in time order. */
static int drain(struct capture *k, uint32_t *got)
{
	uint32_t n = 0;

	for (unsigned i = 0; i < k->o.nsockets; i++) {
		struct tr_source *s = &k->src[i];
		tr_sync_comms(s);
		while (n < k->batch_max) {
			struct sl_trace_rec *rec = (struct sl_trace_rec *)(k->buf + (size_t)n * k->slot_max);
			if (!tr_next(s, rec))
				break;
			if (rec->port >= s->nports || !keep(k, s, rec))
				continue;
			k->batch[n++] = (struct pending){ rec->ts_ns + (uint64_t)s->page->realtime_off_ns, s, rec };
		}
	}
	qsort(k->batch, n, sizeof(k->batch[0]), by_time);
	*got = n;
	for (uint32_t i = 0; i < n && !(k->o.count && k->written >= k->o.count); i++)
		if (emit(k, &k->batch[i]) != 0)
			return -1;
	return 0;
}

static bool all_gone(struct capture *k)
{
	bool all = true;

	for (unsigned i = 0; i < k->o.nsockets; i++) {
		if (!k->gone[i] && hung_up(&k->src[i]))
			k->gone[i] = true;
		all &= k->gone[i];
	}
	return all;
}

static int run(struct capture *k)
{
	double end = k->o.duration_s > 0 ? now_s() + k->o.duration_s : 0;
	bool last = false;
	uint32_t got;

	for (;;) {
		/* a dataplane that hung up has written its last record: one more pass takes it */
		if (stop_requested || (end && now_s() >= end) || all_gone(k))
			last = true;
		if (drain(k, &got) != 0) {
			fprintf(stderr, "sluice-trace: writing %s failed: %s\n", k->o.out, strerror(errno));
			return -1;
		}
		if (k->o.count && k->written >= k->o.count)
			return 0;
		if (last && got < k->batch_max)
			return 0;
		if (got == 0)
			usleep(IDLE_US);
	}
}

/* Ring drops per port, to stderr and (with -w) as interface statistics. */
static int report(struct capture *k)
{
	struct timespec rt;
	uint64_t total = 0;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &rt);
	for (unsigned i = 0; i < k->o.nsockets; i++) {
		const struct tr_source *s = &k->src[i];
		for (unsigned p = 0; p < s->nports; p++) {
			uint64_t d = tr_dropped(s, p), kept = k->kept_per_if[s->ifbase + p];
			char note[128];
			snprintf(note, sizeof(note), "trace ring full: %" PRIu64 " frames not recorded", d);
			total += d;
			if (k->f)
				rc |= tr_pcapng_stats(k->f, s->ifbase + p,
						      (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec, kept, d, note);
			fprintf(stderr, "sluice-trace: node %u port %u (to node %u): %" PRIu64 " packets, %" PRIu64
				" dropped (ring full)\n", s->node, p, s->ports[p].peer_node, kept, d);
		}
		if (s->comms_lost)
			fprintf(stderr, "sluice-trace: node %u: %" PRIu64 " communicators were created and replaced "
				"before they were read: some peer ranks read -1\n", s->node, s->comms_lost);
	}
	fprintf(stderr, "sluice-trace: %" PRIu64 " packets%s%s, %" PRIu64 " dropped in the trace rings%s\n",
		k->written, k->f ? " written to " : "", k->f ? k->o.out : "", total,
		total ? ": capture fewer (filters, --snap 0) or drain faster" : "");
	return rc;
}

static int open_output(struct capture *k)
{
	if (!k->o.out)
		return 0;
	k->f = fopen(k->o.out, "wb");
	if (!k->f || write_header(k) != 0) {
		fprintf(stderr, "sluice-trace: cannot write %s: %s\n", k->o.out, strerror(errno));
		return -1;
	}
	return 0;
}

static int signal_ready(const char *path)
{
	FILE *f = path ? fopen(path, "w") : NULL;

	if (path && !f) {
		fprintf(stderr, "sluice-trace: cannot create --ready file %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (f)
		fclose(f);
	return 0;
}

int tr_cmd_capture(int argc, char **argv)
{
	static struct capture k;
	struct sigaction sa = { .sa_handler = on_signal };
	int rc = 1;

	if (parse_opts(argc, argv, &k.o) != 0 || attach_all(&k) != 0)
		return 2;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	k.batch_max = BATCH_BYTES / k.slot_max;
	k.buf = malloc((size_t)k.batch_max * k.slot_max);
	k.batch = malloc(k.batch_max * sizeof(*k.batch));
	if (!k.buf || !k.batch)
		fprintf(stderr, "sluice-trace: out of memory\n");
	else if (open_output(&k) == 0 && signal_ready(k.o.ready) == 0 && run(&k) == 0 && report(&k) == 0)
		rc = 0;
	if (k.f && fclose(k.f) != 0 && rc == 0) {
		fprintf(stderr, "sluice-trace: closing %s failed: %s\n", k.o.out, strerror(errno));
		rc = 1;
	}
	for (unsigned i = 0; i < k.o.nsockets; i++)
		tr_detach(&k.src[i]);
	free(k.buf);
	free(k.batch);
	return rc;
}
