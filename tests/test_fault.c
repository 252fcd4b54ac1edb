/*
 * test_fault.c: the fault injector on its own: SLUICE_FAULT specs accepted
 * and refused (with a message naming the bad part), and the fault port over
 * a clean memport pair: frames conserved (every frame sent arrives, is
 * dropped or is a counted duplicate), delays honoured by the clock, held
 * frames released on a quiet link, and the same seed giving the same fates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fault_port.h"
#include "memport.h"

#define MAX_FRAME 256
#define DEPTH 1024

static void test_parse_ok(void **state)
{
	(void)state;
	struct sl_fault_spec s;
	char err[256] = "";

	assert_int_equal(sl_fault_parse("drop:0.01,reorder:16,dup:0.001,corrupt:0.0001,delay:50us,seed:7",
					&s, err, sizeof(err)), 0);
	assert_true(s.drop == 0.01 && s.dup == 0.001 && s.corrupt == 0.0001);
	assert_int_equal(s.reorder_depth, 15);
	assert_true(s.reorder > 0.93 && s.reorder < 0.94); /* 15/16 */
	assert_int_equal(s.delay_ns, 50000);
	assert_int_equal(s.seed, 7);
	assert_true(sl_fault_active(&s));

	assert_int_equal(sl_fault_parse("", &s, err, sizeof(err)), 0);
	assert_false(sl_fault_active(&s));
	assert_int_equal(s.seed, 1);
	assert_int_equal(sl_fault_parse("reorder:1,delay:0ns", &s, err, sizeof(err)), 0);
	assert_false(sl_fault_active(&s)); /* depth 1 reorders nothing */
	assert_int_equal(sl_fault_parse("delay:2ms", &s, err, sizeof(err)), 0);
	assert_int_equal(s.delay_ns, 2000000);
}

static void refused(const char *spec, const char *needle)
{
	struct sl_fault_spec s;
	char err[256] = "";

	assert_int_equal(sl_fault_parse(spec, &s, err, sizeof(err)), -1);
	if (!strstr(err, needle))
		fail_msg("spec '%s': message '%s' does not mention '%s'", spec, err, needle);
}

static void test_parse_refused(void **state)
{
	(void)state;
	refused("drop:1.5", "drop wants a probability");
	refused("drop:-0.1", "drop wants a probability");
	refused("dup:x", "'x'");
	refused("corrupt:", "corrupt wants");
	refused("reorder:0", "reorder wants a depth");
	refused("reorder:65", "reorder wants a depth");
	refused("reorder:0.5", "reorder wants a depth");
	refused("delay:50", "delay wants a whole number with a unit");
	refused("delay:50parsecs", "delay wants");
	refused("delay:11s", "at most 10 s");
	refused("seed:-3", "seed wants");
	refused("lose:0.1", "unknown key 'lose'");
	refused("drop0.1", "not KEY:VALUE");
	refused("drop:0.1,drop:0.2", "'drop' given twice");
}

struct rig {
	uint64_t now;
	struct sl_port *a, *b, *fa;
};

static uint64_t rig_now(void *arg)
{
	return ((struct rig *)arg)->now;
}

/* Counts that say an inner port has nothing to receive (port.h). */
static const _Atomic uint32_t idle_posted;
static const uint32_t idle_taken;

/* The inner port says it is idle, as a shm port may: the injector's polls
 * must not be skipped all the same (test_delay). */
static void rig_open(struct rig *r, const char *spec)
{
	struct sl_memport_faults none = { 0 };
	struct sl_fault_spec s;
	struct sl_clock clock = { rig_now, r };
	char err[256];

	r->now = 1000;
	assert_int_equal(sl_fault_parse(spec, &s, err, sizeof(err)), 0);
	assert_int_equal(sl_memport_pair(&r->a, &r->b, MAX_FRAME, DEPTH, &none), 0);
	r->a->rx_posted = &idle_posted;
	r->a->rx_taken = &idle_taken;
	r->fa = sl_fault_port_wrap(r->a, &s, 1, &clock);
	assert_non_null(r->fa);
}

static void rig_close(struct rig *r)
{
	r->fa->ops->close(r->fa);
	assert_int_equal(sl_memport_held(r->b), 0); /* nothing leaked, held frames included */
	sl_memport_pair_free(r->a, r->b);
}

/* Send n frames numbered from first, one byte each, through the fault port. */
static void send_numbered(struct rig *r, uint32_t first, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct sl_pkt p;
		assert_int_equal(r->fa->ops->alloc(r->fa, &p, 1), 1);
		memset(p.data, 0, 64);
		p.data[0] = (uint8_t)(first + i);
		p.len = 64;
		assert_int_equal(r->fa->ops->tx_burst(r->fa, &p, 1), 1);
	}
}

/* Receive everything waiting at b; counts[k] += arrivals of frame k. */
static uint32_t receive(struct rig *r, uint32_t *counts, uint8_t *order)
{
	struct sl_pkt p[32];
	uint32_t total = 0;
	uint16_t n;

	r->fa->ops->rx_burst(r->fa, p, 0); /* let the fault port hand on what is due */
	while ((n = r->b->ops->rx_burst(r->b, p, 32)) > 0) {
		for (uint16_t i = 0; i < n; i++) {
			if (counts)
				counts[p[i].data[0]]++;
			if (order)
				order[total] = p[i].data[0];
			total++;
		}
		r->b->ops->free(r->b, p, n);
	}
	return total;
}

static void test_conservation(void **state)
{
	(void)state;
	struct rig r;
	uint32_t counts[256] = { 0 }, got;

	rig_open(&r, "drop:0.1,dup:0.1,reorder:8,seed:3");
	send_numbered(&r, 0, 200);
	r.now += 1000000; /* the link goes quiet: held frames are released */
	got = receive(&r, counts, NULL);
	const struct sl_fault_counters *c = sl_fault_port_counters(r.fa);
	assert_int_equal(c->frames, 200);
	assert_true(c->dropped > 0 && c->duplicated > 0 && c->reordered > 0);
	assert_int_equal(got, 200 - c->dropped + c->duplicated);
	uint32_t lost = 0, doubled = 0;
	for (int k = 0; k < 200; k++) {
		lost += counts[k] == 0;
		doubled += counts[k] == 2;
		assert_true(counts[k] <= 2);
	}
	assert_int_equal(lost, c->dropped);
	assert_int_equal(doubled, c->duplicated);
	rig_close(&r);
}

static void test_delay(void **state)
{
	(void)state;
	struct rig r;

	rig_open(&r, "delay:50us");
	assert_true(sl_port_rx_idle(r.a));
	assert_false(sl_port_rx_idle(r.fa)); /* its rx_burst sends what came due */
	send_numbered(&r, 0, 10);
	assert_int_equal(receive(&r, NULL, NULL), 0);
	r.now += 49999;
	assert_int_equal(receive(&r, NULL, NULL), 0);
	r.now += 1;
	assert_int_equal(receive(&r, NULL, NULL), 10);
	rig_close(&r);
}

static void test_reorder_replays(void **state)
{
	(void)state;
	uint8_t order[2][64];

	for (int run = 0; run < 2; run++) {
		struct rig r;
		rig_open(&r, "reorder:16,seed:11");
		send_numbered(&r, 0, 64);
		r.now += 1000000;
		assert_int_equal(receive(&r, NULL, order[run]), 64);
		rig_close(&r);
	}
	assert_memory_equal(order[0], order[1], 64);
	uint32_t displaced = 0;
	for (int i = 0; i < 64; i++)
		displaced += order[0][i] != i;
	assert_true(displaced > 32);
}

static void test_corrupt_counts_coverage(void **state)
{
	(void)state;
	struct rig r;

	rig_open(&r, "corrupt:1,seed:2");
	send_numbered(&r, 0, 50); /* not sluice frames: no flip is covered */
	receive(&r, NULL, NULL);
	const struct sl_fault_counters *c = sl_fault_port_counters(r.fa);
	assert_int_equal(c->corrupted, 50);
	assert_int_equal(c->corrupted_covered, 0);
	rig_close(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_refused),
		cmocka_unit_test(test_conservation),
		cmocka_unit_test(test_delay),
		cmocka_unit_test(test_reorder_replays),
		cmocka_unit_test(test_corrupt_counts_coverage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
