/*
 * fault.c: the fault engine behind memport and fault_port (see fault.h),
 * and the parser of SLUICE_FAULT specs.  A frame meets, in this order:
 * drop, corrupt (one byte flipped, never to itself), duplicate (the copy
 * carries the same flip), and reorder (held back until a few later frames
 * passed it).  The generator is only drawn for faults that are on, so a
 * spec with one fault replays the same as it always did.
 */
#include "fault.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/errmsg.h>

#include "wire.h"

#define OFF_UDP_DPORT (SL_ETH_LEN + SL_IP_LEN + 2)
#define OFF_HDR (SL_ETH_LEN + SL_IP_LEN + SL_UDP_LEN)
#define DEFAULT_SEED 1
#define MAX_REORDER SL_FAULT_HOLD

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool chance(struct sl_fault *f, double p)
{
	return p > 0 && (double)(splitmix64(&f->rng) >> 11) * 0x1.0p-53 < p;
}

void sl_fault_init(struct sl_fault *f, const struct sl_fault_spec *spec, uint64_t stream)
{
	memset(f, 0, sizeof(*f));
	f->spec = *spec;
	f->rng = spec->seed ^ (0x5bd1e995ull * stream);
}

bool sl_fault_active(const struct sl_fault_spec *s)
{
	return s->drop > 0 || s->dup > 0 || s->corrupt > 0 || (s->reorder > 0 && s->reorder_depth) ||
	       s->delay_ns > 0;
}

static bool is_sluice(const struct sl_fault_frame *fr)
{
	return fr->len > OFF_HDR + 1 && fr->data[OFF_UDP_DPORT] == (SL_UDP_PORT >> 8) &&
	       fr->data[OFF_UDP_DPORT + 1] == (SL_UDP_PORT & 0xff);
}

static bool is_data(const struct sl_fault_frame *fr)
{
	return is_sluice(fr) && fr->data[OFF_HDR + 1] == SL_T_DATA;
}

/* Flip one byte; true when the flip lies where the sluice CRC32C covers it. */
static bool corrupt(struct sl_fault *f, struct sl_fault_frame *fr)
{
	if (!fr->len)
		return false;
	bool sluice = is_sluice(fr);
	uint64_t r = splitmix64(&f->rng);
	uint32_t at = (uint32_t)(r % fr->len);

	fr->data[at] ^= (uint8_t)(1 + (r >> 32) % 255); /* never a no-op flip */
	return sluice && at >= OFF_HDR;
}

/* A frame passed the held ones: release those that waited long enough. */
static void held_tick(struct sl_fault *f, const struct sl_fault_sink *sink)
{
	for (uint32_t i = 0; i < f->n_held;) {
		if (--f->held[i].skip) {
			i++;
			continue;
		}
		sink->emit(sink->arg, f->held[i].frame);
		f->held[i] = f->held[--f->n_held];
	}
}

void sl_fault_flush(struct sl_fault *f, const struct sl_fault_sink *sink)
{
	for (uint32_t i = 0; i < f->n_held; i++)
		sink->emit(sink->arg, f->held[i].frame);
	f->n_held = 0;
}

static void count_corrupt(struct sl_fault *f, bool covered)
{
	f->count.corrupted++;
	f->count.corrupted_covered += covered;
}

void sl_fault_apply(struct sl_fault *f, struct sl_fault_frame fr, const struct sl_fault_sink *sink)
{
	const struct sl_fault_spec *s = &f->spec;
	bool flipped = false, covered = false;
	struct sl_fault_frame copy;

	f->count.frames++;
	if (chance(f, s->drop)) {
		f->count.dropped++;
		f->count.dropped_data += is_data(&fr);
		sink->discard(sink->arg, fr);
		return;
	}
	if (chance(f, s->corrupt)) {
		flipped = true;
		covered = corrupt(f, &fr);
		count_corrupt(f, covered);
	}
	if (chance(f, s->dup) && sink->copy(sink->arg, &fr, &copy)) {
		f->count.duplicated++;
		if (flipped)
			count_corrupt(f, covered);
		sink->emit(sink->arg, copy);
	}
	if (f->n_held < SL_FAULT_HOLD && s->reorder_depth && chance(f, s->reorder)) {
		uint32_t skip = 1 + (uint32_t)(splitmix64(&f->rng) % s->reorder_depth);
		f->held[f->n_held++] = (struct sl_fault_held){ fr, skip };
		f->count.reordered++;
		return;
	}
	sink->emit(sink->arg, fr);
	held_tick(f, sink);
}

/* ---- SLUICE_FAULT ---- */

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_errmsg_vformat(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int parse_prob(const char *key, const char *v, double *out, char *err, size_t errlen)
{
	char *end;

	errno = 0;
	*out = strtod(v, &end);
	if (errno || end == v || *end || !(*out >= 0 && *out <= 1))
		return fail(err, errlen, "fault spec: %s wants a probability from 0 to 1, not '%s'", key, v);
	return 0;
}

static int parse_u64(const char *v, uint64_t *out, char **end)
{
	errno = 0;
	*out = strtoull(v, end, 10);
	return errno || *end == v || *v == '-' ? -1 : 0;
}

static int parse_reorder(const char *v, struct sl_fault_spec *out, char *err, size_t errlen)
{
	uint64_t n;
	char *end;

	if (parse_u64(v, &n, &end) || *end || n < 1 || n > MAX_REORDER)
		return fail(err, errlen, "fault spec: reorder wants a depth N from 1 to 64 (frames "
			    "overtaken by 0..N-1 later ones), not '%s'", v);
	/* held with probability (N-1)/N, then overtaken by 1..N-1: 0..N-1 uniformly */
	out->reorder_depth = (uint32_t)n - 1;
	out->reorder = n > 1 ? (double)(n - 1) / (double)n : 0;
	return 0;
}

static int parse_delay(const char *v, uint64_t *out, char *err, size_t errlen)
{
	static const struct { const char *unit; uint64_t ns; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
	};
	uint64_t n;
	char *end;

	if (parse_u64(v, &n, &end) == 0) {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (strcmp(end, units[i].unit) == 0 && n <= 10 * 1000000000ull / units[i].ns) {
				*out = n * units[i].ns;
				return 0;
			}
		}
	}
	return fail(err, errlen, "fault spec: delay wants a whole number with a unit (ns, us, ms "
		    "or s), at most 10 s, such as 50us, not '%s'", v);
}

static int parse_pair(char *key, char *v, struct sl_fault_spec *out, char *err, size_t errlen)
{
	char *end;

	if (strcmp(key, "drop") == 0)
		return parse_prob(key, v, &out->drop, err, errlen);
	if (strcmp(key, "dup") == 0)
		return parse_prob(key, v, &out->dup, err, errlen);
	if (strcmp(key, "corrupt") == 0)
		return parse_prob(key, v, &out->corrupt, err, errlen);
	if (strcmp(key, "reorder") == 0)
		return parse_reorder(v, out, err, errlen);
	if (strcmp(key, "delay") == 0)
		return parse_delay(v, &out->delay_ns, err, errlen);
	if (strcmp(key, "seed") == 0) {
		if (parse_u64(v, &out->seed, &end) || *end)
			return fail(err, errlen, "fault spec: seed wants a whole number, not '%s'", v);
		return 0;
	}
	return fail(err, errlen, "fault spec: unknown key '%s' (known: drop, dup, corrupt, "
		    "reorder, delay, seed)", key);
}

int sl_fault_parse(const char *text, struct sl_fault_spec *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "drop", "dup", "corrupt", "reorder", "delay", "seed" };
	char buf[256], *save = NULL;
	unsigned seen = 0;

	memset(out, 0, sizeof(*out));
	out->seed = DEFAULT_SEED;
	if (strlen(text) >= sizeof(buf))
		return fail(err, errlen, "fault spec: longer than %zu characters: '%s'", sizeof(buf) - 1, text);
	strcpy(buf, text);
	for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':');
		if (!colon)
			return fail(err, errlen, "fault spec: '%s' is not KEY:VALUE (in '%s')", item, text);
		*colon = '\0';
		for (unsigned k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			if (strcmp(item, keys[k]) != 0)
				continue;
			if (seen & 1u << k)
				return fail(err, errlen, "fault spec: '%s' given twice in '%s'", item, text);
			seen |= 1u << k;
		}
		if (parse_pair(item, colon + 1, out, err, errlen))
			return -1;
	}
	return 0;
}
