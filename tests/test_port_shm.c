/*
 * test_port_shm.c: the shared-memory port (dataplane/port_shm.h).
 *
 * - Frames cross between two processes, byte for byte and in order, many
 *   times more than there are buffers (so every buffer is handed back and
 *   posted again), with the receiver started first.
 * - A peer's forged descriptors (a buffer index or a length out of range, a
 *   buffer handed back that is not in flight) are counted and dropped; none
 *   reaches the receiver, none frees a buffer twice.
 * - A missing peer, a peer of another geometry and a dead peer's file give
 *   a clear error or a wait, never a mapping of the wrong file.
 * - A last word finds a buffer after ordinary frames took every other one.
 * - Once a link is up, writing and reading every byte of every buffer, on
 *   both ends, faults no page in: each end touched its mappings then.
 * - A link that carries a few frames at a time to a peer on the sender's
 *   CPU posts the same few buffers, the ones its peer handed back last; to
 *   a peer on another CPU, every buffer in turn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "port_shm.h"

#define FRAME 9000u
#define NBUFS 64u
#define N_FRAMES 20000u
#define WAIT_MS 10000u

static char dir[64] = "/tmp/test_port_shm.XXXXXX"; /* the mesh's directory: names the files */

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(dir);
}

static uint32_t frame_len(uint32_t seq)
{
	return 64 + (seq * 2654435761u) % (FRAME - 64 + 1);
}

static uint8_t pattern(uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 31 + i * 7);
}

static void fill(uint8_t *p, uint32_t seq, uint32_t len)
{
	memcpy(p, &seq, sizeof(seq));
	for (uint32_t i = sizeof(seq); i < len; i++)
		p[i] = pattern(seq, i);
}

/* The child: receive N_FRAMES and check each; exit 0 when all were right. */
static int receive_all(void)
{
	char err[256];
	struct sl_port *p = sl_shm_port_open(dir, 1, 0, 0, FRAME, NBUFS, err, sizeof(err));
	uint32_t next = 0;
	struct sl_pkt pk[32];

	if (!p || sl_port_wait_up(p, WAIT_MS, err, sizeof(err)) != 0) {
		fprintf(stderr, "receiver: %s\n", err);
		return 2;
	}
	for (time_t t0 = time(NULL); next < N_FRAMES && time(NULL) - t0 < 20;) {
		uint16_t n = p->ops->rx_burst(p, pk, 32);
		for (uint16_t k = 0; k < n; k++, next++) {
			uint32_t seq;
			memcpy(&seq, pk[k].data, sizeof(seq));
			if (seq != next || pk[k].len != frame_len(seq)) {
				fprintf(stderr, "receiver: frame %u came as %u of %u B\n", next, seq, pk[k].len);
				return 3;
			}
			for (uint32_t i = sizeof(seq); i < pk[k].len; i++)
				if (pk[k].data[i] != pattern(seq, i)) {
					fprintf(stderr, "receiver: frame %u byte %u is wrong\n", seq, i);
					return 4;
				}
		}
		p->ops->free(p, pk, n);
	}
	p->ops->close(p);
	return next == N_FRAMES ? 0 : 5;
}

static void frames_cross_between_processes(void **state)
{
	(void)state;
	char err[256];
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(receive_all());
	usleep(20000); /* the receiver waits for our file first */
	struct sl_port *p = sl_shm_port_open(dir, 0, 1, 0, FRAME, NBUFS, err, sizeof(err));
	assert_non_null(p);
	assert_false(p->crc); /* memory between two processes: no trailer unless faults are injected */
	assert_int_equal(sl_shm_port_wait_up(p, WAIT_MS, err, sizeof(err)), 0);
	uint32_t seq = 0;
	for (time_t t0 = time(NULL); seq < N_FRAMES && time(NULL) - t0 < 20;) {
		struct sl_pkt pk[16];
		uint16_t n = p->ops->alloc(p, pk, N_FRAMES - seq < 16 ? (uint16_t)(N_FRAMES - seq) : 16);
		for (uint16_t k = 0; k < n; k++) {
			assert_true(pk[k].cap >= FRAME);
			pk[k].len = frame_len(seq + k);
			fill(pk[k].data, seq + k, pk[k].len);
		}
		assert_int_equal(p->ops->tx_burst(p, pk, n), n);
		seq += n;
	}
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(p->stats.tx_pkts, N_FRAMES);
	assert_int_equal(p->stats.bad_desc, 0);
	p->ops->close(p);
}

/* Every buffer of a link, written whole by the sender and read whole by the
 * receiver, faults no page in: the guest would count these faults, and on
 * the PVM guests sluice runs on, the hypervisor's own first-touch fills
 * that it cannot count (10-14 us a page) come with them.  Not touched at
 * setup, a 3-rank scatter's first 150 calls took 5-10x their steady time. */
static void buffers_fault_nothing_in(void **state)
{
	(void)state;
	char err[256];
	struct sl_port *a = sl_shm_port_open(dir, 4, 5, 0, FRAME, NBUFS, err, sizeof(err));
	struct sl_port *b = sl_shm_port_open(dir, 5, 4, 0, FRAME, NBUFS, err, sizeof(err));
	struct sl_pkt pk[NBUFS];
	uint64_t sum = 0;

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(sl_port_wait_up(a, WAIT_MS, err, sizeof(err)), 0);
	assert_int_equal(sl_port_wait_up(b, WAIT_MS, err, sizeof(err)), 0);
	static uint8_t last[FRAME];
	memset(last, 1, sizeof(last)); /* its pages in before the count */
	long before = page_faults(RUSAGE_SELF);
	for (struct sl_port *from = a, *to = b; from; from = from == a ? b : NULL, to = a) {
		/* the buffers kept for last words too (send_last) */
		assert_int_equal(from->ops->alloc(from, pk, NBUFS), NBUFS - SHM_LAST_BUFS);
		for (uint32_t i = 0; i < NBUFS - SHM_LAST_BUFS; i++) {
			pk[i].len = FRAME;
			memset(pk[i].data, (int)i, FRAME);
		}
		assert_int_equal(from->ops->tx_burst(from, pk, NBUFS - SHM_LAST_BUFS), NBUFS - SHM_LAST_BUFS);
		for (uint32_t i = NBUFS - SHM_LAST_BUFS; i < NBUFS; i++) {
			memset(last, (int)i, FRAME);
			assert_true(sl_port_send_last(from, last, FRAME));
		}
		assert_int_equal(to->ops->rx_burst(to, pk, NBUFS), NBUFS);
		for (uint32_t i = 0; i < NBUFS; i++)
			for (uint32_t k = 0; k < FRAME; k += 64)
				sum += pk[i].data[k];
		to->ops->free(to, pk, NBUFS);
	}
	long faults = page_faults(RUSAGE_SELF) - before;
	assert_int_equal(sum, 2 * (uint64_t)(FRAME / 64 + (FRAME % 64 != 0)) * (NBUFS * (NBUFS - 1) / 2));
	if (faults > 2)
		fail_msg("writing and reading every buffer of a link faulted %ld pages in (want at most 2): "
			 "an end did not touch its mappings when the link came up", faults);
	a->ops->close(a);
	b->ops->close(b);
}

/* A port tells that nothing came without a call (sl_port_rx_idle): the
 * transport skips such a port's poll, so it must never say idle while a
 * frame waits, nor before its peer's end is mapped. */
static void an_idle_port_says_so(void **state)
{
	(void)state;
	char err[256];
	struct sl_port *a = sl_shm_port_open(dir, 6, 7, 0, FRAME, NBUFS, err, sizeof(err));
	struct sl_port *b = sl_shm_port_open(dir, 7, 6, 0, FRAME, NBUFS, err, sizeof(err));
	struct sl_pkt pk[2];

	assert_non_null(a);
	assert_non_null(b);
	assert_false(sl_port_rx_idle(b)); /* not up: only rx_burst can tell */
	assert_int_equal(sl_port_wait_up(a, WAIT_MS, err, sizeof(err)), 0);
	assert_int_equal(sl_port_wait_up(b, WAIT_MS, err, sizeof(err)), 0);
	assert_true(sl_port_rx_idle(b));
	assert_int_equal(a->ops->alloc(a, pk, 2), 2);
	pk[0].len = pk[1].len = 64;
	assert_int_equal(a->ops->tx_burst(a, pk, 2), 2);
	assert_false(sl_port_rx_idle(b));
	assert_true(sl_port_rx_idle(a)); /* b sent nothing */
	for (int left = 2; left > 0; left--) {
		assert_false(sl_port_rx_idle(b));
		assert_int_equal(b->ops->rx_burst(b, pk, 1), 1);
		b->ops->free(b, pk, 1);
	}
	assert_true(sl_port_rx_idle(b));
	assert_int_equal(b->ops->rx_burst(b, pk, 2), 0);
	a->ops->close(a);
	b->ops->close(b);
}

/* A peer that stopped reading while its sender posted every buffer alloc
 * gives (retransmissions into a stopped rank's ring): a last word (port.h
 * send_last) still finds one of the few kept back, and the peer reads it
 * after the others once it runs again.  Without them it was refused. */
static void a_last_word_finds_a_buffer(void **state)
{
	(void)state;
	char err[256];
	struct sl_port *a = sl_shm_port_open(dir, 8, 9, 0, FRAME, NBUFS, err, sizeof(err));
	struct sl_port *b = sl_shm_port_open(dir, 9, 8, 0, FRAME, NBUFS, err, sizeof(err));
	static const uint8_t last[64] = "last word";
	struct sl_pkt pk[NBUFS];
	uint32_t posted = 0, read = 0;

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(sl_port_wait_up(a, WAIT_MS, err, sizeof(err)), 0);
	assert_int_equal(sl_port_wait_up(b, WAIT_MS, err, sizeof(err)), 0);
	for (uint16_t n; (n = a->ops->alloc(a, pk, 8)) > 0; posted += n) {
		for (uint16_t k = 0; k < n; k++)
			fill(pk[k].data, posted + k, pk[k].len = 64);
		assert_int_equal(a->ops->tx_burst(a, pk, n), n);
	}
	if (!sl_port_send_last(a, last, sizeof(last)))
		fail_msg("a last word found no buffer after %u frames filled the ring", posted);
	assert_int_equal(posted, NBUFS - SHM_LAST_BUFS);
	assert_int_equal(a->ops->alloc(a, pk, 1), 0); /* the kept ones are for last words only */
	for (uint16_t n; (n = b->ops->rx_burst(b, pk, NBUFS)) > 0; read += n) {
		if (read + n == posted + 1)
			assert_memory_equal(pk[n - 1].data, last, sizeof(last));
		b->ops->free(b, pk, n);
	}
	assert_int_equal(read, posted + 1);
	a->ops->close(a);
	b->ops->close(b);
}

/* Map the file a's end made before b takes its name away, as a hostile
 * peer could write it. */
static struct shm_head *map_file(unsigned from, unsigned to, size_t *bytes)
{
	char name[128];
	struct stat st;

	assert_int_equal(sl_shm_port_file(name, sizeof(name), dir, from, to, 0), 0);
	int fd = open(name, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	*bytes = (size_t)st.st_size;
	void *m = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(m != MAP_FAILED);
	return m;
}

static void forged_descriptors_are_dropped(void **state)
{
	(void)state;
	char err[256];
	size_t bytes;
	struct sl_port *a = sl_shm_port_open(dir, 2, 3, 0, FRAME, NBUFS, err, sizeof(err));
	struct sl_port *b = sl_shm_port_open(dir, 3, 2, 0, FRAME, NBUFS, err, sizeof(err));
	assert_non_null(a);
	assert_non_null(b);
	struct shm_head *ah = map_file(2, 3, &bytes);
	struct shm_desc *tx = (struct shm_desc *)(ah + 1);
	uint32_t *ret = (uint32_t *)(tx + NBUFS);
	assert_int_equal(sl_port_wait_up(a, WAIT_MS, err, sizeof(err)), 0);
	assert_int_equal(sl_port_wait_up(b, WAIT_MS, err, sizeof(err)), 0);

	/* a sends one good frame; a forger adds an index and a length out of range */
	struct sl_pkt pk[NBUFS];
	assert_int_equal(a->ops->alloc(a, pk, 1), 1);
	pk[0].len = 100;
	fill(pk[0].data, 7, 100);
	assert_int_equal(a->ops->tx_burst(a, pk, 1), 1);
	uint32_t posted = atomic_load(&ah->posted);
	tx[posted % NBUFS] = (struct shm_desc){ NBUFS + 5, 100 };
	tx[(posted + 1) % NBUFS] = (struct shm_desc){ 9, FRAME + 1 };
	atomic_store(&ah->posted, posted + 2);
	uint16_t n = b->ops->rx_burst(b, pk, NBUFS);
	assert_int_equal(n, 1);
	assert_int_equal(pk[0].len, 100);
	assert_int_equal(b->stats.bad_desc, 2);
	b->ops->free(b, pk, n);

	/* a forger hands back buffer 9 (not in flight) and 9999 (none such):
	 * a takes back only its one good buffer, so it still has NBUFS (its
	 * alloc gives all but those kept for last words), not more */
	uint32_t handed = atomic_load(&ah->handed);
	ret[handed % NBUFS] = 9999;
	ret[(handed + 1) % NBUFS] = 9;
	atomic_store(&ah->handed, handed + 2);
	assert_int_equal(a->ops->alloc(a, pk, NBUFS), NBUFS - SHM_LAST_BUFS);
	assert_int_equal(a->ops->alloc(a, pk + 1, 1), 0);
	assert_true(a->stats.bad_desc >= 2);
	for (uint32_t i = 0; i < NBUFS - SHM_LAST_BUFS; i++)
		for (uint32_t k = 0; k < i; k++)
			assert_ptr_not_equal(pk[i].data, pk[k].data);
	a->ops->free(a, pk, NBUFS - SHM_LAST_BUFS);
	munmap(ah, bytes);
	a->ops->close(a);
	b->ops->close(b);
}

/* How many of a's buffers 2 * NBUFS rounds of two frames went out in, each
 * pair received and handed back by b before the next. */
static unsigned buffers_used(struct sl_port *a, struct sl_port *b)
{
	const uint8_t *seen[NBUFS];
	unsigned nseen = 0;
	struct sl_pkt pk[2];

	for (uint32_t round = 0; round < 2 * NBUFS; round++) {
		assert_int_equal(a->ops->alloc(a, pk, 2), 2);
		for (int k = 0; k < 2; k++) {
			unsigned i = 0;
			while (i < nseen && seen[i] != pk[k].data)
				i++;
			if (i == nseen)
				seen[nseen++] = pk[k].data;
			pk[k].len = 64;
		}
		assert_int_equal(a->ops->tx_burst(a, pk, 2), 2);
		assert_int_equal(b->ops->rx_burst(b, pk, 2), 2);
		b->ops->free(b, pk, 2);
	}
	return nseen;
}

/* A peer on the sender's CPU: the port posts the two buffers its peer read
 * last (still in this core's caches), not the next of its NBUFS, which
 * built every frame in cold memory.  A peer that says it runs on another
 * CPU (its head, forged here): every buffer in turn, as that core still
 * holds the lines it read (port_shm.c shm_alloc).  The thread is pinned, so
 * that both ends see one CPU. */
static void buffers_go_out_hot_to_a_peer_on_our_cpu(void **state)
{
	(void)state;
	char err[256];
	cpu_set_t was, one;
	size_t bytes;
	unsigned n;

	assert_int_equal(sched_getaffinity(0, sizeof(was), &was), 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	struct sl_port *a = sl_shm_port_open(dir, 8, 9, 0, FRAME, NBUFS, err, sizeof(err));
	struct sl_port *b = sl_shm_port_open(dir, 9, 8, 0, FRAME, NBUFS, err, sizeof(err));
	assert_non_null(a);
	assert_non_null(b);
	struct shm_head *bh = map_file(9, 8, &bytes);
	assert_int_equal(sl_port_wait_up(a, WAIT_MS, err, sizeof(err)), 0);
	assert_int_equal(sl_port_wait_up(b, WAIT_MS, err, sizeof(err)), 0);
	if ((n = buffers_used(a, b)) != 2)
		fail_msg("%u rounds of 2 frames to a peer on our CPU, each pair handed back before the next, went "
			 "out in %u buffers (want 2): the port posted buffers no cache held before the ones its peer "
			 "had read", 2 * NBUFS, n);
	atomic_store(&bh->cpu, sched_getcpu() + 1);
	if ((n = buffers_used(a, b)) != NBUFS - SHM_LAST_BUFS)
		fail_msg("the same rounds to a peer on another CPU went out in %u buffers (want all %u but the %u "
			 "kept for last words): the port wrote into lines that core still held", n,
			 NBUFS - SHM_LAST_BUFS, SHM_LAST_BUFS);
	munmap(bh, bytes);
	a->ops->close(a);
	b->ops->close(b);
	assert_int_equal(sched_setaffinity(0, sizeof(was), &was), 0);
}

static void missing_or_wrong_peer_is_an_error(void **state)
{
	(void)state;
	char err[256] = "";
	struct sl_port *a = sl_shm_port_open(dir, 4, 5, 0, FRAME, NBUFS, err, sizeof(err));
	assert_non_null(a);
	assert_int_equal(sl_shm_port_wait_up(a, 50, err, sizeof(err)), -1);
	/* which node waited, for which node, and whose log to read */
	assert_non_null(strstr(err, "node 4: node 5's end of the shm link (channel 0)"));
	assert_non_null(strstr(err, "node 5's dataplane did not start"));

	/* the peer carries other frames: refused, with both geometries named */
	struct sl_port *b = sl_shm_port_open(dir, 5, 4, 0, FRAME / 2, NBUFS, err, sizeof(err));
	assert_non_null(b);
	assert_int_equal(sl_shm_port_wait_up(b, 50, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "same --frame"));
	b->ops->close(b);
	a->ops->close(a);

	/* a dead sender's file is not mapped: the wait runs out instead */
	size_t bytes;
	a = sl_shm_port_open(dir, 6, 7, 0, FRAME, NBUFS, err, sizeof(err));
	b = sl_shm_port_open(dir, 7, 6, 0, FRAME, NBUFS, err, sizeof(err));
	struct shm_head *ah = map_file(6, 7, &bytes);
	pid_t dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	ah->owner = dead;
	assert_int_equal(sl_shm_port_wait_up(b, 50, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "did not appear"));
	char gone[64];
	snprintf(gone, sizeof(gone), "only a file of pid %d, which is gone", (int)dead);
	assert_non_null(strstr(err, gone));
	ah->owner = (int32_t)getpid();
	assert_int_equal(sl_shm_port_wait_up(b, 50, err, sizeof(err)), 0);
	munmap(ah, bytes);
	b->ops->close(b);
	a->ops->close(a);
}

/* A message longer than its buffer ends in "..." (errmsg.h): here a mesh
 * directory longer than sluiced's 512-byte err, which it names whole. */
static void a_cut_message_says_so(void **state)
{
	(void)state;
	char long_dir[700], err[512];
	size_t n = (size_t)snprintf(long_dir, sizeof(long_dir), "%s/missing", dir);

	while (n + 101 < sizeof(long_dir)) {
		long_dir[n++] = '/';
		memset(long_dir + n, 'd', 99); /* components under NAME_MAX: stat says ENOENT */
		n += 99;
	}
	long_dir[n] = '\0';
	assert_null(sl_shm_port_open(long_dir, 8, 9, 0, FRAME, NBUFS, err, sizeof(err)));
	assert_non_null(strstr(err, "shm link to node 9: the mesh directory /tmp/"));
	assert_int_equal(strlen(err), sizeof(err) - 1);
	assert_string_equal(err + sizeof(err) - 4, "...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(frames_cross_between_processes),
		cmocka_unit_test(a_cut_message_says_so),
		cmocka_unit_test(forged_descriptors_are_dropped),
		cmocka_unit_test(missing_or_wrong_peer_is_an_error),
		cmocka_unit_test(buffers_fault_nothing_in),
		cmocka_unit_test(an_idle_port_says_so),
		cmocka_unit_test(a_last_word_finds_a_buffer),
		cmocka_unit_test(buffers_go_out_hot_to_a_peer_on_our_cpu),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
