/*
 * trace_cli.h: what the parts of sluice-trace share: attaching to
 * dataplanes and draining their trace rings (trace_attach.c), writing and
 * reading pcapng (trace_pcapng.c), describing a packet in words
 * (trace_attach.c), and the subcommands (trace_capture.c, trace_top.c,
 * trace_analyze.c).  sluice-trace needs only libc and include/sluice.
 */
#ifndef SLUICE_TRACE_CLI_H
#define SLUICE_TRACE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sluice/abi.h>

#define TR_MAX_SOURCES 64 /* dataplanes one capture attaches to */
#define TR_MAX_IFS (TR_MAX_SOURCES * SL_TRACE_MAX_PORTS) /* a capture's interfaces: one a port */
#define TR_NOTE_LEN 256   /* a packet's annotation in words */

/* A communicator as one dataplane announced it. */
struct tr_comm {
	uint32_t key32, rank, nranks;
	uint16_t node[SL_TRACE_MAX_RANKS];
};

/* One attached dataplane. */
struct tr_source {
	char path[108];
	int sock;
	struct sl_trace_page *page;
	size_t bytes;
	struct sl_spsc cons;
	uint32_t slot_size;
	uint16_t node, nports;
	struct sl_trace_port_info ports[SL_TRACE_MAX_PORTS];
	uint32_t comms_read;     /* page->ncomms already copied */
	uint64_t comms_lost;     /* announced and overwritten before we read them */
	struct tr_comm *comms;   /* every communicator seen, newest last */
	uint32_t ncomms;
	uint32_t ifbase;         /* pcapng interface id of this source's port 0 */
};

/* trace_attach.c */
/* A whole number (decimal or 0x hex) up to max; -1 after saying what is wrong with it. */
int tr_parse_num(const char *s, const char *what, uint64_t max, uint64_t *out);
/* The one sluiced socket listening on this machine, found in /proc/net/unix. */
int tr_find_socket(char *path, size_t len, char *err, size_t errlen);
int tr_attach(struct tr_source *s, const char *path, uint32_t snap, const struct sl_trace_filter *flt,
	      char *err, size_t errlen);
void tr_detach(struct tr_source *s);
/* Copy the next record (slot_size bytes) into rec; false when the ring is empty. */
bool tr_next(struct tr_source *s, struct sl_trace_rec *rec);
/* Read communicators announced since the last call. */
void tr_sync_comms(struct tr_source *s);
uint64_t tr_dropped(const struct tr_source *s, unsigned port);
/* The communicator with key32 (the newest of that key), or NULL. */
const struct tr_comm *tr_comm_find(const struct tr_source *s, uint32_t key32);
/* The communicator a packet belongs to; an ACK (a flow's, not a
 * collective's) gets the newest communicator its peer is in. */
const struct tr_comm *tr_comm_of(const struct tr_source *s, const struct sl_trace_pkt *p, uint16_t peer);
/* Rank of node in c, or -1. */
int tr_rank_of(const struct tr_comm *c, uint16_t node);
/* "rx/tx", the peer's node and rank, and every sluice header field in words. */
void tr_describe(const struct tr_source *s, const struct sl_trace_rec *rec, char *out, size_t len);
uint64_t tr_realtime_ns(const struct tr_source *s, uint64_t mono_ns);
/* "allreduce", ... for the sluice header's kind (enum sl_opcode). */
const char *tr_kind_name(uint8_t kind);

/* trace_pcapng.c */
struct tr_pcapng_if {
	const char *name, *description;
	uint32_t snaplen;
};
int tr_pcapng_header(FILE *f, const struct tr_pcapng_if *ifs, unsigned nifs);
int tr_pcapng_packet(FILE *f, uint32_t ifid, uint64_t ts_ns, const uint8_t *data, uint32_t caplen,
		     uint32_t len, bool outbound, const char *comment);
int tr_pcapng_stats(FILE *f, uint32_t ifid, uint64_t ts_ns, uint64_t received, uint64_t dropped,
		    const char *comment);

/* A packet read back from a pcapng file. */
struct tr_pcapng_pkt {
	uint32_t ifid;
	uint64_t ts_ns;
	uint32_t caplen, len;
	int dir;               /* 1 inbound, 2 outbound, 0 unknown (epb_flags) */
	const uint8_t *data;
	char comment[TR_NOTE_LEN];
};
struct tr_pcapng_reader;
struct tr_pcapng_reader *tr_pcapng_open(const char *path, char *err, size_t errlen);
/* 1 with *p filled (valid until the next call), 0 at the end, -1 with err. */
int tr_pcapng_next(struct tr_pcapng_reader *r, struct tr_pcapng_pkt *p, char *err, size_t errlen);
void tr_pcapng_close(struct tr_pcapng_reader *r);

/* Subcommands: argc/argv start at the subcommand's name; return the exit status. */
int tr_cmd_capture(int argc, char **argv);
int tr_cmd_top(int argc, char **argv);
int tr_cmd_analyze(int argc, char **argv);

#endif
