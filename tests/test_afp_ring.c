/*
 * afp_ring: the af_packet socket a process bound to an interface is found
 * among its descriptors, and its receive ring's drops are summed across
 * reads (the kernel resets its count on each).  Runs in a network
 * namespace of its own, on its loopback, with a ring of 8 frames nobody
 * reads: every frame past the eighth is a drop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "afp_ring.h"

#define RING_FRAMES 8

static int lo_index;

static int ring_socket(void)
{
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	int v2 = TPACKET_V2;
	struct tpacket_req req = { .tp_block_size = 4096, .tp_block_nr = RING_FRAMES / 2,
				   .tp_frame_size = 2048, .tp_frame_nr = RING_FRAMES };
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				   .sll_ifindex = lo_index };

	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof(v2)), 0);
	assert_int_equal(setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)), 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sll, sizeof(sll)), 0);
	return fd;
}

/* n frames out of an unbound packet socket onto the loopback */
static void send_frames(unsigned n)
{
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	unsigned char frame[64] = { 0 };
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = lo_index, .sll_halen = ETH_ALEN };

	assert_true(fd >= 0);
	frame[12] = 0x88, frame[13] = 0xb5; /* IEEE local experimental ethertype */
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(sendto(fd, frame, sizeof(frame), 0, (struct sockaddr *)&to, sizeof(to)),
				 (ssize_t)sizeof(frame));
	close(fd);
}

static void test_finds_the_bound_socket(void **state)
{
	(void)state;
	int other = socket(AF_INET, SOCK_DGRAM, 0);  /* a socket of another family is passed over */
	int unbound = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	int fd = ring_socket();

	assert_int_equal(dp_afp_socket(lo_index), fd);
	assert_int_equal(dp_afp_socket(lo_index + 1000), -1);
	close(fd);
	assert_int_equal(dp_afp_socket(lo_index), -1);
	close(unbound);
	close(other);
}

static void test_drops_summed_across_reads(void **state)
{
	(void)state;
	int fd = ring_socket();
	uint64_t total = 0;

	/* the ring sees each frame on the loopback's way out and in: half a ring's worth fills it */
	send_frames(RING_FRAMES / 2);
	assert_int_equal(dp_afp_drops(fd, &total), 0);
	send_frames(4 * RING_FRAMES);
	uint64_t first = dp_afp_drops(fd, &total);
	assert_true(first >= 4 * RING_FRAMES);
	assert_int_equal(dp_afp_drops(fd, &total), first);      /* read once, not counted again */
	send_frames(RING_FRAMES);
	assert_true(dp_afp_drops(fd, &total) >= first + RING_FRAMES);
	close(fd);
	assert_int_equal(dp_afp_drops(fd, &total), total);      /* a closed descriptor adds nothing */
	assert_int_equal(dp_afp_drops(-1, &total), total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_finds_the_bound_socket),
		cmocka_unit_test(test_drops_summed_across_reads),
	};
	struct ifreq ifr = { .ifr_name = "lo" };
	int s;

	if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) {
		printf("# test_afp_ring needs root (a network namespace, packet sockets); skipped\n");
		return 77;
	}
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0 || (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr)) != 0) {
		printf("# cannot bring up the loopback of a new namespace: %s\n", strerror(errno));
		return 1;
	}
	close(s);
	lo_index = (int)if_nametoindex("lo");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
