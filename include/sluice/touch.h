/*
 * touch.h: map memory in before the calls that use it.
 *
 * On the shared PVM guests sluice is measured on, the first access to each
 * page of a process costs 10-14 us, even after MAP_POPULATE or
 * MADV_POPULATE_WRITE (the guest kernel fills its page tables; the
 * hypervisor's own fills on the first user access).  Tables and rings that
 * calls walk through a slot at a time are touched here once, when they are
 * set up, so that no call pays for a page (perf/ALGORITHMS.md, "stalls").
 */
#ifndef SLUICE_TOUCH_H
#define SLUICE_TOUCH_H

#include <stddef.h>
#include <stdint.h>

#define SL_TOUCH_PAGE 4096u

/* Write-access every page of [p, p + len) without changing a byte: an
 * atomic OR of zero, so memory another thread or process uses is safe. */
static inline void sl_touch(void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, end = a + len;

	for (; a < end; a = (a | (SL_TOUCH_PAGE - 1)) + 1)
		__atomic_fetch_or((uint8_t *)a, 0, __ATOMIC_RELAXED);
}

#endif
