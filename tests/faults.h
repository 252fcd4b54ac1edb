/*
 * faults.h: the page faults the kernel counted, for tests that check a path
 * faults no page in (on the PVM guests sluice runs on, a page's first access
 * costs 10-14 us).  Include after cmocka.h.
 */
#ifndef SLUICE_TEST_FAULTS_H
#define SLUICE_TEST_FAULTS_H

#include <sys/resource.h>

/* who: RUSAGE_THREAD (this thread's) or RUSAGE_SELF (the process's) */
static inline long page_faults(int who)
{
	struct rusage ru;

	assert_int_equal(getrusage(who, &ru), 0);
	return ru.ru_minflt + ru.ru_majflt;
}

#endif
