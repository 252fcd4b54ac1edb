/*
 * raw_client.h: a client that speaks abi.h to a dataplane's socket itself,
 * without libsluice (it_raw_abi.c, test_ctl_server.c).  Include after
 * cmocka.h.
 */
#ifndef SLUICE_TEST_RAW_CLIENT_H
#define SLUICE_TEST_RAW_CLIENT_H

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sluice/abi.h>
#include <sluice/sluice.h>

struct raw_client {
	int fd;
	struct sl_client_page *page;
	struct sl_spsc submit, complete;
	unsigned channels; /* the dataplane's, from HELLO */
};

static inline int ctl_send(int fd, const struct sl_ctl_msg *m, int pass_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (pass_fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static inline int ctl_call(int fd, const struct sl_ctl_msg *m, int pass_fd, struct sl_ctl_reply *r)
{
	if (ctl_send(fd, m, pass_fd) != 0)
		return -1;
	return recv(fd, r, sizeof(*r), 0) == (ssize_t)sizeof(*r) ? 0 : -1;
}

static inline int raw_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	strcpy(sa.sun_path, path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	return fd;
}

static inline int named_memfd(const char *name, size_t size, void **map)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(*map != MAP_FAILED);
	return fd;
}

/* Connect to the socket at path and attach with a fresh client page: the
 * reply (value: the client's slot). */
static inline struct sl_ctl_reply raw_hello(struct raw_client *c, const char *path)
{
	struct sl_ctl_msg m = { .type = SL_CTL_HELLO, .version = SL_ABI_VERSION };
	struct sl_ctl_reply r;
	void *map;
	int pfd = named_memfd("raw", sl_page_bytes(), &map);

	c->page = map;
	c->page->magic = SL_ABI_MAGIC;
	c->page->version = SL_ABI_VERSION;
	sl_spsc_attach(&c->submit, (void *)((uint8_t *)map + sl_page_submit_off(0)), SL_SUBMIT_SLOTS,
		       sizeof(struct sl_cmd), true);
	sl_spsc_attach(&c->complete, (void *)((uint8_t *)map + sl_page_complete_off(0)), SL_COMPLETE_SLOTS,
		       sizeof(struct sl_cpl), false);
	c->fd = raw_connect(path);
	assert_true(c->fd >= 0);
	assert_int_equal(ctl_call(c->fd, &m, pfd, &r), 0);
	close(pfd);
	return r;
}

#endif
