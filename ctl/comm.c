/*
 * comm.c: communicators.  sluice_comm_init asks this process's dataplane
 * for its node id, meets the other ranks through the bootstrap to agree on
 * a key and learn every rank's node, has the dataplane create the
 * communicator, and ends with a barrier so that no rank posts data before
 * every dataplane knows the communicator.  Then, unless configured not to,
 * the ranks measure their links for the planner (link_probe.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

#include <sluice/errmsg.h>

#include "internal.h"

static sluice_result_t comm_check_args(sluice_ctx_t *ctx, int nranks, int rank, sluice_comm_t **comm)
{
	if (!ctx || !comm)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "sluice_comm_init: ctx (%p) and comm (%p) must not be NULL", (void *)ctx,
			       (void *)comm);
	if (nranks < 1 || nranks > (int)SL_MAX_RANKS)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "sluice_comm_init: nranks %d is out of range: expected 1 to %u", nranks,
			       SL_MAX_RANKS);
	if (rank < 0 || rank >= nranks)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "sluice_comm_init: rank %d is out of range for %d ranks: expected 0 to %d", rank,
			       nranks, nranks - 1);
	return SLUICE_OK;
}

static sluice_result_t dataplane_node(struct sluice_ctx *ctx, uint32_t *node)
{
	struct sl_ctl_msg msg = {.type = SL_CTL_INFO};
	struct sl_ctl_reply reply;
	sluice_result_t res = sl_ctl_call(ctx, &msg, -1, &reply);

	*node = reply.node;
	return res;
}

static sluice_result_t comm_create(struct sluice_comm *c, const struct sl_boot *b)
{
	struct sl_ctl_msg msg = {.type = SL_CTL_COMM_CREATE};
	struct sl_ctl_reply reply;
	sluice_result_t res;

	msg.c.key = c->key;
	msg.c.rank = (uint32_t)c->rank;
	msg.c.nranks = (uint32_t)c->nranks;
	msg.c.timeout_ms = (uint32_t)c->ctx->cfg.timeout_s * 1000; /* the dataplane times out calls with this wait's */
	for (int r = 0; r < c->nranks; r++)
		msg.c.node[r] = b->node[r];
	res = sl_ctl_call(c->ctx, &msg, -1, &reply);
	c->handle = reply.value;
	return res;
}

static sluice_result_t comm_destroy_call(struct sluice_comm *c)
{
	struct sl_ctl_msg msg = {.type = SL_CTL_COMM_DESTROY};
	struct sl_ctl_reply reply;

	msg.a.comm = c->handle;
	return sl_ctl_call(c->ctx, &msg, -1, &reply);
}

/* host and port of the rendezvous: the root argument, else the environment's. */
static sluice_result_t root_address(const char *root, char *host, size_t host_len, uint16_t *port)
{
	char env[SL_HOST_MAX + 8];
	sluice_result_t res;

	if (root)
		return sl_parse_hostport(root, "sluice_comm_init's root", host, host_len, port);
	if ((res = sl_config_root(env, sizeof(env))) != SLUICE_OK)
		return res;
	return sl_parse_hostport(env, getenv("SLUICE_ROOT") ? "SLUICE_ROOT" : "MASTER_ADDR:MASTER_PORT",
				 host, host_len, port);
}

/* A rank alone needs no rendezvous. */
static sluice_result_t comm_alone(struct sluice_comm *c, uint32_t node)
{
	struct sl_boot b = {.node = {node}};

	c->channels = c->ctx->nch;
	if (getrandom(&c->key, sizeof(c->key), 0) != sizeof(c->key))
		c->key = (uint64_t)sl_now_ns();
	return comm_create(c, &b);
}

/* Rendezvous, create, wait until every rank has created it, measure the
 * links (or undo it). */
static sluice_result_t comm_join(struct sluice_comm *c, const char *root)
{
	char host[SL_HOST_MAX], why[SL_LAST_ERROR_LEN];
	struct sl_boot b;
	uint16_t port;
	uint32_t node;
	sluice_result_t res, created;

	if ((res = dataplane_node(c->ctx, &node)) != SLUICE_OK)
		return res;
	if (c->nranks == 1)
		return comm_alone(c, node);
	if ((res = root_address(root, host, sizeof(host), &port)) != SLUICE_OK ||
	    (res = sl_boot_exchange(&b, host, port, c->rank, c->nranks, node, c->ctx->nch,
				    c->ctx->cfg.timeout_s)) != SLUICE_OK)
		return res;
	c->key = b.key;
	c->channels = b.channels;
	created = comm_create(c, &b);
	res = sl_boot_barrier(&b, created);
	/* every rank ends the probe before any posts its own calls: a failure
	 * of those (a mismatch, say) cannot reach a rank still probing */
	if (res == SLUICE_OK && sl_plan_wants_probe())
		res = sl_boot_barrier(&b, sl_link_probe(c));
	sl_boot_close(&b);
	if (res != SLUICE_OK && created == SLUICE_OK) {
		sl_errmsg_copy(why, sizeof(why), sluice_last_error());
		comm_destroy_call(c);
		return sl_fail(res, "%s", why);
	}
	return res;
}

sluice_result_t sluice_comm_init(sluice_ctx_t *ctx, int nranks, int rank, const char *root,
				 sluice_comm_t **comm)
{
	struct sluice_comm *c;
	sluice_result_t res;

	if ((res = comm_check_args(ctx, nranks, rank, comm)) != SLUICE_OK ||
	    (res = sl_plan_config("sluice_comm_init")) != SLUICE_OK)
		return res;
	*comm = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return sl_fail(SLUICE_ERR_NO_MEMORY, "sluice_comm_init: out of memory");
	c->ctx = ctx;
	c->rank = rank;
	c->nranks = nranks;
	sl_log_set_rank(rank);
	res = comm_join(c, root);
	if (res != SLUICE_OK) {
		free(c);
		return res;
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->ncomms++;
	pthread_mutex_unlock(&ctx->lock);
	SL_INFO(SL_SUB_COMM, "communicator %u: rank %d of %d, key %016llx, %u channel%s", c->handle, rank,
		nranks, (unsigned long long)c->key, c->channels, c->channels == 1 ? "" : "s");
	*comm = c;
	return SLUICE_OK;
}

sluice_result_t sluice_comm_init_env(sluice_ctx_t *ctx, sluice_comm_t **comm)
{
	int rank, nranks;
	sluice_result_t res = sl_config_rank_world(&rank, &nranks);

	return res != SLUICE_OK ? res : sluice_comm_init(ctx, nranks, rank, NULL, comm);
}

sluice_result_t sluice_comm_destroy(sluice_comm_t *comm)
{
	struct sluice_ctx *ctx;
	unsigned inflight;
	sluice_result_t res;

	if (!comm)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_comm_destroy: comm is NULL");
	ctx = comm->ctx;
	pthread_mutex_lock(&ctx->lock);
	inflight = comm->inflight;
	pthread_mutex_unlock(&ctx->lock);
	if (inflight > 0)
		return sl_fail(SLUICE_ERR_INVALID_USAGE,
			       "sluice_comm_destroy: communicator %u has %u collective%s in flight: "
			       "sluice_wait for them first",
			       comm->handle, inflight, inflight == 1 ? "" : "s");
	res = comm_destroy_call(comm);
	pthread_mutex_lock(&ctx->lock);
	ctx->ncomms--;
	pthread_mutex_unlock(&ctx->lock);
	free(comm);
	return res;
}

sluice_result_t sluice_comm_rank(const sluice_comm_t *comm, int *rank)
{
	if (!comm || !rank)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "sluice_comm_rank: comm and rank must not be NULL");
	*rank = comm->rank;
	return SLUICE_OK;
}

sluice_result_t sluice_comm_size(const sluice_comm_t *comm, int *nranks)
{
	if (!comm || !nranks)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT,
			       "sluice_comm_size: comm and nranks must not be NULL");
	*nranks = comm->nranks;
	return SLUICE_OK;
}
