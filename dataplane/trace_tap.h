/*
 * trace_tap.h: packet capture for sluice-trace, at the port layer.
 *
 * A trace tap is a struct sl_port wrapping a real one.  The transport sees
 * no difference; while no tracer is attached each burst costs one load and
 * one predictable branch.  While one is attached, the tap copies the first
 * bytes of every frame received or sent (headers, ACK body, optionally a
 * payload snap) with a timestamp into the engine's trace ring (include/
 * sluice/trace.h), which the tracer drains: the polling core never does I/O.
 *
 * Threads: the taps run on whoever polls the engine (one at a time); attach,
 * detach and the communicator log run on the control server's thread.
 */
#ifndef SLUICE_TRACE_TAP_H
#define SLUICE_TRACE_TAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <sluice/abi.h>

#include "port.h"

struct dp_engine;
struct dp_comm;
struct dp_trace_ring;

struct dp_trace_tap {
	struct sl_port port;      /* what the transport is given */
	struct sl_port *inner;    /* the real port */
	struct dp_trace *trace;
	uint16_t peer_node;       /* the dataplane at the other end of the link */
	uint8_t index;            /* the tap's number, as named in the trace */
};

/* One per engine; zero-initialized means no taps, nothing attached. */
struct dp_trace {
	_Atomic(struct dp_trace_ring *) ring; /* set while a tracer is attached */
	_Atomic bool busy;                     /* a tap is writing into ring */
	struct dp_trace_tap taps[SL_TRACE_MAX_PORTS];
	uint8_t ntaps;
};

/* Wrap inner (reaching peer_node) in a tap of t; returns the port to hand the
 * transport.  Never fails: with SL_TRACE_MAX_PORTS taps made it returns inner
 * itself (untraced) and says so on stderr. */
struct sl_port *dp_trace_tap(struct dp_trace *t, struct sl_port *inner, uint16_t peer_node);

/* Control thread: attach a tracer as m->t asks.  Returns the ring's memfd for
 * the reply (the caller closes it after sending), or -1 with r filled. */
int dp_trace_attach(struct dp_trace *t, const struct dp_engine *e, const struct sl_ctl_msg *m,
		    struct sl_ctl_reply *r);
/* Control thread: the tracer hung up; returns once no tap uses the ring. */
void dp_trace_detach(struct dp_trace *t);
/* Control thread: a communicator was created; tell the tracer, if any. */
void dp_trace_note_comm(struct dp_trace *t, const struct dp_comm *comm);

#endif
