/* af_packet receive-ring drops, read from the kernel (afp_ring.h). */
#include "afp_ring.h"

#include <dirent.h>
#include <stddef.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <sys/socket.h>

static int bound_ifindex(int fd)
{
	int domain = 0;
	socklen_t len = sizeof(domain);
	struct sockaddr_ll sll;
	socklen_t slen = sizeof(sll);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET)
		return -1;
	if (getsockname(fd, (struct sockaddr *)&sll, &slen) != 0 || slen < offsetof(struct sockaddr_ll, sll_addr))
		return -1;
	return sll.sll_ifindex;
}

int dp_afp_socket(int ifindex)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);

		if (*end != '\0' || end == e->d_name || fd == dirfd(d))
			continue;
		if ((found < 0 || fd < found) && bound_ifindex((int)fd) == ifindex)
			found = (int)fd;
	}
	closedir(d);
	return found;
}

uint64_t dp_afp_drops(int fd, uint64_t *total)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);

	if (fd >= 0 && bound_ifindex(fd) >= 0 &&
	    getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		*total += st.tp_drops;
	return *total;
}
