/*
 * port_shm.c: the shared-memory port (port_shm.h has the layout both ends
 * share and why it cannot overflow).  This end keeps its buffers' states
 * and free list in private memory, so that nothing the peer writes can make
 * it post a buffer twice.
 */
#include "port_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sluice/errmsg.h"
#include "sluice/touch.h"

#define SHM_PAGE 4096
#define SHM_MAX_BUFS 65536u
#define SHM_RX_TAG (1u << 31) /* a handle's mark: a received frame, not one of our buffers */

/* A mapped direction: ours (we post into it) or the peer's (we read it). */
struct shm_dir {
	struct shm_head *head;
	size_t bytes;
	struct shm_desc *tx;
	uint32_t *ret;
	uint8_t *bufs;
};

enum { BUF_FREE, BUF_HELD, BUF_POSTED };

struct shm_port {
	struct sl_port port;
	struct shm_dir own, peer;  /* peer.head NULL until wait_up mapped it */
	uint32_t nbufs, stride;
	uint32_t posted;           /* own.head->posted, as we last wrote it */
	uint32_t taken_back;       /* own ret slots read */
	uint32_t read;             /* peer tx slots read */
	uint32_t handed;           /* peer.head->handed, as we last wrote it */
	uint32_t nfree;
	uint32_t *free_bufs;       /* a stack of our free buffer indexes */
	int32_t cpu;               /* own.head->cpu, as we last wrote it */
	uint8_t *state;            /* BUF_* of each of our buffers */
	unsigned node, peer_node, channel; /* for the messages */
	int32_t dead_owner;        /* the pid of a dead run's file found in the peer's place, 0 if none */
	char own_name[128], peer_name[128];
};

static struct shm_port *shm_of(const struct sl_port *port)
{
	return port->priv;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

size_t sl_shm_bufs_offset(uint32_t nbufs)
{
	return align_up(sizeof(struct shm_head) + nbufs * (sizeof(struct shm_desc) + sizeof(uint32_t)), SHM_PAGE);
}

static size_t dir_bytes(uint32_t stride, uint32_t nbufs)
{
	return sl_shm_bufs_offset(nbufs) + (size_t)stride * nbufs;
}

static void dir_layout(struct shm_dir *d, void *base, size_t bytes, uint32_t nbufs)
{
	d->head = base;
	d->bytes = bytes;
	d->tx = (struct shm_desc *)((uint8_t *)base + sizeof(struct shm_head));
	d->ret = (uint32_t *)(d->tx + nbufs);
	d->bufs = (uint8_t *)base + sl_shm_bufs_offset(nbufs);
}

int sl_shm_port_file(char *buf, size_t len, const char *dir, unsigned from, unsigned to, unsigned channel)
{
	struct stat st;

	if (stat(dir, &st) != 0)
		return -1;
	snprintf(buf, len, "/dev/shm/sluice-%u-%llu-%llu-%u-%u-%u", (unsigned)getuid(), (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino, from, to, channel);
	return 0;
}

static bool pid_alive(int32_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* ---- the data path ---- */

/* Take back the buffers the peer handed back.  A slot naming a buffer that
 * is not in flight is a peer's bug: counted, skipped. */
static void take_back(struct shm_port *s)
{
	uint32_t handed = atomic_load_explicit(&s->own.head->handed, memory_order_acquire);

	for (uint32_t k = 0; s->taken_back != handed && k < s->nbufs; k++) {
		uint32_t idx = s->own.ret[s->taken_back++ & (s->nbufs - 1)];
		if (idx >= s->nbufs || s->state[idx] != BUF_POSTED) {
			s->port.stats.bad_desc++;
			continue;
		}
		s->state[idx] = BUF_FREE;
		s->free_bufs[s->nfree++] = idx;
	}
}

/* Ask for the lines the next frame's headers and small payload go to, to
 * write: the peer's core read them last, and building a small frame waited
 * for them (sl_wire_build was a tenth of a gather leaf's samples, and the
 * wake word's fence after the send waited for those stores). */
static void prefetch_frame(uint8_t *buf)
{
	for (unsigned off = 0; off < 4 * SHM_LINE; off += SHM_LINE)
#if defined(__x86_64__)
		/* prefetchw even where the build's -march lacks PRFCHW, which
		 * turns __builtin_prefetch's write hint into a plain read */
		__asm__ volatile("prefetchw %0" : : "m"(buf[off]));
#else
		__builtin_prefetch(&buf[off], 1);
#endif
}

/* The CPU this end runs on now, told to the peer when it changed (ranks
 * are pinned: it seldom does). */
static int32_t note_cpu(struct shm_port *s)
{
	int32_t cpu = sched_getcpu();

	if (cpu != s->cpu) {
		s->cpu = cpu;
		atomic_store_explicit(&s->own.head->cpu, cpu, memory_order_relaxed);
	}
	return cpu;
}

/* Whether the peer last ran on this end's CPU. */
static bool peer_on_our_cpu(struct shm_port *s)
{
	int32_t cpu = note_cpu(s);

	return cpu >= 0 && s->peer.head && atomic_load_explicit(&s->peer.head->cpu, memory_order_relaxed) == cpu;
}

/* The free buffer on top of the stack, held for a frame. */
static struct sl_pkt pop_buf(struct shm_port *s)
{
	uint32_t idx = s->free_bufs[--s->nfree];

	s->state[idx] = BUF_HELD;
	return (struct sl_pkt){ .data = s->own.bufs + (size_t)idx * s->stride, .cap = s->port.max_frame,
				.handle = (void *)(uintptr_t)idx };
}

static uint16_t shm_alloc(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct shm_port *s = shm_of(port);
	uint16_t k;

	/* A peer on this CPU: what it handed back goes on the stack first, on
	 * every call, so the next frames go into the buffers it read last,
	 * still in this core's caches.  Taken back only once the stack ran
	 * low, the port cycled through all its buffers (8.5 MB a link): the
	 * root of a 3-rank 64 KiB scatter on a core shared with a leaf framed
	 * its 43 KiB in 6 us, and in 3 from hot buffers.  A peer on another
	 * core still held those lines: a 2-rank 256 KiB scatter or gather took
	 * 1.25x its time so (perf/ALGORITHMS.md, scat34). */
	if (s->nfree < n + SHM_LAST_BUFS || peer_on_our_cpu(s))
		take_back(s);
	for (k = 0; k < n && s->nfree > SHM_LAST_BUFS; k++)
		pkts[k] = pop_buf(s);
	if (s->nfree)
		prefetch_frame(s->own.bufs + (size_t)s->free_bufs[s->nfree - 1] * s->stride);
	return k;
}

static uint16_t shm_tx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct shm_port *s = shm_of(port);

	for (uint16_t i = 0; i < n; i++) {
		uint32_t idx = (uint32_t)(uintptr_t)pkts[i].handle;
		s->own.tx[s->posted++ & (s->nbufs - 1)] = (struct shm_desc){ idx, pkts[i].len };
		s->state[idx] = BUF_POSTED;
		port->stats.tx_bytes += pkts[i].len;
	}
	port->stats.tx_pkts += n;
	atomic_store_explicit(&s->own.head->posted, s->posted, memory_order_release);
	return n;
}

static bool shm_send_last(struct sl_port *port, const uint8_t *frame, uint32_t len)
{
	struct shm_port *s = shm_of(port);
	struct sl_pkt p;

	if (!s->nfree)
		take_back(s);
	if (!s->nfree || len > port->max_frame)
		return false;
	p = pop_buf(s);
	p.len = len;
	memcpy(p.data, frame, len);
	return shm_tx_burst(port, &p, 1) == 1;
}

static void hand_back(struct shm_port *s, uint32_t idx)
{
	s->peer.ret[s->handed++ & (s->nbufs - 1)] = idx;
}

static uint16_t shm_rx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct shm_port *s = shm_of(port);
	uint32_t posted = atomic_load_explicit(&s->peer.head->posted, memory_order_acquire);
	uint32_t handed = s->handed;
	uint16_t k = 0;

	note_cpu(s); /* a receiver that never sends tells its peer where it runs too */
	while (k < n && s->read != posted) {
		struct shm_desc d = s->peer.tx[s->read++ & (s->nbufs - 1)];
		if (d.idx >= s->nbufs) { /* nothing to hand back */
			port->stats.bad_desc++;
			continue;
		}
		if (d.len > port->max_frame) {
			port->stats.bad_desc++;
			hand_back(s, d.idx);
			continue;
		}
		pkts[k++] = (struct sl_pkt){ .data = s->peer.bufs + (size_t)d.idx * s->stride, .len = d.len,
					     .cap = d.len, .handle = (void *)(uintptr_t)(d.idx | SHM_RX_TAG) };
		port->stats.rx_bytes += d.len;
	}
	port->stats.rx_pkts += k;
	if (s->handed != handed)
		atomic_store_explicit(&s->peer.head->handed, s->handed, memory_order_release);
	return k;
}

static void shm_free(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	struct shm_port *s = shm_of(port);
	uint32_t handed = s->handed;

	for (uint16_t i = 0; i < n; i++) {
		uint32_t h = (uint32_t)(uintptr_t)pkts[i].handle;
		if (h & SHM_RX_TAG) {
			hand_back(s, h & ~SHM_RX_TAG);
		} else {
			s->state[h] = BUF_FREE;
			s->free_bufs[s->nfree++] = h;
		}
	}
	if (s->handed != handed)
		atomic_store_explicit(&s->peer.head->handed, s->handed, memory_order_release);
}

/* ---- set-up ---- */

static void shm_close(struct sl_port *port)
{
	struct shm_port *s = shm_of(port);

	/* a peer that mapped our file took its name away (map_peer) */
	if (!atomic_load(&s->own.head->attached))
		unlink(s->own_name);
	munmap(s->own.head, s->own.bytes);
	if (s->peer.head)
		munmap(s->peer.head, s->peer.bytes);
	free(s->free_bufs);
	free(s->state);
	free(s);
}

static const struct sl_port_ops shm_ops = {
	.name = "shm", .rx_burst = shm_rx_burst, .tx_burst = shm_tx_burst, .alloc = shm_alloc,
	.free = shm_free, .close = shm_close, .wait_up = sl_shm_port_wait_up, .send_last = shm_send_last,
};

/* Make our direction's file, mapped and filled in, every page touched up
 * front so that no frame pays a page fault on either side (map_peer touches
 * the other end's mapping).  MAP_POPULATE was not enough: on the PVM guests
 * sluice is measured on, the hypervisor fills its own tables on a page's
 * first user access (sluice/touch.h), 10-14 us each, and the 512 frames of a
 * link cover 2000+ pages.  A 3-rank 64-128 KiB scatter's first 150 calls (40
 * ms, as long as a benchmark's size lasts) ran at 100-250 us a call until
 * the rings had come round once, then at 20-40 (perf/ALGORITHMS.md, gs5). */
static int make_own(struct shm_port *s, uint32_t frame, char *err, size_t errlen)
{
	size_t bytes = dir_bytes(s->stride, s->nbufs);
	void *base;
	int fd, e;

	unlink(s->own_name); /* a previous run's, left by a crash */
	fd = open(s->own_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		sl_errmsg_format(err, errlen, "cannot create %s: %s", s->own_name, strerror(errno));
		return -1;
	}
	if ((e = posix_fallocate(fd, 0, (off_t)bytes)) != 0) {
		sl_errmsg_format(err, errlen, "cannot allocate %zu bytes for %s: %s (is /dev/shm full?)", bytes,
				 s->own_name, strerror(e));
		close(fd);
		unlink(s->own_name);
		return -1;
	}
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		sl_errmsg_format(err, errlen, "cannot map %s: %s", s->own_name, strerror(errno));
		unlink(s->own_name);
		return -1;
	}
	dir_layout(&s->own, base, bytes, s->nbufs);
	sl_touch(base, bytes);
	*s->own.head = (struct shm_head){ .version = SHM_VERSION, .frame = frame, .stride = s->stride,
					  .nbufs = s->nbufs, .owner = (int32_t)getpid(), .cpu = -1 };
	atomic_store_explicit((_Atomic uint64_t *)&s->own.head->magic, SHM_MAGIC, memory_order_release);
	return 0;
}

struct sl_port *sl_shm_port_open(const char *dir, unsigned node, unsigned peer, unsigned channel,
				 uint32_t max_frame, uint32_t nbufs, char *err, size_t errlen)
{
	struct shm_port *s;

	if (nbufs < 4 * SHM_LAST_BUFS || nbufs > SHM_MAX_BUFS || (nbufs & (nbufs - 1)) || max_frame == 0) {
		sl_errmsg_format(err, errlen, "shm link to node %u: %u buffers of %u B: want a power of two from %u "
				 "up to %u, and frames of at least 1 B", peer, nbufs, max_frame, 4 * SHM_LAST_BUFS,
				 SHM_MAX_BUFS);
		return NULL;
	}
	if (!(s = calloc(1, sizeof(*s))) || !(s->free_bufs = malloc(nbufs * sizeof(uint32_t))) ||
	    !(s->state = calloc(nbufs, 1))) {
		sl_errmsg_format(err, errlen, "shm link to node %u: out of memory", peer);
		if (s)
			free(s->free_bufs);
		free(s);
		return NULL;
	}
	s->nbufs = nbufs;
	s->cpu = -1; /* as make_own writes it */
	s->stride = (uint32_t)align_up(max_frame, SHM_LINE);
	s->node = node;
	s->peer_node = peer;
	s->channel = channel;
	if (sl_shm_port_file(s->own_name, sizeof(s->own_name), dir, node, peer, channel) != 0) {
		sl_errmsg_format(err, errlen, "shm link to node %u: the mesh directory %s: %s", peer, dir, strerror(errno));
		goto fail;
	}
	sl_shm_port_file(s->peer_name, sizeof(s->peer_name), dir, peer, node, channel);
	if (make_own(s, max_frame, err, errlen) != 0) {
fail:
		free(s->state);
		free(s->free_bufs);
		free(s);
		return NULL;
	}
	for (uint32_t i = 0; i < nbufs; i++)
		s->free_bufs[i] = nbufs - 1 - i; /* buffer 0 first */
	s->nfree = nbufs;
	/* No CRC trailer: no wire between the ends (as between ranks over NCCL's or
	 * Open MPI's shared memory), and its check would read every byte again.
	 * The receiver may hold an eighth of the buffers (early packets, kept
	 * where they lie: a 1 MiB message's at 16 KiB frames), the rest carries
	 * what the sender has in flight; holding more spreads the sender's writes
	 * over more buffers for nothing (a quarter was no faster). */
	s->port = (struct sl_port){ .ops = &shm_ops, .priv = s, .max_frame = max_frame, .crc = false,
				    .rx_keep = nbufs / 8 };
	return &s->port;
}

/* Map the peer's file: 0 done, 1 not there (yet), -1 with a message when
 * it is there but cannot be ours (other geometry, unreadable). */
static int map_peer(struct shm_port *s, char *err, size_t errlen)
{
	const struct shm_head *h;
	struct stat st;
	size_t bytes = dir_bytes(s->stride, s->nbufs);
	uint64_t magic;
	void *base;
	int fd = open(s->peer_name, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT) {
			s->dead_owner = 0;
			return 1;
		}
		sl_errmsg_format(err, errlen, "cannot open %s: %s", s->peer_name, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(*h)) { /* not filled in yet */
		close(fd);
		return 1;
	}
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		sl_errmsg_format(err, errlen, "cannot map %s: %s", s->peer_name, strerror(errno));
		return -1;
	}
	h = base;
	/* a crashed run's file, or one still being filled in: wait for the right one */
	magic = atomic_load_explicit((_Atomic uint64_t *)&h->magic, memory_order_acquire);
	if (magic != SHM_MAGIC || !pid_alive(h->owner)) {
		s->dead_owner = magic == SHM_MAGIC ? h->owner : 0;
		munmap(base, (size_t)st.st_size);
		return 1;
	}
	if (h->version != SHM_VERSION || h->frame != s->port.max_frame || h->stride != s->stride ||
	    h->nbufs != s->nbufs || (size_t)st.st_size != bytes) {
		sl_errmsg_format(err, errlen, "%s (pid %d) carries frames of %u B in %u buffers (version %u), this end %u B "
				 "in %u (version %u): start every dataplane of the mesh with the same --frame and build",
				 s->peer_name, h->owner, h->frame, h->nbufs, h->version, s->port.max_frame, s->nbufs,
				 SHM_VERSION);
		munmap(base, (size_t)st.st_size);
		return -1;
	}
	dir_layout(&s->peer, base, bytes, s->nbufs);
	sl_touch(base, bytes);
	s->port.rx_posted = &s->peer.head->posted;
	s->port.rx_taken = &s->read;
	/* both ends have it now: nothing is left behind if either dies */
	atomic_store(&s->peer.head->attached, (int32_t)getpid());
	unlink(s->peer_name);
	return 0;
}

int sl_shm_port_wait_up(struct sl_port *port, unsigned timeout_ms, char *err, size_t errlen)
{
	struct shm_port *s = shm_of(port);
	struct timespec t0, t;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!s->peer.head && (r = map_peer(s, err, errlen)) != 0) {
		if (r < 0)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > (long)timeout_ms) {
			char left[64] = "";
			if (s->dead_owner)
				snprintf(left, sizeof(left), " (only a file of pid %d, which is gone)", s->dead_owner);
			sl_errmsg_format(err, errlen, "node %u: node %u's end of the shm link (channel %u), %s, did not appear "
					 "in %u ms%s: node %u's dataplane did not start, is stuck starting or died (its log or "
					 "its rank's stderr says which), or starts slower than that (raise --timeout or "
					 "SLUICE_TIMEOUT); every node needs the same mesh directory and --mesh shm",
					 s->node, s->peer_node, s->channel, s->peer_name, timeout_ms, left, s->peer_node);
			return -1;
		}
		usleep(1000);
	}
	return 0;
}

bool sl_shm_port_is(const struct sl_port *port)
{
	return port->ops == &shm_ops;
}

