/*
 * eal_delay.c: an LD_PRELOAD shim for it_slow_start.sh.  It stands in for
 * DPDK's rte_eal_init, and in the dataplane of node N (EAL's --file-prefix
 * is sluice-nN-PID) sleeps MS milliseconds first, SLUICE_TEST_EAL_DELAY
 * being "N:MS": a dataplane whose EAL starts slowly, as under load.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rte_eal_init(int argc, char **argv);

/* The loaded librte_eal's path: an embedded dataplane's libraries are
 * loaded locally (dlopen), out of RTLD_NEXT's reach. */
static int find_eal(struct dl_phdr_info *info, size_t size, void *path)
{
	(void)size;
	if (!strstr(info->dlpi_name, "librte_eal.so"))
		return 0;
	*(const char **)path = info->dlpi_name;
	return 1;
}

int rte_eal_init(int argc, char **argv)
{
	const char *spec = getenv("SLUICE_TEST_EAL_DELAY"), *path = NULL;
	int (*real)(int, char **) = NULL;
	unsigned node, ms;
	char prefix[32];
	void *lib;

	if (spec && sscanf(spec, "%u:%u", &node, &ms) == 2) {
		snprintf(prefix, sizeof(prefix), "sluice-n%u-", node);
		for (int i = 0; i < argc; i++)
			if (!strncmp(argv[i], prefix, strlen(prefix)))
				nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L }, NULL);
	}
	dl_iterate_phdr(find_eal, &path);
	if (path && (lib = dlopen(path, RTLD_LAZY | RTLD_NOLOAD)))
		*(void **)&real = dlsym(lib, "rte_eal_init");
	if (!real) {
		fprintf(stderr, "eal_delay.so: the real rte_eal_init was not found\n");
		return -1;
	}
	return real(argc, argv);
}
