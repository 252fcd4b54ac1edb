/*
 * perf_json.h: run perf_run with -J into a temporary file and read it
 * back, for the unit tests of sluice-perf's loop (cmocka).
 */
#ifndef SLUICE_TESTS_PERF_JSON_H
#define SLUICE_TESTS_PERF_JSON_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "perf_common.h"

/* perf_run's status with o's other options as the caller set them, and
 * its -J file, rewound (the caller closes it). */
static inline FILE *perf_run_json_file(struct perf_opts *o, const struct perf_backend *b, void *send, void *recv,
				       int *rc)
{
	char json[] = "/tmp/sluice_perf_json.XXXXXX"; /* mkstemp replaces the X's */
	int fd = mkstemp(json);

	assert_true(fd >= 0);
	o->json = json;
	*rc = perf_run(o, b, send, recv);
	FILE *f = fdopen(fd, "r");
	assert_non_null(f);
	unlink(json);
	o->json = NULL;
	return f;
}

/* A run that succeeds; line gets the first JSON line. */
static inline void perf_run_json(struct perf_opts *o, const struct perf_backend *b, void *send, void *recv,
				 char *line, int len)
{
	int rc;
	FILE *f = perf_run_json_file(o, b, send, recv, &rc);

	assert_int_equal(rc, 0);
	line[0] = '\0';
	assert_non_null(fgets(line, len, f));
	fclose(f);
}

#endif
