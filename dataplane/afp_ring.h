/*
 * The kernel's own count of frames an af_packet receive ring had no room
 * for.  DPDK 22.11's net_af_packet reports no such count (imissed stays 0),
 * so a veth run could not tell ring overflow from loss elsewhere; the
 * socket the driver opened is found among this process's descriptors by
 * the interface it is bound to, and asked with PACKET_STATISTICS.
 */
#ifndef SLUICE_AFP_RING_H
#define SLUICE_AFP_RING_H

#include <stdint.h>

/* The af_packet socket this process bound to interface ifindex (the lowest
 * descriptor when there are several), or -1 when there is none. */
int dp_afp_socket(int ifindex);

/* Add the frames fd's receive ring dropped since the last call to *total
 * (the kernel resets its count on every read) and return *total; 0 added
 * when fd is not an af_packet socket any more. */
uint64_t dp_afp_drops(int fd, uint64_t *total);

#endif
