/*
 * it_mismatch.c: a rank of the mismatch integration test, started by
 * sluice-run over real dataplanes, once per algorithm (SLUICE_ALGO) and
 * once with the planner's own choice.
 *
 * Rank 1 alone calls something else than the other ranks: another count,
 * datatype, op, root or collective, at a small size (1 KiB a block) and a
 * large one (1 MiB), and a small count against a large one, where the
 * planner may pick another algorithm on each side.  Every rank must get
 * SLUICE_ERR_MISMATCH well before the timeout, with the dataplane's
 * sentence whole (what each side called, which ranks, what to do), and
 * never a result: only a rooted call's rank may return first, and then its
 * next call must fail; every later call fails.
 *
 * Usage: it_mismatch [--channels] COLL[,COLL...] (allreduce, allgather,
 * reduce_scatter, broadcast, reduce, alltoall, gather, scatter): the
 * collectives whose mismatches this run tries, each against every kind.
 * The collective another rank calls instead must run under the same
 * SLUICE_ALGO.  --channels: the dataplanes run several channels, so a
 * large call is split into slices, on one rank and not on another where
 * the counts differ; the sentence names a slice's count, and says so.
 *
 * it_mismatch --p2p (2 ranks): rank 0 waits in a collective while rank 1
 * waits in a send or recv with it, which rank 0 posts only after: each
 * waits on the other.  Every rank must get SLUICE_ERR_MISMATCH within the
 * timeout and a bit, with a sentence naming both sides, not a bare
 * timeout; the same calls in legal orders (the send posted while the
 * collective runs, a stall longer than half the timeout between them) must
 * report nothing.  A sixth cycle has rank 1 get there 0.6 of the timeout
 * late.  --channels --p2p (2 ranks, 2 channels): cycles through calls
 * split over the channels on one rank only.  --cycles (3 ranks): cycles
 * only the chains of waits show, and one behind a call stalled longer
 * outside it;
 * --tail (4 ranks): a rank two steps from a cycle, first to get there; then a
 * cycle through a rank's second call while its first waits outside it.
 * --long-ring (4 to 64 ranks): a ring of recvs over every rank.
 * --late-ring (3 ranks): a ring whose last rank gets there after the
 * first one's timeout: a timeout naming that rank and the call it has not
 * posted.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sluice/sluice.h>

static int rank = -1, nranks;
static sluice_ctx_t *ctx;

#include "it_common.h"

enum coll { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALLTOALL, GATHER, SCATTER, BARRIER, NCOLLS };
static const char *const coll_names[NCOLLS] = { "allreduce", "allgather", "reduce_scatter", "broadcast",
						 "reduce", "alltoall", "gather", "scatter", "barrier" };
/* What a rank calls instead of each, in "collective differs" (the issue's own
 * example first: all-reduce against broadcast). */
static const enum coll other_coll[NCOLLS] = { BROADCAST, ALLTOALL, ALLREDUCE, ALLREDUCE,
					      BROADCAST, ALLGATHER, SCATTER, GATHER };

#define SMALL 256             /* elements of 4 bytes: 1 KiB a block */
#define LARGE (256 * 1024)    /* 1 MiB a block */
#define MOST_RANKS 4
#define MOST_BYTES (MOST_RANKS * (size_t)(LARGE + 1) * 4) /* every rank's block of 4-byte elements */
#define MISMATCH_END "(a recv the same count and type as its send)"
#define OTHER_CHANNEL " (on another channel of this dataplane)"
#define SLICE_NOTE "counts of a call split over the communicator's channels are one slice's"

struct call {
	enum coll coll;
	size_t count;
	sluice_datatype_t dtype;
	sluice_redop_t op;
	int root;
};

struct mismatch {
	char what[96];
	struct call all, odd; /* what ranks other than 1 call, and what rank 1 calls */
	char said[48];        /* what the sentence must say of rank 1's call */
};

static void *bufa, *bufb;
static int failures;
static double timeout_s; /* a mismatch is reported in half of it: a hang takes all of it */
static bool sliced; /* --channels: a large call runs as slices, and the sentence names a slice's count */

static bool rooted(enum coll c)
{
	return c == BROADCAST || c == REDUCE || c == GATHER || c == SCATTER;
}

static bool reduces(enum coll c)
{
	return c == ALLREDUCE || c == REDUCE_SCATTER || c == REDUCE;
}

static sluice_result_t post(sluice_comm_t *comm, const struct call *c, sluice_req_t **req)
{
	switch (c->coll) {
	case ALLREDUCE: return sluice_allreduce(comm, bufa, bufb, c->count, c->dtype, c->op, req);
	case ALLGATHER: return sluice_allgather(comm, bufa, bufb, c->count, c->dtype, req);
	case REDUCE_SCATTER: return sluice_reduce_scatter(comm, bufa, bufb, c->count, c->dtype, c->op, req);
	case BROADCAST: return sluice_broadcast(comm, bufa, bufb, c->count, c->dtype, c->root, req);
	case REDUCE: return sluice_reduce(comm, bufa, bufb, c->count, c->dtype, c->op, c->root, req);
	case ALLTOALL: return sluice_alltoall(comm, bufa, bufb, c->count, c->dtype, req);
	case GATHER: return sluice_gather(comm, bufa, bufb, c->count, c->dtype, c->root, req);
	case SCATTER: return sluice_scatter(comm, bufa, bufb, c->count, c->dtype, c->root, req);
	default: return sluice_barrier(comm, req);
	}
}

/* The sentence is whole (not cut: it ends in what to do, and from "collective
 * #" on it is longer than the 191 bytes a completion once carried), says
 * rank 1's side of it (sliced: not its count, only that counts may be a
 * slice's), and came quickly.  Returns whether it was a peer's copy ("rank R
 * reported: ..."). */
static bool check_sentence(const struct mismatch *m, double took)
{
	const char *msg = sluice_last_error(), *from = strstr(msg, "collective #"), *end = strstr(msg, MISMATCH_END);
	/* ... or, heard from another channel of the same dataplane, that note after it */
	bool whole = end && (!end[strlen(MISMATCH_END)] || !strcmp(end + strlen(MISMATCH_END), OTHER_CHANNEL));
	char said[sizeof(m->said)];

	snprintf(said, sizeof(said), "%s", m->said);
	if (sliced && strstr(said, "(count="))
		strstr(said, "(count=")[sizeof("(count=") - 1] = '\0';
	if (!strstr(msg, "differs across ranks") || !whole || !from || strlen(from) <= 191 || !strstr(msg, said) || (sliced && !strstr(msg, SLICE_NOTE))) {
		fprintf(stderr, "rank %d: %s: the sentence does not say \"%s\"%s or arrived cut short: \"%s\"\n",
			rank, m->what, said, sliced ? " and \"" SLICE_NOTE "\"" : "", msg);
		failures++;
	}
	if (took > timeout_s / 2) {
		fprintf(stderr, "rank %d: %s took %.1f s to report (bound %.1f s, half of SLUICE_TIMEOUT): \"%s\"\n",
			rank, m->what, took, timeout_s / 2, msg);
		failures++;
	}
	return strstr(msg, " reported: collective #") != NULL;
}

/* What a call that should have failed got instead. */
static const char *outcome(sluice_result_t res, char *buf, size_t len)
{
	if (res == SLUICE_OK)
		return "it returned a result";
	snprintf(buf, len, "got %s (\"%s\")", sluice_get_error_string(res), sluice_last_error());
	return buf;
}

/* A communicator's calls after a failure fail too, and its destroy
 * returns at once; everything took `bound` at most. */
static void after_failure(sluice_comm_t *comm, const char *what, sluice_result_t want, double t0, double bound)
{
	struct call barrier_like = { .coll = ALLREDUCE, .count = 1, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };
	sluice_req_t *req;
	sluice_result_t res;
	char got[1200];

	/* broken now, as NCCL's would be: later calls fail at once */
	CHECK(post(comm, &barrier_like, &req));
	if ((res = sluice_wait(req)) != want) {
		fprintf(stderr, "rank %d: %s: a call after it: %s, want %s\n", rank, what,
			outcome(res, got, sizeof(got)), sluice_get_error_string(want));
		failures++;
	}
	/* the destroy neither reports again what the calls did nor waits out
	 * the timeout for a peer's closing words */
	if ((res = sluice_comm_destroy(comm)) != SLUICE_OK) {
		fprintf(stderr, "rank %d: %s: the destroy got %s (\"%s\"), want SLUICE_OK: the calls reported the "
			"failure already\n", rank, what, sluice_get_error_string(res), sluice_last_error());
		failures++;
	}
	if (now_s() - t0 > bound) {
		fprintf(stderr, "rank %d: %s: the calls and the destroy took %.1f s (bound %.1f s)\n", rank, what,
			now_s() - t0, bound);
		failures++;
	}
}

/* Runs one mismatch on a fresh communicator.  True when this rank heard of
 * it as a peer's copy. */
static bool run(const struct mismatch *m)
{
	const struct call *mine = rank == 1 ? &m->odd : &m->all;
	struct call barrier_like = { .coll = ALLREDUCE, .count = 1, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };
	sluice_comm_t *comm;
	sluice_req_t *req;
	sluice_result_t res;
	bool copy;
	char got[1200];

	CHECK(sluice_comm_init_env(ctx, &comm));
	double t0 = now_s();
	CHECK(post(comm, mine, &req));
	res = sluice_wait(req);
	/* a rooted call's rank whose own part was complete (a broadcast's root,
	 * say) may end first: it hears of the mismatch on its next call */
	if (res == SLUICE_OK && rooted(mine->coll)) {
		CHECK(post(comm, &barrier_like, &req));
		res = sluice_wait(req);
	}
	if (res != SLUICE_ERR_MISMATCH) {
		fprintf(stderr, "rank %d: %s: rank 1 called %s(count=%zu), the others %s(count=%zu): %s, want "
			"SLUICE_ERR_MISMATCH\n", rank, m->what, coll_names[m->odd.coll], m->odd.count,
			coll_names[m->all.coll], m->all.count, outcome(res, got, sizeof(got)));
		failures++;
		copy = false;
	} else {
		copy = check_sentence(m, now_s() - t0);
	}
	after_failure(comm, m->what, SLUICE_ERR_MISMATCH, t0, timeout_s / 2);
	return copy;
}

static void add(struct mismatch *list, int *n, const char *what, enum coll c, struct call all, struct call odd,
		const char *said)
{
	struct mismatch *m = &list[(*n)++];

	snprintf(m->what, sizeof(m->what), "%s: %s", coll_names[c], what);
	m->all = all;
	m->odd = odd;
	snprintf(m->said, sizeof(m->said), "%s", said);
}

/* ---- cycles of waits (--p2p, --cycles) ---- */

enum p2p_op { NONE, COLL, SEND, RECV };
#define CYCLE_SAID "each waits on the other"
#define CYCLE_END "but a rank must not wait for one before posting the other)"
#define CHAIN_SAID " wait on each other in a cycle (no progress for "
#define CHAIN_END "so that no rank waits in one before posting what another waits for"

struct p2p_step {
	enum p2p_op op;
	size_t count; /* COLL: the collective's; else the message's */
	int peer;     /* SEND, RECV: with this rank */
};

struct p2p_case {
	const char *what;
	enum coll coll;            /* what a COLL step calls */
	struct p2p_step steps[MOST_RANKS][2]; /* a rank waits in its second step after its first ends */
	const char *said[4];       /* what the sentence must say (NULL ends) ... */
	const char *end;           /* ... and how it ends */
	bool other_comm;           /* rank 1 makes its COLL step on a second communicator */
	double late[MOST_RANKS];   /* each rank posts its first step so many timeouts after the start */
};

static sluice_result_t post_step(sluice_comm_t *comm, enum coll coll, const struct p2p_step *s, sluice_req_t **req)
{
	struct call c = { .coll = coll, .count = s->count, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };

	switch (s->op) {
	case SEND: return sluice_send(comm, bufa, s->count, SLUICE_FLOAT32, s->peer, req);
	case RECV: return sluice_recv(comm, bufb, s->count, SLUICE_FLOAT32, s->peer, req);
	default: return post(comm, &c, req);
	}
}

/* A wait of case c ended with res: want (SLUICE_ERR_MISMATCH for a
 * cycle), whose sentence names what hangs (each of c->said) and ends in
 * what to do. */
static void expect_said(const struct p2p_case *c, sluice_result_t res, sluice_result_t want)
{
	char got[1200];

	if (res != want) {
		fprintf(stderr, "rank %d: %s: %s, want %s naming what hangs\n", rank, c->what,
			outcome(res, got, sizeof(got)), sluice_get_error_string(want));
		failures++;
		return;
	}
	const char *msg = sluice_last_error(), *end = strstr(msg, c->end);
	bool said = true;

	for (int i = 0; i < 4 && c->said[i]; i++)
		said = said && strstr(msg, c->said[i]);
	if (!said || !end || (end[strlen(c->end)] && strcmp(end + strlen(c->end), OTHER_CHANNEL))) {
		fprintf(stderr, "rank %d: %s: the sentence does not say \"%s\", \"%s\", \"%s\" and \"%s\", or is cut "
			"short: \"%s\"\n", rank, c->what, c->said[0], c->said[1] ? c->said[1] : "",
			c->said[1] && c->said[2] ? c->said[2] : "", c->end, msg);
		failures++;
	}
}

/* Runs n cycles at once, each on communicators of its own (independent:
 * within one timeout, not one after another).  Every rank must end each
 * with SLUICE_ERR_MISMATCH naming the cycle. */
static void run_cycles(const struct p2p_case *cases, int n)
{
	sluice_comm_t *comm[8], *other[8];
	sluice_req_t *req[8];
	sluice_result_t res[8];
	bool posted[8] = { false };
	char got[1200];

	for (int i = 0; i < n; i++) {
		CHECK(sluice_comm_init_env(ctx, &comm[i]));
		if (cases[i].other_comm)
			CHECK(sluice_comm_init_env(ctx, &other[i]));
	}
	double t0 = now_s();
	/* the cases due at once, then each late one at its time (ranks reach a hang at different times) */
	for (int c = 0; c < n; c++)
		res[c] = SLUICE_OK, req[c] = NULL;
	for (int done = 0; done < n;) {
		double late = -1;
		for (int c = 0; c < n; c++)
			if (!posted[c] && (late < 0 || cases[c].late[rank] < late))
				late = cases[c].late[rank];
		if (now_s() < t0 + late * timeout_s)
			usleep((useconds_t)((t0 + late * timeout_s - now_s()) * 1e6));
		for (int i = 0; i < n; i++) {
			const struct p2p_step *s = &cases[i].steps[rank][0];
			sluice_comm_t *on = cases[i].other_comm && s->op == COLL ? other[i] : comm[i];
			if (!posted[i] && cases[i].late[rank] == late && s->op != NONE)
				CHECK(post_step(on, cases[i].coll, s, &req[i]));
		}
		/* a first step that is a send may end at once (the peer's dataplane keeps its data): then the second */
		for (int i = 0; i < n; i++) {
			const struct p2p_step *s = cases[i].steps[rank];
			if (posted[i] || cases[i].late[rank] != late)
				continue;
			posted[i] = true;
			done++;
			if (s[1].op == NONE || !req[i])
				continue;
			if ((res[i] = sluice_wait(req[i])) == SLUICE_OK)
				CHECK(post_step(comm[i], cases[i].coll, &s[1], &req[i]));
			else
				req[i] = NULL;
		}
	}
	for (int i = 0; i < n; i++) {
		if (req[i])
			res[i] = sluice_wait(req[i]);
		expect_said(&cases[i], res[i], SLUICE_ERR_MISMATCH);
	}
	/* the cycles are found at the timeout: the peers hear of them at once */
	for (int i = 0; i < n; i++) {
		/* a rank with no call on it hears of the cycle there at its destroy, if not before */
		sluice_result_t r = cases[i].other_comm ? sluice_comm_destroy(other[i]) : SLUICE_OK;
		if (r != SLUICE_OK && r != SLUICE_ERR_MISMATCH) {
			fprintf(stderr, "rank %d: %s: the other communicator's destroy: %s\n", rank, cases[i].what,
				outcome(r, got, sizeof(got)));
			failures++;
		}
		after_failure(comm[i], cases[i].what, SLUICE_ERR_MISMATCH, t0, timeout_s + 2);
	}
}

/* Legal: rank 0 posts its collective, waits `stall` seconds and posts its
 * send; rank 1 waits in the recv first, then makes the collective.  Both
 * calls stall past half the timeout (their stall notes go out) and must
 * still end with the right data. */
static void run_legal(const char *what, enum coll coll, size_t count, double stall)
{
	uint32_t *a = bufa, *b = bufb;
	uint32_t *p2p_out = a + 2 * (size_t)LARGE, *p2p_in = b + 2 * (size_t)LARGE;
	struct call c = { .coll = coll, .count = SMALL, .dtype = SLUICE_UINT32, .op = SLUICE_SUM };
	sluice_comm_t *comm;
	sluice_req_t *coll_req, *p2p_req;
	sluice_result_t res;

	for (size_t i = 0; i < SMALL; i++)
		a[i] = (uint32_t)(i + 1);
	for (size_t i = 0; i < count; i++)
		p2p_out[i] = (uint32_t)(i * 7 + 3), p2p_in[i] = 0;
	CHECK(sluice_comm_init_env(ctx, &comm));
	if (rank == 0) {
		CHECK(post(comm, &c, &coll_req));
		usleep((useconds_t)(stall * 1e6));
		CHECK(sluice_send(comm, p2p_out, count, SLUICE_UINT32, 1, &p2p_req));
		res = sluice_wait(p2p_req);
		if (res == SLUICE_OK)
			res = sluice_wait(coll_req);
	} else {
		CHECK(sluice_recv(comm, p2p_in, count, SLUICE_UINT32, 0, &p2p_req));
		res = sluice_wait(p2p_req);
		if (res == SLUICE_OK) {
			CHECK(post(comm, &c, &coll_req));
			res = sluice_wait(coll_req);
		}
	}
	if (res != SLUICE_OK) {
		fprintf(stderr, "rank %d: %s (legal): %s: \"%s\"\n", rank, what, sluice_get_error_string(res),
			sluice_last_error());
		failures++;
	}
	for (size_t i = 0; res == SLUICE_OK && rank == 1 && i < count; i++)
		if (p2p_in[i] != (uint32_t)(i * 7 + 3)) {
			fprintf(stderr, "rank 1: %s (legal): received element %zu is %u, want %u\n", what, i,
				p2p_in[i], (uint32_t)(i * 7 + 3));
			failures++;
			break;
		}
	for (size_t i = 0; res == SLUICE_OK && coll == ALLREDUCE && i < SMALL; i++)
		if (b[i] != 2 * (uint32_t)(i + 1)) {
			fprintf(stderr, "rank %d: %s (legal): all-reduce element %zu is %u, want %u\n", rank, what, i,
				b[i], 2 * (uint32_t)(i + 1));
			failures++;
			break;
		}
	CHECK(sluice_comm_destroy(comm));
}

static void run_p2p(void)
{
	const struct p2p_case cases[] = {
		{ "allreduce against recv", ALLREDUCE, { { { COLL, SMALL, 0 } }, { { RECV, SMALL, 0 } } },
		  { CYCLE_SAID, "allreduce #", "recv #0 from rank 0" }, CYCLE_END, false, { 0 } },
		{ "allreduce against a 1 KiB send", ALLREDUCE,
		  { { { COLL, SMALL, 0 } }, { { SEND, SMALL, 0 }, { RECV, SMALL, 0 } } },
		  { CYCLE_SAID, "allreduce #", "recv #0 from rank 0" }, CYCLE_END, false, { 0 } },
		{ "allreduce against a 1 MiB send", ALLREDUCE,
		  { { { COLL, SMALL, 0 } }, { { SEND, LARGE, 0 }, { RECV, SMALL, 0 } } },
		  { CYCLE_SAID, "allreduce #", "recv #0 from rank 0" }, CYCLE_END, false, { 0 } },
		{ "barrier against recv", BARRIER, { { { COLL, 0, 0 } }, { { RECV, SMALL, 0 } } },
		  { CYCLE_SAID, "barrier #", "recv #0 from rank 0" }, CYCLE_END, false, { 0 } },
		{ "recv against recv", ALLREDUCE, { { { RECV, SMALL, 1 } }, { { RECV, SMALL, 0 } } },
		  { "2 ranks" CHAIN_SAID, "recv #0 from rank 1", "recv #0 from rank 0" }, CHAIN_END, false, { 0 } },
		/* named at rank 0's timeout: rank 1's stall note must come before it */
		{ "recv against recv, rank 1 0.6 of the timeout later", ALLREDUCE,
		  { { { RECV, SMALL, 1 } }, { { RECV, SMALL, 0 } } },
		  { "2 ranks" CHAIN_SAID, "recv #0 from rank 1", "recv #0 from rank 0" }, CHAIN_END, false, { 0, 0.6 } },
	};

	memset(bufa, 0, MOST_BYTES);
	run_cycles(cases, sizeof(cases) / sizeof(cases[0]));
	run_legal("allreduce, then a 1 KiB send past half the timeout", ALLREDUCE, SMALL, 0.6 * timeout_s);
	run_legal("barrier with a 1 MiB send", BARRIER, LARGE, 0);
}

/* --channels --p2p (2 ranks, 2 channels): cycles whose calls one rank splits
 * over the channels (1 MiB) while the other's run on the first alone (1
 * KiB): the second channel sees no cycle, and its bare timeout must not
 * come before the first one's name.  Rank 0 splits in the first window,
 * rank 1 in the second (in one, their slices on the second channel would
 * wait on each other across the cases' communicators: a cycle too). */
static void run_p2p_channels(void)
{
	const struct p2p_case rank0_splits[] = {
		{ "a 1 MiB recv against a 1 KiB recv", ALLREDUCE, { { { RECV, LARGE, 1 } }, { { RECV, SMALL, 0 } } },
		  { "2 ranks" CHAIN_SAID, "recv #0 from rank 1", "recv #0 from rank 0" }, CHAIN_END, false, { 0 } },
		{ "a 1 MiB allreduce against a 1 KiB recv", ALLREDUCE,
		  { { { COLL, LARGE, 0 } }, { { RECV, SMALL, 0 } } },
		  { CYCLE_SAID, "allreduce #", "recv #0 from rank 0" }, CYCLE_END, false, { 0 } },
	};
	const struct p2p_case rank1_splits = {
		"a 1 KiB allreduce against a 1 MiB recv", ALLREDUCE, { { { COLL, SMALL, 0 } }, { { RECV, LARGE, 0 } } },
		{ CYCLE_SAID, "allreduce #", "recv #0 from rank 0" }, CYCLE_END, false, { 0 },
	};

	run_cycles(rank0_splits, 2);
	run_cycles(&rank1_splits, 1);
}

/* Legal, on 3 ranks: rank 0 waits in a recv from rank 1, which waits in a
 * recv from rank 2 before it sends to rank 0; rank 2 posts its recv from
 * rank 0, computes past half the timeout, sends to rank 1 and waits in its
 * recv.  For that while the three recvs wait on each other in a cycle (the
 * chain closes on every rank), but rank 2 was only late: all must deliver,
 * and nothing be reported. */
static void run_legal_ring(void)
{
	uint32_t *out = bufa, *in = bufb;
	sluice_comm_t *comm;
	sluice_req_t *req, *recv_req;
	sluice_result_t res = SLUICE_OK;
	int from = (rank + 1) % 3;

	for (size_t i = 0; i < SMALL; i++)
		out[i] = (uint32_t)(rank * 1000 + i), in[i] = 0;
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_recv(comm, in, SMALL, SLUICE_UINT32, from, &recv_req));
	if (rank == 2) {
		usleep((useconds_t)(0.6 * timeout_s * 1e6));
		CHECK(sluice_send(comm, out, SMALL, SLUICE_UINT32, 1, &req));
		res = sluice_wait(req);
	}
	if (res == SLUICE_OK)
		res = sluice_wait(recv_req);
	if (res == SLUICE_OK && rank != 2) {
		CHECK(sluice_send(comm, out, SMALL, SLUICE_UINT32, (rank + 2) % 3, &req));
		res = sluice_wait(req);
	}
	if (res != SLUICE_OK) {
		fprintf(stderr, "rank %d: a ring of recvs, one late send (legal): %s: \"%s\"\n", rank,
			sluice_get_error_string(res), sluice_last_error());
		failures++;
	}
	for (size_t i = 0; res == SLUICE_OK && i < SMALL; i++)
		if (in[i] != (uint32_t)(from * 1000 + i)) {
			fprintf(stderr, "rank %d: a ring of recvs (legal): element %zu is %u, want %u\n", rank, i, in[i],
				(uint32_t)(from * 1000 + i));
			failures++;
			break;
		}
	CHECK(sluice_comm_destroy(comm));
}

/* A pipeline's hang through a rank's second stalled call, 3 ranks.  Rank 0
 * posts a recv from rank 1 ahead (a prefetch), computes 0.3 of the timeout
 * and waits in a second recv from rank 1; rank 1 computes half a timeout,
 * sends rank 0 the first, and waits in a recv from rank 2 before it sends
 * the second; rank 2 waits in a recv from rank 0 from the start.  Until
 * rank 1's send, the prefetch was rank 0's oldest stalled call, and the
 * chains rank 0 held went along it to rank 1, which waited for no one yet;
 * rank 2 times out first, and every rank must get the cycle's name. */
static void run_second_call(void)
{
	const struct p2p_case c = {
		"a cycle through rank 0's second recv", ALLREDUCE, { { { NONE } } },
		{ "3 ranks" CHAIN_SAID, "recv #1 from rank 1", "recv #0 from rank 2", "recv #0 from rank 0" },
		CHAIN_END, false, { 0 },
	};
	uint32_t *out = bufa, *in = bufb;
	sluice_comm_t *comm;
	sluice_req_t *ahead = NULL, *req;
	sluice_result_t res;
	char got[1200];

	CHECK(sluice_comm_init_env(ctx, &comm));
	double t0 = now_s();
	if (rank == 0) {
		CHECK(sluice_recv(comm, in, SMALL, SLUICE_UINT32, 1, &ahead));
		usleep((useconds_t)(0.3 * timeout_s * 1e6));
		CHECK(sluice_recv(comm, in + SMALL, SMALL, SLUICE_UINT32, 1, &req));
	} else if (rank == 1) {
		usleep((useconds_t)(0.5 * timeout_s * 1e6));
		CHECK(sluice_send(comm, out, SMALL, SLUICE_UINT32, 0, &ahead));
		CHECK(sluice_recv(comm, in, SMALL, SLUICE_UINT32, 2, &req));
	} else {
		CHECK(sluice_recv(comm, in, SMALL, SLUICE_UINT32, 0, &req));
	}
	expect_said(&c, sluice_wait(req), SLUICE_ERR_MISMATCH);
	if (ahead && (res = sluice_wait(ahead)) != SLUICE_OK) { /* the prefetch and its send were legal */
		fprintf(stderr, "rank %d: %s: the first %s: %s\n", rank, c.what, rank ? "send" : "recv",
			outcome(res, got, sizeof(got)));
		failures++;
	}
	after_failure(comm, c.what, SLUICE_ERR_MISMATCH, t0, timeout_s + 2);
}

/* A cycle behind a call stalled longer outside it, 3 ranks.  Rank 1 posts
 * a recv from rank 2 ahead (a prefetch: rank 2 computes past the timeout)
 * and at 0.2 of the timeout waits in a recv from rank 0; at 0.3 rank 0
 * waits in a recv from rank 1.  The prefetch, stalled longest, timed out
 * first, naming only the rank it waits for ("(waiting for rank 2)"), and
 * its abort took that to every rank; the cycle through the second recv
 * must be named on every rank. */
static void run_behind(void)
{
	const struct p2p_case c = {
		"a cycle behind a recv stalled longer outside it", ALLREDUCE, { { { NONE } } },
		{ "2 ranks" CHAIN_SAID, "recv #1 from rank 0", "recv #0 from rank 1" }, CHAIN_END, false, { 0 },
	};
	sluice_comm_t *comm;
	sluice_req_t *ahead = NULL, *req = NULL;

	CHECK(sluice_comm_init_env(ctx, &comm));
	/* a message from rank 0 first: the recvs after it differ in number too
	 * (one of the same number and kind passed for the other in a chain) */
	if (rank < 2) {
		CHECK(rank ? sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, 0, &req)
			   : sluice_send(comm, bufa, SMALL, SLUICE_FLOAT32, 1, &req));
		CHECK(sluice_wait(req));
		req = NULL;
	}
	double t0 = now_s();
	if (rank == 1) {
		CHECK(sluice_recv(comm, bufa, SMALL, SLUICE_FLOAT32, 2, &ahead));
		usleep((useconds_t)(0.2 * timeout_s * 1e6));
		CHECK(sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, 0, &req));
	} else if (rank == 0) {
		usleep((useconds_t)(0.3 * timeout_s * 1e6));
		CHECK(sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, 1, &req));
	} else {
		/* computing past the first timeout (rank 1's prefetch's) */
		usleep((useconds_t)(1.2 * timeout_s * 1e6));
	}
	if (req)
		expect_said(&c, sluice_wait(req), SLUICE_ERR_MISMATCH);
	if (ahead)
		sluice_wait(ahead); /* failed with the communicator */
	after_failure(comm, c.what, SLUICE_ERR_MISMATCH, t0, timeout_s * 1.2 + 2);
}

/* --cycles, 3 ranks: cycles that only the whole chain of waits shows (no
 * rank waits for one that waits for it), one at a time (each rank is in
 * both: run together, their waits would make other cycles of each), one
 * through a rank's second stalled call, one behind a call stalled longer
 * outside it, then the legal ring. */
static void run_cycles3(void)
{
	const struct p2p_case ring = {
		"a ring of recvs", ALLREDUCE,
		{ { { RECV, SMALL, 1 } }, { { RECV, SMALL, 2 } }, { { RECV, SMALL, 0 } } },
		{ "3 ranks" CHAIN_SAID, "recv #0 from rank 1", "recv #0 from rank 2", "recv #0 from rank 0" }, CHAIN_END,
		false, { 0 },
	};
	/* rank 1's barrier waits for rank 0 or 2: a cycle of 2 or 3 across the communicators */
	const struct p2p_case across = {
		"recvs through a barrier on another communicator", BARRIER,
		{ { { RECV, SMALL, 1 } }, { { COLL, 0, 0 } }, { { RECV, SMALL, 0 } } },
		{ CHAIN_SAID, "recv #0 from rank 1 on communicator 0x", "barrier #0 for rank " }, CHAIN_END, true, { 0 },
	};

	run_cycles(&ring, 1);
	if (!failures)
		run_cycles(&across, 1);
	if (!failures)
		run_second_call();
	if (!failures)
		run_behind();
	run_legal_ring();
}

/* --tail, 4 ranks (SLUICE_ALGO=ring,direct: rank 3's all-reduce waits for rank
 * 2): a training job's hang.  Ranks 0 and 1 wait in recvs from each other,
 * rank 2 in a recv from rank 0, and rank 3 in an all-reduce for rank 2,
 * two steps from the cycle.  They get there at different times, rank 3
 * first (0, 0.3 and 0.6 of the timeout): rank 3 times out first, and must
 * name its path to the cycle and the cycle; its abort takes that to every
 * rank (before: its bare timeout did). */
static void run_tail(void)
{
	const struct p2p_case tail = {
		"an all-reduce two steps from a cycle of recvs", ALLREDUCE,
		{ { { RECV, SMALL, 1 } }, { { RECV, SMALL, 0 } }, { { RECV, SMALL, 0 } }, { { COLL, SMALL, 0 } } },
		{ "rank 3 waits in allreduce #0 for rank 2, which waits in recv #0 from rank 0, which is in a cycle: "
		  "2 ranks" CHAIN_SAID, "rank 0 waits in recv #0 from rank 1, which has not posted send #0 to rank 0 "
		  "while it waits in recv #0 from rank 0" }, CHAIN_END, false, { 0.6, 0.6, 0.3, 0 },
	};

	run_cycles(&tail, 1);
}

/* A cycle through a rank's second stalled call while its first stalls on
 * a rank outside the cycle, 4 ranks.  Rank 1 waits in a recv from rank 2
 * from the start; at 0.1 of the timeout rank 0 sends rank 3 32 MiB (rank
 * 3, computing, never posts its recv: its stash takes part, then holds
 * the rest) and waits in a recv from rank 1; at 0.3 rank 2 waits in a recv
 * from rank 0.  Rank 0's send was posted first but moved last (the
 * acknowledgements of what rank 3's stash took): chains went along it,
 * the older call, to rank 3, once it stalled, and rank 2's chain, which
 * came after, never reached rank 1, which timed out first, bare.  Every
 * rank must get the cycle's name. */
static void run_outside(void)
{
	const struct p2p_case c = {
		"a cycle behind a send held outside it", ALLREDUCE, { { { NONE } } },
		{ "3 ranks" CHAIN_SAID, "recv #0 from rank 1", "recv #0 from rank 2", "recv #0 from rank 0" },
		CHAIN_END, false, { 0 },
	};
	size_t held = 8u << 20; /* floats: 32 MiB, past what a stash takes of a call not posted */
	sluice_comm_t *comm;
	sluice_req_t *outside = NULL, *req = NULL;
	float *big;

	CHECK(sluice_mem_alloc(ctx, held * sizeof(float), (void **)&big));
	CHECK(sluice_comm_init_env(ctx, &comm));
	double t0 = now_s();
	if (rank == 0) {
		usleep((useconds_t)(0.1 * timeout_s * 1e6));
		CHECK(sluice_send(comm, big, held, SLUICE_FLOAT32, 3, &outside));
		CHECK(sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, 1, &req));
	} else if (rank == 1) {
		CHECK(sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, 2, &req));
	} else if (rank == 2) {
		usleep((useconds_t)(0.3 * timeout_s * 1e6));
		CHECK(sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, 0, &req));
	} else {
		/* computing past the first timeout (rank 1's): a call of its own
		 * now would wait for rank 0, another cycle through the send */
		usleep((useconds_t)(1.2 * timeout_s * 1e6));
	}
	if (req)
		expect_said(&c, sluice_wait(req), SLUICE_ERR_MISMATCH);
	if (outside)
		sluice_wait(outside); /* failed with the communicator */
	after_failure(comm, c.what, SLUICE_ERR_MISMATCH, t0, timeout_s + 2);
	CHECK(sluice_mem_free(ctx, big));
}

/* --long-ring (4 to 64 ranks; the suite runs 12): a ring of recvs over
 * every rank, rank i waiting for rank i + 1, all at once (after an
 * all-reduce).  A cycle longer
 * than a stall note's chain once was (8 waits: 10 ranks), named on every
 * rank. */
static void run_long_ring(void)
{
	char count[64];
	const struct p2p_case ring = { .what = "a ring of recvs over every rank",
				       .said = { count, "recv #0 from rank " }, .end = CHAIN_END };
	sluice_comm_t *comm;
	sluice_req_t *req;

	struct call together = { .coll = ALLREDUCE, .count = 1, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };

	snprintf(count, sizeof(count), "%d ranks" CHAIN_SAID, nranks);
	CHECK(sluice_comm_init_env(ctx, &comm));
	/* into the ring together: 12 processes on 2 cores start seconds apart */
	CHECK(post(comm, &together, &req));
	CHECK(sluice_wait(req));
	double t0 = now_s();
	CHECK(sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, (rank + 1) % nranks, &req));
	expect_said(&ring, sluice_wait(req), SLUICE_ERR_MISMATCH);
	after_failure(comm, ring.what, SLUICE_ERR_MISMATCH, t0, timeout_s + 2);
}

/* --late-ring (3 ranks): a ring of recvs whose last rank gets there after
 * the first rank's timeout: ranks 0, 1 and 2 post theirs at 0, 0.3 and
 * 1.2 of the timeout.  Rank 0's chain stops at rank 2, which has no call
 * yet, and rank 2 tells it so: rank 0's timeout, and every rank's copy,
 * names rank 2 and the send it has not posted (before: "(waiting for rank
 * 1): a rank may not have made this call").  Rank 2 came at 0.9 and 1.0
 * before, into the ring: the ranks leave the all-reduce apart and engines
 * run late under load, and in some runs its stall passed the chain round
 * in time and the cycle was named (right, but not this test's case; test_engine
 * a_path_to_a_rank_late_in_its_wait_is_named has it on a stepped clock). */
static void run_late_ring(void)
{
	static const double late[3] = { 0, 0.3, 1.2 };
	const struct p2p_case ring = {
		.what = "a ring of recvs whose last rank gets there late",
		.said = { "recv #0 on rank 0 made no progress for ", "(waiting for rank 1): rank 0 waits in recv #0 "
			  "from rank 1, rank 1 in recv #0 from rank 2; rank 2 had not posted send #0 to rank 1 " },
		.end = "every rank on the way waits on it",
	};
	struct call together = { .coll = ALLREDUCE, .count = 1, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };
	sluice_comm_t *comm;
	sluice_req_t *req;

	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(post(comm, &together, &req)); /* its processes start apart: the lateness counts from here */
	CHECK(sluice_wait(req));
	double t0 = now_s();
	usleep((useconds_t)(late[rank] * timeout_s * 1e6));
	CHECK(sluice_recv(comm, bufb, SMALL, SLUICE_FLOAT32, (rank + 1) % 3, &req));
	expect_said(&ring, sluice_wait(req), SLUICE_ERR_TIMEOUT);
	after_failure(comm, ring.what, SLUICE_ERR_TIMEOUT, t0, timeout_s + 2);
}

/* Every kind of mismatch of collective c, at a small and a large count. */
static int mismatches_of(enum coll c, struct mismatch *list)
{
	int n = 0;
	char said[48];

	for (int large = 0; large < 2; large++) {
		size_t count = large ? LARGE : SMALL;
		const char *size = large ? "1 MiB" : "1 KiB";
		struct call all = { .coll = c, .count = count, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM }, odd;
		char what[64];

		odd = all, odd.count = count + 1;
		snprintf(what, sizeof(what), "count differs (%s)", size);
		snprintf(said, sizeof(said), "rank 1 called %s(count=%zu,", coll_names[c], count + 1);
		add(list, &n, what, c, all, odd, said);
		/* the same size: the same plan on both sides */
		odd = all, odd.dtype = SLUICE_INT32;
		snprintf(what, sizeof(what), "datatype differs (%s)", size);
		add(list, &n, what, c, all, odd, "int32");
		if (reduces(c)) {
			odd = all, odd.op = SLUICE_MAX;
			snprintf(what, sizeof(what), "op differs (%s)", size);
			add(list, &n, what, c, all, odd, "max");
		}
		if (rooted(c)) {
			odd = all, odd.root = 1;
			snprintf(what, sizeof(what), "root differs (%s)", size);
			add(list, &n, what, c, all, odd, "root 1)");
		}
		odd = all, odd.coll = other_coll[c];
		snprintf(what, sizeof(what), "rank 1 calls %s (%s)", coll_names[odd.coll], size);
		snprintf(said, sizeof(said), "rank 1 called %s(", coll_names[odd.coll]);
		add(list, &n, what, c, all, odd, said);
	}
	/* a call with nothing to move, against one with something */
	struct call all = { .coll = c, .count = SMALL, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM }, odd = all;
	odd.count = 0;
	add(list, &n, "count 0 on rank 1", c, all, odd, "rank 1 called");
	odd = all, odd.coll = BARRIER;
	add(list, &n, "rank 1 calls barrier", c, all, odd, "rank 1 called barrier");
	/* the planner may pick one algorithm for 8 bytes and another for 1 MiB */
	for (int odd_large = 0; odd_large < 2; odd_large++) {
		struct call all = { .coll = c, .count = odd_large ? 2 : LARGE, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };
		struct call odd = all;

		odd.count = odd_large ? LARGE : 2;
		snprintf(said, sizeof(said), "rank 1 called %s(count=%zu,", coll_names[c], odd.count);
		add(list, &n, odd_large ? "count 1 MiB on rank 1, 8 bytes on the others" :
					  "count 8 bytes on rank 1, 1 MiB on the others", c, all, odd, said);
	}
	return n;
}

static bool coll_by_name(const char *s, size_t len, enum coll *out)
{
	for (int c = 0; c < NCOLLS; c++)
		if (strlen(coll_names[c]) == len && !strncmp(s, coll_names[c], len)) {
			*out = (enum coll)c;
			return true;
		}
	return false;
}

int main(int argc, char **argv)
{
	const char *limit = getenv("SLUICE_TIMEOUT"), *algo = getenv("SLUICE_ALGO");
	bool ring = algo && !strncmp(algo, "ring", 4);
	int tried = 0, copies = 0, ring_allreduces = 0;
	sluice_comm_t *comm;

	bool p2p = argc == 2 && !strcmp(argv[1], "--p2p"), cycles = argc == 2 && !strcmp(argv[1], "--cycles");
	bool tail = argc == 2 && !strcmp(argv[1], "--tail"), long_ring = argc == 2 && !strcmp(argv[1], "--long-ring");
	bool late_ring = argc == 2 && !strcmp(argv[1], "--late-ring");

	sliced = argc == 3 && !strcmp(argv[1], "--channels");
	bool split_p2p = sliced && !strcmp(argv[2], "--p2p");
	p2p |= split_p2p;
	if (argc != 2 + sliced) {
		fprintf(stderr, "usage: it_mismatch [--channels] COLL[,COLL...] (allreduce, allgather, reduce_scatter, "
			"broadcast, reduce, alltoall, gather, scatter), it_mismatch [--channels] --p2p, --cycles or "
			"--tail, --long-ring or --late-ring\n");
		return 2;
	}
	timeout_s = limit ? atof(limit) : 60;
	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	CHECK(sluice_comm_destroy(comm));
	if (long_ring ? nranks < 4 || nranks > 64
		      : nranks < 2 || nranks > MOST_RANKS || (p2p && nranks != 2) || (cycles && nranks != 3) ||
				(tail && nranks != 4) || (late_ring && nranks != 3)) {
		fprintf(stderr, "it_mismatch: runs on 2 to %d ranks (--p2p: 2, --cycles: 3, --tail: 4, --long-ring: 4 "
			"to 64, --late-ring: 3), not %d\n", MOST_RANKS, nranks);
		return 2;
	}
	/* --long-ring's recv alone: many ranks on one host */
	size_t bytes = long_ring ? SMALL * sizeof(float) : MOST_BYTES;
	CHECK(sluice_mem_alloc(ctx, bytes, &bufa));
	CHECK(sluice_mem_alloc(ctx, bytes, &bufb));
	memset(bufa, 0, bytes);
	if (split_p2p)
		run_p2p_channels();
	else if (p2p)
		run_p2p();
	if (cycles)
		run_cycles3();
	if (tail)
		run_tail();
	if (tail && !failures)
		run_outside();
	if (long_ring)
		run_long_ring();
	if (late_ring)
		run_late_ring();
	for (const char *p = argv[1 + sliced]; *p && !p2p && !cycles && !tail && !long_ring && !late_ring;) {
		size_t len = strcspn(p, ",");
		struct mismatch list[20];
		enum coll c;

		if (!coll_by_name(p, len, &c)) {
			fprintf(stderr, "it_mismatch: \"%.*s\" is not a collective it knows\n", (int)len, p);
			return 2;
		}
		int n = mismatches_of(c, list);
		/* up to the first that fails: each later one might wait out the timeout too */
		for (int i = 0; i < n && !failures; i++) {
			bool copy = run(&list[i]);
			/* on a ring rank 0 hears only from the last rank, which
			 * agrees with it: it learns of rank 1's all-reduce only
			 * as a peer's copy */
			if (ring && nranks == 3 && list[i].all.coll == ALLREDUCE && list[i].odd.coll == ALLREDUCE) {
				ring_allreduces++;
				copies += copy;
			}
		}
		tried += n;
		p += len + (p[len] == ',');
		if (failures)
			break;
	}
	if (rank == 0 && copies != ring_allreduces) {
		fprintf(stderr, "rank 0: %d of %d ring all-reduce mismatches came as a peer's copy, want all: on a ring "
			"it hears only from rank %d, which agrees with it\n", copies, ring_allreduces, nranks - 1);
		failures++;
	}
	CHECK(sluice_mem_free(ctx, bufa));
	CHECK(sluice_mem_free(ctx, bufb));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_mismatch rank %d of %d (SLUICE_ALGO=%s): %d mismatches, %d failures\n", rank, nranks,
		       algo ? algo : "", tried, failures);
	return failures ? 1 : 0;
}
