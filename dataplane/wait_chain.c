/*
 * wait_chain.c: a stall note's chain of waits, as text, and the sentence
 * that names a cycle of them (wait_chain.h).
 *
 * Text, not a binary block: the note's payload was a string before chains
 * (on_notice checks its terminator), a trace shows it as it is, and a
 * strict parse turns a forged or cut one away whole.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/abi.h>
#include <sluice/errmsg.h>

#include "schedule.h"
#include "wait_chain.h"

#define CHAIN_TAG "w2" /* the format's name: another one is dropped whole by this parser */

/* One unsigned field of at most max, in base, that starts at *p with a
 * digit; *p moves to the character after it. */
static bool field(const char **p, int base, unsigned long max, unsigned long *out)
{
	char *stop;

	if (!(base == 16 ? isxdigit((unsigned char)**p) : isdigit((unsigned char)**p)))
		return false;
	*out = strtoul(*p, &stop, base);
	*p = stop;
	return *out <= max;
}

/* The ':' in the edge at p (up to a space or the end): 4 for one in full,
 * 2 for one that goes on from the edge before it. */
static unsigned colons(const char *p)
{
	unsigned n = 0;

	for (; *p && *p != ' '; p++)
		n += *p == ':';
	return n;
}

/* One edge at *p (after its space): " comm:rank:waits_for:op:seq" in full,
 * or " waits_for:op:seq" on prev's communicator from the rank prev waits
 * for (prev NULL: the first, always in full).  Each separator is checked
 * before the next field is read. */
static bool edge_parse(const char **p, const struct dp_wait_edge *prev, struct dp_wait_edge *e)
{
	unsigned long comm, rank, waits_for, op, seq;
	unsigned n = colons(*p);

	if (n == 4) {
		if (!field(p, 16, UINT32_MAX, &comm) || *(*p)++ != ':' || !field(p, 10, SL_MAX_RANKS - 1, &rank) ||
		    *(*p)++ != ':')
			return false;
	} else if (n == 2 && prev) {
		comm = prev->comm;
		rank = prev->waits_for;
	} else {
		return false;
	}
	if (!field(p, 10, SL_MAX_RANKS - 1, &waits_for) || *(*p)++ != ':' || !field(p, 10, SL_OP_COUNT - 1, &op) ||
	    *(*p)++ != ':' || !field(p, 10, UINT32_MAX, &seq) || (**p && **p != ' ') || op == 0 || rank == waits_for)
		return false;
	*e = (struct dp_wait_edge){ .comm = (uint32_t)comm, .seq = (uint32_t)seq, .rank = (uint16_t)rank,
				    .waits_for = (uint16_t)waits_for, .op = (uint8_t)op };
	/* a path: on one communicator, each waits for the next one's rank */
	return !prev || prev->comm != e->comm || prev->waits_for == e->rank;
}

/* The count of waits a chain left out at *p (after its space): "+N", N
 * from 1, the chain's head before it, none before; *p moves past it. */
static bool skip_parse(const char **p, struct dp_wait_chain *out)
{
	unsigned long n;

	if (**p != '+' || out->n != DP_CHAIN_HEAD || out->skipped)
		return false;
	(*p)++;
	if (!field(p, 10, DP_WAIT_HOPS_MAX, &n) || !n || *(*p)++ != ' ')
		return false;
	out->skipped = (uint16_t)n;
	return true;
}

bool dp_chain_parse(const char *text, struct dp_wait_chain *out)
{
	const char *p = text;

	out->n = 0;
	out->skipped = 0;
	if (!*text)
		return true;
	if (strncmp(p, CHAIN_TAG, strlen(CHAIN_TAG)))
		return false;
	p += strlen(CHAIN_TAG);
	while (*p) {
		if (out->n == DP_WAIT_CHAIN_MAX || *p++ != ' ')
			return false;
		/* after the waits left out, one in full: the path between is not known */
		bool after_skip = *p == '+';
		if ((after_skip && !skip_parse(&p, out)) ||
		    !edge_parse(&p, out->n && !after_skip ? &out->edge[out->n - 1] : NULL, &out->edge[out->n]))
			return false;
		out->n++;
	}
	return out->n > 0 && out->n + out->skipped < DP_WAIT_HOPS_MAX;
}

/* Writes edge[0, n) as a note's text, with `skipped` waits left out
 * before edge[DP_CHAIN_HEAD] (0: none). */
static bool chain_text(const struct dp_wait_edge *edge, unsigned n, unsigned skipped, char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "%s", CHAIN_TAG);

	for (unsigned i = 0; i < n && len < size; i++) {
		const struct dp_wait_edge *e = &edge[i];
		bool skip = skipped && i == DP_CHAIN_HEAD;
		if (skip)
			len += (size_t)snprintf(buf + len, size - len, " +%u", skipped);
		if (len >= size)
			break;
		if (i && !skip && e->comm == e[-1].comm && e->rank == e[-1].waits_for) /* goes on from the edge before */
			len += (size_t)snprintf(buf + len, size - len, " %u:%u:%u", e->waits_for, e->op, e->seq);
		else
			len += (size_t)snprintf(buf + len, size - len, " %x:%u:%u:%u:%u", e->comm, e->rank,
						e->waits_for, e->op, e->seq);
	}
	return len < size;
}

bool dp_chain_format(const struct dp_wait_edge *edge, unsigned n, char *buf, size_t size)
{
	return chain_text(edge, n, 0, buf, size);
}

bool dp_chain_write(const struct dp_wait_chain *c, char *buf, size_t size)
{
	return chain_text(c->edge, c->n, c->skipped, buf, size);
}

bool dp_chain_make_room(struct dp_wait_chain *c)
{
	if (c->n + c->skipped >= DP_WAIT_HOPS_MAX)
		return false;
	if (c->n > DP_WAIT_CHAIN_MAX) {
		memmove(&c->edge[DP_CHAIN_HEAD], &c->edge[DP_CHAIN_HEAD + 1],
			(c->n - DP_CHAIN_HEAD - 1u) * sizeof(c->edge[0]));
		c->n--;
		c->skipped++;
	}
	return true;
}

uint8_t dp_counter_op(uint8_t op)
{
	return op == SL_OP_RECV ? SL_OP_SEND : op == SL_OP_SEND ? SL_OP_RECV : op;
}

void dp_call_name(char *buf, size_t size, uint8_t op, uint32_t seq, int with)
{
	if (op == SL_OP_SEND || op == SL_OP_RECV)
		snprintf(buf, size, "%s #%u %s rank %d", sl_coll_name((enum sl_coll)op), seq,
			 op == SL_OP_SEND ? "to" : "from", with);
	else
		snprintf(buf, size, "%s #%u", sl_coll_name((enum sl_coll)op), seq);
}

/* Appends to buf (len bytes used of size) as snprintf would. */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (*len < size)
		*len += (size_t)vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
}

void dp_rank_list(char *buf, size_t size, const uint64_t *set, uint32_t nranks, unsigned most)
{
	unsigned n = 0, named = 0;
	size_t len = 0;

	for (uint32_t r = 0; r < nranks; r++)
		n += (unsigned)(set[r / 64] >> (r % 64) & 1);
	*buf = 0;
	append(buf, size, &len, "rank%s", n > 1 ? "s" : "");
	for (uint32_t r = 0; r < nranks && named < most; r++) {
		if (!(set[r / 64] >> (r % 64) & 1))
			continue;
		named++;
		/* the last one named takes "and", unless a count of the rest follows */
		const char *sep = named == 1 ? " " : named == n && n <= most ? " and " : ", ";
		append(buf, size, &len, "%s%u", sep, r);
	}
	if (n > most)
		append(buf, size, &len, " and %u more", n - most);
	if (len >= size)
		sl_errmsg_mark_cut(buf, size, (int)len);
}

/* Edge e's call as its rank waits in it ("recv #0 from rank 1", "barrier
 * #2 for rank 1"), and its communicator if name_comm. */
static void wait_name(char *buf, size_t size, const struct dp_wait_edge *e, bool name_comm)
{
	size_t len = 0;

	dp_call_name(buf, size, e->op, e->seq, e->waits_for);
	len = strlen(buf);
	if (e->op != SL_OP_SEND && e->op != SL_OP_RECV)
		append(buf, size, &len, " for rank %u", e->waits_for);
	if (name_comm)
		append(buf, size, &len, " on communicator %#x", e->comm);
}

/* Whether the waits in edge (n) are on more than one communicator: then
 * calls are named with their communicator, each where it differs from the
 * call named before it (a counterpart is on its wait's), so that a
 * sentence across communicators fits SL_ERRMSG_LEN with what to do at its
 * end (named at each call, a tail of two and a cycle of two over real
 * keys did not). */
static bool across_comms(const struct dp_wait_edge *edge, unsigned n)
{
	for (unsigned i = 1; i < n; i++)
		if (edge[i].comm != edge[0].comm)
			return true;
	return false;
}

/* What to do about a cycle whose last wait (last) waits for the first, to
 * end its sentence (counter: what last's rank has not posted). */
static void cycle_end(char *buf, size_t size, size_t *len, const struct dp_wait_edge *last, const char *counter,
		      bool comms)
{
	append(buf, size, len, "none can move; post %s", counter);
	if (comms)
		append(buf, size, len, " on communicator %#x", last->comm);
	append(buf, size, len, " on rank %u before it waits, or order the calls so that no rank waits in one before "
	       "posting what another waits for", last->waits_for);
}

/* Room a cycle's sentence leaves for "rank 255 reported: ", which a peer
 * that relays it puts before it (coll_run.c on_notice): a 24-rank ring's,
 * without, came cut to the peers. */
#define RELAY_ROOM 24

/* Waits edge[0, n) (n >= 2) each once ("rank 1 in recv #0 from rank 2"),
 * and as many of those between the first and the last as fit before the
 * last (and before `skipped` not known before edge[skip_at]) with end
 * after it, the rest counted. */
static void waits_listed(char *buf, size_t size, size_t *len, const struct dp_wait_edge *edge, unsigned n,
			 unsigned skip_at, unsigned skipped, bool comms, const char *end)
{
	char wait[96], last[SL_ERRMSG_LEN];
	size_t last_len = 0, room;
	unsigned i = 1;

	wait_name(wait, sizeof(wait), &edge[n - 1], comms && edge[n - 1].comm != edge[n - 2].comm);
	append(last, sizeof(last), &last_len, ", rank %u in %s%s", edge[n - 1].rank, wait, end);
	wait_name(wait, sizeof(wait), &edge[0], comms);
	append(buf, size, len, "rank %u waits in %s", edge[0].rank, wait);
	/* room for the waits between, with ", and 99 more" */
	room = *len + last_len + 16 + RELAY_ROOM < size ? size - *len - last_len - 16 - RELAY_ROOM : 0;
	for (; i + 1 < n && (!skipped || i < skip_at); i++) {
		char one[128];
		int m;
		wait_name(wait, sizeof(wait), &edge[i], comms && edge[i].comm != edge[i - 1].comm);
		m = snprintf(one, sizeof(one), ", rank %u in %s", edge[i].rank, wait);
		if ((size_t)m >= room)
			break;
		append(buf, size, len, "%s", one);
		room -= (size_t)m;
	}
	if (i + 1 < n + skipped)
		append(buf, size, len, ", and %u more", n + skipped - 1 - i);
	append(buf, size, len, "%s", last);
}

/* The sentence of a cycle too long to say each counterpart (some 5 ranks
 * or more, with RELAY_ROOM), or with waits not known (skipped before
 * cycle[skip_at]): its waits listed (waits_listed), then what to do. */
static void cycle_words_short(char *buf, size_t size, size_t *len, const struct dp_wait_edge *cycle, unsigned n,
			      unsigned skip_at, unsigned skipped, bool comms)
{
	char counter[64], end[SL_ERRMSG_LEN];
	size_t end_len = 0;

	dp_call_name(counter, sizeof(counter), dp_counter_op(cycle[n - 1].op), cycle[n - 1].seq, cycle[n - 1].rank);
	append(end, sizeof(end), &end_len, "; none has posted what the one before it waits for: ");
	cycle_end(end, sizeof(end), &end_len, &cycle[n - 1], counter, comms);
	waits_listed(buf, size, len, cycle, n, skip_at, skipped, comms, end);
}

/* Appends the sentence of dp_cycle_sentence to buf (len bytes used). */
static void cycle_words(char *buf, size_t size, size_t *len, const struct dp_wait_edge *cycle, unsigned n,
			unsigned skip_at, unsigned skipped, double timeout_s, bool comms)
{
	char wait[96], counter[64];
	size_t start;

	append(buf, size, len, "%u ranks wait on each other in a cycle (no progress for %.1f s): ", n + skipped,
	       timeout_s);
	start = *len;
	if (skipped) {
		cycle_words_short(buf, size, len, cycle, n, skip_at, skipped, comms);
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		wait_name(wait, sizeof(wait), &cycle[i], comms && (i == 0 || cycle[i].comm != cycle[i - 1].comm));
		if (i == 0)
			append(buf, size, len, "rank %u waits in %s", cycle[i].rank, wait);
		else
			append(buf, size, len, ", which has not posted %s while it waits in %s", counter, wait);
		dp_call_name(counter, sizeof(counter), dp_counter_op(cycle[i].op), cycle[i].seq, cycle[i].rank);
	}
	append(buf, size, len, ", which has not posted %s: ", counter);
	cycle_end(buf, size, len, &cycle[n - 1], counter, comms);
	if (*len + RELAY_ROOM < size || n < 3 || start >= size)
		return;
	*len = start;
	buf[start] = '\0';
	cycle_words_short(buf, size, len, cycle, n, 0, 0, comms);
}

void dp_cycle_sentence(char *buf, size_t size, const struct dp_wait_edge *cycle, unsigned n, unsigned skip_at,
		       unsigned skipped, double timeout_s)
{
	size_t len = 0;

	cycle_words(buf, size, &len, cycle, n, skip_at, skipped, timeout_s, across_comms(cycle, n));
	sl_errmsg_mark_cut(buf, size, (int)len);
}

/* A path to a cycle is said in full ("..., which waits in recv #0 from
 * rank 2, ...") up to TAIL_FULL waits; a longer one, or one with waits not
 * known, is listed as waits_listed lists, in TAIL_ROOM bytes at most, the
 * rest left to the cycle's sentence (in full, a path of 40 waits cut the
 * cycle off). */
#define TAIL_FULL 6
#define TAIL_ROOM 200

void dp_tail_sentence(char *buf, size_t size, const struct dp_wait_edge *mine, const struct dp_wait_edge *ahead,
		      unsigned n, unsigned path, unsigned skip_at, unsigned skipped, double timeout_s)
{
	struct dp_wait_edge all[DP_WAIT_CHAIN_MAX + 2];
	bool gap_in_path = skipped && skip_at <= path;
	char wait[96];
	size_t len = 0;
	bool comms;

	all[0] = *mine;
	memcpy(&all[1], ahead, n * sizeof(*ahead));
	comms = across_comms(all, n + 1);
	if (path < TAIL_FULL && !gap_in_path) {
		for (unsigned i = 0; i <= path; i++) {
			wait_name(wait, sizeof(wait), &all[i], comms && (i == 0 || all[i].comm != all[i - 1].comm));
			if (i == 0)
				append(buf, size, &len, "rank %u waits in %s", mine->rank, wait);
			else
				append(buf, size, &len, ", which waits in %s", wait);
		}
		append(buf, size, &len, ", which is in a cycle: ");
	} else {
		waits_listed(buf, size < len + TAIL_ROOM ? size : len + TAIL_ROOM, &len, all, path + 1,
			     gap_in_path ? skip_at + 1 : 0, gap_in_path ? skipped : 0, comms, "");
		append(buf, size, &len, "; rank %u is in a cycle: ", ahead[path].rank);
	}
	cycle_words(buf, size, &len, &ahead[path], n - path, skipped && !gap_in_path ? skip_at - path : 0,
		    gap_in_path ? 0 : skipped, timeout_s, comms);
	sl_errmsg_mark_cut(buf, size, (int)len);
}

void dp_path_sentence(char *buf, size_t size, const struct dp_wait_edge *path, unsigned n, unsigned skip_at,
		      unsigned skipped, double age_s)
{
	const struct dp_wait_edge *last = &path[n - 1];
	bool comms = across_comms(path, n);
	char counter[64], on[40] = "", end[SL_ERRMSG_LEN];
	size_t len = 0;

	dp_call_name(counter, sizeof(counter), dp_counter_op(last->op), last->seq, last->rank);
	if (comms)
		snprintf(on, sizeof(on), " on communicator %#x", last->comm);
	snprintf(end, sizeof(end), "; rank %u had not posted %s%s (it said so %.1f s before): it may not have made "
		 "that call, or may be stuck before it; every rank on the way waits on it", last->waits_for, counter, on,
		 age_s);
	waits_listed(buf, size, &len, path, n, skip_at, skipped, comms, end);
	sl_errmsg_mark_cut(buf, size, (int)len);
}
