/*
 * test_twheel.c: the pacing timing wheel.  Timers never fire early, fire at
 * the first expire at or after their time (also more than a turn of the
 * wheel ahead, and after the hand jumps several turns), in time order across
 * slots; cancelling and re-arming work, also from inside a firing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "twheel.h"

#define SLOTS 64
#define TICK 1000
#define N 200

struct timer {
	struct sl_twheel_node node; /* first: the node's address is the timer's */
	uint64_t fired_at;          /* 0: not yet */
	uint32_t fires;
	bool rearm;                 /* fire again TICK * 3 later, once */
};

struct ctx {
	struct sl_twheel *w;
	uint64_t now;
	uint64_t last_due;          /* order check within one expire */
};

static void on_fire(void *arg, struct sl_twheel_node *n)
{
	struct ctx *c = arg;
	struct timer *t = (struct timer *)n;

	assert_false(sl_twheel_armed(n));
	assert_true(n->due_ns <= c->now); /* never early */
	t->fired_at = c->now;
	t->fires++;
	if (t->rearm) {
		t->rearm = false;
		sl_twheel_arm(c->w, n, c->now + 3 * TICK);
	}
}

static void test_fires_on_time(void **state)
{
	(void)state;
	struct sl_twheel w;
	static struct timer t[N];
	struct ctx c = { .w = &w, .now = 5 * TICK + 17 };
	uint64_t start = c.now;

	assert_int_equal(sl_twheel_init(&w, SLOTS, TICK, c.now), 0);
	/* spread over about three turns of the wheel, some in the past */
	for (int i = 0; i < N; i++) {
		t[i] = (struct timer){ 0 };
		uint64_t due = i < 5 ? start - (uint64_t)i * 100 : start + (uint64_t)(i * 997) % (3 * SLOTS * TICK);
		sl_twheel_arm(&w, &t[i].node, due);
	}
	assert_int_equal(w.armed, N);
	/* step in 300 ns: each fires at the first step at or after its time */
	uint32_t fired = 0;
	while (fired < N) {
		fired += sl_twheel_expire(&w, c.now, on_fire, &c);
		c.now += 300;
		assert_true(c.now < start + 4 * SLOTS * TICK);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(t[i].fires, 1);
		assert_true(t[i].fired_at >= t[i].node.due_ns);
		uint64_t due = t[i].node.due_ns > start ? t[i].node.due_ns : start; /* the past: at once */
		assert_true(t[i].fired_at < due + 300);
	}
	assert_int_equal(w.armed, 0);
	sl_twheel_fini(&w);
}

static void test_cancel_rearm_and_jumps(void **state)
{
	(void)state;
	struct sl_twheel w;
	struct timer a = { 0 }, b = { 0 }, far = { 0 }, again = { .rearm = true };
	struct ctx c = { .w = &w, .now = 0 };

	assert_int_equal(sl_twheel_init(&w, SLOTS, TICK, 0), 0);
	assert_int_equal(sl_twheel_init(&(struct sl_twheel){ 0 }, 48, TICK, 0), -1); /* not a power of two */
	sl_twheel_arm(&w, &a.node, 10 * TICK);
	sl_twheel_arm(&w, &b.node, 10 * TICK + 1);
	sl_twheel_arm(&w, &far.node, 10 * TICK + 5 * SLOTS * TICK); /* five turns ahead, same slot */
	sl_twheel_arm(&w, &again.node, 2 * TICK);
	sl_twheel_cancel(&w, &b.node);
	sl_twheel_cancel(&w, &b.node); /* twice: nothing */
	sl_twheel_arm(&w, &a.node, 20 * TICK); /* re-arming moves it */
	c.now = 10 * TICK + 2;
	assert_int_equal(sl_twheel_expire(&w, c.now, on_fire, &c), 1); /* only again */
	assert_int_equal(again.fires, 1);
	assert_true(sl_twheel_armed(&again.node)); /* re-armed from its firing */
	assert_int_equal(a.fires + b.fires + far.fires, 0);
	c.now = 20 * TICK;
	assert_int_equal(sl_twheel_expire(&w, c.now, on_fire, &c), 2); /* a, and again's second time */
	assert_int_equal(again.fires, 2);
	/* the hand jumps several turns at once: far fires, nothing twice */
	c.now = 10 * TICK + 9 * SLOTS * TICK;
	assert_int_equal(sl_twheel_expire(&w, c.now, on_fire, &c), 1);
	assert_int_equal(far.fires, 1);
	assert_int_equal(b.fires, 0);
	assert_int_equal(w.armed, 0);
	/* a clock that runs backwards fires nothing */
	sl_twheel_arm(&w, &b.node, c.now - 5 * TICK);
	assert_int_equal(sl_twheel_expire(&w, c.now - 10 * TICK, on_fire, &c), 0);
	assert_int_equal(sl_twheel_expire(&w, c.now, on_fire, &c), 1);
	sl_twheel_fini(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fires_on_time),
		cmocka_unit_test(test_cancel_rearm_and_jumps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
