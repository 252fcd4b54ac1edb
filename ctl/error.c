/*
 * error.c: how libsluice reports failure.  Every failing call stores one
 * sentence (what failed, where, what to do) in a thread-local buffer through
 * sl_fail() and returns a sluice_result_t; sluice_last_error() hands the
 * sentence to the application.  Also the names and sizes of datatypes.
 */
#include <stdarg.h>
#include <stdio.h>

#include <sluice/errmsg.h>

#include "internal.h"

/* A dataplane's message (SL_ERRMSG_LEN) arrives inside a sentence of
 * libsluice's ("the dataplane at <socket> refused ...: ", "collective
 * request N failed in the dataplane: "): room for both. */
_Static_assert(SL_LAST_ERROR_LEN >= SL_ERRMSG_LEN + 256, "sluice_last_error holds a dataplane message whole");
static _Thread_local char last_error[SL_LAST_ERROR_LEN];

sluice_result_t sl_fail(sluice_result_t result, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_errmsg_vformat(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	SL_LOG(SL_LOG_WARN, 0, "%s: %s", sluice_get_error_string(result), last_error);
	return result;
}

const char *sluice_last_error(void)
{
	return last_error;
}

const char *sluice_get_error_string(sluice_result_t result)
{
	static const char *const names[SLUICE_RESULT_COUNT] = {
		[SLUICE_OK] = "no error",
		[SLUICE_ERR_INVALID_ARGUMENT] = "invalid argument",
		[SLUICE_ERR_INVALID_USAGE] = "invalid usage",
		[SLUICE_ERR_SYSTEM] = "system call failed",
		[SLUICE_ERR_INTERNAL] = "internal error (a bug in sluice: please report it)",
		[SLUICE_ERR_REMOTE] = "a peer failed or aborted",
		[SLUICE_ERR_TIMEOUT] = "timed out",
		[SLUICE_ERR_MISMATCH] = "ranks called different collectives",
		[SLUICE_ERR_UNAVAILABLE] = "no dataplane to attach to",
		[SLUICE_ERR_NO_MEMORY] = "out of memory or ring slots",
		[SLUICE_IN_PROGRESS] = "in progress",
	};

	if ((unsigned)result >= SLUICE_RESULT_COUNT)
		return "unknown result code";
	return names[result];
}

static const struct {
	const char *name;
	size_t size;
} dtypes[SLUICE_DATATYPE_COUNT] = {
	[SLUICE_INT8] = {"SLUICE_INT8", 1},       [SLUICE_UINT8] = {"SLUICE_UINT8", 1},
	[SLUICE_INT32] = {"SLUICE_INT32", 4},     [SLUICE_UINT32] = {"SLUICE_UINT32", 4},
	[SLUICE_INT64] = {"SLUICE_INT64", 8},     [SLUICE_UINT64] = {"SLUICE_UINT64", 8},
	[SLUICE_FLOAT16] = {"SLUICE_FLOAT16", 2}, [SLUICE_FLOAT32] = {"SLUICE_FLOAT32", 4},
	[SLUICE_FLOAT64] = {"SLUICE_FLOAT64", 8}, [SLUICE_BFLOAT16] = {"SLUICE_BFLOAT16", 2},
	[SLUICE_FLOAT8_E4M3] = {"SLUICE_FLOAT8_E4M3", 1}, [SLUICE_FLOAT8_E5M2] = {"SLUICE_FLOAT8_E5M2", 1},
};

size_t sluice_datatype_size(sluice_datatype_t dtype)
{
	return (unsigned)dtype < SLUICE_DATATYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *sl_datatype_name(sluice_datatype_t dtype)
{
	return (unsigned)dtype < SLUICE_DATATYPE_COUNT ? dtypes[dtype].name : "an unknown datatype";
}

const char *sl_op_name(sluice_redop_t op)
{
	static const char *const names[SLUICE_REDOP_COUNT] = {
		[SLUICE_SUM] = "SLUICE_SUM", [SLUICE_PROD] = "SLUICE_PROD", [SLUICE_MAX] = "SLUICE_MAX",
		[SLUICE_MIN] = "SLUICE_MIN", [SLUICE_AVG] = "SLUICE_AVG",
	};

	return (unsigned)op < SLUICE_REDOP_COUNT ? names[op] : "an unknown op";
}
