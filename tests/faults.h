/*
 * faults.h: the page faults the kernel counted, for tests that check a path
 * faults no page in (on the PVM guests sluice runs on, a page's first access
 * costs 10-14 us).  Include after cmocka.h.
 */
#ifndef SLUICE_TEST_FAULTS_H
#define SLUICE_TEST_FAULTS_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* who: RUSAGE_THREAD (this thread's) or RUSAGE_SELF (the process's) */
static inline long page_faults(int who)
{
	struct rusage ru;

	assert_int_equal(getrusage(who, &ru), 0);
	return ru.ru_minflt + ru.ru_majflt;
}

/* How many of the pages wholly inside [p, p + len) are resident (mincore:
 * a shared file's pages count whichever process faulted them in). */
static inline size_t resident_pages(const void *p, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = ((uintptr_t)p + page - 1) & ~(page - 1), to = ((uintptr_t)p + len) & ~(page - 1);
	size_t n = to > from ? (to - from) / page : 0, resident = 0;
	unsigned char *in = malloc(n + 1);

	assert_non_null(in);
	assert_int_equal(mincore((void *)from, to - from, in), 0);
	for (size_t i = 0; i < n; i++)
		resident += in[i] & 1;
	free(in);
	return resident;
}

#endif
