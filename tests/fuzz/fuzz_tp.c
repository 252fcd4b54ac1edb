/*
 * fuzz_tp.c: a libFuzzer target over the packet parser and the transport's
 * receive path (DATA, ACK/SACK, retransmission and timers).
 *
 * An input is a sequence of records, each one frame as if from the network:
 *   [u8 flags][u16 length, little-endian][length bytes]
 * flags bit 0 moves the fake clock 1 ms on first (RTO, dead peers), bit 1
 * polls once more after the frame, bit 2 reopens held windows first (the
 * engine refuses DATA of odd collectives and holds after those of seq 2 mod 4).  Each frame is parsed on its own and
 * then received by a transport (node 1) that has messages in flight to node
 * 2, through a port that hands every frame over in a buffer of exactly its
 * length, so AddressSanitizer catches any read past a packet.  The seed
 * corpus (tests/fuzz/corpus/wire_tp, made by gen_corpus.c) holds valid
 * DATA and ACK frames for this set-up.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_setup.h"

struct input {
	const uint8_t *data;
	size_t left;
	uint64_t now_ns;
};

static uint64_t fake_now(void *arg)
{
	return ((struct input *)arg)->now_ns;
}

/* Next record as one exact-size frame; false when the input is used up. */
static bool next_frame(struct input *in, struct sl_pkt *pkt, uint8_t *flags)
{
	if (in->left < 3)
		return false;
	*flags = in->data[0];
	size_t len = (size_t)in->data[1] | (size_t)in->data[2] << 8;
	in->data += 3;
	in->left -= 3;
	if (len > in->left)
		len = in->left;
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		abort();
	memcpy(buf, in->data, len);
	in->data += len;
	in->left -= len;
	*pkt = (struct sl_pkt){ .data = buf, .len = (uint32_t)len, .cap = (uint32_t)len, .handle = buf };
	return true;
}

/* The frame the fake port hands over on its next rx_burst. */
static struct sl_pkt pending;
static bool has_pending;

static uint16_t fake_rx(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	(void)port;
	if (!has_pending || !n)
		return 0;
	pkts[0] = pending;
	has_pending = false;
	return 1;
}

/* Frames the transport sends vanish. */
static uint16_t fake_tx(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	port->ops->free(port, pkts, n);
	return n;
}

static uint16_t fake_alloc(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		uint8_t *buf = malloc(port->max_frame);
		if (!buf)
			abort();
		pkts[i] = (struct sl_pkt){ .data = buf, .cap = port->max_frame, .handle = buf };
	}
	return n;
}

static void fake_free(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	(void)port;
	for (uint16_t i = 0; i < n; i++)
		free(pkts[i].handle);
}

static void fake_close(struct sl_port *port)
{
	(void)port;
}

static const struct sl_port_ops fake_ops = {
	.name = "fuzz", .rx_burst = fake_rx, .tx_burst = fake_tx, .alloc = fake_alloc,
	.free = fake_free, .close = fake_close,
};

static volatile uint8_t sink; /* keeps the payload reads */

static enum sl_deliver_result on_deliver(void *arg, const struct sl_hdr *h, const uint8_t *payload)
{
	uint8_t x = 0;

	(void)arg;
	for (uint32_t i = 0; i < h->len; i++) /* every byte must lie inside the frame */
		x ^= payload[i];
	sink = x;
	return h->seq & 1 ? SL_DELIVER_RETRY : h->seq & 2 ? SL_DELIVER_HOLD : SL_DELIVER_DONE;
}

static void on_acked(void *arg, struct sl_tp_msg *m)
{
	struct sl_tp_msg *msgs = arg;

	if (m < msgs || m >= msgs + FUZZ_MSGS) /* only messages we sent are ever acked */
		abort();
}

static void on_dead(void *arg, uint16_t node)
{
	(void)arg;
	if (node != FUZZ_PEER && node != FUZZ_OTHER)
		abort();
}

/* Parse alone: on success, everything it points at lies inside the frame. */
static void parse_alone(const struct sl_pkt *pkt)
{
	struct sl_hdr h;
	struct sl_ack ack;
	const uint8_t *payload;

	if (sl_wire_parse(pkt->data, pkt->len, &h, &payload, &ack) != SL_PARSE_OK)
		return;
	if (payload < pkt->data || payload + h.len > pkt->data + pkt->len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t src[FUZZ_MSGS * FUZZ_MSG_LEN];
	struct input in = { data, size, 1000000000ull };
	struct sl_tp_msg msgs[FUZZ_MSGS];
	struct sl_port port = { .ops = &fake_ops, .max_frame = FUZZ_MAX_FRAME };
	struct sl_clock clock = { fake_now, &in };
	struct sl_tp_callbacks cb = { on_deliver, on_acked, on_dead, msgs };
	struct sl_tp *tp = fuzz_transport(&clock, &cb, &port, msgs, src);
	uint8_t flags;

	sl_tp_poll(tp); /* a window of DATA goes out: PSNs in flight for ACKs to hit */
	while (next_frame(&in, &pending, &flags)) {
		parse_alone(&pending);
		if (flags & 1)
			in.now_ns += 1000000;
		if (flags & 4)
			sl_tp_resume(tp);
		has_pending = true;
		sl_tp_poll(tp);
		if (has_pending) /* not taken (cannot happen): do not leak it */
			fake_free(&port, &pending, 1);
		has_pending = false;
		if (flags & 2)
			sl_tp_poll(tp);
		in.now_ns += 10000;
	}
	sl_tp_destroy(tp);
	return 0;
}
