/*
 * comm_close.h: a communicator's destroy (comm_close.c), as coll_run.c's
 * passes and packets move it on; dp.h has dp_comm_close, the request.
 * Only the engine's thread calls these.
 */
#ifndef SLUICE_COMM_CLOSE_H
#define SLUICE_COMM_CLOSE_H

#include "dp.h"

/* comm's destroy is waiting (close_done): answer it if its calls and its
 * peers' closing words allow, else count it among those a timer looks at. */
void dp_comm_close_try(struct dp_engine *e, struct dp_comm *comm, uint64_t now);
/* A timer pass over the destroys that wait. */
void dp_comm_close_timers(struct dp_engine *e, uint64_t now);

#endif
