/*
 * errmsg.h: a failure's sentence, formatted or copied into a fixed buffer.
 * The buffers are sized for the longest message the code makes (abi.h's
 * SL_ERRMSG_LEN); one that is cut anyway ends in "..." where it was cut, so
 * a reader sees a sentence was lost rather than one that stops mid-word.
 */
#ifndef SLUICE_ERRMSG_H
#define SLUICE_ERRMSG_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SL_ERRMSG_CUT "..."

/* vsnprintf's outcome n in buf (cap bytes): when it did not fit, end it with the mark. */
static inline void sl_errmsg_mark_cut(char *buf, size_t cap, int n)
{
	if (n >= 0 && (size_t)n >= cap && cap >= sizeof(SL_ERRMSG_CUT))
		memcpy(buf + cap - sizeof(SL_ERRMSG_CUT), SL_ERRMSG_CUT, sizeof(SL_ERRMSG_CUT));
}

static inline void sl_errmsg_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static inline void sl_errmsg_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
	sl_errmsg_mark_cut(buf, cap, vsnprintf(buf, cap, fmt, ap));
}

static inline void sl_errmsg_format(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* snprintf for a failure's sentence: every one that goes into a fixed buffer
 * is made here, by sl_errmsg_vformat or by sl_errmsg_copy, so none is cut silently. */
static inline void sl_errmsg_format(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_errmsg_vformat(buf, cap, fmt, ap);
	va_end(ap);
}

static inline void sl_errmsg_copy(char *buf, size_t cap, const char *msg)
{
	sl_errmsg_mark_cut(buf, cap, snprintf(buf, cap, "%s", msg));
}

#endif
