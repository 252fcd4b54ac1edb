/*
 * test_trace_analyze.c: `sluice-trace analyze` counts every DATA frame a
 * link sent that never arrived, control messages (a communicator's closing
 * word, an abort, a stall note) included, as a fault injector does: it_trace
 * compares the two, and a dropped closing word once made them differ by one
 * (trace_loss_2ranks: "the fault injector dropped 41 DATA frames, analyze
 * saw 40 vanish").  A capture is written by hand: node 0 sends node 1 three
 * DATA frames of a collective and a closing word; one DATA frame and the
 * closing word never arrive.
 *
 * No number of ranks or links is a cap: an all-to-all over 20 ranks (380
 * links, where a collective once kept 64 and the whole capture 256) loses
 * one frame on its last link, and that link is the one blamed; a capture
 * of as many interfaces as sluice-trace writes reads back.  A capture of
 * no frames at all (a dataplane that stopped before any call) is a summary
 * of nothing, not a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "trace_cli.h"
#include "wire.h"

#define COMM 0x1234u

/* One frame from src to dst, captured at the sender (tx) or the receiver. */
static void frame(FILE *f, uint64_t *ts, uint16_t src, uint16_t dst, uint32_t psn, uint16_t flags, bool tx)
{
	struct sl_addr a, b;
	struct sl_hdr h = { .version = SL_WIRE_VERSION, .type = SL_T_DATA, .flags = flags, .src_node = src,
			    .dst_node = dst, .psn = psn, .comm = COMM, .seq = 0, .kind = 0, .len = 8 };
	uint8_t buf[256], payload[8] = { 0 };
	char comment[64];
	uint32_t len;

	sl_addr_for_node(src, &a);
	sl_addr_for_node(dst, &b);
	len = sl_wire_build(buf, sizeof(buf), &a, &b, 1, &h, payload, NULL);
	assert_true(len > 0);
	/* interface i: node i's port; rank i on node i */
	snprintf(comment, sizeof(comment), "dir=%s rank=%u peer_rank=%u", tx ? "tx" : "rx", tx ? src : dst,
		 tx ? dst : src);
	assert_int_equal(tr_pcapng_packet(f, tx ? src : dst, (*ts)++ * 1000, buf, len, len, tx, comment), 0);
}

/* What `sluice-trace analyze` prints for the capture at path. */
static void analyze_into(const char *path, char *text, size_t size)
{
	char out[] = "/tmp/test-trace-analyze-out.XXXXXX";
	int ofd = mkstemp(out);

	assert_true(ofd >= 0);
	fflush(stdout);
	int saved = dup(STDOUT_FILENO);
	assert_true(dup2(ofd, STDOUT_FILENO) >= 0);
	char *argv[] = { "analyze", (char *)path, NULL };
	int rc = tr_cmd_analyze(2, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	assert_int_equal(rc, 0);
	FILE *r = fdopen(ofd, "r");
	rewind(r);
	size_t n = fread(text, 1, size - 1, r);
	text[n] = '\0';
	fclose(r);
	unlink(out);
}

/* A capture at path (a mkstemp template) of interfaces ifs[0..n), open to write frames to. */
static FILE *capture_open(char *path, const struct tr_pcapng_if *ifs, unsigned n)
{
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	assert_non_null(f);
	assert_int_equal(tr_pcapng_header(f, ifs, n), 0);
	return f;
}

/* The capture f at path closed, what `sluice-trace analyze` says of it in text, the file gone. */
static void capture_analyze(FILE *f, const char *path, char *text, size_t size)
{
	assert_int_equal(fclose(f), 0);
	analyze_into(path, text, size);
	unlink(path);
}

static void control_frames_that_vanished_are_counted(void **state)
{
	char path[] = "/tmp/test-trace-analyze.XXXXXX";
	struct tr_pcapng_if ifs[2] = { { "node0-port0", "node 0", 65535 }, { "node1-port0", "node 1", 65535 } };
	uint64_t ts = 1;
	char text[8192] = "";

	(void)state;
	FILE *f = capture_open(path, ifs, 2);
	for (uint32_t psn = 1; psn <= 3; psn++) {
		frame(f, &ts, 0, 1, psn, 0, true);
		if (psn != 2) /* PSN 2 is lost */
			frame(f, &ts, 0, 1, psn, 0, false);
		frame(f, &ts, 1, 0, psn, 0, true); /* node 1's part of the call */
		frame(f, &ts, 1, 0, psn, 0, false);
	}
	frame(f, &ts, 0, 1, 4, SL_F_CTRL, true); /* the closing word, lost */
	capture_analyze(f, path, text, sizeof(text));
	const char *want = "rank 0 (node 0) -> rank 1 (node 1): 1 lost (2 DATA frames never arrived, 1 of them "
			   "control messages)";
	if (!strstr(text, want))
		fail_msg("analyze said:\n%s\nwanted a line with: %s", text, want);
}

#define WIDE 20u /* ranks: WIDE * (WIDE - 1) links */

static void every_link_of_a_wide_all_to_all_is_counted(void **state)
{
	char path[] = "/tmp/test-trace-analyze.XXXXXX";
	struct tr_pcapng_if ifs[WIDE];
	char names[WIDE][2][24];
	uint64_t ts = 1;
	static char text[1 << 20];

	(void)state;
	for (unsigned i = 0; i < WIDE; i++) {
		snprintf(names[i][0], sizeof(names[i][0]), "node%u-port0", i);
		snprintf(names[i][1], sizeof(names[i][1]), "node %u", i);
		ifs[i] = (struct tr_pcapng_if){ names[i][0], names[i][1], 65535 };
	}
	FILE *f = capture_open(path, ifs, WIDE);
	for (uint16_t src = 0; src < WIDE; src++)
		for (uint16_t dst = 0; dst < WIDE; dst++) {
			if (src == dst)
				continue;
			frame(f, &ts, src, dst, 1, 0, true);
			if (!(src == WIDE - 1 && dst == WIDE - 2)) /* the last link's frame is lost */
				frame(f, &ts, src, dst, 1, 0, false);
		}
	capture_analyze(f, path, text, sizeof(text));

	const char *blamed = "slowest link: rank 19 (node 19) -> rank 18 (node 18): 1 packets lost";
	if (!strstr(text, blamed))
		fail_msg("analyze said (from its end):\n%s\nwanted a line with: %s",
			 strlen(text) > 2000 ? text + strlen(text) - 2000 : text, blamed);
	unsigned lines = 0;
	for (const char *p = strstr(text, "links over the whole capture:\n"); p && (p = strstr(p, "\n  rank ")); p++)
		lines++;
	if (lines != WIDE * (WIDE - 1))
		fail_msg("analyze listed %u links over the whole capture, not the %u a %u-rank all-to-all used", lines,
			 WIDE * (WIDE - 1), WIDE);
}

/* 64 dataplanes of 8 ports each: a capture that once read back only its first 256 interfaces. */
static void every_interface_sluice_writes_reads_back(void **state)
{
	char path[] = "/tmp/test-trace-analyze.XXXXXX";
	static struct tr_pcapng_if ifs[TR_MAX_IFS];
	static char names[TR_MAX_IFS][24];
	static char text[1 << 16];
	uint64_t ts = 1;

	(void)state;
	for (unsigned i = 0; i < TR_MAX_IFS; i++) {
		snprintf(names[i], sizeof(names[i]), "if%u", i);
		ifs[i] = (struct tr_pcapng_if){ names[i], names[i], 65535 };
	}
	FILE *f = capture_open(path, ifs, TR_MAX_IFS);
	frame(f, &ts, TR_MAX_IFS - 1, TR_MAX_IFS - 2, 1, 0, true); /* on the last interface */
	frame(f, &ts, TR_MAX_IFS - 1, TR_MAX_IFS - 2, 1, 0, false);
	capture_analyze(f, path, text, sizeof(text));
	char want[96];
	snprintf(want, sizeof(want), "rank %u (node %u) -> rank %u (node %u): 0 lost", TR_MAX_IFS - 1, TR_MAX_IFS - 1,
		 TR_MAX_IFS - 2, TR_MAX_IFS - 2);
	if (!strstr(text, want))
		fail_msg("analyze said:\n%s\nwanted a line with: %s", text, want);
}

static void a_capture_of_no_frames_is_summarized(void **state)
{
	char path[] = "/tmp/test-trace-analyze.XXXXXX";
	struct tr_pcapng_if ifs[1] = { { "node0-port0", "node 0", 65535 } };
	char text[1024] = "";

	(void)state;
	FILE *f = capture_open(path, ifs, 1);
	capture_analyze(f, path, text, sizeof(text));
	if (!strstr(text, "0 collectives, 0 DATA/ACK packets"))
		fail_msg("analyze said:\n%s\nwanted a summary of nothing", text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(control_frames_that_vanished_are_counted),
		cmocka_unit_test(every_link_of_a_wide_all_to_all_is_counted),
		cmocka_unit_test(every_interface_sluice_writes_reads_back),
		cmocka_unit_test(a_capture_of_no_frames_is_summarized),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
