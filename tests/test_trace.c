/*
 * test_trace.c: the trace path without DPDK.  sl_trace_peek (trace.h, what
 * sluice-trace decodes with) against sl_wire_build (what the transport
 * sends), so the two layouts cannot drift apart; and the trace tap over an
 * in-memory port pair: transparent when detached, every frame recorded once
 * when attached (a frame the port refuses is not), the engine-side filter,
 * and ring overflow counted per port.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "dp.h"
#include "memport.h"
#include "trace_tap.h"

#define FRAME 2048

static const struct sl_addr a0 = { { 2, 0, 0, 0, 0, 1 }, 0x0a000001 };
static const struct sl_addr a1 = { { 2, 0, 0, 0, 0, 2 }, 0x0a000002 };

static void peek_matches_wire(void **state)
{
	uint8_t f[FRAME], payload[100] = { 7 };
	struct sl_hdr h = { .version = SL_WIRE_VERSION, .type = SL_T_DATA, .flags = SL_F_RETX | SL_F_CRC,
			    .src_node = 3, .dst_node = 9, .psn = 0xfffffff0u, .comm = 0xabcdef01u, .seq = 77,
			    .step = 5, .kind = 1, .dtype_op = 0x21, .count = 1ull << 40, .offset = 123456789012ull,
			    .len = sizeof(payload), .ts = 4242 };
	struct sl_ack ack = { .cum_psn = 17, .echo_ts = 99, .credit = 256, .sack = { 5, 0, 1ull << 63, 2 } };
	struct sl_trace_pkt p;
	(void)state;

	uint32_t len = sl_wire_build(f, sizeof(f), &a0, &a1, 0xc123, &h, payload, NULL);
	assert_true(sl_trace_peek(f, len, &p));
	assert_int_equal(p.type, SL_T_DATA);
	assert_int_equal(p.flags, SL_F_RETX | SL_F_CRC);
	assert_int_equal(p.src_node, 3);
	assert_int_equal(p.dst_node, 9);
	assert_int_equal(p.psn, h.psn);
	assert_int_equal(p.comm, h.comm);
	assert_int_equal(p.seq, 77);
	assert_int_equal(p.step, 5);
	assert_int_equal(p.kind, 1);
	assert_true(p.count == h.count && p.offset == h.offset);
	assert_int_equal(p.len, sizeof(payload));
	assert_int_equal(p.ts, 4242);
	assert_int_equal(p.entropy, 0xc123);
	assert_false(p.has_ack);
	assert_false(sl_trace_peek(f, SL_TRACE_OFF_BODY - 1, &p)); /* too short for the header */

	h.type = SL_T_ACK;
	h.flags = 0;
	len = sl_wire_build(f, sizeof(f), &a0, &a1, 1, &h, NULL, &ack);
	assert_true(sl_trace_peek(f, len, &p));
	assert_true(p.has_ack);
	assert_int_equal(p.cum_psn, 17);
	assert_int_equal(p.echo_ts, 99);
	assert_int_equal(p.credit, 256);
	assert_memory_equal(p.sack, ack.sack, sizeof(ack.sack));
	f[SL_TRACE_OFF_UDP + 3] ^= 1; /* another UDP port: not sluice */
	assert_false(sl_trace_peek(f, len, &p));
}

struct rig {
	struct sl_port *a, *b;   /* the memory pair */
	struct sl_port *tap;     /* a, tapped */
	struct dp_trace trace;
	struct dp_engine e;      /* only node and comms are read by attach */
	struct sl_trace_page *page;
	size_t bytes;
	struct sl_spsc cons;
};

static struct rig *rig_new(uint32_t depth)
{
	struct rig *r = calloc(1, sizeof(*r));
	struct sl_memport_faults none = { 0 };

	assert_non_null(r);
	assert_int_equal(sl_memport_pair(&r->a, &r->b, FRAME, depth, &none), 0);
	r->tap = dp_trace_tap(&r->trace, r->a, 1);
	r->e.node = 0;
	return r;
}

static void rig_attach(struct rig *r, const struct sl_trace_filter *flt)
{
	struct sl_ctl_msg m = { .type = SL_CTL_TRACE_ATTACH, .t.filter = *flt };
	struct sl_ctl_reply rep = { 0 };
	int fd = dp_trace_attach(&r->trace, &r->e, &m, &rep);

	assert_true(fd >= 0);
	r->bytes = (size_t)lseek(fd, 0, SEEK_END);
	r->page = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(r->page != MAP_FAILED);
	assert_int_equal(r->page->nports, 1);
	assert_int_equal(r->page->ports[0].peer_node, 1);
	assert_true(sl_spsc_attach(&r->cons, (void *)((uint8_t *)r->page + r->page->ring_off), r->page->slots,
				   r->page->slot_size, false));
	/* a second tracer is refused while one is attached */
	assert_int_equal(dp_trace_attach(&r->trace, &r->e, &m, &rep), -1);
	assert_non_null(strstr(rep.msg, "another tracer"));
}

static void rig_free(struct rig *r)
{
	dp_trace_detach(&r->trace);
	if (r->page)
		munmap(r->page, r->bytes);
	sl_memport_pair_free(r->a, r->b);
	free(r);
}

/* Send n DATA frames through the tap with PSNs from psn, every other one a retransmission. */
static uint16_t send_frames(struct rig *r, uint16_t n, uint32_t psn)
{
	struct sl_pkt pk[64];
	uint16_t got = r->tap->ops->alloc(r->tap, pk, n);

	assert_int_equal(got, n);
	for (uint16_t i = 0; i < n; i++) {
		struct sl_hdr h = { .version = SL_WIRE_VERSION, .type = SL_T_DATA, .src_node = 0, .dst_node = 1,
				    .psn = psn + i, .flags = i % 2 ? SL_F_RETX : 0, .len = 16 };
		uint8_t body[16] = { 0 };
		pk[i].len = sl_wire_build(pk[i].data, pk[i].cap, &a0, &a1, 1, &h, body, NULL);
	}
	uint16_t sent = r->tap->ops->tx_burst(r->tap, pk, n);
	if (sent < n)
		r->tap->ops->free(r->tap, pk + sent, (uint16_t)(n - sent));
	return sent;
}

static uint32_t drain(struct rig *r, uint32_t *psns)
{
	uint8_t slot[1024];
	struct sl_trace_rec *rec = (struct sl_trace_rec *)slot;
	struct sl_trace_pkt p;
	uint32_t n = 0;

	assert_true(r->page->slot_size <= sizeof(slot));
	while (sl_spsc_dequeue(&r->cons, slot)) {
		assert_true(sl_trace_peek(rec->data, rec->caplen, &p));
		assert_int_equal(rec->dir, SL_TRACE_TX);
		assert_int_equal(rec->caplen, SL_TRACE_OFF_BODY); /* headers only: no payload snap */
		psns[n++] = p.psn;
	}
	return n;
}

static void tap_records_what_was_sent(void **state)
{
	struct rig *r = rig_new(8); /* the pair queues 8 frames: a burst of 12 is cut short */
	struct sl_trace_filter all = { 0 };
	uint32_t psns[64];
	(void)state;

	assert_int_equal(send_frames(r, 4, 100), 4); /* detached: passes through, nothing recorded */
	rig_attach(r, &all);
	assert_int_equal(drain(r, psns), 0);
	uint16_t sent = send_frames(r, 12, 200);
	assert_int_equal(sent, 4); /* 4 queued before, 8 deep */
	assert_int_equal(drain(r, psns), sent);
	for (uint16_t i = 0; i < sent; i++)
		assert_int_equal(psns[i], 200 + i);
	assert_int_equal(atomic_load(&r->page->dropped[0]), 0);
	rig_free(r);
}

static void tap_filter_and_overflow(void **state)
{
	struct rig *r = rig_new(4096);
	struct sl_trace_filter retx = { .match = SL_TRACE_M_RETX };
	struct sl_pkt in[64];
	uint32_t psns[64];
	uint64_t total = 0;
	(void)state;

	rig_attach(r, &retx);
	assert_int_equal(send_frames(r, 10, 0), 10);
	assert_int_equal(drain(r, psns), 5); /* only the odd PSNs, the retransmissions */
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(psns[i], 2 * i + 1);
	/* never drained: the ring fills, the rest are counted, and nothing blocks */
	for (uint32_t k = 0; total < r->page->slots + 100; k++) {
		uint16_t got = r->b->ops->rx_burst(r->b, in, 64); /* keep the pair from filling */
		r->b->ops->free(r->b, in, got);
		total += send_frames(r, 64, k * 64) / 2;
	}
	assert_int_equal(sl_spsc_count(&r->cons), r->page->slots);
	assert_int_equal(atomic_load(&r->page->dropped[0]), total - r->page->slots);
	rig_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(peek_matches_wire),
		cmocka_unit_test(tap_records_what_was_sent),
		cmocka_unit_test(tap_filter_and_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
