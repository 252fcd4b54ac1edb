/*
 * config.c: the SLUICE_* environment variables (and the launchers' own ones
 * that stand in for them), each checked with an error that names the
 * variable and the values it accepts, plus the SLUICE_DEBUG logger that
 * prints "sluice <host>:<pid> [rank] LEVEL SUBSYS message" on stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sluice/errmsg.h>

#include "internal.h"

/* ---- parsing ---- */

/* name's value as an integer in [min, max]; *set is false (and *out untouched) when unset. */
static sluice_result_t env_long(const char *name, long min, long max, const char *meaning, long *out,
				bool *set)
{
	const char *s = getenv(name);
	char *end;
	long v;

	*set = s != NULL;
	if (!s)
		return SLUICE_OK;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "%s=\"%s\" is not valid: expected %s, a whole number from %ld to %ld", name, s,
			       meaning, min, max);
	*out = v;
	return SLUICE_OK;
}

sluice_result_t sl_config_timeout(int *seconds)
{
	long v = SL_TIMEOUT_DEFAULT;
	bool set;
	sluice_result_t res = env_long("SLUICE_TIMEOUT", 1, SL_TIMEOUT_MAX, "seconds", &v, &set);

	*seconds = (int)v;
	return res;
}

static sluice_result_t config_socket(struct sl_config *cfg)
{
	const char *s = getenv("SLUICE_SOCKET");

	if (!s)
		s = SL_SOCKET_DEFAULT;
	if (*s == '\0' || strlen(s) >= sizeof(cfg->socket))
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "SLUICE_SOCKET=\"%s\" is not valid: expected the path of the dataplane's unix "
			       "socket, 1 to %zu characters (default %s)",
			       s, sizeof(cfg->socket) - 1, SL_SOCKET_DEFAULT);
	strcpy(cfg->socket, s);
	return SLUICE_OK;
}

/* A 0/1 switch in the environment: unset or empty is 0; anything else is an
 * error that says what each value means. */
static sluice_result_t env_switch(const char *name, bool *on, const char *means1, const char *means0)
{
	const char *s = getenv(name);

	*on = s && strcmp(s, "1") == 0;
	if (s && *s && strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s=\"%s\" is not valid: expected 1 (%s) or 0 (%s)", name,
			       s, means1, means0);
	return SLUICE_OK;
}

static sluice_result_t config_embedded(struct sl_config *cfg)
{
	sluice_result_t r;

	if ((r = env_switch("SLUICE_EMBEDDED", &cfg->embedded, "run the engine on threads of this process",
			    "attach to a running sluiced")) != SLUICE_OK ||
	    (r = env_switch("SLUICE_BUSY_POLL", &cfg->busy_poll, "the dataplane's engine and an embedded wait "
			    "never sleep: for dedicated cores", "spin, then sleep until woken")) != SLUICE_OK ||
	    (r = env_switch("SLUICE_YIELD", &cfg->yield, "ranks share cores: waits give the core away at once",
			    "spin, then sleep until woken")) != SLUICE_OK)
		return r;
	cfg->embedded_args = getenv("SLUICE_EMBEDDED_ARGS") ? getenv("SLUICE_EMBEDDED_ARGS") : "";
	cfg->dp_lib = getenv("SLUICE_DP_LIB");
	if (cfg->dp_lib && *cfg->dp_lib == '\0')
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "SLUICE_DP_LIB is set but empty: expected the path of libsluice_dp.so, or "
			       "leave it unset for the default");
	return SLUICE_OK;
}

/* ---- SLUICE_DEBUG and SLUICE_DEBUG_SUBSYS ---- */

static const char *const level_names[] = {
	[SL_LOG_NONE] = "NONE", [SL_LOG_WARN] = "WARN", [SL_LOG_INFO] = "INFO", [SL_LOG_TRACE] = "TRACE"};

static const struct {
	const char *name;
	unsigned bit;
} subsys_names[] = {
	{"INIT", SL_SUB_INIT}, {"ENV", SL_SUB_ENV},   {"MEM", SL_SUB_MEM},
	{"BOOT", SL_SUB_BOOT}, {"COMM", SL_SUB_COMM}, {"COLL", SL_SUB_COLL}, {"TUNING", SL_SUB_TUNING},
};
#define SUBSYS_COUNT (sizeof(subsys_names) / sizeof(subsys_names[0]))
#define SUBSYS_ALL ((1u << SUBSYS_COUNT) - 1)

static bool parse_level(const char *s, enum sl_log_level *level)
{
	*level = SL_LOG_NONE;
	if (!s || *s == '\0')
		return true;
	for (int l = SL_LOG_WARN; l <= SL_LOG_TRACE; l++) {
		if (strcasecmp(s, level_names[l]) == 0) {
			*level = (enum sl_log_level)l;
			return true;
		}
	}
	return false;
}

/* A comma-separated list of subsystem names or ALL; on failure bad holds the first unknown name. */
static bool parse_subsys(const char *s, unsigned *mask, char *bad, size_t bad_len)
{
	*mask = SUBSYS_ALL;
	if (!s || *s == '\0')
		return true;
	*mask = 0;
	while (*s) {
		size_t n = strcspn(s, ",");
		bool known = n == 3 && strncasecmp(s, "ALL", 3) == 0;

		if (known)
			*mask |= SUBSYS_ALL;
		for (size_t i = 0; i < SUBSYS_COUNT && !known; i++) {
			if (strlen(subsys_names[i].name) == n && strncasecmp(s, subsys_names[i].name, n) == 0) {
				*mask |= subsys_names[i].bit;
				known = true;
			}
		}
		if (!known) {
			snprintf(bad, bad_len, "%.*s", (int)n, s);
			return false;
		}
		s += n + (s[n] == ',');
	}
	return true;
}

static sluice_result_t config_debug(void)
{
	const char *level_s = getenv("SLUICE_DEBUG");
	const char *subsys_s = getenv("SLUICE_DEBUG_SUBSYS");
	enum sl_log_level level;
	unsigned mask;
	char bad[32];

	if (!parse_level(level_s, &level))
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "SLUICE_DEBUG=\"%s\" is not valid: expected WARN, INFO or TRACE", level_s);
	if (!parse_subsys(subsys_s, &mask, bad, sizeof(bad))) {
		char names[96] = "";
		for (size_t i = 0; i < SUBSYS_COUNT; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s, ", subsys_names[i].name);
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "SLUICE_DEBUG_SUBSYS=\"%s\" names an unknown subsystem \"%s\": expected a "
			       "comma-separated list of %sor ALL", subsys_s, bad, names);
	}
	return SLUICE_OK;
}

sluice_result_t sl_config_load(struct sl_config *cfg)
{
	sluice_result_t res;

	memset(cfg, 0, sizeof(*cfg));
	if ((res = config_debug()) != SLUICE_OK || (res = config_socket(cfg)) != SLUICE_OK ||
	    (res = config_embedded(cfg)) != SLUICE_OK || (res = sl_config_timeout(&cfg->timeout_s)) != SLUICE_OK)
		return res;
	SL_INFO(SL_SUB_ENV, "socket %s, embedded %d, timeout %d s", cfg->socket, cfg->embedded,
		cfg->timeout_s);
	return SLUICE_OK;
}

/* ---- rank, world size and root ---- */

/* Where launchers put rank and world size, in the order they are tried. */
static const struct {
	const char *rank, *size;
} launcher_vars[] = {
	{"SLUICE_RANK", "SLUICE_WORLD_SIZE"},
	{"RANK", "WORLD_SIZE"},                                 /* torchrun */
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},       /* Open MPI */
	{"PMI_RANK", "PMI_SIZE"},                               /* MPICH, Intel MPI */
	{"SLURM_PROCID", "SLURM_NTASKS"},                       /* srun */
};
#define LAUNCHER_COUNT (sizeof(launcher_vars) / sizeof(launcher_vars[0]))

/* The first of the launchers' variables (rank or size) that is set; *from names it. */
static sluice_result_t first_set(bool want_rank, long *out, const char **from)
{
	for (size_t i = 0; i < LAUNCHER_COUNT; i++) {
		const char *name = want_rank ? launcher_vars[i].rank : launcher_vars[i].size;
		bool set;
		sluice_result_t res = want_rank
			? env_long(name, 0, SL_MAX_RANKS - 1, "this process's rank", out, &set)
			: env_long(name, 1, SL_MAX_RANKS, "the number of ranks", out, &set);

		if (res != SLUICE_OK || set) {
			*from = name;
			return res;
		}
	}
	*from = NULL;
	return SLUICE_OK;
}

sluice_result_t sl_config_rank_world(int *rank, int *nranks)
{
	const char *rank_from, *size_from;
	long r = 0, n = 0;
	sluice_result_t res;

	if ((res = first_set(true, &r, &rank_from)) != SLUICE_OK ||
	    (res = first_set(false, &n, &size_from)) != SLUICE_OK)
		return res;
	if (!rank_from || !size_from)
		return sl_fail(SLUICE_ERR_INVALID_USAGE,
			       "no %s for this process: set SLUICE_RANK and SLUICE_WORLD_SIZE, or start it "
			       "with torchrun, mpirun or srun, whose variables sluice reads",
			       rank_from ? "world size" : "rank");
	if (r >= n)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "rank %ld (from %s) is not below the world size %ld (from %s): ranks run from "
			       "0 to world size - 1",
			       r, rank_from, n, size_from);
	*rank = (int)r;
	*nranks = (int)n;
	SL_INFO(SL_SUB_ENV, "rank %d of %d (from %s and %s)", *rank, *nranks, rank_from, size_from);
	return SLUICE_OK;
}

sluice_result_t sl_config_root(char *root, size_t len)
{
	const char *s = getenv("SLUICE_ROOT");
	const char *addr = getenv("MASTER_ADDR");
	const char *port = getenv("MASTER_PORT");
	int n;

	if (s)
		n = snprintf(root, len, "%s", s);
	else if (addr && port)
		n = snprintf(root, len, "%s:%s", addr, port);
	else if (addr || port)
		return sl_fail(SLUICE_ERR_INVALID_USAGE,
			       "%s is set but %s is not: set both, or SLUICE_ROOT=host:port",
			       addr ? "MASTER_ADDR" : "MASTER_PORT", addr ? "MASTER_PORT" : "MASTER_ADDR");
	else
		return sl_fail(SLUICE_ERR_INVALID_USAGE,
			       "no rendezvous address: set SLUICE_ROOT=host:port (where rank 0 listens), or "
			       "MASTER_ADDR and MASTER_PORT, or pass root to sluice_comm_init");
	if (n < 0 || (size_t)n >= len)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "the rendezvous address \"%s\" is longer than %zu characters: use a shorter "
			       "host name or an IPv4 address",
			       root, len - 1);
	return SLUICE_OK;
}

sluice_result_t sl_parse_hostport(const char *spec, const char *source, char *host, size_t host_len,
				  uint16_t *port)
{
	const char *colon = strrchr(spec, ':');
	char *end;
	long p;

	if (!colon || colon == spec || (size_t)(colon - spec) >= host_len)
		goto bad;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || p < 1 || p > 65535)
		goto bad;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	*port = (uint16_t)p;
	return SLUICE_OK;
bad:
	return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
		       "%s \"%s\" is not host:port: expected a host name or IPv4 address and a port from "
		       "1 to 65535, e.g. node0:29500 or 10.0.0.1:29500",
		       source, spec);
}

/* ---- logging ---- */

static struct {
	pthread_once_t once;
	enum sl_log_level level;
	unsigned mask;
	char host[64];
	_Atomic int rank;
} logger = {.once = PTHREAD_ONCE_INIT, .rank = -1};

/* Bad values are reported by sluice_init; here they simply leave logging off.
 * SLUICE_DEBUG_SUBSYS without SLUICE_DEBUG asks for those subsystems' INFO
 * lines (SLUICE_DEBUG_SUBSYS=TUNING logs the planner's choices): naming a
 * subsystem and getting nothing helps nobody. */
static void log_init(void)
{
	const char *subsys = getenv("SLUICE_DEBUG_SUBSYS"), *level = getenv("SLUICE_DEBUG");
	char bad[32];
	bool subsys_ok = parse_subsys(subsys, &logger.mask, bad, sizeof(bad));

	if (!subsys_ok)
		logger.mask = SUBSYS_ALL;
	if (!parse_level(level, &logger.level))
		logger.level = SL_LOG_NONE;
	else if ((!level || !*level) && subsys && *subsys && subsys_ok)
		logger.level = SL_LOG_INFO;
	if (gethostname(logger.host, sizeof(logger.host)) != 0)
		strcpy(logger.host, "?");
	logger.host[sizeof(logger.host) - 1] = '\0';
}

bool sl_log_on(enum sl_log_level level, unsigned subsys)
{
	pthread_once(&logger.once, log_init);
	return level <= logger.level && (level == SL_LOG_WARN || (subsys & logger.mask) != 0);
}

void sl_log_set_rank(int rank)
{
	logger.rank = rank;
}

static const char *subsys_name(unsigned subsys)
{
	for (size_t i = 0; i < SUBSYS_COUNT; i++)
		if (subsys_names[i].bit == subsys)
			return subsys_names[i].name;
	return "-";
}

void sl_log(enum sl_log_level level, unsigned subsys, const char *fmt, ...)
{
	char line[SL_LAST_ERROR_LEN + 256]; /* sl_fail logs sluice_last_error whole, after its prefix */
	char rank[16] = "-";
	int n;
	va_list ap;

	if (logger.rank >= 0)
		snprintf(rank, sizeof(rank), "%d", logger.rank);
	n = snprintf(line, sizeof(line), "sluice %s:%d [%s] %s %s ", logger.host, (int)getpid(), rank,
		     level_names[level], subsys_name(subsys));
	va_start(ap, fmt);
	sl_errmsg_vformat(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}
