/*
 * crc32c.h: CRC32C (Castagnoli), as in iSCSI and ext4: the trailer that
 * sluice frames carry on links without an FCS (wire.h, SL_F_CRC).
 *
 * Every byte sent and received on such a link goes through it, so it comes
 * with a variant that copies while it computes: building a frame reads the
 * payload once instead of twice (copy, then CRC).
 */
#ifndef SLUICE_CRC32C_H
#define SLUICE_CRC32C_H

#include <stdbool.h>
#include <stdint.h>

/* The CRC32C of len bytes. */
uint32_t sl_crc32c(const void *data, uint32_t len);

/* Continue a CRC over more bytes: sl_crc32c(a || b) == sl_crc32c_extend(sl_crc32c(a), b). */
uint32_t sl_crc32c_extend(uint32_t crc, const void *data, uint32_t len);

/* sl_crc32c_extend over src while copying it to dst (which must not overlap it). */
uint32_t sl_crc32c_copy(uint32_t crc, void *dst, const void *src, uint32_t len);

/* The implementations, fastest last; the best the CPU has runs unless a test
 * or benchmark forces one (false, and nothing changes, if the CPU lacks it). */
enum sl_crc32c_impl { SL_CRC32C_TABLE, SL_CRC32C_SSE42, SL_CRC32C_CLMUL512 };
bool sl_crc32c_force(enum sl_crc32c_impl impl);

#endif
