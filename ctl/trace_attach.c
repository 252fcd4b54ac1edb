/*
 * trace_attach.c: sluice-trace's side of the trace ring.  Finds a
 * dataplane's attach socket, asks it for a trace ring (SL_CTL_TRACE_ATTACH),
 * maps the memfd it passes back, drains records, follows the communicator
 * log, and puts a packet into words for pcapng comments.  Detaching is
 * closing the socket: the dataplane stops recording at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sluice/errmsg.h>

#include "trace_cli.h"

int tr_parse_num(const char *s, const char *what, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	if (errno || *s == '\0' || *s == '-' || *end != '\0' || *out > max) {
		fprintf(stderr, "sluice-trace: %s wants a whole number up to %" PRIu64 ", not '%s'\n", what, max, s);
		return -1;
	}
	return 0;
}

#define UNIX_ACCEPTING 0x00010000u /* /proc/net/unix Flags: a listening socket */
#define UNIX_SEQPACKET 5u

int tr_find_socket(char *path, size_t len, char *err, size_t errlen)
{
	FILE *f = fopen("/proc/net/unix", "r");
	char line[512], found[108] = "";
	int n = 0;

	if (!f) {
		sl_errmsg_format(err, errlen, "cannot read /proc/net/unix (%s): name the dataplane with --socket PATH",
				 strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned flags, type;
		char sock[108];
		if (sscanf(line, "%*s %*s %*s %x %x %*s %*s %107s", &flags, &type, sock) != 3)
			continue;
		/* sluiced, sluice-run's and embedded dataplanes listen on SEQPACKET sockets with
		 * "sluice" in their path (/run/sluice/, /tmp/sluice-run.*, /tmp/sluice-embedded-*);
		 * memif's own sockets may sit beside them */
		size_t n = strlen(sock);
		if (!(flags & UNIX_ACCEPTING) || type != UNIX_SEQPACKET || sock[0] != '/' || !strstr(sock, "sluice") ||
		    strstr(sock, "memif") || n < 5 || strcmp(sock + n - 5, ".sock") != 0)
			continue;
		if (n++ == 0)
			snprintf(found, sizeof(found), "%s", sock);
	}
	fclose(f);
	if (n != 1) {
		sl_errmsg_format(err, errlen, n ? "%d dataplanes are listening (one is %s): pick one with --socket PATH"
						: "no dataplane is listening on this machine: start sluiced, or name its "
						  "socket with --socket PATH",
				 n, found);
		return -1;
	}
	snprintf(path, len, "%s", found);
	return 0;
}

static int connect_to(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		sl_errmsg_format(err, errlen, "socket path %s is too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		sl_errmsg_format(err, errlen, "cannot connect to the dataplane at %s: %s (is sluiced running?)", path,
				 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Send the attach request; the reply's memfd, or -1 with err. */
static int request_ring(int sock, const char *path, uint32_t snap, const struct sl_trace_filter *flt,
			char *err, size_t errlen)
{
	struct sl_ctl_msg m = { .type = SL_CTL_TRACE_ATTACH, .version = SL_ABI_VERSION };
	struct sl_ctl_reply r;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &r, sizeof(r) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	int fd = -1;

	m.t.snap = snap;
	m.t.filter = *flt;
	if (send(sock, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
		sl_errmsg_format(err, errlen, "sending the attach request to %s failed: %s", path, strerror(errno));
		return -1;
	}
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (n != (ssize_t)sizeof(r)) {
		sl_errmsg_format(err, errlen, "the dataplane at %s answered the attach request with %zd bytes: is it "
				 "from the same build as sluice-trace?", path, n);
	} else if (r.status != 0) {
		r.msg[SL_ERRMSG_LEN - 1] = '\0';
		sl_errmsg_format(err, errlen, "the dataplane at %s refused: %s", path, r.msg);
	} else if (fd < 0) {
		sl_errmsg_format(err, errlen, "the dataplane at %s sent no trace ring", path);
	} else {
		return fd;
	}
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Map the ring and check its page; its geometry must fit the file. */
static int map_ring(struct tr_source *s, int fd, char *err, size_t errlen)
{
	struct stat st;
	const struct sl_trace_page *pg;

	if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(*pg)) {
		sl_errmsg_format(err, errlen, "the trace ring from %s is too small", s->path);
		return -1;
	}
	s->bytes = (size_t)st.st_size;
	s->page = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s->page == MAP_FAILED) {
		sl_errmsg_format(err, errlen, "cannot map the trace ring from %s: %s", s->path, strerror(errno));
		s->page = NULL;
		return -1;
	}
	pg = s->page;
	if (pg->magic != SL_TRACE_MAGIC || pg->version != SL_TRACE_VERSION || pg->nports > SL_TRACE_MAX_PORTS ||
	    pg->ring_off != sl_trace_ring_off() || pg->slot_size < sizeof(struct sl_trace_rec) ||
	    (size_t)pg->ring_off + sl_spsc_bytes(pg->slots, pg->slot_size) > s->bytes ||
	    !sl_spsc_attach(&s->cons, (struct sl_spsc_shared *)((uint8_t *)s->page + pg->ring_off), pg->slots,
			    pg->slot_size, false)) {
		sl_errmsg_format(err, errlen, "the trace ring from %s has an unknown layout (version %u): use sluiced "
				 "and sluice-trace from the same build", s->path, pg->version);
		return -1;
	}
	s->slot_size = pg->slot_size;
	s->node = pg->node;
	s->nports = pg->nports;
	memcpy(s->ports, pg->ports, sizeof(s->ports));
	for (unsigned i = 0; i < SL_TRACE_MAX_PORTS; i++)
		s->ports[i].name[sizeof(s->ports[i].name) - 1] = '\0';
	return 0;
}

int tr_attach(struct tr_source *s, const char *path, uint32_t snap, const struct sl_trace_filter *flt,
	      char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->sock = connect_to(path, err, errlen);
	if (s->sock < 0)
		return -1;
	int fd = request_ring(s->sock, path, snap, flt, err, errlen);
	int rc = fd < 0 ? -1 : map_ring(s, fd, err, errlen);
	if (fd >= 0)
		close(fd);
	if (rc != 0) {
		tr_detach(s);
		return -1;
	}
	tr_sync_comms(s);
	return 0;
}

void tr_detach(struct tr_source *s)
{
	if (s->page)
		munmap(s->page, s->bytes);
	if (s->sock >= 0)
		close(s->sock);
	free(s->comms);
	s->page = NULL;
	s->comms = NULL;
	s->sock = -1;
}

bool tr_next(struct tr_source *s, struct sl_trace_rec *rec)
{
	if (!sl_spsc_dequeue(&s->cons, rec))
		return false;
	/* the dataplane wrote it, but check before trusting a length */
	uint32_t room = s->slot_size - (uint32_t)sizeof(*rec);
	if (rec->caplen > room)
		rec->caplen = (uint16_t)room;
	if (rec->caplen > rec->len)
		rec->len = rec->caplen;
	return true;
}

static void comm_add(struct tr_source *s, const struct sl_trace_comm *c)
{
	struct tr_comm *grown = realloc(s->comms, (s->ncomms + 1) * sizeof(*s->comms));

	if (!grown)
		return; /* peer ranks read "?" then; nothing else depends on it */
	s->comms = grown;
	struct tr_comm *t = &s->comms[s->ncomms++];
	t->key32 = c->key32;
	t->rank = c->rank;
	t->nranks = c->nranks < SL_TRACE_MAX_RANKS ? c->nranks : SL_TRACE_MAX_RANKS;
	memcpy(t->node, c->node, sizeof(t->node));
}

void tr_sync_comms(struct tr_source *s)
{
	uint32_t n = atomic_load_explicit(&s->page->ncomms, memory_order_acquire);

	if (n - s->comms_read > SL_TRACE_COMM_LOG) {
		s->comms_lost += n - s->comms_read - SL_TRACE_COMM_LOG;
		s->comms_read = n - SL_TRACE_COMM_LOG;
	}
	for (; s->comms_read != n; s->comms_read++)
		comm_add(s, &s->page->comms[s->comms_read % SL_TRACE_COMM_LOG]);
}

uint64_t tr_dropped(const struct tr_source *s, unsigned port)
{
	return atomic_load_explicit(&s->page->dropped[port], memory_order_relaxed);
}

const struct tr_comm *tr_comm_find(const struct tr_source *s, uint32_t key32)
{
	for (uint32_t i = s->ncomms; i-- > 0;)
		if (s->comms[i].key32 == key32)
			return &s->comms[i];
	return NULL;
}

const struct tr_comm *tr_comm_of(const struct tr_source *s, const struct sl_trace_pkt *p, uint16_t peer)
{
	if (p->type != SL_TRACE_T_ACK)
		return tr_comm_find(s, p->comm);
	for (uint32_t i = s->ncomms; i-- > 0;)
		if (tr_rank_of(&s->comms[i], peer) >= 0)
			return &s->comms[i];
	return NULL;
}

int tr_rank_of(const struct tr_comm *c, uint16_t node)
{
	for (uint32_t r = 0; c && r < c->nranks; r++)
		if (c->node[r] == node)
			return (int)r;
	return -1;
}

uint64_t tr_realtime_ns(const struct tr_source *s, uint64_t mono_ns)
{
	return mono_ns + (uint64_t)s->page->realtime_off_ns;
}

const char *tr_kind_name(uint8_t kind)
{
	static const char *const ops[SL_OP_COUNT] = {
		[SL_OP_ALLREDUCE] = "allreduce", [SL_OP_ALLGATHER] = "allgather",
		[SL_OP_REDUCE_SCATTER] = "reduce_scatter", [SL_OP_BROADCAST] = "broadcast",
		[SL_OP_REDUCE] = "reduce", [SL_OP_ALLTOALL] = "alltoall", [SL_OP_BARRIER] = "barrier",
		[SL_OP_SEND] = "send", [SL_OP_RECV] = "recv", [SL_OP_GATHER] = "gather", [SL_OP_SCATTER] = "scatter",
	};
	static const char *const algos[] = { "", "/ring", "/direct", "/rd", "/rhd", "/tree", "/pairwise" };
	static char buf[8][40]; /* a few calls may share one printf */
	static unsigned next;
	unsigned op = kind & ((1u << SL_TRACE_KIND_ALGO_SHIFT) - 1), algo = kind >> SL_TRACE_KIND_ALGO_SHIFT;
	char *out = buf[next++ % 8];

	snprintf(out, sizeof(buf[0]), "%s%s", op < SL_OP_COUNT && ops[op] ? ops[op] : "kind?",
		 algo < sizeof(algos) / sizeof(algos[0]) ? algos[algo] : "/algo?");
	return out;
}

/* The ACK's fields, and the PSNs its SACK bitmap names, as ranges above cum. */
static size_t describe_ack(const struct sl_trace_pkt *p, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, " cum_psn=%" PRIu32 " echo_ts=%" PRIu32 " credit=%" PRIu32 " sack=",
				    p->cum_psn, p->echo_ts, p->credit);
	bool any = false;

	for (unsigned i = 0; i < 256 && n < len; i++) {
		if (!(p->sack[i / 64] >> (i % 64) & 1) || (i > 0 && p->sack[(i - 1) / 64] >> ((i - 1) % 64) & 1))
			continue;
		unsigned j = i;
		while (j + 1 < 256 && p->sack[(j + 1) / 64] >> ((j + 1) % 64) & 1)
			j++;
		n += (size_t)snprintf(out + n, len - n, "%s+%u-%u", any ? "," : "", i + 1, j + 1);
		any = true;
	}
	if (!any && n < len)
		n += (size_t)snprintf(out + n, len - n, "none");
	return n;
}

void tr_describe(const struct tr_source *s, const struct sl_trace_rec *rec, char *out, size_t len)
{
	struct sl_trace_pkt p;
	const char *dir = rec->dir == SL_TRACE_TX ? "tx" : "rx";
	uint16_t peer = rec->port < s->nports ? s->ports[rec->port].peer_node : 0xffff;

	if (!sl_trace_peek(rec->data, rec->caplen, &p)) {
		snprintf(out, len, "dir=%s node=%u peer_node=%u not-sluice", dir, s->node, peer);
		return;
	}
	const struct tr_comm *c = tr_comm_of(s, &p, peer);
	size_t n = (size_t)snprintf(out, len, "dir=%s node=%u peer_node=%u rank=%d peer_rank=%d %s psn=%" PRIu32
				    " flags=%s%s%s%s%s",
				    dir, s->node, peer, tr_rank_of(c, s->node), tr_rank_of(c, peer),
				    p.type == SL_TRACE_T_ACK ? "ACK" : p.type == SL_TRACE_T_LAST ? "LAST" : "DATA", p.psn, p.flags ? "" : "none",
				    p.flags & SL_TRACE_F_RETX ? "+RETX" : "", p.flags & SL_TRACE_F_CTRL ? "+CTRL" : "",
				    p.flags & SL_TRACE_F_VOID ? "+VOID" : "", p.flags & SL_TRACE_F_CRC ? "+CRC" : "");
	if (n >= len)
		return;
	if (p.type == SL_TRACE_T_ACK && p.has_ack)
		describe_ack(&p, out + n, len - n);
	else if (p.type != SL_TRACE_T_ACK)
		snprintf(out + n, len - n, " comm=%#" PRIx32 " seq=%" PRIu32 " kind=%s step=%u offset=%" PRIu64
			 " len=%" PRIu32, p.comm, p.seq, tr_kind_name(p.kind), p.step, p.offset, p.len);
}
