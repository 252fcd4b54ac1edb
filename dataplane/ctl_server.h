/*
 * ctl_server.h: the attach socket that applications connect to.
 */
#ifndef SLUICE_CTL_SERVER_H
#define SLUICE_CTL_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "dp.h"

struct dp_trace;

struct dp_server_cfg {
	const char *socket_path;
	bool allow_any_user;  /* serve peers of other uids too */
	_Atomic bool *stop;   /* set to make dp_server_run return */
	struct dp_trace *trace; /* channel 0's trace taps (trace_tap.h), or NULL: none */
};

/* Serve the engines of every channel (engines[0] owns the mappings) until
 * *cfg->stop; sets *ready once listening.  0, or -1 with err. */
int dp_server_run(struct dp_engine *const *engines, unsigned nengines, const struct dp_server_cfg *cfg,
		  _Atomic bool *ready, char *err, size_t len);

/* Map len bytes of a client's file (its page, registered memory) shared,
 * the first touch bytes' pages touched; MAP_FAILED with errno. */
void *dp_map_client_file(int fd, uint64_t len, uint64_t touch);

/* Touch every page of a client's registered memory, DP_TOUCH_PIECE at a
 * time (a 6 GiB one took 25 s here); before each piece abandon(arg) may
 * say why to stop.  NULL once done, else that reason. */
#define DP_TOUCH_PIECE (16ull << 20)
const char *dp_touch_client_memory(void *p, uint64_t len, const char *(*abandon)(void *), void *arg);

#endif
