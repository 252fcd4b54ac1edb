/*
 * dp_main.h: run a whole dataplane from sluiced-style arguments.
 */
#ifndef SLUICE_DP_MAIN_H
#define SLUICE_DP_MAIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Bring up EAL, links and engine, serve until *stop; *ready is set once the
 * attach socket listens.  0, or -1 with err saying what failed. */
int dp_main(int argc, char **argv, _Atomic bool *stop, _Atomic bool *ready, char *err, size_t len);

struct dp_engine;
/* The engine dp_main runs, while it serves; NULL otherwise. */
extern _Atomic(struct dp_engine *) dp_running_engine;

#endif
