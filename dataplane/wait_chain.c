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

#define CHAIN_TAG "w1" /* the format's name: another one is dropped whole by this parser */

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

bool dp_chain_parse(const char *text, struct dp_wait_chain *out)
{
	const char *p = text;

	out->n = 0;
	if (!*text)
		return true;
	if (strncmp(p, CHAIN_TAG, strlen(CHAIN_TAG)))
		return false;
	p += strlen(CHAIN_TAG);
	while (*p) {
		unsigned long comm, rank, waits_for, op, seq;
		struct dp_wait_edge *e = &out->edge[out->n];

		/* " comm:rank:waits_for:op:seq", each separator checked before the next field is read */
		if (out->n == DP_WAIT_CHAIN_MAX || *p++ != ' ' || !field(&p, 16, UINT32_MAX, &comm) || *p++ != ':' ||
		    !field(&p, 10, SL_MAX_RANKS - 1, &rank) || *p++ != ':' ||
		    !field(&p, 10, SL_MAX_RANKS - 1, &waits_for) || *p++ != ':' ||
		    !field(&p, 10, SL_OP_COUNT - 1, &op) || *p++ != ':' || !field(&p, 10, UINT32_MAX, &seq) ||
		    (*p && *p != ' ') || op == 0 || rank == waits_for)
			return false;
		*e = (struct dp_wait_edge){ .comm = (uint32_t)comm, .seq = (uint32_t)seq, .rank = (uint16_t)rank,
					    .waits_for = (uint16_t)waits_for, .op = (uint8_t)op };
		/* a path: on one communicator, each waits for the next one's rank */
		if (out->n && e[-1].comm == e->comm && e[-1].waits_for != e->rank)
			return false;
		out->n++;
	}
	return out->n > 0;
}

bool dp_chain_format(const struct dp_wait_edge *edge, unsigned n, char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "%s", CHAIN_TAG);

	for (unsigned i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, " %x:%u:%u:%u:%u", edge[i].comm, edge[i].rank,
					edge[i].waits_for, edge[i].op, edge[i].seq);
	return len < size;
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

/* Appends the sentence of dp_cycle_sentence to buf (len bytes used). */
static void cycle_words(char *buf, size_t size, size_t *len, const struct dp_wait_edge *cycle, unsigned n,
			double timeout_s, bool comms)
{
	char wait[96], counter[64];

	append(buf, size, len, "%u ranks wait on each other in a cycle (no progress for %.1f s): ", n, timeout_s);
	for (unsigned i = 0; i < n; i++) {
		wait_name(wait, sizeof(wait), &cycle[i], comms && (i == 0 || cycle[i].comm != cycle[i - 1].comm));
		if (i == 0)
			append(buf, size, len, "rank %u waits in %s", cycle[i].rank, wait);
		else
			append(buf, size, len, ", which has not posted %s while it waits in %s", counter, wait);
		dp_call_name(counter, sizeof(counter), dp_counter_op(cycle[i].op), cycle[i].seq, cycle[i].rank);
	}
	append(buf, size, len, ", which has not posted %s: none can move; post %s", counter, counter);
	if (comms)
		append(buf, size, len, " on communicator %#x", cycle[n - 1].comm);
	append(buf, size, len, " on rank %u before it waits, or order the calls so that no rank waits in one before "
	       "posting what another waits for", cycle[n - 1].waits_for);
}

void dp_cycle_sentence(char *buf, size_t size, const struct dp_wait_edge *cycle, unsigned n, double timeout_s)
{
	size_t len = 0;

	cycle_words(buf, size, &len, cycle, n, timeout_s, across_comms(cycle, n));
	sl_errmsg_mark_cut(buf, size, (int)len);
}

void dp_tail_sentence(char *buf, size_t size, const struct dp_wait_edge *mine, const struct dp_wait_edge *ahead,
		      unsigned n, unsigned path, double timeout_s)
{
	struct dp_wait_edge all[DP_WAIT_CHAIN_MAX + 2];
	char wait[96];
	size_t len = 0;
	bool comms;

	all[0] = *mine;
	memcpy(&all[1], ahead, n * sizeof(*ahead));
	comms = across_comms(all, n + 1);
	for (unsigned i = 0; i <= path; i++) {
		wait_name(wait, sizeof(wait), &all[i], comms && (i == 0 || all[i].comm != all[i - 1].comm));
		if (i == 0)
			append(buf, size, &len, "rank %u waits in %s", mine->rank, wait);
		else
			append(buf, size, &len, ", which waits in %s", wait);
	}
	append(buf, size, &len, ", which is in a cycle: ");
	cycle_words(buf, size, &len, &ahead[path], n - path, timeout_s, comms);
	sl_errmsg_mark_cut(buf, size, (int)len);
}
