/*
 * eal_intr.h: work that must not overlap EAL's interrupt thread.
 *
 * DPDK 22.11 runs every driver's control callbacks (memif's handshake and
 * its peer's disconnect) on one thread of its own, and its memif does not
 * lock what those callbacks share with stopping a port; nor does
 * rte_eal_cleanup stop that thread.  These run work on it, or wait until it
 * sleeps, so that port teardown and EAL cleanup never race it.
 */
#ifndef SLUICE_DP_EAL_INTR_H
#define SLUICE_DP_EAL_INTR_H

/*
 * Run fn(arg) on EAL's interrupt thread and return once it has returned, so
 * that it takes its turn with the drivers' callbacks.  what names the work in
 * the note printed when the thread has not run it within 10 s.  Not from the
 * interrupt thread itself (it would wait for itself).
 */
void sl_eal_on_intr_thread(void (*fn)(void *arg), void *arg, const char *what);

/*
 * Return once EAL's interrupt thread has taken in every callback registered
 * or removed so far and waits on what is left.  Before rte_eal_cleanup: 22.11's
 * memif leaves a closed server's listener registered there, its handle in
 * EAL's memory, which cleanup unmaps; the thread touches it whenever it
 * wakes (cleanup itself wakes it when an EAL alarm was ever set: we set none).
 * Registers a pipe of its own for good: once per process.
 */
void sl_eal_settle_intr_thread(void);

#endif
