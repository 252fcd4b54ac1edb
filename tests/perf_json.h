/*
 * perf_json.h: run perf_run with -J into a temporary file and read back
 * its first line, for the unit tests of sluice-perf's loop (cmocka).
 */
#ifndef SLUICE_TESTS_PERF_JSON_H
#define SLUICE_TESTS_PERF_JSON_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "perf_common.h"

/* o's other options as the caller set them; line gets the first JSON line. */
static inline void perf_run_json(struct perf_opts *o, const struct perf_backend *b, void *send, void *recv,
				 char *line, int len)
{
	char json[] = "/tmp/sluice_perf_json.XXXXXX"; /* mkstemp replaces the X's */
	int fd = mkstemp(json);

	assert_true(fd >= 0);
	o->json = json;
	assert_int_equal(perf_run(o, b, send, recv), 0);
	FILE *f = fdopen(fd, "r");
	assert_non_null(f);
	line[0] = '\0';
	assert_non_null(fgets(line, len, f));
	fclose(f);
	unlink(json);
	o->json = NULL;
}

#endif
