/*
 * trace_analyze.c: `sluice-trace analyze FILE`: who made a collective slow.
 *
 * Reads a capture (sluice-trace's pcapng, one or more dataplanes) and, per
 * collective (communicator, sequence), prints each step's first and last
 * packet on each rank the capture saw; for every link its packets, the
 * packets it lost (sent, and the plain copy never arrived: retransmitting a
 * packet that did arrive is spurious), its retransmissions and the delay
 * they cost (first send to first arrival, summed over packets, so it can
 * exceed the collective's duration); and each rank's time spent waiting
 * (gaps in what it received longer than --gap).  It then names the slowest
 * link (most packets lost, then most retransmission delay, then the highest
 * one-way latency) and the slowest rank (that link's sender: its peers
 * waited for it).  Ranks come from the capture's annotations; nodes stand
 * in where absent.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/errmsg.h>

#include "trace_cli.h"

#define DEFAULT_GAP_US 1000
#define DEFAULT_SHOW 10

struct ev {
	uint64_t ts;
	struct sl_trace_pkt p;
	uint16_t at;     /* the dataplane node that captured it */
	bool tx;
	int rank, peer_rank;
};

struct psn_ent {         /* one DATA PSN of one flow */
	bool used;
	uint16_t src, dst;
	uint32_t psn;
	uint64_t first_tx, first_rx;
	uint32_t retx;
	uint32_t tx_copies, rx_copies; /* sent and received, retransmissions included */
	bool orig_rx;        /* the first, plain copy arrived: any retransmission was spurious */
	bool control;        /* a control message's or a cancelled message's: in no collective */
	uint32_t coll;       /* where it belongs: a->colls[coll].links[link] */
	uint32_t link;
};

struct span {
	uint64_t first, last;
};

struct part {            /* one rank's view of one collective */
	uint16_t node;
	int rank;
	struct span all;
	struct span *steps;
	uint32_t nsteps;
	uint64_t last_rx, waited;
};

struct link {
	uint16_t src, dst;
	uint64_t data, retx, lat_sum, lat_n;
	uint64_t lost;     /* DATA sent whose plain copy never arrived: lost on the wire */
	uint64_t spurious; /* retransmissions of DATA whose plain copy did arrive */
	uint64_t vanished; /* DATA frames sent, retransmissions included, that never arrived */
	uint64_t lost_ns;  /* summed over retransmitted packets: first send to first arrival */
	uint64_t worst_ns; /* the longest of those */
};

struct coll {
	uint32_t comm, seq;
	uint8_t kind;
	struct span all;
	struct part *parts;
	uint32_t nparts, parts_cap;
	struct link *links;
	uint32_t nlinks, links_cap;
	uint64_t retx;
};

/* A link's totals over the whole capture. */
struct blame {
	uint16_t src, dst;
	int src_rank, dst_rank;
	bool carried_data; /* a link that carried no collective's DATA is not shown */
	uint64_t lost, lost_ns, retx, spurious, vanished, control_vanished, slowest;
};

/* Where a 64-bit key's entry is in an array: open addressing, grown at
 * half full, so that no number of ranks, links or collectives is a cap. */
struct key_index {
	uint64_t *keys;
	uint32_t *at; /* UINT32_MAX: an empty slot */
	size_t cap, n;
};

struct analysis {
	struct ev *evs;
	size_t nevs;
	struct psn_ent *psns;
	size_t psn_cap;
	struct coll *colls;
	size_t ncolls, colls_cap;
	uint64_t gap_ns;
	uint64_t acks, other;
	bool captured[UINT16_MAX + 1]; /* nodes whose own frames the capture holds */
	struct key_index link_at;      /* (collective, src, dst) -> colls[].links[] */
	struct blame *totals;          /* per link over the capture */
	uint32_t ntotals, totals_cap;
	struct key_index total_at;     /* (src, dst) -> totals[] */
};

/* ---- growing ---- */

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	return k ^ (k >> 33);
}

static int key_index_grow(struct key_index *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	uint64_t *keys = malloc(cap * sizeof(*keys));
	uint32_t *at = malloc(cap * sizeof(*at));

	if (!keys || !at) {
		free(keys);
		free(at);
		return -1;
	}
	memset(at, 0xff, cap * sizeof(*at));
	for (size_t i = 0; i < m->cap; i++) {
		if (m->at[i] == UINT32_MAX)
			continue;
		size_t h = mix(m->keys[i]) & (cap - 1);
		while (at[h] != UINT32_MAX)
			h = (h + 1) & (cap - 1);
		keys[h] = m->keys[i];
		at[h] = m->at[i];
	}
	free(m->keys);
	free(m->at);
	m->keys = keys;
	m->at = at;
	m->cap = cap;
	return 0;
}

/* The index stored for key; if there is none, next is stored and returned
 * (the caller appends that entry).  UINT32_MAX when out of memory. */
static uint32_t key_index_get(struct key_index *m, uint64_t key, uint32_t next)
{
	if (2 * (m->n + 1) > m->cap && key_index_grow(m) != 0)
		return UINT32_MAX;
	size_t h = mix(key) & (m->cap - 1);
	for (; m->at[h] != UINT32_MAX; h = (h + 1) & (m->cap - 1))
		if (m->keys[h] == key)
			return m->at[h];
	m->keys[h] = key;
	m->at[h] = next;
	m->n++;
	return next;
}

static void key_index_free(struct key_index *m)
{
	free(m->keys);
	free(m->at);
}

/* v with room for one more element (n used of *cap, each size bytes): v
 * itself or where realloc moved it; NULL when out of memory (v stays). */
static void *room_for_one(void *v, uint32_t n, uint32_t *cap, size_t size)
{
	if (n < *cap)
		return v;
	uint32_t ncap = *cap ? *cap * 2 : 8;
	void *g = realloc(v, (size_t)ncap * size);
	if (g)
		*cap = ncap;
	return g;
}

/* ---- reading ---- */

static int comment_int(const char *c, const char *key, int dflt)
{
	const char *p = strstr(c, key);

	return p ? atoi(p + strlen(key)) : dflt;
}

static int add_event(struct analysis *a, const struct tr_pcapng_pkt *pk, size_t *cap)
{
	struct ev e = { .ts = pk->ts_ns };

	if (!sl_trace_peek(pk->data, pk->caplen, &e.p)) {
		a->other++;
		return 0;
	}
	e.tx = pk->dir ? pk->dir == 2 : strstr(pk->comment, "dir=tx") != NULL;
	e.at = e.tx ? e.p.src_node : e.p.dst_node;
	e.rank = comment_int(pk->comment, " rank=", -1);
	e.peer_rank = comment_int(pk->comment, "peer_rank=", -1);
	if (a->nevs == *cap) {
		size_t ncap = *cap ? *cap * 2 : 4096;
		struct ev *g = realloc(a->evs, ncap * sizeof(*g));
		if (!g)
			return -1;
		a->evs = g;
		*cap = ncap;
	}
	a->evs[a->nevs++] = e;
	return 0;
}

static int by_ts(const void *x, const void *y)
{
	const struct ev *a = x, *b = y;

	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static int load(struct analysis *a, const char *path)
{
	char err[512];
	struct tr_pcapng_pkt pk;
	size_t cap = 0;
	int rc;
	struct tr_pcapng_reader *r = tr_pcapng_open(path, err, sizeof(err));

	if (!r) {
		fprintf(stderr, "sluice-trace analyze: %s\n", err);
		return -1;
	}
	while ((rc = tr_pcapng_next(r, &pk, err, sizeof(err))) == 1)
		if (add_event(a, &pk, &cap) != 0) {
			rc = -1;
			sl_errmsg_format(err, sizeof(err), "out of memory after %zu packets", a->nevs);
			break;
		}
	tr_pcapng_close(r);
	if (rc < 0) {
		fprintf(stderr, "sluice-trace analyze: %s\n", err);
		return -1;
	}
	/* several dataplanes' records interleave: time order first (none, and
	 * evs may be NULL, which qsort must not be given) */
	if (a->nevs > 1)
		qsort(a->evs, a->nevs, sizeof(*a->evs), by_ts);
	return 0;
}

/* ---- per-PSN bookkeeping ---- */

static struct psn_ent *psn_get(struct analysis *a, uint16_t src, uint16_t dst, uint32_t psn)
{
	size_t h = ((size_t)src * 0x9e3779b1u ^ (size_t)dst * 0x85ebca6bu ^ psn * 0xc2b2ae35u) % a->psn_cap;

	for (;; h = (h + 1) % a->psn_cap) {
		struct psn_ent *e = &a->psns[h];
		if (!e->used) {
			*e = (struct psn_ent){ .used = true, .src = src, .dst = dst, .psn = psn };
			return e;
		}
		if (e->src == src && e->dst == dst && e->psn == psn)
			return e;
	}
}

/* ---- per-collective bookkeeping ---- */

static struct coll *coll_get(struct analysis *a, uint32_t comm, uint32_t seq, uint8_t kind)
{
	for (size_t i = a->ncolls; i-- > 0 && i + 64 >= a->ncolls;) /* recent ones: collectives overlap little */
		if (a->colls[i].comm == comm && a->colls[i].seq == seq)
			return &a->colls[i];
	for (size_t i = 0; i < a->ncolls; i++)
		if (a->colls[i].comm == comm && a->colls[i].seq == seq)
			return &a->colls[i];
	if (a->ncolls == a->colls_cap) {
		size_t ncap = a->colls_cap ? a->colls_cap * 2 : 64;
		struct coll *g = realloc(a->colls, ncap * sizeof(*g));
		if (!g)
			return NULL;
		a->colls = g;
		a->colls_cap = ncap;
	}
	struct coll *c = &a->colls[a->ncolls++];
	memset(c, 0, sizeof(*c));
	c->comm = comm;
	c->seq = seq;
	c->kind = kind;
	return c;
}

static void span_add(struct span *s, uint64_t ts)
{
	if (!s->first || ts < s->first)
		s->first = ts;
	if (ts > s->last)
		s->last = ts;
}

static struct part *part_get(struct coll *c, uint16_t node, int rank)
{
	for (uint32_t i = 0; i < c->nparts; i++)
		if (c->parts[i].node == node)
			return &c->parts[i];
	struct part *parts = room_for_one(c->parts, c->nparts, &c->parts_cap, sizeof(*parts));
	if (!parts)
		return NULL;
	c->parts = parts;
	struct part *p = &c->parts[c->nparts++];
	*p = (struct part){ .node = node, .rank = rank };
	return p;
}

static void step_add(struct part *p, uint16_t step, uint64_t ts)
{
	if (step >= p->nsteps) {
		struct span *g = realloc(p->steps, (step + 1u) * sizeof(*g));
		if (!g)
			return;
		memset(g + p->nsteps, 0, (step + 1u - p->nsteps) * sizeof(*g));
		p->steps = g;
		p->nsteps = step + 1u;
	}
	span_add(&p->steps[step], ts);
}

static uint64_t link_key(uint16_t src, uint16_t dst)
{
	return (uint64_t)src << 16 | dst;
}

static struct link *link_get(struct analysis *a, struct coll *c, uint16_t src, uint16_t dst)
{
	uint64_t key = (uint64_t)(c - a->colls) << 32 | link_key(src, dst);
	uint32_t i;

	/* room first: a key indexed is a link that exists */
	struct link *links = room_for_one(c->links, c->nlinks, &c->links_cap, sizeof(*links));
	if (!links)
		return NULL;
	c->links = links;
	i = key_index_get(&a->link_at, key, c->nlinks);
	if (i == c->nlinks)
		c->links[c->nlinks++] = (struct link){ .src = src, .dst = dst };
	return i == UINT32_MAX ? NULL : &c->links[i];
}

/* A link's totals over the capture, made on first use. */
static struct blame *total_get(struct analysis *a, uint16_t src, uint16_t dst)
{
	uint32_t i;

	struct blame *totals = room_for_one(a->totals, a->ntotals, &a->totals_cap, sizeof(*totals));
	if (!totals)
		return NULL;
	a->totals = totals;
	i = key_index_get(&a->total_at, link_key(src, dst), a->ntotals);
	if (i == a->ntotals)
		a->totals[a->ntotals++] = (struct blame){ .src = src, .dst = dst, .src_rank = -1, .dst_rank = -1 };
	return i == UINT32_MAX ? NULL : &a->totals[i];
}

static bool part_seen(const struct coll *c, uint16_t node)
{
	for (uint32_t i = 0; i < c->nparts; i++)
		if (c->parts[i].node == node)
			return true;
	return false;
}

/* The rank a node has in c, as the captured annotations say. */
static int rank_of(const struct coll *c, uint16_t node)
{
	for (uint32_t i = 0; i < c->nparts; i++)
		if (c->parts[i].node == node)
			return c->parts[i].rank;
	return -1;
}

static int account(struct analysis *a, const struct ev *e)
{
	const struct sl_trace_pkt *p = &e->p;
	struct coll *c = coll_get(a, p->comm, p->seq, p->kind);
	struct part *pt = c ? part_get(c, e->at, e->rank) : NULL;
	struct link *l = pt ? link_get(a, c, p->src_node, p->dst_node) : NULL;
	struct psn_ent *pe = psn_get(a, p->src_node, p->dst_node, p->psn);

	if (!l)
		return -1;
	span_add(&c->all, e->ts);
	span_add(&pt->all, e->ts);
	step_add(pt, p->step, e->ts);
	if (e->tx) {
		pe->tx_copies++;
		l->data += !(p->flags & SL_TRACE_F_RETX);
		if (!pe->first_tx) {
			pe->first_tx = e->ts;
			pe->coll = (uint32_t)(c - a->colls);
			pe->link = (uint32_t)(l - c->links);
		}
		if (p->flags & SL_TRACE_F_RETX) {
			pe->retx++;
			l->retx++;
			c->retx++;
		}
		return 0;
	}
	if (pt->last_rx && e->ts - pt->last_rx > a->gap_ns)
		pt->waited += e->ts - pt->last_rx;
	pt->last_rx = e->ts;
	pe->rx_copies++;
	pe->orig_rx |= !(p->flags & SL_TRACE_F_RETX);
	if (pe->first_rx || !pe->first_tx)
		return 0; /* a duplicate, or its sender was not captured */
	pe->first_rx = e->ts;
	if (pe->retx) {
		l->lost_ns += e->ts - pe->first_tx;
		if (e->ts - pe->first_tx > l->worst_ns)
			l->worst_ns = e->ts - pe->first_tx;
	} else {
		l->lat_sum += e->ts - pe->first_tx;
		l->lat_n++;
	}
	return 0;
}

/* A control or cancelled message's DATA frame: counted per PSN, like a collective's. */
static void account_control(struct analysis *a, const struct ev *e)
{
	struct psn_ent *pe = psn_get(a, e->p.src_node, e->p.dst_node, e->p.psn);

	pe->control = true;
	if (e->tx)
		pe->tx_copies++;
	else
		pe->rx_copies++;
}

/* DATA frames outside any collective (control messages: abort, closing,
 * stall notes; cancelled messages) sent on a link and never arrived: a
 * fault injector counts them with the others, and so does the link. */
static int control_vanished(struct analysis *a, const struct psn_ent *pe)
{
	struct blame *t = total_get(a, pe->src, pe->dst);

	if (!t)
		return -1;
	t->vanished += pe->tx_copies - pe->rx_copies;
	t->control_vanished += pe->tx_copies - pe->rx_copies;
	return 0;
}

static int analyze(struct analysis *a)
{
	a->psn_cap = a->nevs * 2 + 1;
	a->psns = calloc(a->psn_cap, sizeof(*a->psns));
	if (!a->psns) {
		fprintf(stderr, "sluice-trace analyze: out of memory for %zu packets\n", a->nevs);
		return -1;
	}
	for (size_t i = 0; i < a->nevs; i++) {
		const struct ev *e = &a->evs[i];
		a->captured[e->at] = true;
		if (e->p.type != SL_TRACE_T_DATA) {
			a->acks += e->p.type == SL_TRACE_T_ACK;
			continue;
		}
		if (e->p.flags & (SL_TRACE_F_CTRL | SL_TRACE_F_VOID))
			account_control(a, e);
		else if (account(a, e) != 0)
			goto oom;
	}
	/* a PSN sent whose plain copy never arrived where the receiver was captured: lost;
	 * one that did arrive and was sent again anyway: spurious retransmissions */
	for (size_t i = 0; i < a->psn_cap; i++) {
		const struct psn_ent *pe = &a->psns[i];
		if (pe->used && pe->control && a->captured[pe->dst] && pe->tx_copies > pe->rx_copies &&
		    control_vanished(a, pe) != 0)
			goto oom;
		if (!pe->used || !pe->first_tx)
			continue;
		struct coll *c = &a->colls[pe->coll];
		if (part_seen(c, pe->dst) && pe->tx_copies > pe->rx_copies)
			c->links[pe->link].vanished += pe->tx_copies - pe->rx_copies;
		if (pe->orig_rx)
			c->links[pe->link].spurious += pe->retx;
		else if (part_seen(c, pe->dst))
			c->links[pe->link].lost++;
	}
	return 0;
oom:
	fprintf(stderr, "sluice-trace analyze: out of memory for %zu packets of %zu collectives\n", a->nevs,
		a->ncolls);
	return -1;
}

/* ---- verdicts and printing ---- */

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* Slowest link: most packets lost, then most delay from retransmission, then highest mean latency. */
static const struct link *slowest_link(const struct coll *c)
{
	const struct link *best = NULL;

	for (uint32_t i = 0; i < c->nlinks; i++) {
		const struct link *l = &c->links[i];
		double lat = l->lat_n ? (double)l->lat_sum / (double)l->lat_n : 0;
		double blat = best && best->lat_n ? (double)best->lat_sum / (double)best->lat_n : 0;
		if (!best || l->lost > best->lost || (l->lost == best->lost && (l->lost_ns > best->lost_ns ||
		    (l->lost_ns == best->lost_ns && lat > blat))))
			best = l;
	}
	return best;
}

static void name_node(const struct coll *c, uint16_t node, char *out, size_t len)
{
	int r = rank_of(c, node);

	if (r >= 0)
		snprintf(out, len, "rank %d (node %u)", r, node);
	else
		snprintf(out, len, "node %u", node);
}

static void print_coll(const struct coll *c, uint64_t t0)
{
	char s[48], d[48];

	printf("comm %#" PRIx32 " seq %" PRIu32 " %s: %.3f ms from %.6f s, %" PRIu64 " retransmissions\n",
	       c->comm, c->seq, tr_kind_name(c->kind), ms(c->all.last - c->all.first), (double)(c->all.first - t0) / 1e9,
	       c->retx);
	for (uint32_t i = 0; i < c->nparts; i++) {
		const struct part *p = &c->parts[i];
		name_node(c, p->node, s, sizeof(s));
		printf("  %s: %.3f..%.3f ms, waited %.3f ms; steps", s, ms(p->all.first - c->all.first),
		       ms(p->all.last - c->all.first), ms(p->waited));
		for (uint32_t k = 0; k < p->nsteps; k++)
			if (p->steps[k].first)
				printf(" %u:%.3f-%.3f", k, ms(p->steps[k].first - c->all.first),
				       ms(p->steps[k].last - c->all.first));
		printf("\n");
	}
	for (uint32_t i = 0; i < c->nlinks; i++) {
		const struct link *l = &c->links[i];
		name_node(c, l->src, s, sizeof(s));
		name_node(c, l->dst, d, sizeof(d));
		printf("  link %s -> %s: %" PRIu64 " DATA, %" PRIu64 " lost, %" PRIu64 " retransmitted (%" PRIu64
		       " spurious; delayed %.3f ms in all, %.3f ms at worst), one-way %.1f us\n", s, d, l->data, l->lost,
		       l->retx, l->spurious, ms(l->lost_ns), ms(l->worst_ns),
		       l->lat_n ? (double)l->lat_sum / (double)l->lat_n / 1e3 : 0);
	}
}

static int by_duration(const void *x, const void *y)
{
	const struct coll *a = *(const struct coll *const *)x, *b = *(const struct coll *const *)y;
	uint64_t da = a->all.last - a->all.first, db = b->all.last - b->all.first;

	return da > db ? -1 : da < db;
}

static int by_link(const void *x, const void *y)
{
	const struct blame *a = x, *b = y;

	return a->src != b->src ? (a->src > b->src) - (a->src < b->src) : (a->dst > b->dst) - (a->dst < b->dst);
}

static int summarize(struct analysis *a, unsigned show)
{
	struct blame *b = NULL;
	uint32_t nb = 0, best = 0;
	uint64_t t0 = a->nevs ? a->evs[0].ts : 0;
	const struct coll **order = malloc(a->ncolls * sizeof(*order));

	if (!order && a->ncolls) {
		fprintf(stderr, "sluice-trace analyze: out of memory for %zu collectives\n", a->ncolls);
		return -1;
	}
	for (size_t i = 0; i < a->ncolls; i++) {
		const struct coll *c = &a->colls[i];
		const struct link *sl = slowest_link(c);
		for (uint32_t k = 0; k < c->nlinks; k++) {
			const struct link *l = &c->links[k];
			struct blame *t = total_get(a, l->src, l->dst);
			if (!t) {
				fprintf(stderr, "sluice-trace analyze: out of memory for %u links\n", a->ntotals);
				free(order);
				return -1;
			}
			if (!t->carried_data) {
				t->carried_data = true;
				t->src_rank = rank_of(c, l->src);
				t->dst_rank = rank_of(c, l->dst);
			}
			t->lost += l->lost;
			t->lost_ns += l->lost_ns;
			t->retx += l->retx;
			t->spurious += l->spurious;
			t->vanished += l->vanished;
			t->slowest += l == sl;
		}
	}
	/* the links that carried a collective's DATA, by node; their frames that
	 * never arrived include their control messages'.  A copy: sorted or
	 * compacted in place, totals would no longer be where total_at says */
	b = malloc((a->ntotals + 1ull) * sizeof(*b)); /* + 1: no malloc(0), which may be NULL */
	if (!b) {
		fprintf(stderr, "sluice-trace analyze: out of memory for %u links\n", a->ntotals);
		free(order);
		return -1;
	}
	for (uint32_t j = 0; j < a->ntotals; j++)
		if (a->totals[j].carried_data)
			b[nb++] = a->totals[j];
	qsort(b, nb, sizeof(*b), by_link);
	/* the slowest collectives first */
	for (size_t i = 0; i < a->ncolls; i++)
		order[i] = &a->colls[i];
	if (a->ncolls > 1) /* order may be NULL for none */
		qsort(order, a->ncolls, sizeof(*order), by_duration);
	printf("%zu collectives, %zu DATA/ACK packets (%" PRIu64 " ACKs), %" PRIu64 " other frames; the %u slowest:\n",
	       a->ncolls, a->nevs, a->acks, a->other, show < a->ncolls ? show : (unsigned)a->ncolls);
	for (size_t i = 0; i < a->ncolls && i < show; i++)
		print_coll(order[i], t0);
	free(order);
	printf("links over the whole capture:\n");
	for (uint32_t j = 0; j < nb; j++) {
		printf("  rank %d (node %u) -> rank %d (node %u): %" PRIu64 " lost (%" PRIu64 " DATA frames never arrived, %"
		       PRIu64 " of them control messages), %" PRIu64 " retransmissions (%" PRIu64 " spurious) delaying "
		       "packets %.3f ms in all, slowest link of %" PRIu64 " collectives\n", b[j].src_rank, b[j].src,
		       b[j].dst_rank, b[j].dst, b[j].lost, b[j].vanished, b[j].control_vanished, b[j].retx, b[j].spurious,
		       ms(b[j].lost_ns), b[j].slowest);
		if (b[j].lost > b[best].lost || (b[j].lost == b[best].lost && (b[j].lost_ns > b[best].lost_ns ||
		    (b[j].lost_ns == b[best].lost_ns && b[j].slowest > b[best].slowest))))
			best = j;
	}
	if (nb == 0) {
		printf("no sluice DATA packets: nothing to blame\n");
		free(b);
		return 0;
	}
	printf("slowest link: rank %d (node %u) -> rank %d (node %u): %" PRIu64 " packets lost, %" PRIu64
	       " retransmissions delayed packets %.3f ms in all\n", b[best].src_rank, b[best].src, b[best].dst_rank,
	       b[best].dst, b[best].lost, b[best].retx, ms(b[best].lost_ns));
	printf("slowest rank: %d (node %u): %s\n", b[best].src_rank, b[best].src,
	       b[best].lost ? "its link lost packets and its peers waited for the retransmissions"
			    : b[best].lost_ns ? "its peers waited for its retransmissions"
					      : "its link was the slowest most often");
	free(b);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice-trace analyze [--gap US] [--show N] FILE.pcapng\n"
		   "  --gap US   a rank waited when nothing reached it for longer than US microseconds (default %u)\n"
		   "  --show N   print the N slowest collectives in detail (default %u)\n"
		   "The slowest link is the one that lost the most packets (sent, never arrived), then the one\n"
		   "whose retransmitted packets were delayed most (first send to first arrival), then the one\n"
		   "slowest most often by one-way latency.  Needs both ends of a link in the capture.\n"
		   "The slowest rank is that link's sender.\n",
		   DEFAULT_GAP_US, DEFAULT_SHOW);
}

int tr_cmd_analyze(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "gap", required_argument, NULL, 'g' }, { "show", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },      { NULL, 0, NULL, 0 },
	};
	struct analysis a = { .gap_ns = DEFAULT_GAP_US * 1000ull };
	uint64_t show = DEFAULT_SHOW, gap_us;
	int c, rc = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (tr_parse_num(optarg, "--gap", 3600000000ull, &gap_us))
				return 2;
			a.gap_ns = gap_us * 1000ull;
			break;
		case 's':
			if (tr_parse_num(optarg, "--show", UINT32_MAX, &show))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (load(&a, argv[optind]) == 0 && analyze(&a) == 0 && summarize(&a, (unsigned)show) == 0)
		rc = 0;
	for (size_t i = 0; i < a.ncolls; i++) {
		for (uint32_t k = 0; k < a.colls[i].nparts; k++)
			free(a.colls[i].parts[k].steps);
		free(a.colls[i].parts);
		free(a.colls[i].links);
	}
	free(a.colls);
	free(a.totals);
	key_index_free(&a.link_at);
	key_index_free(&a.total_at);
	free(a.psns);
	free(a.evs);
	return rc;
}
