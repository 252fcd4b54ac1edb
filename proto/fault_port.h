/*
 * fault_port.h: a port that wraps any other port and puts seeded,
 * replayable faults (fault.h: drop, duplicate, corrupt, reorder, delay) on
 * the frames sent through it, to rehearse a bad network on a good one.
 * Receiving passes straight through.  Like the port it wraps, it is polled
 * from one thread.
 */
#ifndef SLUICE_FAULT_PORT_H
#define SLUICE_FAULT_PORT_H

#include "fault.h"
#include "port.h"

/*
 * Wrap inner: the result sends through inner, faults applied, and owns it
 * (closing the result closes inner).  stream tells apart the generators of
 * ports that share spec's seed.  clock times delays and releases frames held
 * back on an idle link.  NULL when out of memory.
 */
struct sl_port *sl_fault_port_wrap(struct sl_port *inner, const struct sl_fault_spec *spec,
				   uint64_t stream, const struct sl_clock *clock);
/* What a port from sl_fault_port_wrap injected so far. */
const struct sl_fault_counters *sl_fault_port_counters(const struct sl_port *port);

#endif
