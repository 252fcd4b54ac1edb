/*
 * wire.h: sluice's frame format.
 *
 *   Ethernet (14) | IPv4 (20, no options) | UDP (8) | sluice header (48) | payload
 *
 * The UDP destination port is SL_UDP_PORT; the source port carries entropy
 * so that switches spread one flow over many paths.  All multi-byte fields
 * are big-endian on the wire; struct sl_hdr below is the host-order view
 * that sl_wire_parse fills and sl_wire_build writes.
 *
 * Version 2 (from 1): the IPv4 ECN field is used (DATA goes out ECT(0), so
 * that an AQM queue marks CE instead of dropping); flags bits 8..11 carry the
 * sender's path id (multipath) and bit 4 marks a path probe; the ACK body's
 * former reserved word echoes CE marks and the path id.  Same 48-byte header,
 * same 48-byte ACK body.  Flag bit 5 on an ACK (SL_F_DSACK) reports a
 * duplicate DATA, bit 6 (SL_F_HOLD) a receiver that holds its window; a
 * version 2 peer that does not know them ignores them.  An ACK's psn field
 * carries its ACK number (one more for each ACK or probe its end sends the
 * peer), so that an ACK overtaken by a later one does not take back the
 * credit or reopening the later one brought; a peer that leaves it 0 has
 * every ACK taken as current, as before.  Flag bit 7 on DATA
 * (SL_F_ACK_NOW) asks for an ACK at once rather than a delayed one; a
 * sender that never sets it gets its ACKs per 8 packets or 10 us.  Flag bit
 * 12 on an ACK (SL_F_PARK) parks the sender's calls that the receiver has
 * not posted, naming them in the ACK header's comm and seq; a version 2
 * peer that does not know it sends them on, and the receiver stashes them
 * as before the flag (bounded by its stash limit), so the version stays.
 * A receiver parks up to SL_PARKS_LOW communicators at once in the first
 * slots: the ACK body's former reserved byte (sl_ack.parks) lists those in
 * use and which one the header names, each ACK naming the next in turn.  A
 * sender that reads the byte as 0 (a peer from before it) sees one park in
 * slot 0; one that does not read it takes each ACK's named park as the only
 * one.  Flag bit 13 on an ACK (SL_F_PARK_MORE) carries the slots past those,
 * up to SL_PARKS_MAX, in header fields an ACK left 0: offset lists them
 * (bit i: slot i), step names one, count holds its comm and seq.  A peer
 * from before it ignores them: as a sender it sends those communicators'
 * calls on, and the receiver stashes them as before the flag (bounded by
 * its stash limit); as a receiver it parks four at most.  So the version
 * stays.  Flag bit 14 (SL_F_SENDS_PARK) on DATA of a send (point-to-point)
 * says its sender parks sends (session 33): only then does a receiver
 * park them, in a slot past the first SL_PARKS_LOW, named by an ACK whose
 * SL_F_PARK_MORE part carries bit 14 too, its seq the pair's (the first
 * send whose recv is not posted).  A peer from before it neither sets nor
 * reads it: it is never told to park sends (it would read a park of sends
 * as one of calls), and its sends are stashed as before (bounded by the
 * stash limit).  So the version stays.
 * A control message (SL_F_CTRL) of step 2 is a stall note (the engine's
 * wait_notes.c dp_note_stall): the call its sender waits in, opcode in kind and
 * number in seq, with status 0 in count; a version 2 peer that does not
 * know it reads status 0 and drops it, so the version stays.  Its payload,
 * a string, was empty; it may now carry the chain of waits that end at
 * its sender ("w1" and one " comm:rank:waits_for:op:seq" a wait, the
 * dataplane's wait_chain.h), passed on from rank to rank so that the ranks
 * of a cycle each see it close.  A peer from before chains reads only the
 * header (and checks the string's terminator), so it takes such a note as
 * a plain one and passes nothing on: a longer cycle through it is not
 * named (its ranks time out as before), a cycle of two on one communicator
 * still is.  Step 3 is a cycle note: a rank in a cycle tells one that
 * waits for it from outside the cycle the cycle's waits, in the same text
 * (its sender's first; kind and seq its own wait, status 0); a version 2
 * peer that does not know it reads status 0 and drops it.  Step 4 is a
 * path note: a rank that waits on a cycle from outside it tells the ranks
 * that wait for it the waits from its own to the cycle and the cycle's, in
 * the same text, with seq the number of them before the cycle (1 or more;
 * kind its own wait's opcode, status 0), and they tell theirs in turn; a
 * version 2 peer that does not know it reads status 0 and drops it (a
 * rank behind it times out as before), so the version stays.  Stall notes
 * now go out after an eighth of a timeout without progress rather than
 * half: nothing on the wire changes.
 * Type 3 (SL_T_LAST), a last word: a control message (SL_F_CTRL, as DATA
 * carries one) sent once outside the PSN stream, unacknowledged, by a
 * dataplane whose stream to the peer can no longer carry it (the flow died,
 * or the dataplane stops with it still unacknowledged); psn is 0.  A frame
 * a port took outlives its sender, a queued packet does not.  A version 2
 * peer that does not know it drops it as a bad type (and times out as
 * before), so the version stays.
 */
#ifndef SLUICE_WIRE_H
#define SLUICE_WIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "crc32c.h" /* the SL_F_CRC trailer */

#define SL_WIRE_VERSION 2
#define SL_UDP_PORT 0x51ce
#define SL_ETH_LEN 14
#define SL_IP_LEN 20
#define SL_UDP_LEN 8
#define SL_HDR_LEN 48
#define SL_FRAME_OVERHEAD (SL_ETH_LEN + SL_IP_LEN + SL_UDP_LEN + SL_HDR_LEN)
#define SL_ACK_LEN 48 /* ACK body after the sluice header */
#define SL_CRC_LEN 4  /* optional CRC32C trailer (SL_F_CRC) */

enum sl_pkt_type {
	SL_T_DATA = 1, /* payload for (comm, seq, step) at offset */
	SL_T_ACK = 2,  /* cumulative PSN + SACK bitmap, in the ACK body */
	SL_T_LAST = 3, /* a control message outside the PSN stream (a last word): see above */
};

enum sl_hdr_flags {
	SL_F_RETX = 1u << 0,  /* a retransmission */
	SL_F_CTRL = 1u << 1,  /* DATA carrying a control message (abort, ...) for the engine */
	SL_F_VOID = 1u << 2,  /* DATA of a cancelled message, len 0: mark the PSN, deliver nothing */
	SL_F_CRC = 1u << 3,   /* a CRC32C of sluice header + body follows the body */
	SL_F_PROBE = 1u << 4, /* ACK sent on a path its sender thinks dead: answer it with an
				 ACK on the port it came in on, echoing its path and ts */
	SL_F_DSACK = 1u << 5, /* ACK: DATA for a PSN already applied arrived since the previous
				 ACK, so a retransmission was not needed (a receiver that does
				 not set it only keeps its peer's reorder window narrow) */
	SL_F_HOLD = 1u << 6,  /* ACK: the receiver cannot take more from this sender yet.  Its
				 window ends at cum_psn + credit, and what the sender has out
				 beyond that and not SACKed waits there, neither acknowledged nor
				 lost, until an ACK without the flag reopens it (a peer that does
				 not know the flag recovers those packets as lost ones) */
	SL_F_ACK_NOW = 1u << 7, /* DATA: its sender waits for the ACK (the end of a message
				 it does not let go before, or of its window): answer at once,
				 not with the next delayed ACK (a peer that does not know the
				 flag acknowledges every burst anyway) */
	SL_F_PARK = 1u << 12, /* ACK: the receiver has not posted calls seq and after on
				 communicator comm (the header's fields): the sender holds back
				 their messages not yet sent and sends its others, until an ACK
				 without the flag, or whose sl_ack.parks lacks its slot, lifts it */
	SL_F_PARK_MORE = 1u << 13, /* ACK: parks in slots SL_PARKS_LOW and up, as SL_F_PARK's:
				 the header's offset lists those in use (bit i: slot i), step
				 names one (SL_PARKS_LOW..SL_PARKS_MAX - 1), and count holds its
				 comm (high 32 bits) and seq (low 32); an ACK without the flag,
				 or whose offset lacks a slot, lifts it */
	SL_F_SENDS_PARK = 1u << 14, /* DATA of a send: its sender parks its sends to the
				 receiver when asked.  ACK with SL_F_PARK_MORE: the slot that
				 step names parks sends, not calls: the sender's sends on comm
				 to the receiver from the pair's sequence number seq on */
};

/* DATA and probe ACKs: the sender's path (port x UDP source port) in flags
 * bits 8..11, echoed by the ACK they trigger (sl_ack.echo_path) so that the
 * sender keeps RTT and liveness per path. */
#define SL_F_PATH_SHIFT 8
#define SL_F_PATH_MASK 0x0f00u
#define SL_MAX_PATHS 16
#define SL_ECHO_NONE 0xff

/* A flow's park slots: the first SL_PARKS_LOW in sl_ack.parks, bits 0..3
 * those in use, bits 4..5 the one that an SL_F_PARK ACK's comm and seq name
 * (in use, whatever bits 0..3 say); the rest, up to SL_PARKS_MAX, under
 * SL_F_PARK_MORE.  Sixty-four: a rank waits on a call of one communicator
 * while calls of up to all its engine's others (dataplane DP_MAX_COMMS),
 * posted first by the peer, are parked. */
#define SL_PARKS_LOW 4
#define SL_PARKS_MAX 64
#define SL_ACK_PARK_SLOTS 0x0fu
#define SL_ACK_PARK_NAMED_SHIFT 4
/* the named low slot is read as (parks >> SHIFT) & (SL_PARKS_LOW - 1): a forged byte cannot name a slot past them */
_Static_assert(SL_ACK_PARK_SLOTS == (1u << SL_PARKS_LOW) - 1 && (SL_PARKS_LOW & (SL_PARKS_LOW - 1)) == 0 &&
		       SL_PARKS_LOW <= 1u << (8 - SL_ACK_PARK_NAMED_SHIFT),
	       "sl_ack.parks: one bit a slot below the named slot's index, a power of two of slots");
_Static_assert(SL_PARKS_MAX == 64, "SL_F_PARK_MORE: one bit of the header's 64-bit offset a slot");

/* The IPv4 header's ECN field (RFC 3168), in struct sl_hdr.ip_ecn. */
enum sl_ecn {
	SL_ECN_NOT_ECT = 0, /* the sender does not react to marks: queues drop instead */
	SL_ECN_ECT1 = 1,
	SL_ECN_ECT0 = 2,    /* what sluice's DATA carries */
	SL_ECN_CE = 3,      /* congestion experienced: a queue marked it */
};

/* The sluice header, host order.  Every field is checked by sl_wire_parse. */
struct sl_hdr {
	uint8_t version;   /* SL_WIRE_VERSION */
	uint8_t type;      /* enum sl_pkt_type */
	uint16_t flags;    /* enum sl_hdr_flags */
	uint16_t src_node; /* sender's dataplane node id: selects the flow */
	uint16_t dst_node; /* receiver's dataplane node id */
	uint32_t psn;      /* per-flow packet sequence number (DATA), ACK number (ACK) */
	uint32_t comm;     /* communicator key (low 32 bits) */
	uint32_t seq;      /* collective sequence number within the communicator */
	uint16_t step;     /* algorithm step */
	uint8_t kind;      /* collective kind (enum sl_opcode) */
	uint8_t dtype_op;  /* datatype << 4 | redop: checked against the receiver's call */
	uint64_t count;    /* the collective's element count: checked likewise */
	uint64_t offset;   /* payload's byte offset within the destination buffer */
	uint32_t len;      /* payload bytes */
	uint32_t ts;       /* sender's clock, microseconds, echoed by ACKs */
	uint8_t ip_ecn;    /* not in the sluice header: the IPv4 ECN field (enum sl_ecn),
			      written by sl_wire_build, read by sl_wire_parse */
};

/* The ACK body that follows an SL_T_ACK header (host order). */
struct sl_ack {
	uint32_t cum_psn;      /* every PSN below this was received */
	uint32_t echo_ts;      /* ts of the DATA packet that triggered this ACK */
	uint32_t credit;       /* packets the receiver lets this sender have in flight, counting
				  from cum_psn: its receive budget shared among active senders */
	uint16_t ce;           /* DATA packets that arrived CE-marked since the previous ACK */
	uint8_t echo_path;     /* path id (SL_F_PATH_MASK) of the packet whose ts is echoed, or
				  SL_ECHO_NONE (a probe: its echo_ts and ce mean nothing) */
	uint8_t parks;         /* the receiver's parks (SL_ACK_PARK_*), 0 without SL_F_PARK */
	uint64_t sack[4];      /* bit i of word i/64: PSN cum_psn + 1 + i was received */
};

/* Addresses of one end: enough to build the Ethernet/IPv4/UDP headers. */
struct sl_addr {
	uint8_t mac[6];
	uint32_t ip; /* host order */
};

/* A node's default addresses in an emulated cluster: 02:53:4c:00:00:NN, 10.83.x.y. */
void sl_addr_for_node(uint16_t node, struct sl_addr *out);

/*
 * Write a whole frame into buf (cap bytes): headers from h (h->len payload
 * bytes copied from payload, or the ACK body from ack for SL_T_ACK, whose
 * header len is then SL_ACK_LEN whatever h->len says).  With SL_F_CRC in
 * h->flags a CRC32C trailer follows the body.
 * Returns the frame length, or 0 when cap is too small.
 */
uint32_t sl_wire_build(uint8_t *buf, uint32_t cap, const struct sl_addr *src,
		       const struct sl_addr *dst, uint16_t entropy, const struct sl_hdr *h,
		       const void *payload, const struct sl_ack *ack);

enum sl_parse_result {
	SL_PARSE_OK = 0,
	SL_PARSE_SHORT,       /* shorter than the headers or than len says */
	SL_PARSE_NOT_SLUICE,  /* not IPv4/UDP to SL_UDP_PORT: a foreign frame */
	SL_PARSE_BAD_VERSION,
	SL_PARSE_BAD_TYPE,
	SL_PARSE_BAD_LENGTH,  /* UDP/IP/sluice lengths disagree */
	SL_PARSE_BAD_CRC,     /* SL_F_CRC set and the trailer does not match */
};

/*
 * Check a frame and decode it.  On SL_PARSE_OK *payload points at the
 * payload (h->len bytes, all inside the frame) and, for an ACK, *ack is
 * filled.  Never reads outside [frame, frame + len).  Frames longer than
 * their headers say (Ethernet padding) are accepted.
 */
enum sl_parse_result sl_wire_parse(const uint8_t *frame, uint32_t len, struct sl_hdr *h,
				   const uint8_t **payload, struct sl_ack *ack);

const char *sl_parse_result_str(enum sl_parse_result r);

/* What a congested ECN queue does to a frame passing it: an ECN-capable IPv4
 * frame gets CE (and its IP checksum fixed).  True when it was marked. */
bool sl_wire_mark_ce(uint8_t *frame, uint32_t len);

#endif
