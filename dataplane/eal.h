/*
 * eal.h: bringing up DPDK's EAL for one sluice dataplane.
 *
 * EAL is configured by an argv, once per process, and its defaults are wrong
 * for us (it probes the VM's own PCI NIC, wants hugepages, and two processes
 * with the default prefix collide).  This builds the argv from a small struct,
 * picks hugepages or --no-huge from what the machine really has free, and
 * says which lcore the engine is to be launched on.
 */
#ifndef SLUICE_DP_EAL_H
#define SLUICE_DP_EAL_H

#include <stdbool.h>
#include <stddef.h>

#include "sluice/abi.h"

/* One engine lcore per channel. */
#define SL_EAL_MAX_ENGINES SL_MAX_CHANNELS

struct sl_eal_cfg {
	const char *prefix;       /* distinct file prefix per instance, e.g. "sluice-n0-<pid>" */
	int engine_cpu;           /* CPU for the first engine lcore (the next ones follow), -1 = any */
	unsigned engines;         /* engine lcores, 1 to SL_EAL_MAX_ENGINES (0: 1) */
	unsigned mem_mb;          /* memory for --no-huge runs and the zero-copy layout (0: 512) */
	bool huge;                /* use hugepages if reserved and free, else --no-huge */
	bool zero_copy;           /* with hugepages, lay memory out for memif zero-copy */
	unsigned links;           /* ports the dataplane will open (sizes the zero-copy fd gap) */
	const char *log_level;    /* e.g. "*:error"; NULL: "*:error" */
	const char *const *vdevs; /* NULL-terminated list of --vdev strings (may be NULL) */
};

/*
 * Start EAL.  May be called from any thread (embedded mode runs it on a
 * thread the application made); that thread becomes EAL's main lcore and must
 * be the one that later calls rte_eal_remote_launch() for *engine_lcore (the
 * first engine's; engine c runs on *engine_lcore + c).
 * Once per process: EAL cannot be started again after sl_eal_stop().
 * Returns 0, or -1 with a message in err.
 */
int sl_eal_start(const struct sl_eal_cfg *cfg, unsigned *engine_lcore, char *err, size_t errlen);

/* Whether EAL runs on hugepages. */
bool sl_eal_huge(void);

/* Whether EAL runs with hugepages in the zero-copy layout (cfg.zero_copy was honoured). */
bool sl_eal_zero_copy(void);

/*
 * Before a memif zero-copy client starts: make sure EAL's hugepage files are
 * open under the numbers EAL (and memif, which reads them from EAL) uses;
 * 22.11's memif closes them when a zero-copy client connects.  0, or -1 with
 * a message in err when a number was taken by another file meanwhile (then
 * start no further zero-copy client).  Control path only.
 */
int sl_eal_restore_mem_fds(char *err, size_t errlen);

/*
 * Remove the runtime directories under root (EAL's parent of
 * <root>/<prefix>) that dataplanes killed before sl_eal_stop() left: those
 * named "sluice-...-<pid>" whose pid is gone and whose EAL config file no
 * process holds locked (a primary in another pid namespace).  Others stay.
 * sl_eal_start() reaps the default root itself.  Returns how many went.
 */
unsigned sl_eal_reap(const char *root);

/* Release EAL's resources and its runtime directory.  Ports must be closed first. */
void sl_eal_stop(void);

/* A failure's sentence into err (if any), cut visibly (errmsg.h): the dataplane's one way to say what failed. */
void sl_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
