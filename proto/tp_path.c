/*
 * tp_path.c: multipath.  A flow's paths are its routes (one per port that
 * reaches the peer) times cfg.entropies UDP source ports, so that ECMP
 * switches spread it too.  New packets go on the live path with the fewest
 * packets out (a slow or stalled path fills up and is passed over);
 * retransmissions avoid the path they were lost on.  Each path keeps its
 * own RTT, load and losses.  A path that stops delivering (TP_PATH_DEAD_LOSSES
 * losses in a row, or TP_PATH_DEAD_RTOS timeouts or TP_PATH_DEAD_RTTS
 * smoothed RTTs, or more where the RTT varies, of sending without an answer
 * while other paths deliver) is
 * marked dead, unless it is the last one alive (then
 * the flow's own dead timer decides): its packets are sent again on the
 * others, and it gets a probe (an ACK flagged SL_F_PROBE) every RTO until
 * the peer's answer comes back over it.
 */
#include "tp_internal.h"

/* UDP source port: 0xC000 plus a hash, so that ECMP spreads a flow's paths. */
uint16_t tp_entropy(const struct sl_tp *tp, uint16_t node, uint32_t salt)
{
	uint32_t x = ((uint32_t)tp->cfg.local_node << 16 | node) ^ (salt + 1) * 0x9e3779b1u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint16_t)(0xc000 | (x & 0x3fff));
}

int tp_path_add_route(struct sl_tp *tp, struct tp_flow *f, uint16_t port_idx,
		      const struct sl_addr *addr)
{
	bool known = false;

	for (uint8_t i = 0; i < f->n_paths; i++) {
		if (f->paths[i].port_idx == port_idx) {
			f->paths[i].addr = *addr;
			known = true;
		}
	}
	if (known)
		return 0;
	if (f->n_paths + tp->cfg.entropies > SL_MAX_PATHS)
		return -1;
	for (uint8_t e = 0; e < tp->cfg.entropies; e++) {
		uint8_t i = f->n_paths++;
		f->paths[i] = (struct tp_path){ .port_idx = port_idx, .addr = *addr,
						.entropy = tp_entropy(tp, f->node, i) };
		f->n_alive++;
	}
	return 0;
}

const struct tp_path *tp_path_on_port(const struct tp_flow *f, uint16_t port_idx)
{
	for (uint8_t i = 0; i < f->n_paths; i++)
		if (f->paths[i].port_idx == port_idx)
			return &f->paths[i];
	return &f->paths[0];
}

/* The live path with the fewest packets out, other than avoid (-1: none)
 * when there is another; ties go round robin. */
uint8_t tp_path_pick(struct tp_flow *f, int avoid)
{
	int best = -1;

	for (uint8_t k = 0; k < f->n_paths; k++) {
		uint8_t i = (uint8_t)((f->path_rr + k) % f->n_paths);
		const struct tp_path *p = &f->paths[i];
		if (p->dead || (i == avoid && f->n_alive > 1))
			continue;
		if (best < 0 || p->in_flight < f->paths[best].in_flight)
			best = i;
	}
	f->path_rr = (uint8_t)((f->path_rr + 1) % f->n_paths);
	return best < 0 ? 0 : (uint8_t)best;
}

/* s is (re)sent on path: the load moves there. */
void tp_path_sent(struct sl_tp *tp, struct tp_flow *f, struct tp_slot *s, uint8_t path, bool retx)
{
	struct tp_path *p = &f->paths[path], *old = tp_path_of(f, s);

	if (retx) { /* the old path lost it (or is slow) */
		old->lost++;
		old->lost_streak++;
		/* nothing of it left out: its silence no longer says anything */
		if (!--old->in_flight)
			old->unproven_ns = 0;
	}
	if (!p->unproven_ns)
		p->unproven_ns = tp->now_ns; /* the silence clock starts */
	p->in_flight++;
	p->tx++;
	s->path = path;
}

static void path_ok(struct tp_path *p)
{
	p->unproven_ns = 0;
	p->rtos = p->lost_streak = 0;
}

void tp_path_acked(struct tp_flow *f, const struct tp_slot *s)
{
	struct tp_path *p = tp_path_of(f, s);

	p->in_flight--;
	if (!p->dead)
		path_ok(p);
}

static void revive(struct sl_tp *tp, struct tp_flow *f, struct tp_path *p)
{
	p->dead = false;
	p->revivals++;
	f->n_alive++;
	tp->stats.path_revivals++;
	path_ok(p);
}

/* An ACK echoed a packet sent on path (DATA, or a probe); rtt_ns its delay, 0: none. */
void tp_path_echo(struct sl_tp *tp, struct tp_flow *f, uint8_t path, uint32_t echo_ts, uint64_t rtt_ns)
{
	if (path >= f->n_paths)
		return;
	struct tp_path *p = &f->paths[path];
	if (p->dead) {
		/* only what was sent after it died proves it works again */
		if ((int32_t)(echo_ts - p->dead_us) >= 0)
			revive(tp, f, p);
		return;
	}
	path_ok(p);
	if (rtt_ns)
		p->srtt_ns = p->rtt_valid ? (7 * p->srtt_ns + rtt_ns) / 8 : rtt_ns;
	p->rtt_valid |= rtt_ns != 0;
}

/* How long a path may go unanswered: TP_PATH_DEAD_RTTS smoothed RTTs, but
 * never less than TP_PATH_DEAD_RTOS timeouts' worth of the RTT's own spread
 * (srtt + 4 rttvar, as RFC 6298's RTO before its floor): on a loaded
 * machine single answers come tens of RTTs late, and a deadline the
 * variance already explains kills working paths. */
uint64_t tp_path_silence_limit(uint64_t srtt_ns, uint64_t rttvar_ns, uint64_t rto_min_ns)
{
	uint64_t by_rtt = TP_PATH_DEAD_RTTS * srtt_ns, by_var = TP_PATH_DEAD_RTOS * (srtt_ns + 4 * rttvar_ns);
	uint64_t limit = by_rtt > by_var ? by_rtt : by_var;

	return limit > 2 * rto_min_ns ? limit : 2 * rto_min_ns;
}

/* Path i stopped delivering: no new data on it, its packets go again elsewhere. */
static uint32_t path_kill(struct sl_tp *tp, struct tp_flow *f, uint8_t i)
{
	struct tp_path *p = &f->paths[i];
	uint32_t moved = 0;

	p->dead = true;
	p->deaths++;
	p->dead_us = tp_now_us(tp);
	p->probe_ns = tp->now_ns + f->rto_ns;
	f->n_alive--;
	tp->stats.path_deaths++;
	for (uint32_t psn = f->snd_una; psn != f->snd_nxt; psn++) {
		struct tp_slot *s = tp_slot(tp, f, psn);
		if (s->acked || s->held || s->path != i)
			continue;
		/* out of buffers: the rest stay, and RTO or SACK move them later */
		if (!tp_retransmit(tp, f, psn, &tp->stats.retx_path))
			break;
		moved++;
	}
	return moved;
}

/* Has path p stopped delivering?  Losses in a row say so; silence and
 * timeouts only while the flow still makes progress through other paths
 * (a stalled peer, common on shared machines, silences them all alike). */
static bool looks_dead(const struct sl_tp *tp, const struct tp_flow *f, const struct tp_path *p)
{
	uint64_t limit = tp_path_silence_limit(f->srtt_ns, f->rttvar_ns, tp->cfg.rto_min_ns);
	bool others_deliver = p->in_flight && p->unproven_ns && f->progress_ns > p->unproven_ns + limit / 2;

	if (p->lost_streak >= TP_PATH_DEAD_LOSSES)
		return true;
	return others_deliver && (p->rtos >= TP_PATH_DEAD_RTOS || tp->now_ns - p->unproven_ns > limit);
}

uint32_t tp_path_scan(struct sl_tp *tp, struct tp_flow *f)
{
	uint32_t moved = 0;

	for (uint8_t i = 0; i < f->n_paths; i++) {
		struct tp_path *p = &f->paths[i];
		if (p->dead) {
			if (tp->now_ns >= p->probe_ns && tp_send_probe(tp, f, i)) {
				tp->stats.probes_tx++;
				p->probe_ns = tp->now_ns + f->rto_ns;
				moved++;
			}
		} else if (f->n_alive > 1 && looks_dead(tp, f, p)) {
			moved += path_kill(tp, f, i);
		}
	}
	return moved;
}
