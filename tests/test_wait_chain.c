/*
 * test_wait_chain.c: a stall note's chain of waits as text, and the
 * sentence of a cycle (dataplane/wait_chain.h): long chains round-trip,
 * cut or overlong ones are refused, and a long cycle's sentence still ends
 * in what to do, a path's in whom it waits on; a set of ranks as a
 * sentence names them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/abi.h>

#include "wait_chain.h"

#define WHAT_TO_DO "so that no rank waits in one before posting what another waits for"

/* A ring of n recvs on one communicator (rank i waits for rank i + 1),
 * every fourth edge on another communicator and numbered high, so that
 * both of an edge's forms and the widest fields are in it. */
static void ring(struct dp_wait_edge *edge, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		edge[i] = (struct dp_wait_edge){ .comm = i % 4 == 3 ? 0xfedcba98u : 0x1234u,
						 .seq = i % 4 == 3 ? UINT32_MAX : i,
						 .rank = (uint16_t)(SL_MAX_RANKS - 1 - i),
						 .waits_for = (uint16_t)(SL_MAX_RANKS - 2 - i),
						 .op = i % 2 ? SL_OP_RECV : SL_OP_ALLREDUCE };
}

static bool same(const struct dp_wait_edge *a, const struct dp_wait_edge *b)
{
	return a->comm == b->comm && a->seq == b->seq && a->rank == b->rank && a->waits_for == b->waits_for &&
	       a->op == b->op;
}

/* DP_WAIT_CHAIN_MAX (64) edges go through the text and come back whole,
 * in DP_CHAIN_TEXT_LEN; as many with every edge in full (a communicator
 * change at each) fit it too. */
static void test_a_long_chain_round_trips(void **state)
{
	struct dp_wait_edge edge[DP_WAIT_CHAIN_MAX];
	struct dp_wait_chain out;
	char text[DP_CHAIN_TEXT_LEN];
	(void)state;

	assert_int_equal(DP_WAIT_CHAIN_MAX, 64);
	ring(edge, DP_WAIT_CHAIN_MAX);
	assert_true(dp_chain_format(edge, DP_WAIT_CHAIN_MAX, text, sizeof(text)));
	assert_true(dp_chain_parse(text, &out));
	assert_int_equal(out.n, DP_WAIT_CHAIN_MAX);
	for (unsigned i = 0; i < DP_WAIT_CHAIN_MAX; i++)
		if (!same(&out.edge[i], &edge[i]))
			fail_msg("edge %u came back as %x:%u:%u:%u:%u", i, out.edge[i].comm, out.edge[i].rank,
				 out.edge[i].waits_for, out.edge[i].op, out.edge[i].seq);
	for (unsigned i = 0; i < DP_WAIT_CHAIN_MAX; i++)
		edge[i].comm = i % 2 ? 0xfedcba98u : 0xfedcba99u, edge[i].seq = UINT32_MAX;
	assert_true(dp_chain_format(edge, DP_WAIT_CHAIN_MAX, text, sizeof(text)));
	assert_true(dp_chain_parse(text, &out));
	assert_int_equal(out.n, DP_WAIT_CHAIN_MAX);
}

/* A chain cut inside an edge, one past DP_WAIT_CHAIN_MAX, and a short edge
 * first (no edge before it to go on from) are refused. */
static void test_a_cut_or_overlong_chain_is_refused(void **state)
{
	struct dp_wait_edge edge[DP_WAIT_CHAIN_MAX + 1];
	struct dp_wait_chain out;
	char text[DP_CHAIN_TEXT_LEN + 32];
	size_t len;
	(void)state;

	ring(edge, DP_WAIT_CHAIN_MAX);
	assert_true(dp_chain_format(edge, DP_WAIT_CHAIN_MAX, text, sizeof(text)));
	len = strlen(text);
	for (size_t cut = 1; cut < len; cut++) {
		char c[DP_CHAIN_TEXT_LEN];
		memcpy(c, text, cut);
		c[cut] = '\0';
		/* cut at or next to a separator: a field or an edge is missing */
		if ((text[cut] == ':' || text[cut - 1] == ':' || text[cut - 1] == ' ') && dp_chain_parse(c, &out))
			fail_msg("the chain cut to %zu of %zu bytes was taken (\"...%s\")", cut, len,
				 c + (cut > 12 ? cut - 12 : 0));
	}
	ring(edge, DP_WAIT_CHAIN_MAX + 1);
	assert_true(dp_chain_format(edge, DP_WAIT_CHAIN_MAX + 1, text, sizeof(text)));
	assert_false(dp_chain_parse(text, &out));
	assert_false(dp_chain_parse("w2 7:9:0", &out));
	assert_true(dp_chain_parse("w2 ab:8:7:9:0 6:9:0", &out));
	assert_int_equal(out.n, 2);
	assert_int_equal(out.edge[1].rank, 7);
	assert_false(dp_chain_parse("w2 ab:8:7:9:0 6:9", &out));
	assert_false(dp_chain_parse("w2 ab:8:7:9:0 6:9:0:1", &out));
	assert_false(dp_chain_parse("w2 ab:8:7:9:0 ab:6:5:9:0", &out)); /* not a path */
}

/* A chain that does not fit the note's room (a small --payload) is not
 * written: wait_notes.c sends no note then. */
static void test_a_chain_past_the_payload_is_not_written(void **state)
{
	struct dp_wait_edge edge[DP_WAIT_CHAIN_MAX];
	char text[DP_CHAIN_TEXT_LEN];
	(void)state;

	ring(edge, DP_WAIT_CHAIN_MAX);
	assert_true(dp_chain_format(edge, DP_WAIT_CHAIN_MAX, text, sizeof(text)));
	assert_false(dp_chain_format(edge, DP_WAIT_CHAIN_MAX, text, strlen(text)));
	assert_false(dp_chain_format(edge, DP_WAIT_CHAIN_MAX, text, 256));
}

/* A ring of n recvs on one communicator, rank base + i waiting for rank
 * base + i + 1. */
static void recv_ring(struct dp_wait_edge *edge, unsigned n, unsigned base)
{
	for (unsigned i = 0; i < n; i++)
		edge[i] = (struct dp_wait_edge){ .comm = 0xabcd, .seq = 0, .rank = (uint16_t)(base + i),
						 .waits_for = (uint16_t)(base + (i + 1) % n), .op = SL_OP_RECV };
}

/* The sentence of a cycle over 3 to 66 ranks, of one to three digits,
 * fits SL_ERRMSG_LEN uncut with room for a relay's "rank 255 reported: "
 * before it (a 5-rank cycle's took 615 bytes, a 24-rank ring's came cut
 * to the peers): the count, this rank's wait and what to do; a long one's
 * also the wait that closes it. */
static void test_a_long_cycle_is_said_whole(void **state)
{
	struct dp_wait_edge edge[DP_WAIT_CHAIN_MAX + 2];
	char why[SL_ERRMSG_LEN];
	(void)state;

	for (unsigned n = 3; n <= DP_WAIT_CHAIN_MAX + 2; n++)
		for (unsigned base = 0; base <= 100; base += 10) {
			char count[64], first[64], last[64];
			const char *end;
			recv_ring(edge, n, base);
			dp_cycle_sentence(why, sizeof(why), edge, n, 0, 0, 1.0);
			snprintf(count, sizeof(count), "%u ranks wait on each other in a cycle", n);
			snprintf(first, sizeof(first), "rank %u waits in recv #0 from rank %u", base, base + 1);
			snprintf(last, sizeof(last), "rank %u in recv #0 from rank %u", base + n - 1, base);
			end = strstr(why, WHAT_TO_DO);
			if (strncmp(why, count, strlen(count)) || !strstr(why, first) || !end ||
			    end[strlen(WHAT_TO_DO)] || strlen(why) + strlen("rank 255 reported: ") >= sizeof(why) ||
			    (n >= 12 && !strstr(why, last)))
				fail_msg("cycle of %u from rank %u (%zu bytes): \"%s\"", n, base, strlen(why), why);
		}
}

/* A chain passed round a ring of n recvs as the ranks pass it (wait_notes.c
 * chain_came, chain_pass): each rank reads the text, puts the sender's
 * wait at its end, and, unless the chain came back to its first rank or
 * took `stop` hops (0: none), makes room and writes it on.  Returns the
 * chain as the rank it came to last holds it, or with n 0 if a rank
 * stopped it. */
static struct dp_wait_chain round_the_ring(unsigned n, unsigned stop, size_t *longest)
{
	struct dp_wait_edge edge[SL_MAX_RANKS];
	struct dp_wait_chain c;
	char text[DP_CHAIN_TEXT_LEN] = "";

	recv_ring(edge, n, 0);
	*longest = 0;
	for (unsigned hop = 1;; hop++) {
		unsigned at = hop % n; /* the rank it comes to, from rank hop - 1 */
		assert_true(dp_chain_parse(text, &c));
		c.edge[c.n++] = edge[hop - 1];
		if (at == c.edge[0].rank || hop == stop)
			return c;
		if (!dp_chain_make_room(&c) || !dp_chain_write(&c, text, sizeof(text)))
			return (struct dp_wait_chain){ .n = 0 };
		*longest = strlen(text) > *longest ? strlen(text) : *longest;
	}
}

/* A cycle over more than 66 ranks (up to SL_MAX_RANKS): the chain keeps
 * its head and its latest waits, counts those it leaves out, and comes
 * back to its first rank, which names the cycle with its size, its own
 * wait, the one that closes it and what to do.  It stopped at 64 waits,
 * and the cycle was a bare timeout. */
static void test_a_chain_goes_round_a_cycle_of_any_size(void **state)
{
	static const unsigned sizes[] = { 3, 65, 66, 67, 100, 128, 255, 256 };
	char why[SL_ERRMSG_LEN];
	(void)state;

	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		unsigned n = sizes[s];
		size_t longest;
		struct dp_wait_chain c = round_the_ring(n, 0, &longest);
		char count[64], last[64];
		if (!c.n || c.n + c.skipped != n || c.n > DP_WAIT_CHAIN_MAX + 1 || longest > 1024)
			fail_msg("ring of %u: came back with %u waits and %u left out (want %u), its text up to "
				 "%zu bytes", n, c.n, c.skipped, n, longest);
		dp_cycle_sentence(why, sizeof(why), c.edge, c.n, DP_CHAIN_HEAD, c.skipped, 1.0);
		snprintf(count, sizeof(count), "%u ranks wait on each other in a cycle", n);
		snprintf(last, sizeof(last), "rank %u in recv #0 from rank 0", n - 1);
		const char *end = strstr(why, WHAT_TO_DO);
		if (strncmp(why, count, strlen(count)) || !strstr(why, "rank 0 waits in recv #0 from rank 1") ||
		    (n >= 12 && !strstr(why, last)) || !end || end[strlen(WHAT_TO_DO)] ||
		    strlen(why) + strlen("rank 255 reported: ") >= sizeof(why))
			fail_msg("ring of %u: \"%s\"", n, why);
	}
}

/* The sentence of a path of 2 to 255 waits that stops at a rank which has
 * not posted the last one's counterpart (its chain passed along a ring
 * that far, waits left out past DP_WAIT_CHAIN_MAX), after a timeout's
 * words: it starts with this rank's wait, names the rank it stops at, its
 * call and the last wait, and ends whole, with the relay's room left. */
static void test_a_path_names_the_rank_it_stops_at(void **state)
{
	static const unsigned lengths[] = { 2, 3, 5, 12, 64, 65, 100, 255 };
	static const char head[] = "recv #0 on rank 0 made no progress for 30.0 s (waiting for rank 1): ";
	static const char end[] = " s before): it may not have made that call, or may be stuck before it; every rank "
				  "on the way waits on it";
	char why[SL_ERRMSG_LEN];
	(void)state;

	for (unsigned l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
		unsigned n = lengths[l];
		size_t longest, at = strlen(head);
		struct dp_wait_chain c = round_the_ring(SL_MAX_RANKS, n, &longest);
		char stops[192], last[64];
		if (c.n + c.skipped != n)
			fail_msg("path of %u: %u waits and %u left out", n, c.n, c.skipped);
		memcpy(why, head, at);
		dp_path_sentence(why + at, sizeof(why) - at, c.edge, c.n, c.skipped ? DP_CHAIN_HEAD : 0, c.skipped, 1.5);
		snprintf(stops, sizeof(stops), "; rank %u had not posted send #0 to rank %u (it said so 1.5%s", n, n - 1, end);
		snprintf(last, sizeof(last), ", rank %u in recv #0 from rank %u;", n - 1, n);
		const char *tail = strstr(why, stops);
		if (strncmp(why + at, "rank 0 waits in recv #0 from rank 1", 35) || !tail || tail[strlen(stops)] ||
		    !strstr(why, last) || strlen(why) + strlen("rank 255 reported: ") >= sizeof(why))
			fail_msg("path of %u (%zu bytes): \"%s\"", n, strlen(why), why);
	}
}

/* A path of `path` recvs into a ring of `cycle` (ranks 0 to path - 1 lead
 * to rank path, which is in the ring), rank 0's chain passed on as the
 * ranks pass it (round_the_ring) until it comes to a rank whose own wait
 * it holds: it closed there (wait_notes.c chain_closed).  Returns it as
 * that rank holds it (n 0: stopped first), and in *at where its cycle
 * starts, as its starter finds it from the last wait (closes_at). */
static struct dp_wait_chain into_a_cycle(unsigned path, unsigned cycle, unsigned *at)
{
	struct dp_wait_edge edge[SL_MAX_RANKS];
	struct dp_wait_chain c;
	char text[DP_CHAIN_TEXT_LEN] = "";
	unsigned r = 0;

	recv_ring(edge, path + cycle, 0);
	edge[path + cycle - 1].waits_for = (uint16_t)path;
	for (;;) {
		assert_true(dp_chain_parse(text, &c));
		c.edge[c.n++] = edge[r];
		r = edge[r].waits_for;
		for (*at = 1; *at < c.n; ++*at)
			if (c.edge[*at].rank == r)
				return c;
		if (!dp_chain_make_room(&c) || !dp_chain_write(&c, text, sizeof(text)))
			return (struct dp_wait_chain){ .n = 0 };
	}
}

/* The sentence of a rank that waits on a cycle from outside it, from its
 * chain come back to it closed (an ahead note): a cycle past a chain's
 * room one step out, and paths past the chain's head into a cycle, their
 * waits counted where the chain left them out.  Each names the cycle
 * with its size, starts with the rank's own wait and ends in what to do,
 * with the relay's room left.  Such ranks learnt of the cycle only from a
 * peer's abort. */
static void test_a_cycle_far_ahead_is_named(void **state)
{
	static const struct {
		unsigned path, cycle;
	} shapes[] = { { 1, 2 }, { 1, 100 }, { 5, 200 }, { 40, 10 }, { 60, 30 }, { 200, 20 } };
	char why[SL_ERRMSG_LEN];
	(void)state;

	for (unsigned s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		unsigned path = shapes[s].path, cycle = shapes[s].cycle, at;
		struct dp_wait_chain c = into_a_cycle(path, cycle, &at);
		char count[64];
		if (!c.n || c.edge[at].rank != path || c.n + c.skipped != path + cycle)
			fail_msg("%u into %u: closed after %u waits and %u left out, at %u", path, cycle, c.n, c.skipped,
				 at);
		dp_tail_sentence(why, sizeof(why), &c.edge[0], &c.edge[1], c.n - 1u, at - 1u,
				 c.skipped ? DP_CHAIN_HEAD - 1u : 0, c.skipped, 1.0);
		snprintf(count, sizeof(count), "in a cycle: %u ranks wait on each other in a cycle", cycle);
		const char *end = strstr(why, WHAT_TO_DO);
		if (strncmp(why, "rank 0 waits in recv #0 from rank 1", 35) || !strstr(why, count) || !end ||
		    end[strlen(WHAT_TO_DO)] || strlen(why) + strlen("rank 255 reported: ") >= sizeof(why))
			fail_msg("%u into %u (%zu bytes): \"%s\"", path, cycle, strlen(why), why);
	}
}

/* A chain that leaves waits out says so once, after its head, with the
 * wait after in full; any other count is refused, and a chain of
 * DP_WAIT_HOPS_MAX waits is not passed on. */
static void test_waits_left_out_are_checked(void **state)
{
	struct dp_wait_edge edge[DP_WAIT_CHAIN_MAX + 1];
	struct dp_wait_chain c;
	char text[DP_CHAIN_TEXT_LEN], bad[DP_CHAIN_TEXT_LEN + 16];
	char *skip;
	(void)state;

	recv_ring(edge, DP_WAIT_CHAIN_MAX, 0);
	c.n = DP_WAIT_CHAIN_MAX;
	c.skipped = 7;
	memcpy(c.edge, edge, sizeof(edge[0]) * DP_WAIT_CHAIN_MAX);
	assert_true(dp_chain_write(&c, text, sizeof(text)));
	assert_true(dp_chain_parse(text, &c));
	assert_int_equal(c.n, DP_WAIT_CHAIN_MAX);
	assert_int_equal(c.skipped, 7);
	skip = strstr(text, " +7 ");
	assert_non_null(skip);
	/* none, a count of 0, over the most, twice, or a short wait after it */
	static const char *const swaps[] = { " +0 ", " +256 ", " +7 +7 ", " +7 1:5:0 " };
	for (unsigned i = 0; i < sizeof(swaps) / sizeof(swaps[0]); i++) {
		const char *after = strchr(skip + 4, ' '); /* the wait after the count, then the rest */
		snprintf(bad, sizeof(bad), "%.*s%s%s", (int)(skip - text), text, swaps[i],
			 i == 3 ? strchr(after + 1, ' ') + 1 : skip + 4);
		if (dp_chain_parse(bad, &c))
			fail_msg("case %u taken: %s", i, bad);
	}
	/* a count anywhere but after the head */
	assert_false(dp_chain_parse("w2 abcd:0:1:9:0 +3 abcd:4:5:9:0", &c));
	/* DP_WAIT_HOPS_MAX waits: not passed on */
	c.n = DP_WAIT_CHAIN_MAX + 1;
	c.skipped = DP_WAIT_HOPS_MAX - DP_WAIT_CHAIN_MAX - 2;
	assert_true(dp_chain_make_room(&c));
	assert_int_equal(c.n, DP_WAIT_CHAIN_MAX);
	c.edge[c.n++] = edge[0];
	assert_false(dp_chain_make_room(&c));
}

/* A wait on several ranks names each (up to `most`, then counts the rest),
 * in rank order, with "and" before the last named. */
static void test_ranks_are_listed(void **state)
{
	static const struct {
		uint32_t ranks[12];
		unsigned n, most;
		const char *want;
	} cases[] = {
		{ { 2 }, 1, 8, "rank 2" },
		{ { 2, 3 }, 2, 8, "ranks 2 and 3" },
		{ { 5, 1, 4 }, 3, 8, "ranks 1, 4 and 5" },
		{ { 0, 63, 64, 255 }, 4, 8, "ranks 0, 63, 64 and 255" },
		{ { 1, 2, 3, 4, 5, 6, 7, 8 }, 8, 8, "ranks 1, 2, 3, 4, 5, 6, 7 and 8" },
		{ { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, 11, 8, "ranks 1, 2, 3, 4, 5, 6, 7, 8 and 3 more" },
		{ { 7, 9 }, 2, 1, "ranks 7 and 1 more" },
	};
	char buf[96];
	(void)state;

	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint64_t set[SL_MAX_RANKS / 64] = { 0 };
		for (unsigned i = 0; i < cases[c].n; i++)
			set[cases[c].ranks[i] / 64] |= 1ull << (cases[c].ranks[i] % 64);
		dp_rank_list(buf, sizeof(buf), set, SL_MAX_RANKS, cases[c].most);
		if (strcmp(buf, cases[c].want))
			fail_msg("case %u: \"%s\", want \"%s\"", c, buf, cases[c].want);
	}
	/* 64 ranks of three digits do not fit: cut, and marked so */
	uint64_t all[SL_MAX_RANKS / 64] = { 0, 0, UINT64_MAX, 0 };
	dp_rank_list(buf, 40, all, SL_MAX_RANKS, 64);
	if (strlen(buf) != 39 || !strstr(buf, "..."))
		fail_msg("a list past its room: \"%s\"", buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_long_chain_round_trips),
		cmocka_unit_test(test_a_cut_or_overlong_chain_is_refused),
		cmocka_unit_test(test_a_chain_past_the_payload_is_not_written),
		cmocka_unit_test(test_a_long_cycle_is_said_whole),
		cmocka_unit_test(test_a_chain_goes_round_a_cycle_of_any_size),
		cmocka_unit_test(test_waits_left_out_are_checked),
		cmocka_unit_test(test_a_path_names_the_rank_it_stops_at),
		cmocka_unit_test(test_a_cycle_far_ahead_is_named),
		cmocka_unit_test(test_ranks_are_listed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
