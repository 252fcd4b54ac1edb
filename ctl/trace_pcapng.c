/*
 * trace_pcapng.c: writing and reading pcapng (the IETF draft "PCAP Next
 * Generation Dump File Format"), just the blocks sluice-trace needs.
 *
 * Written: a Section Header Block, one Interface Description Block per
 * dataplane port (nanosecond timestamps), an Enhanced Packet Block per frame
 * with its direction (epb_flags) and its annotations in words (opt_comment),
 * and at the end an Interface Statistics Block per port with the frames the
 * trace ring had to drop.  Host byte order throughout: the byte-order magic
 * tells readers.  Read: the same, for sluice-trace analyze.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/errmsg.h>

#include "trace_cli.h"

#define BT_SHB 0x0a0d0d0au
#define BT_IDB 1u
#define BT_ISB 5u
#define BT_EPB 6u
#define BYTE_ORDER_MAGIC 0x1a2b3c4du
#define LINKTYPE_ETHERNET 1u
#define OPT_END 0u
#define OPT_COMMENT 1u
#define SHB_USERAPPL 4u
#define IF_NAME 2u
#define IF_DESCRIPTION 3u
#define IF_TSRESOL 9u
#define EPB_FLAGS 2u
#define ISB_IFRECV 4u
#define ISB_IFDROP 5u
#define EPB_INBOUND 1u
#define EPB_OUTBOUND 2u
#define MAX_BLOCK (1u << 20)

static uint32_t pad4(uint32_t n)
{
	return (n + 3) & ~3u;
}

/* Bytes an option of len bytes takes. */
static uint32_t opt_size(uint32_t len)
{
	return 4 + pad4(len);
}

static int put(FILE *f, const void *p, size_t n)
{
	static const uint8_t zeros[4];

	if (fwrite(p ? p : zeros, 1, n, f) != n)
		return -1;
	return 0;
}

static int put32(FILE *f, uint32_t v)
{
	return put(f, &v, 4);
}

static int put_opt(FILE *f, uint16_t code, const void *val, uint32_t len)
{
	uint16_t h[2] = { code, (uint16_t)len };

	if (put(f, h, 4) || put(f, val, len))
		return -1;
	return len % 4 ? put(f, NULL, 4 - len % 4) : 0;
}

static uint32_t str_opt_len(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0xfff0 ? 0xfff0 : (uint32_t)n;
}

int tr_pcapng_header(FILE *f, const struct tr_pcapng_if *ifs, unsigned nifs)
{
	static const char app[] = "sluice-trace";
	uint32_t total = 28 + opt_size(sizeof(app) - 1) + 4;
	uint16_t version[2] = { 1, 0 };
	int64_t section_len = -1;
	int rc = put32(f, BT_SHB) | put32(f, total) | put32(f, BYTE_ORDER_MAGIC) | put(f, version, 4) |
		 put(f, &section_len, 8) | put_opt(f, SHB_USERAPPL, app, sizeof(app) - 1) |
		 put_opt(f, OPT_END, NULL, 0) | put32(f, total);

	for (unsigned i = 0; i < nifs && rc == 0; i++) {
		uint8_t tsresol = 9; /* 10^-9 s */
		uint32_t nl = str_opt_len(ifs[i].name), dl = str_opt_len(ifs[i].description);
		uint16_t link[2] = { LINKTYPE_ETHERNET, 0 };
		total = 20 + opt_size(nl) + opt_size(dl) + opt_size(1) + 4;
		rc = put32(f, BT_IDB) | put32(f, total) | put(f, link, 4) | put32(f, ifs[i].snaplen) |
		     put_opt(f, IF_NAME, ifs[i].name, nl) | put_opt(f, IF_DESCRIPTION, ifs[i].description, dl) |
		     put_opt(f, IF_TSRESOL, &tsresol, 1) | put_opt(f, OPT_END, NULL, 0) | put32(f, total);
	}
	return rc ? -1 : 0;
}

int tr_pcapng_packet(FILE *f, uint32_t ifid, uint64_t ts_ns, const uint8_t *data, uint32_t caplen,
		     uint32_t len, bool outbound, const char *comment)
{
	uint32_t cl = str_opt_len(comment), flags = outbound ? EPB_OUTBOUND : EPB_INBOUND;
	uint32_t total = 28 + pad4(caplen) + (cl ? opt_size(cl) : 0) + opt_size(4) + 4 + 4;
	int rc = put32(f, BT_EPB) | put32(f, total) | put32(f, ifid) | put32(f, (uint32_t)(ts_ns >> 32)) |
		 put32(f, (uint32_t)ts_ns) | put32(f, caplen) | put32(f, len) | put(f, data, caplen) |
		 (caplen % 4 ? put(f, NULL, 4 - caplen % 4) : 0) | (cl ? put_opt(f, OPT_COMMENT, comment, cl) : 0) |
		 put_opt(f, EPB_FLAGS, &flags, 4) | put_opt(f, OPT_END, NULL, 0) | put32(f, total);

	return rc ? -1 : 0;
}

int tr_pcapng_stats(FILE *f, uint32_t ifid, uint64_t ts_ns, uint64_t received, uint64_t dropped,
		    const char *comment)
{
	uint32_t cl = str_opt_len(comment);
	uint32_t total = 20 + 2 * opt_size(8) + (cl ? opt_size(cl) : 0) + 4 + 4;
	int rc = put32(f, BT_ISB) | put32(f, total) | put32(f, ifid) | put32(f, (uint32_t)(ts_ns >> 32)) |
		 put32(f, (uint32_t)ts_ns) | (cl ? put_opt(f, OPT_COMMENT, comment, cl) : 0) |
		 put_opt(f, ISB_IFRECV, &received, 8) | put_opt(f, ISB_IFDROP, &dropped, 8) |
		 put_opt(f, OPT_END, NULL, 0) | put32(f, total);

	return rc ? -1 : 0;
}

/* ---- reading ---- */

struct tr_pcapng_reader {
	FILE *f;
	const char *path;
	uint8_t *block;
	bool swap;                /* the section was written in the other byte order */
	uint32_t nifs;
	uint64_t ts_div[TR_MAX_IFS]; /* divide raw timestamps by this... */
	uint64_t ts_mul[TR_MAX_IFS]; /* ...and multiply by this for nanoseconds */
};

static uint32_t rd32(const struct tr_pcapng_reader *r, const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return r->swap ? __builtin_bswap32(v) : v;
}

static uint16_t rd16(const struct tr_pcapng_reader *r, const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return r->swap ? __builtin_bswap16(v) : v;
}

struct tr_pcapng_reader *tr_pcapng_open(const char *path, char *err, size_t errlen)
{
	struct tr_pcapng_reader *r = calloc(1, sizeof(*r));

	if (!r || !(r->block = malloc(MAX_BLOCK))) {
		free(r);
		sl_errmsg_format(err, errlen, "out of memory");
		return NULL;
	}
	r->path = path;
	r->f = fopen(path, "rb");
	if (!r->f) {
		sl_errmsg_format(err, errlen, "cannot open %s: %s", path, strerror(errno));
		tr_pcapng_close(r);
		return NULL;
	}
	return r;
}

void tr_pcapng_close(struct tr_pcapng_reader *r)
{
	if (!r)
		return;
	if (r->f)
		fclose(r->f);
	free(r->block);
	free(r);
}

/* Walk a block's options from opt to end, calling back for each. */
static void options(const struct tr_pcapng_reader *r, const uint8_t *opt, const uint8_t *end,
		    void (*fn)(const struct tr_pcapng_reader *, uint16_t, const uint8_t *, uint16_t, void *), void *arg)
{
	while (opt + 4 <= end) {
		uint16_t code = rd16(r, opt), len = rd16(r, opt + 2);
		if (code == OPT_END || opt + 4 + len > end)
			return;
		fn(r, code, opt + 4, len, arg);
		opt += 4 + pad4(len);
	}
}

static void idb_opt(const struct tr_pcapng_reader *r, uint16_t code, const uint8_t *v, uint16_t len, void *arg)
{
	uint8_t *tsresol = arg;

	(void)r;
	if (code == IF_TSRESOL && len >= 1)
		*tsresol = v[0];
}

static void epb_opt(const struct tr_pcapng_reader *r, uint16_t code, const uint8_t *v, uint16_t len, void *arg)
{
	struct tr_pcapng_pkt *p = arg;

	if (code == OPT_COMMENT) {
		size_t n = len < TR_NOTE_LEN - 1 ? len : TR_NOTE_LEN - 1;
		memcpy(p->comment, v, n);
		p->comment[n] = '\0';
	} else if (code == EPB_FLAGS && len == 4) {
		uint32_t fl = rd32(r, v);
		p->dir = (int)(fl & 3);
	}
}

/* Record interface ifid's timestamp unit (10^-n s, or 2^-n with the high bit). */
static void add_interface(struct tr_pcapng_reader *r, const uint8_t *b, uint32_t total)
{
	uint8_t tsresol = 6;

	options(r, b + 16, b + total - 4, idb_opt, &tsresol);
	if (r->nifs == TR_MAX_IFS)
		return; /* more than sluice writes: their packets are refused, saying so */
	uint64_t unit = 1;
	if (tsresol & 0x80) {
		r->ts_mul[r->nifs] = 1000000000ull;
		r->ts_div[r->nifs] = 1ull << (tsresol & 0x3f);
		r->nifs++;
		return;
	}
	for (unsigned i = 0; i < (tsresol > 9 ? tsresol - 9u : 9u - tsresol); i++)
		unit *= 10;
	r->ts_mul[r->nifs] = tsresol <= 9 ? unit : 1;
	r->ts_div[r->nifs] = tsresol <= 9 ? 1 : unit;
	r->nifs++;
}

static int read_block(struct tr_pcapng_reader *r, uint32_t *type, uint32_t *total, char *err, size_t errlen)
{
	uint8_t h[8];
	size_t got = fread(h, 1, 8, r->f);

	if (got == 0)
		return 0;
	memcpy(type, h, 4);
	if (got == 8 && *type == BT_SHB) {
		uint32_t magic;
		if (fread(h, 1, 4, r->f) != 4)
			got = 0;
		memcpy(&magic, h, 4);
		r->swap = magic != BYTE_ORDER_MAGIC;
		r->nifs = 0; /* a new section starts its own interfaces */
		fseek(r->f, -4, SEEK_CUR);
	}
	memcpy(total, h + 4, 4);
	*total = r->swap ? __builtin_bswap32(*total) : *total;
	if (got != 8 || *total < 12 || *total > MAX_BLOCK || *total % 4 ||
	    fread(r->block + 8, 1, *total - 8, r->f) != *total - 8) {
		sl_errmsg_format(err, errlen, "%s: a truncated or damaged pcapng block", r->path);
		return -1;
	}
	*type = r->swap ? __builtin_bswap32(*type) : *type;
	return 1;
}

int tr_pcapng_next(struct tr_pcapng_reader *r, struct tr_pcapng_pkt *p, char *err, size_t errlen)
{
	uint32_t type, total;
	int rc;

	while ((rc = read_block(r, &type, &total, err, errlen)) == 1) {
		const uint8_t *b = r->block;
		if (type == BT_IDB && total >= 20) {
			add_interface(r, b, total);
			continue;
		}
		if (type != BT_EPB || total < 32)
			continue;
		memset(p, 0, sizeof(*p));
		p->ifid = rd32(r, b + 8);
		uint64_t raw = (uint64_t)rd32(r, b + 12) << 32 | rd32(r, b + 16);
		p->caplen = rd32(r, b + 20);
		p->len = rd32(r, b + 24);
		if (p->ifid >= r->nifs || 28 + (uint64_t)pad4(p->caplen) + 4 > total) {
			sl_errmsg_format(err, errlen, "%s: a packet names interface %u of %u or overruns its block", r->path,
					 p->ifid, r->nifs);
			return -1;
		}
		p->ts_ns = raw / r->ts_div[p->ifid] * r->ts_mul[p->ifid];
		p->data = b + 28;
		options(r, b + 28 + pad4(p->caplen), b + total - 4, epb_opt, p);
		return 1;
	}
	return rc;
}
