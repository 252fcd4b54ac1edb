/*
 * wait_chain.h: who waits for whom, as stall notes carry it.
 *
 * A stalled call (an eighth of a timeout without progress) tells the rank
 * it waits for which call it waits in (wait_notes.c dp_note_stall).  That rank, if it has not posted the
 * call's counterpart and is stalled itself, passes the chain of such waits
 * on to the rank it waits for, and so on: a chain that comes back to a rank
 * already in it is a cycle of waits that nothing inside it can break (edge
 * chasing).  Each rank in a cycle sees its own wait come back, so each can
 * name the whole cycle at its own timeout; the ranks that wait on the
 * cycle from outside it hear of it back along their waits (a cycle note,
 * then path notes).  The text form travels as the
 * stall note's payload; this file parses it, writes it and says a cycle.
 */
#ifndef SLUICE_DP_WAIT_CHAIN_H
#define SLUICE_DP_WAIT_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/abi.h>

/* The waits a note carries ahead of its sender's own: 64 (8, before, left
 * a ring of waits over more than 10 ranks a bare timeout; 64 alone, one
 * over 65).  A chain is 1 KiB as a rank keeps it (65 edges of 16 bytes:
 * 5 KiB a communicator with its DP_CHAINS_KEPT and cycle_in).  A note's text ("w2", then an
 * edge in full where its communicator changes, else only whom it waits
 * for, its call and number: 31 and 18 bytes at most, 6-12 as a ring's
 * usually are) fits DP_CHAIN_TEXT_LEN whatever the edges; one that does
 * not fit a small --payload goes without it. */
#define DP_WAIT_CHAIN_MAX 64
/* Past DP_WAIT_CHAIN_MAX a chain keeps its first DP_CHAIN_HEAD waits and
 * its latest, and counts those it leaves out between them (" +N" in its
 * text, the wait after it in full): its first wait, its starter's, still
 * comes back round a cycle of any size, which that rank then names with
 * the count (a cycle over 66 ranks was a bare timeout: the chain stopped
 * at 64).  A chain of DP_WAIT_HOPS_MAX waits, kept or counted, goes no
 * further: no cycle on one communicator is longer, and one that never
 * closes (a path into a cycle, longer than the head) stops there. */
#define DP_CHAIN_HEAD 32
#define DP_WAIT_HOPS_MAX SL_MAX_RANKS
#define DP_CHAIN_TEXT_LEN (2u + 31u * DP_WAIT_CHAIN_MAX + 5u + 1u)

/* Rank `rank` of communicator `comm` waits in call #seq of kind op for
 * rank waits_for of the same communicator, which has not posted that
 * call's counterpart (each edge is checked by the rank it waits for
 * before that rank passes the chain on). */
struct dp_wait_edge {
	uint32_t comm;      /* its key32 */
	uint32_t seq;       /* in the communicator; for a send or recv, in the pair */
	uint16_t rank, waits_for;
	uint8_t op;         /* SL_OP_* */
};

/* A chain as a rank holds it: edge[n - 1] waits for this rank. */
struct dp_wait_chain {
	uint64_t at_ns;     /* when it came */
	uint8_t n;
	uint16_t skipped;   /* waits left out before edge[DP_CHAIN_HEAD] */
	struct dp_wait_edge edge[DP_WAIT_CHAIN_MAX + 1];
};

/* Parses a note's text (n edges, the sender's own not among them) into
 * *out: "" is no chain (n = 0: a note from a rank before chains, or one
 * with nothing to pass on).  False for anything else than whole, valid
 * edges that form a path (a forged or cut note). */
bool dp_chain_parse(const char *text, struct dp_wait_chain *out);

/* Writes chain's first n edges as a note's text; false if it does not fit
 * in size bytes with its terminator. */
bool dp_chain_format(const struct dp_wait_edge *edge, unsigned n, char *buf, size_t size);

/* Writes chain c as a note's text, the waits it left out counted; false
 * as dp_chain_format. */
bool dp_chain_write(const struct dp_wait_chain *c, char *buf, size_t size);

/* Makes chain c (the passer's own wait at its end) fit a note: past
 * DP_WAIT_CHAIN_MAX its oldest wait after the head is left out and
 * counted.  False once it has DP_WAIT_HOPS_MAX waits: not to be passed. */
bool dp_chain_make_room(struct dp_wait_chain *c);

/* The opcode of the call that answers one of kind op (a send's recv, a
 * recv's send, a collective's same collective). */
uint8_t dp_counter_op(uint8_t op);

/* Call #seq of kind op, made with rank `with` if a send or recv: "recv #3
 * from rank 1", "send #0 to rank 1", "allreduce #7". */
void dp_call_name(char *buf, size_t size, uint8_t op, uint32_t seq, int with);

/* The ranks in set (a bit a rank, of nranks) as a sentence names them:
 * "rank 2", "ranks 2 and 5", "ranks 1, 2 and 4"; past the first `most`,
 * a count ("ranks 1, 2, 3 and 7 more").  A timeout that waits on several
 * ranks names each (it named the first alone). */
void dp_rank_list(char *buf, size_t size, const uint64_t *set, uint32_t nranks, unsigned most);

/* The sentence for a cycle of n waits, cycle[0] this rank's and
 * cycle[n - 1] the one waiting for it, and `skipped` more not known before
 * cycle[skip_at] (0: none): every call and what each rank has not posted,
 * and what to do; a long one each wait once, as many as fit, the rest
 * counted. */
void dp_cycle_sentence(char *buf, size_t size, const struct dp_wait_edge *cycle, unsigned n, unsigned skip_at,
		       unsigned skipped, double timeout_s);

/* The sentence for this rank's wait (mine) on a cycle from outside it:
 * ahead (n) holds the waits from the rank mine waits for on, the first
 * `path` of them leading to the cycle, the rest the cycle ("rank 3 waits
 * in allreduce #0 for rank 2, which waits in recv #0 from rank 0, which is
 * in a cycle: 2 ranks wait ..."), and `skipped` more not known before
 * ahead[skip_at] (0: none), on the path or in the cycle (a chain's count);
 * a long path is listed short. */
void dp_tail_sentence(char *buf, size_t size, const struct dp_wait_edge *mine, const struct dp_wait_edge *ahead,
		      unsigned n, unsigned path, unsigned skip_at, unsigned skipped, double timeout_s);

/* The sentence for a path of waits that stops short of a cycle (n >= 2:
 * path[0] this rank's, each waiting for the next one's rank, `skipped`
 * more not known before path[skip_at]), at rank path[n - 1].waits_for,
 * which had not posted path[n - 1]'s counterpart age_s before (its ahead
 * note, wait_notes.c): each wait once, as many as fit, and whom every rank
 * on the way waits on.  A timeout of a long cycle's rank that came before
 * its chain went round (a rank entered its wait late) named only the rank
 * it waits for. */
void dp_path_sentence(char *buf, size_t size, const struct dp_wait_edge *path, unsigned n, unsigned skip_at,
		      unsigned skipped, double age_s);

#endif
