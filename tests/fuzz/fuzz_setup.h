/*
 * fuzz_setup.h: the transport the fuzz target drives and the corpus
 * generator writes frames for, in one place so that the two agree: node 1
 * with messages in flight to node 2 (and a route to node 3), on one port.
 */
#ifndef SLUICE_FUZZ_SETUP_H
#define SLUICE_FUZZ_SETUP_H

#include <stdlib.h>

#include "transport.h"

#define FUZZ_SELF 1
#define FUZZ_PEER 2
#define FUZZ_OTHER 3
#define FUZZ_MAX_FRAME 512
#define FUZZ_PAYLOAD 256
#define FUZZ_WINDOW 16
#define FUZZ_MSGS 3
#define FUZZ_MSG_LEN 2000
#define FUZZ_COMM 0x5eed

static inline struct sl_tp *fuzz_transport(const struct sl_clock *clock,
					   const struct sl_tp_callbacks *cb, struct sl_port *port,
					   struct sl_tp_msg *msgs, const uint8_t *src)
{
	struct sl_tp_config cfg;
	struct sl_addr addr;

	sl_tp_config_default(&cfg, FUZZ_SELF, FUZZ_MAX_FRAME);
	cfg.payload = FUZZ_PAYLOAD;
	cfg.window = FUZZ_WINDOW;
	cfg.rto_min_ns = 100000;
	cfg.dead_ns = 20000000;
	cfg.cc = &sl_cc_swift; /* its per-ACK rules meet every ACK the fuzzer makes up */
	struct sl_tp *tp = sl_tp_create(&cfg, clock, cb);
	if (!tp || sl_tp_add_port(tp, port) != 0)
		abort();
	for (uint16_t node = FUZZ_PEER; node <= FUZZ_OTHER; node++) {
		sl_addr_for_node(node, &addr);
		if (sl_tp_add_route(tp, node, 0, &addr) != 0)
			abort();
	}
	for (int i = 0; i < FUZZ_MSGS; i++) {
		msgs[i] = (struct sl_tp_msg){ .dst_node = FUZZ_PEER, .src = src + i * FUZZ_MSG_LEN };
		msgs[i].hdr = (struct sl_hdr){ .comm = FUZZ_COMM, .seq = (uint32_t)i,
					       .offset = (uint64_t)i * FUZZ_MSG_LEN, .len = FUZZ_MSG_LEN };
		if (sl_tp_send(tp, &msgs[i]) != 0)
			abort();
	}
	return tp;
}

#endif
