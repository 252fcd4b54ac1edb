/*
 * dp_main.c: bringing a dataplane up and down, shared by the sluiced
 * program and the embedded mode.
 *
 * Order matters: EAL first, then the ports (their frame size decides the
 * packet payload), then the engines and their routes, then wait until every
 * link is up (the peers start in any order), launch each engine on its
 * lcore, and serve the attach socket on this thread until told to stop.
 * Stopping stops the engines and the server; the ports stay open until the
 * process exits (see the end of run()).
 *
 * With --channels K the dataplane runs K engines, each on its own core with
 * its own copy of every link, its own transport and its own tables: a
 * collective split into K slices (libsluice's planner decides) moves K
 * times the bytes one core can.  Channel c of one node talks only to
 * channel c of the others.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <sluice/errmsg.h>

#include "ctl_server.h"
#include "dp_main.h"
#include "eal.h"
#include "fault_port.h"
#include "port_dpdk.h"
#include "port_shm.h"
#include "reduce.h"
#include "trace_tap.h"

#define DEFAULT_SOCKET "/run/sluice/sluiced.sock"
/* 16 KiB of payload with its headers and CRC: against 8 KiB, half the packets
 * (and their per-packet costs) for the same bytes, and 1.2x the 1 MiB
 * all-reduce busbw here; a power of two, so that chunks split into whole packets. */
#define DEFAULT_PAYLOAD 16384
#define DEFAULT_FRAME (DEFAULT_PAYLOAD + SL_FRAME_OVERHEAD + SL_CRC_LEN)
#define PORT_DESC 1024      /* rx and tx descriptors per link */
/* Buffers per direction of a shm link: the senders' windows (64 packets
 * per peer) several times over, and 8.5 MB of 16 KiB frames. */
#define SHM_BUFS 512
/* EAL memory without hugepages: the links' pools and this much for the rest
 * (at least EAL_MIN_MB in all), so that a mesh of many links still fits. */
#define EAL_REST_MB 256
#define EAL_MIN_MB 512
/* In flight per peer: enough for memif's bandwidth-delay product, small
 * enough that a descheduled receiver's queue stays under the RTO floor. */
#define DEFAULT_WINDOW 64
/* Oversubscribed VMs stall a process for milliseconds: a lower floor
 * retransmits what was only delayed. */
#define DEFAULT_RTO_MIN_US 4000
/* Above the RTT of an idle veth or memif path here (5 to 50 us), below a
 * queue worth noticing. */
#define DEFAULT_CC_TARGET_US 100
/* One GPU reducer's 8 blocks reduce 45-51 GB/s from pinned host memory
 * (perf/GPU-NOTES.md section 1), where a channel carries about 1 GB/s: K
 * channels share those 8 SMs out, each keeping 2 for its latency. */
#define GPU_BLOCKS_TOTAL 8
#define GPU_BLOCKS_MIN 2
#define GPU_BLOCKS_MAX 1024
#define STASH_LIMIT_MAX_MIB (1ul << 30) /* 1 PiB: no machine's memory */
/* After the last client, engines stay up until no DATA came for LINGER_QUIET_NS
 * (several of the peers' retransmission timeouts), LINGER_MAX_NS at most. */
#define LINGER_QUIET_NS 20000000ull
#define LINGER_MAX_NS 500000000ull
/* Unacknowledged abort notices hold it longer, this long at most: a peer
 * that takes longer is gone, or starved past its own timers. */
#define LINGER_ABORTS_NS 2000000000ull

struct link {
	uint16_t node;
	uint16_t more[SL_MAX_NODES]; /* further nodes on the same segment (a bridge): NODE,NODE,... */
	unsigned nmore;
	char devargs[512];
};

struct opts {
	int node;
	unsigned channels;   /* engines, each with its own links */
	unsigned gpu_blocks; /* blocks of each GPU reducer, 0: 8 shared out among the channels */
	unsigned long stash_limit_mib; /* 0: a quarter of memory (dp.h DP_STASH_LIMIT_FLOOR) */
	int nodes;
	const char *memif_dir;
	struct link links[SL_MAX_PORTS];
	unsigned nlinks;
	const char *socket_path;
	int engine_cpu;
	unsigned payload;
	unsigned frame;
	unsigned window;
	unsigned rx_credit;  /* 0: the transport's default */
	unsigned paths;      /* 0: the transport's default */
	double rto_min_us;
	double timeout_s;
	struct sl_fault_spec fault; /* injected on every link's sends, when active */
	const struct sl_cc_ops *cc; /* congestion control, NULL: the fixed window */
	unsigned cc_target_us;
	bool no_crc;
	bool gate_host;   /* host collectives through the GPU path's asynchronous reducer, on the CPU */
	bool no_huge;
	bool mesh_memif;  /* the mesh's links are net_memif ports, not our own shared-memory ones */
	bool zero_copy;   /* memif mesh links whose client we are run zero-copy where EAL allows it */
	bool allow_any_user;
	bool quiet;
	bool busy_poll;   /* the engine never sleeps (idle.c) */
	bool yield_idle;  /* processes share cores: idle engines and waits give it away at once (idle.c) */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluiced --node N [options]\n"
		"  --node N              this dataplane's node id (0..255)\n"
		"  --nodes M --memif-dir DIR\n"
		"                        join nodes 0..M-1 (dataplanes on this host) in a full mesh of\n"
		"                        links named after DIR, where their sockets and wake words live\n"
		"                        (every node of the mesh uses the same DIR)\n"
		"  --mesh shm|memif      the mesh's links: shm, sluice's own over shared memory (frames are\n"
		"                        built in the peer's view and read where they lie: two copies per\n"
		"                        byte), or DPDK's net_memif (four, three with zero-copy)\n"
		"                        (env SLUICE_MESH, default shm)\n"
		"  --link NODE:DEVARGS   reach NODE through a DPDK vdev, e.g.\n"
		"                        3:net_af_packet0,iface=veth3 (repeatable); NODE,NODE,...:DEVARGS\n"
		"                        for several nodes on one segment (a bridge); a node named by\n"
		"                        several links is reached over all of them (multipath)\n"
		"  --socket PATH         attach socket (env SLUICE_SOCKET, default %s)\n"
		"  --engine-cpu C        pin the engine to CPU C, channel c's to the c-th CPU after it\n"
		"                        (default: any)\n"
		"  --channels K          run K engines (1..%u), each on its own core with its own mesh\n"
		"                        links (needs --nodes/--memif-dir); large collectives are split\n"
		"                        across them (default 1)\n"
		"  --gpu-blocks B        blocks (SMs) of each channel's persistent reduction kernel on a GPU\n"
		"                        (env SLUICE_GPU_BLOCKS; default 8 shared out among the channels,\n"
		"                        at least 2 each)\n"
		"  --stash-limit MIB     early packets an engine may hold past its communicators' stash\n"
		"                        caps while a posted call waits on their sender, before that\n"
		"                        communicator fails (env SLUICE_STASH_LIMIT; default a quarter\n"
		"                        of the machine's memory, at least 256)\n"
		"  --payload B           bytes of data per packet (default: what the frame allows)\n"
		"  --frame B             largest frame on the links (default %u)\n"
		"  --window P            packets in flight per peer (default %u, at most %u)\n"
		"  --rto-min US          retransmission timeout floor in microseconds (default %u)\n"
		"  --rx-credit P         packets this node lets all senders have in flight to it,\n"
		"                        shared among the active ones (default %u)\n"
		"  --paths N             UDP source ports (ECMP paths) per link and peer, 1..%u (default 4)\n"
		"  --timeout S           fail a collective or peer silent this long, and a link whose\n"
		"                        peer does not come up at start (env SLUICE_TIMEOUT, default 30)\n"
		"  --fault SPEC          inject faults on every link's sends (env SLUICE_FAULT), e.g.\n"
		"                        drop:0.01,reorder:16,dup:0.001,corrupt:0.0001,delay:50us,seed:7\n"
		"  --no-crc              no CRC32C trailer (default: on, as these links have no FCS)\n"
		"  --cc none|swift       congestion control (default none: the fixed --window)\n"
		"  --cc-target US        swift's target delay in microseconds (default %u)\n"
		"  --simd scalar|avx2|avx512\n"
		"                        reduction kernels (env SLUICE_SIMD; default: the best this CPU has)\n"
		"  --no-huge             do not use hugepages even when reserved (a shm mesh never does)\n"
		"  --no-zero-copy        memif mesh links copy on both ends (env SLUICE_ZERO_COPY=0; default:\n"
		"                        with hugepages, the client end of each link, half of every node's\n"
		"                        links, hands the driver its own buffers and copies nothing)\n"
		"  --allow-any-user      serve applications of any uid (default: only this uid)\n"
		"  --gate-host           run host collectives through the GPU path (a reducer that applies\n"
		"                        packets later, here gpu_dma's CPU consumer): for testing it without a GPU\n"
		"                        (also SLUICE_GATE_HOST=1)\n"
		"  --busy-poll           never sleep when idle: for an engine with a core of its own\n"
		"                        (also SLUICE_BUSY_POLL=1; default: spin 50 us, then sleep until woken)\n"
		"  --yield-idle          for processes that share cores, as Open MPI does oversubscribed: an idle\n"
		"                        engine sleeps at once instead of spinning first, and an embedded\n"
		"                        application's wait gives its core away (sched_yield) each time a pass finds\n"
		"                        no work (also SLUICE_YIELD=1, which a daemon's clients read too; sluice-run\n"
		"                        sets it when ranks outnumber cores)\n"
		"  --quiet               no start/stop messages\n",
		DEFAULT_SOCKET, SL_MAX_CHANNELS, DEFAULT_FRAME, DEFAULT_WINDOW, SL_MAX_WINDOW, DEFAULT_RTO_MIN_US,
		SL_MAX_WINDOW, SL_MAX_PATHS, DEFAULT_CC_TARGET_US);
}

static int parse_uint(const char *s, const char *what, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	errno = 0;
	*out = strtoul(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || *s == '-' || *out < min || *out > max) {
		fprintf(stderr, "sluiced: %s must be a whole number from %lu to %lu, not '%s'\n", what, min, max, s);
		return -1;
	}
	return 0;
}

/* A 0/1 environment variable into *out (left alone when unset or empty). */
static int parse_flag_env(const char *name, const char *one, const char *zero, bool *out)
{
	const char *env = getenv(name);

	if (!env || !*env)
		return 0;
	if (strcmp(env, "0") && strcmp(env, "1")) {
		fprintf(stderr, "sluiced: %s=\"%s\" is not valid: expected 1 (%s) or 0 (%s)\n", name, env, one, zero);
		return -1;
	}
	*out = strcmp(env, "1") == 0;
	return 0;
}

static int parse_timeout(const char *s, const char *what, double *out)
{
	char *end;
	*out = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || !(*out > 0) || *out > 86400) {
		fprintf(stderr, "sluiced: %s must be seconds > 0 (up to 86400), not '%s'\n", what, s);
		return -1;
	}
	return 0;
}

static int parse_fault(const char *s, const char *what, struct sl_fault_spec *out)
{
	char why[256];

	if (sl_fault_parse(s, out, why, sizeof(why)) == 0)
		return 0;
	fprintf(stderr, "sluiced: %s: %s\n", what, why);
	return -1;
}

static int parse_cc(const char *s, const struct sl_cc_ops **out)
{
	if (strcmp(s, "none") == 0 || strcmp(s, "swift") == 0) {
		*out = strcmp(s, "swift") == 0 ? &sl_cc_swift : NULL;
		return 0;
	}
	fprintf(stderr, "sluiced: --cc wants none or swift, not '%s'\n", s);
	return -1;
}

/* Switches the reduction kernels to the family named (process-wide: the
 * engine's, embedded or not); refuses one this CPU or OS cannot run. */
static int parse_simd(const char *s, const char *what)
{
	enum sl_simd want;
	const char *best = sl_simd_name(sl_simd_best());

	if (!sl_simd_parse(s, &want)) {
		fprintf(stderr, "sluiced: %s wants scalar, avx2 or avx512, not '%s' (best here: %s)\n", what, s, best);
		return -1;
	}
	if (!sl_simd_select(want)) {
		fprintf(stderr, "sluiced: %s=%s: this CPU or its OS cannot run %s kernels (avx2 needs AVX2+F16C, "
			"avx512 needs AVX-512 F/BW/VL/DQ with zmm state saved by the OS): use %s or lower\n", what, s,
			s, best);
		return -1;
	}
	return 0;
}

static int parse_mesh(const char *s, const char *what, bool *memif)
{
	if (strcmp(s, "shm") != 0 && strcmp(s, "memif") != 0) {
		fprintf(stderr, "sluiced: %s wants shm or memif, not '%s'\n", what, s);
		return -1;
	}
	*memif = strcmp(s, "memif") == 0;
	return 0;
}

static int parse_link(struct opts *o, const char *arg)
{
	unsigned long node;
	const char *colon = strchr(arg, ':');
	struct link *l = &o->links[o->nlinks];
	char nums[1024], *save = NULL;

	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(nums) || o->nlinks == SL_MAX_PORTS) {
		fprintf(stderr, "sluiced: --link wants NODE[,NODE...]:DEVARGS (at most %u links), not '%s'\n",
			SL_MAX_PORTS, arg);
		return -1;
	}
	memcpy(nums, arg, (size_t)(colon - arg));
	nums[colon - arg] = '\0';
	/* several nodes: one port onto a shared segment, routed by each node's MAC */
	for (char *n = strtok_r(nums, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
		if (parse_uint(n, "--link's node", 0, SL_MAX_NODES - 1, &node))
			return -1;
		if (n == nums)
			l->node = (uint16_t)node;
		else if (l->nmore < SL_MAX_NODES)
			l->more[l->nmore++] = (uint16_t)node;
	}
	snprintf(o->links[o->nlinks].devargs, sizeof(o->links[0].devargs), "%s", colon + 1);
	o->nlinks++;
	return 0;
}

/* Whether this node is the client of channel ch's memif link to node j.
 * Only a client can run zero-copy, which takes both copies off its end, so
 * the roles alternate: where the pair's ids plus the channel is even the
 * higher id is the client, else the lower.  Every node is then the client
 * of about half its links: of half of two nodes' channels (K even), of one
 * of each node's two links among three. */
static bool memif_client(const struct opts *o, int j, unsigned ch)
{
	return ((unsigned)(o->node + j) + ch) % 2 == 0 ? o->node > j : o->node < j;
}

/* Channel ch's memif link to node j; each channel has its own socket file
 * and vdev name.  zc: ask for zero-copy if we are the client. */
static void memif_devargs(const struct opts *o, int j, unsigned ch, bool zc, char *buf, size_t len)
{
	int lo = o->node < j ? o->node : j, hi = o->node < j ? j : o->node;
	bool client = memif_client(o, j, ch);
	char suffix[16] = "";

	if (ch > 0)
		snprintf(suffix, sizeof(suffix), "c%u", ch);
	/* 256-slot rings (rsize=8): four windows of frames, and a quarter of the
	 * pages that each process faults in on first use of the default 1024. */
	snprintf(buf, len, "net_memif%d%s,role=%s,socket=%s/memif-%d-%d%s.sock,socket-abstract=no,rsize=8%s", j,
		 suffix, client ? "client" : "server", o->memif_dir, lo, hi, suffix,
		 client && zc ? ",zero-copy=yes" : "");
}

/* Every other node of the mesh, channel 0's links (the others' follow from them). */
static int add_mesh(struct opts *o)
{
	for (int j = 0; j < o->nodes; j++) {
		if (j == o->node)
			continue;
		if (o->nlinks == SL_MAX_PORTS) {
			fprintf(stderr, "sluiced: a mesh of %d nodes needs more than %u links\n", o->nodes,
				SL_MAX_PORTS);
			return -1;
		}
		o->links[o->nlinks].node = (uint16_t)j;
		if (o->mesh_memif)
			memif_devargs(o, j, 0, false, o->links[o->nlinks].devargs, sizeof(o->links[0].devargs));
		else
			snprintf(o->links[o->nlinks].devargs, sizeof(o->links[0].devargs), "shm to node %d", j);
		o->nlinks++;
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "node", required_argument, NULL, 'n' },      { "nodes", required_argument, NULL, 'N' },
		{ "memif-dir", required_argument, NULL, 'm' }, { "link", required_argument, NULL, 'l' },
		{ "socket", required_argument, NULL, 's' },    { "engine-cpu", required_argument, NULL, 'c' },
		{ "payload", required_argument, NULL, 'p' },   { "frame", required_argument, NULL, 'f' },
		{ "timeout", required_argument, NULL, 't' },   { "no-huge", no_argument, NULL, 'H' },
		{ "allow-any-user", no_argument, NULL, 'A' },  { "quiet", no_argument, NULL, 'q' },
		{ "window", required_argument, NULL, 'w' },    { "rto-min", required_argument, NULL, 'r' },
		{ "fault", required_argument, NULL, 'F' },     { "no-crc", no_argument, NULL, 'C' },
		{ "cc", required_argument, NULL, 'G' },        { "cc-target", required_argument, NULL, 'T' },
		{ "gate-host", no_argument, NULL, 'g' },       { "simd", required_argument, NULL, 'S' },
		{ "rx-credit", required_argument, NULL, 'R' }, { "paths", required_argument, NULL, 'P' },
		{ "channels", required_argument, NULL, 'K' }, { "gpu-blocks", required_argument, NULL, 'B' },
		{ "busy-poll", no_argument, NULL, 'Y' },       { "help", no_argument, NULL, 'h' },
		{ "yield-idle", no_argument, NULL, 'y' },      { "no-zero-copy", no_argument, NULL, 'Z' },
		{ "mesh", required_argument, NULL, 'M' },      { "stash-limit", required_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long v;
	const char *env;
	int c;

	*o = (struct opts){ .node = -1, .channels = 1, .engine_cpu = -1, .frame = DEFAULT_FRAME, .timeout_s = 30,
			    .cc_target_us = DEFAULT_CC_TARGET_US,
			    .window = DEFAULT_WINDOW, .rto_min_us = DEFAULT_RTO_MIN_US,
			    .socket_path = DEFAULT_SOCKET, .zero_copy = true };
	if ((env = getenv("SLUICE_SOCKET")) && *env)
		o->socket_path = env;
	if ((env = getenv("SLUICE_TIMEOUT")) && *env && parse_timeout(env, "SLUICE_TIMEOUT", &o->timeout_s))
		return -1;
	if ((env = getenv("SLUICE_FAULT")) && parse_fault(env, "SLUICE_FAULT", &o->fault))
		return -1;
	o->gate_host = (env = getenv("SLUICE_GATE_HOST")) && strcmp(env, "1") == 0;
	if (parse_flag_env("SLUICE_BUSY_POLL", "never sleep when idle", "spin, then sleep until woken",
			   &o->busy_poll) ||
	    parse_flag_env("SLUICE_YIELD", "idle engines and waits give the core away at once",
			   "it spins, then sleeps until woken", &o->yield_idle) ||
	    parse_flag_env("SLUICE_ZERO_COPY", "memif clients zero-copy where hugepages allow",
			   "memif copies on both ends", &o->zero_copy))
		return -1;
	if ((env = getenv("SLUICE_MESH")) && *env && parse_mesh(env, "SLUICE_MESH", &o->mesh_memif))
		return -1;
	if ((env = getenv("SLUICE_SIMD")) && parse_simd(env, "SLUICE_SIMD"))
		return -1;
	if ((env = getenv("SLUICE_GPU_BLOCKS")) && *env) {
		if (parse_uint(env, "SLUICE_GPU_BLOCKS", 1, GPU_BLOCKS_MAX, &v))
			return -1;
		o->gpu_blocks = (unsigned)v;
	}
	if ((env = getenv("SLUICE_STASH_LIMIT")) && *env &&
	    parse_uint(env, "SLUICE_STASH_LIMIT", 1, STASH_LIMIT_MAX_MIB, &o->stash_limit_mib))
		return -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'n': if (parse_uint(optarg, "--node", 0, SL_MAX_NODES - 1, &v)) return -1; o->node = (int)v; break;
		case 'N': if (parse_uint(optarg, "--nodes", 0, SL_MAX_NODES, &v)) return -1; o->nodes = (int)v; break;
		case 'm': o->memif_dir = optarg; break;
		case 'l': if (parse_link(o, optarg)) return -1; break;
		case 's': o->socket_path = optarg; break;
		case 'c': if (parse_uint(optarg, "--engine-cpu", 0, 4095, &v)) return -1; o->engine_cpu = (int)v; break;
		case 'K': if (parse_uint(optarg, "--channels", 1, SL_MAX_CHANNELS, &v)) return -1; o->channels = (unsigned)v; break;
		case 'B': if (parse_uint(optarg, "--gpu-blocks", 1, GPU_BLOCKS_MAX, &v)) return -1; o->gpu_blocks = (unsigned)v; break;
		case 'L': if (parse_uint(optarg, "--stash-limit", 1, STASH_LIMIT_MAX_MIB, &o->stash_limit_mib)) return -1; break;
		case 'p': if (parse_uint(optarg, "--payload", 0, 65536, &v)) return -1; o->payload = (unsigned)v; break;
		case 'f': if (parse_uint(optarg, "--frame", 0, 65536, &v)) return -1; o->frame = (unsigned)v; break;
		case 't': if (parse_timeout(optarg, "--timeout", &o->timeout_s)) return -1; break;
		case 'w': if (parse_uint(optarg, "--window", 1, SL_MAX_WINDOW, &v)) return -1; o->window = (unsigned)v; break;
		case 'r': if (parse_uint(optarg, "--rto-min", 1, 10000000, &v)) return -1; o->rto_min_us = (double)v; break;
		case 'R': if (parse_uint(optarg, "--rx-credit", 1, 1000000, &v)) return -1; o->rx_credit = (unsigned)v; break;
		case 'P': if (parse_uint(optarg, "--paths", 1, SL_MAX_PATHS, &v)) return -1; o->paths = (unsigned)v; break;
		case 'F': if (parse_fault(optarg, "--fault", &o->fault)) return -1; break;
		case 'C': o->no_crc = true; break;
		case 'g': o->gate_host = true; break;
		case 'G': if (parse_cc(optarg, &o->cc)) return -1; break;
		case 'S': if (parse_simd(optarg, "--simd")) return -1; break;
		case 'T': if (parse_uint(optarg, "--cc-target", 1, 1000000, &v)) return -1; o->cc_target_us = (unsigned)v; break;
		case 'H': o->no_huge = true; break;
		case 'A': o->allow_any_user = true; break;
		case 'q': o->quiet = true; break;
		case 'Y': o->busy_poll = true; break;
		case 'y': o->yield_idle = true; break;
		case 'Z': o->zero_copy = false; break;
		case 'M': if (parse_mesh(optarg, "--mesh", &o->mesh_memif)) return -1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc || o->node < 0) {
		fprintf(stderr, "sluiced: %s\n", o->node < 0 ? "--node is required" : "unexpected argument");
		usage(stderr);
		return -1;
	}
	if ((o->nodes > 0) != (o->memif_dir != NULL) || (o->nodes > 0 && o->node >= o->nodes)) {
		fprintf(stderr, "sluiced: --nodes and --memif-dir go together, and --node must be below --nodes\n");
		return -1;
	}
	if (o->channels > 1 && o->nodes == 0) {
		fprintf(stderr, "sluiced: --channels above 1 needs a mesh (--nodes and --memif-dir): a "
			"--link device belongs to one engine\n");
		return -1;
	}
	if (o->frame < SL_FRAME_OVERHEAD + 16) {
		fprintf(stderr, "sluiced: --frame must be at least %u\n", SL_FRAME_OVERHEAD + 16);
		return -1;
	}
	return o->nodes > 0 ? add_mesh(o) : 0;
}

/* Whether link i is one of the memif mesh's (they follow the --link ones). */
static bool mesh_link(const struct opts *o, unsigned i)
{
	return o->nodes > 0 && i >= o->nlinks - (unsigned)(o->nodes - 1);
}

/* Channel ch's copy of link i, opened at ports[ch * o->nlinks + i]. */
static int open_link(const struct opts *o, unsigned ch, unsigned i, bool zc, struct sl_port **ports, char *err,
		     size_t len)
{
	char devargs[sizeof(o->links[0].devargs)];

	if (mesh_link(o, i) && !o->mesh_memif) {
		ports[ch * o->nlinks + i] = sl_shm_port_open(o->memif_dir, (unsigned)o->node, o->links[i].node, ch,
							     o->frame, SHM_BUFS, err, len);
		return ports[ch * o->nlinks + i] ? 0 : -1;
	}
	if (mesh_link(o, i))
		memif_devargs(o, o->links[i].node, ch, zc, devargs, sizeof(devargs));
	else
		snprintf(devargs, sizeof(devargs), "%s", o->links[i].devargs);
	ports[ch * o->nlinks + i] = sl_dpdk_port_open(devargs, o->frame, PORT_DESC, PORT_DESC, err, len);
	return ports[ch * o->nlinks + i] ? 0 : -1;
}

/*
 * A shm mesh's links, every channel's, made before EAL starts (they need
 * none of it): a peer waits --timeout for our files from the moment its
 * own are made, and EAL's start, 0.3-0.5 s at load 3, is the longest part
 * of ours and grows with the load (perf/ALGORITHMS.md, gaps20).
 */
static int open_shm_mesh(const struct opts *o, struct sl_port **ports, char *err, size_t len)
{
	for (unsigned k = 0; k < o->channels * o->nlinks; k++) {
		unsigned ch = k / o->nlinks, i = k % o->nlinks;
		if (mesh_link(o, i) && !o->mesh_memif && open_link(o, ch, i, false, ports, err, len) != 0)
			return -1;
	}
	return 0;
}

/*
 * Every channel's copy of every link not open yet (open_shm_mesh's are):
 * channel ch's link i at ports[ch * nlinks + i].  The zero-copy clients
 * come last, one at a time, each up
 * before the next starts, with EAL's hugepage files put back before each
 * (eal.h: memif closes them): every server of ours listens before we wait on
 * anything, so that the peers, doing the same, never wait on each other.
 * A client whose files could not be put back copies instead.
 */
static int open_links(const struct opts *o, struct sl_port **ports, char *err, size_t len)
{
	const bool zc_wanted = o->mesh_memif && o->zero_copy && sl_eal_zero_copy();
	const unsigned up_ms = (unsigned)(o->timeout_s * 1000); /* a peer silent this long has failed */
	bool zc = zc_wanted;
	char why[256];

	for (unsigned k = 0; k < o->channels * o->nlinks; k++) {
		unsigned ch = k / o->nlinks, i = k % o->nlinks;
		if (!ports[k] && !(zc_wanted && mesh_link(o, i) && memif_client(o, o->links[i].node, ch)) &&
		    open_link(o, ch, i, false, ports, err, len) != 0)
			return -1;
	}
	for (unsigned k = 0; zc_wanted && k < o->channels * o->nlinks; k++) {
		unsigned ch = k / o->nlinks, i = k % o->nlinks;
		if (!mesh_link(o, i) || !memif_client(o, o->links[i].node, ch))
			continue;
		if (zc && sl_eal_restore_mem_fds(why, sizeof(why)) != 0) {
			if (!o->quiet)
				fprintf(stderr, "sluiced node %d: %s\n", o->node, why);
			zc = false;
		}
		if (open_link(o, ch, i, zc, ports, err, len) != 0 ||
		    sl_port_wait_up(ports[k], up_ms, err, len) != 0)
			return -1;
	}
	/* for EAL itself, and for a client that reconnects later */
	if (zc && sl_eal_restore_mem_fds(why, sizeof(why)) != 0 && !o->quiet)
		fprintf(stderr, "sluiced node %d: %s\n", o->node, why);
	for (unsigned i = 0; i < o->channels * o->nlinks; i++)
		if (sl_port_wait_up(ports[i], up_ms, err, len) != 0)
			return -1;
	return 0;
}

/* Give back the shm links' files (a peer that never came leaves ours
 * named); DPDK's ports are left to the process's exit (see run's end). */
static void close_shm_links(struct sl_port **ports, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (ports[i] && sl_shm_port_is(ports[i])) {
			ports[i]->ops->close(ports[i]);
			ports[i] = NULL;
		}
}

/*
 * Prime a memif mesh (a shm mesh's pages are taken when it is mapped):
 * every process takes a page fault on first use of each page of memif's
 * shared ring buffers, which made the first few hundred collectives of a
 * run several times slower.  Before any engine runs, each
 * end sends MEMIF_RING full-size frames on every link and receives as many,
 * all links at once (one at a time could wait in a circle).  Best effort: a
 * peer that does not prime just costs the timeout.
 */
#define MEMIF_RING 256  /* rsize=8 in add_memif_mesh */
#define PRIME_MS 3000

static void prime_links(struct sl_port **ports, unsigned nports)
{
	unsigned sent[SL_MAX_CHANNELS * SL_MAX_PORTS] = { 0 }, got[SL_MAX_CHANNELS * SL_MAX_PORTS] = { 0 }, done = 0;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < nports) {
		done = 0;
		for (unsigned i = 0; i < nports; i++) {
			struct sl_port *p = ports[i];
			struct sl_pkt pk[32];
			uint16_t n = p->ops->rx_burst(p, pk, 32);

			got[i] += n;
			p->ops->free(p, pk, n);
			/* exactly MEMIF_RING each way, so no primer is left for the engine */
			uint16_t want = MEMIF_RING - sent[i] < 32 ? (uint16_t)(MEMIF_RING - sent[i]) : 32;
			if (want && (n = p->ops->alloc(p, pk, want)) > 0) {
				for (uint16_t k = 0; k < n; k++) {
					memset(pk[k].data, 0, SL_ETH_LEN); /* ethertype 0: nobody's protocol */
					pk[k].len = p->max_frame;
				}
				uint16_t out = p->ops->tx_burst(p, pk, n);
				p->ops->free(p, pk + out, (uint16_t)(n - out));
				sent[i] += out;
			}
			done += sent[i] >= MEMIF_RING && got[i] >= MEMIF_RING;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > PRIME_MS)
			break;
	}
	for (unsigned i = 0; i < nports; i++) /* count the engines' frames, not the primers */
		memset(&ports[i]->stats, 0, sizeof(ports[i]->stats));
}

/* On a memif mesh every link kicks the engine it sends to awake (wake.h):
 * the mesh's links are each channel's last nodes - 1, and channel ch's
 * reach the peer's channel ch.  The peers made their wake words before
 * their links, and the links are up. */
static int wake_peers(const struct opts *o, struct sl_port **ports, char *err, size_t len)
{
	for (unsigned k = 0; k < o->channels * o->nlinks; k++) {
		unsigned ch = k / o->nlinks, i = k % o->nlinks;
		if (i < o->nlinks - (unsigned)(o->nodes - 1))
			continue;
		struct dp_wake *peer = dp_wake_open(o->memif_dir, o->links[i].node, ch, false, err, len);
		struct sl_port *p = peer ? dp_wake_port_wrap(ports[k], peer) : NULL;
		if (!p) {
			if (peer && !*err)
				sl_errmsg_format(err, len, "out of memory wrapping link %u", i);
			return -1;
		}
		ports[k] = p;
	}
	return 0;
}

/* A link carries the CRC32C trailer where its port asks for one (DPDK's
 * vdevs: no FCS; shm: none), on every link with --fault (whose corruptions
 * it must catch), on none with --no-crc.  With --fault, the fault injector
 * goes on every link's sends, innermost,
 * so that whatever wraps the ports later sees the frames before the faults.
 * faulty[i] is the injector of link i, NULL without faults. */
static int prepare_links(const struct opts *o, struct sl_port **ports, struct sl_port **faulty,
			 const struct sl_clock *clock, char *err, size_t len)
{
	for (unsigned i = 0; i < o->channels * o->nlinks; i++) {
		ports[i]->crc = !o->no_crc && (ports[i]->crc || sl_fault_active(&o->fault));
		faulty[i] = NULL;
		if (!sl_fault_active(&o->fault))
			continue;
		/* one generator per (channel, node, link), all fixed by the spec's seed */
		faulty[i] = sl_fault_port_wrap(ports[i], &o->fault,
					       (uint64_t)(i / o->nlinks) << 16 | (uint64_t)o->node << 8 | i % o->nlinks,
					       clock);
		if (!faulty[i]) {
			sl_errmsg_format(err, len, "out of memory wrapping link %u in the fault injector", i);
			return -1;
		}
		ports[i] = faulty[i];
	}
	return 0;
}

static int add_routes(struct dp_engine *e, const struct opts *o, struct sl_port **ports, char *err, size_t len)
{
	for (unsigned i = 0; i < o->nlinks; i++) {
		const struct link *l = &o->links[i];
		int idx = sl_tp_add_port(e->tp, ports[i]);
		if (idx < 0) {
			sl_errmsg_format(err, len, "cannot add link %u (%s): %u links at most, and frames of %u B must "
					 "hold the payload and CRC (pick a smaller --payload)", i, l->devargs,
					 SL_MAX_PORTS, ports[i]->max_frame);
			return -1;
		}
		for (unsigned k = 0; k <= l->nmore; k++) {
			struct sl_addr addr;
			uint16_t node = k ? l->more[k - 1] : l->node;
			sl_addr_for_node(node, &addr);
			if (sl_tp_add_route(e->tp, node, (uint16_t)idx, &addr) != 0) {
				sl_errmsg_format(err, len, "cannot add the route to node %u over link %u: out of memory, or "
						 "more than %u paths to it (links to it x --paths: lower --paths)",
						 node, i, SL_MAX_PATHS);
				return -1;
			}
		}
	}
	return 0;
}

/* "node 3", or "node 3 channel 1" beyond the first channel: how the lines below name an engine. */
static const char *engine_name(const struct dp_engine *e, char *buf, size_t len)
{
	if (e->channel == 0)
		snprintf(buf, len, "node %u", e->node);
	else
		snprintf(buf, len, "node %u channel %u", e->node, e->channel);
	return buf;
}

static void print_counters(const struct dp_engine *e)
{
	const struct sl_tp_stats *t = sl_tp_get_stats(e->tp);
	char name[48];

	fprintf(stderr,
		"sluiced %s: collectives posted %llu done %llu failed %llu rejected %llu, schedules built %llu, "
		"own buffers allocated %llu, sends released at the input gate %llu (pulled %llu); "
		"data tx %llu rx %llu, retransmits rto %llu sack %llu (tail-loss probes %llu, moved off dead paths %llu), "
		"ACKs tx %llu (delayed %llu) rx %llu (of PSNs never sent %llu), "
		"dup %llu, beyond the window %llu, malformed %llu, "
		"bad-crc %llu, foreign %llu, unknown-comm %llu, bad-coll %llu, mismatch %llu, stashed %llu "
		"(early or deferred packets kept in their frames %llu, past the stash's cap %llu, overran it %llu, "
		"senders parked %llu); "
		"credit stalls %llu, held waits %llu, paced waits %llu, CE received %llu, CE echoes %llu, "
		"paths died %llu revived %llu, probes %llu, tx no-buffer %llu, control frames refused %llu, "
		"bursts handed to ports %llu (refused in part %llu); "
		"windows held %llu (refused %llu), held packets resent %llu, window probes %llu; "
		"last words sent %llu (not taken %llu) received %llu; page faults %ld\n",
		engine_name(e, name, sizeof(name)), (unsigned long long)e->count.colls_posted,
		(unsigned long long)e->count.colls_done,
		(unsigned long long)e->count.colls_failed, (unsigned long long)e->count.cmd_rejected,
		(unsigned long long)e->count.sched_built, (unsigned long long)e->count.owned_allocs,
		(unsigned long long)e->count.sends_released_at_gate, (unsigned long long)e->count.sends_pulled_at_gate,
		(unsigned long long)t->data_tx, (unsigned long long)t->data_rx,
		/* "sack": every selective retransmission, probes included (tools sum rto + sack) */
		(unsigned long long)t->retx_rto, (unsigned long long)(t->retx_sack + t->retx_tlp + t->retx_path),
		(unsigned long long)t->retx_tlp, (unsigned long long)t->retx_path,
		(unsigned long long)t->ack_tx, (unsigned long long)t->ack_delayed, (unsigned long long)t->ack_rx,
		(unsigned long long)t->ack_beyond, (unsigned long long)t->rx_dup,
		(unsigned long long)t->rx_out_of_window, (unsigned long long)t->rx_malformed,
		(unsigned long long)t->rx_bad_crc, (unsigned long long)t->rx_foreign, (unsigned long long)e->count.rx_unknown_comm,
		(unsigned long long)e->count.rx_bad_coll, (unsigned long long)e->count.rx_mismatch,
		(unsigned long long)e->count.stashed, (unsigned long long)e->count.held_in_place,
		(unsigned long long)e->count.stashed_past_cap, (unsigned long long)e->count.stash_overflows,
		(unsigned long long)t->parks,
		(unsigned long long)t->credit_stalls, (unsigned long long)t->held_waits,
		(unsigned long long)t->paced_waits, (unsigned long long)t->rx_ce, (unsigned long long)t->ack_ce,
		(unsigned long long)t->path_deaths, (unsigned long long)t->path_revivals,
		(unsigned long long)t->probes_tx, (unsigned long long)t->tx_no_buf,
		(unsigned long long)t->ctl_refused, (unsigned long long)t->tx_bursts,
		(unsigned long long)t->tx_refused,
		(unsigned long long)t->holds, (unsigned long long)t->rx_retry,
		(unsigned long long)t->held_resent, (unsigned long long)t->window_probes,
		(unsigned long long)t->last_tx, (unsigned long long)t->last_refused, (unsigned long long)t->last_rx,
		e->count.page_faults);
}

/* Each link's own frame counts and what the transport still holds for it,
 * then each flow's sender state: a link the port keeps refusing, or a flow
 * stuck with packets in flight, shows here when a run hangs. */
static const char *ago(char *buf, size_t len, uint64_t ns)
{
	if (!ns)
		return "never";
	snprintf(buf, len, "%.3f s ago", ns / 1e9);
	return buf;
}

static void print_links(const struct dp_engine *e, const struct opts *o, struct sl_port *const *base)
{
	struct sl_tp_flow_info fi;
	char name[48], data[32], ack[32];

	engine_name(e, name, sizeof(name));
	for (unsigned i = 0; i < o->nlinks; i++) {
		const struct sl_port_counters *c = &base[i]->stats;
		char driver[160] = "";

		sl_dpdk_port_describe(base[i], driver, sizeof(driver));
		fprintf(stderr, "sluiced %s: link %u (to node %u%s): tx %llu refused %llu, rx %llu "
			"chained %llu, staged %u, bad descriptors %llu%s\n", name, i, o->links[i].node,
			sl_shm_port_is(base[i]) ? ", shm" : sl_dpdk_port_zero_copy(base[i]) ? ", zero-copy" : "",
			(unsigned long long)c->tx_pkts, (unsigned long long)c->tx_full,
			(unsigned long long)c->rx_pkts, (unsigned long long)c->rx_chained,
			sl_tp_port_staged(e->tp, (uint16_t)i),
			(unsigned long long)c->bad_desc, driver);
	}
	for (uint16_t n = 0; n < SL_MAX_NODES; n++) {
		if (n == e->node || sl_tp_flow_info(e->tp, n, &fi) != 0)
			continue;
		fprintf(stderr, "sluiced %s: flow to node %u: in flight %u (held %u), credit %u, paths alive %u of %u, "
			"srtt %llu us, rto %llu us; PSNs out %#x-%#x, in order from it to %#x, "
			"its last DATA %s, last ACK %s; RTO retransmissions %u, its ACKs that retired nothing "
			"with packets out %u, its DATA that came twice %u; our ACKs to it refused %u\n",
			name, n, fi.in_flight, fi.held, fi.credit,
			fi.paths_alive, fi.paths, (unsigned long long)fi.srtt_ns / 1000,
			(unsigned long long)fi.rto_ns / 1000, fi.snd_una, fi.snd_nxt, fi.rcv_cum,
			ago(data, sizeof(data), fi.data_ago_ns), ago(ack, sizeof(ack), fi.ack_ago_ns),
			fi.rto_retx, fi.acks_idle, fi.dup_rx, fi.acks_refused);
	}
}

static void print_faults(const struct dp_engine *e, const struct opts *o, struct sl_port *const *faulty)
{
	char name[48];

	engine_name(e, name, sizeof(name));
	for (unsigned i = 0; i < o->nlinks; i++) {
		if (!faulty[i])
			continue;
		const struct sl_fault_counters *c = sl_fault_port_counters(faulty[i]);
		fprintf(stderr,
			"sluiced %s: faults injected on link %u (to node %u): frames %llu dropped "
			"%llu data-dropped %llu duplicated %llu corrupted %llu corrupted-covered %llu "
			"reordered %llu\n",
			name, i, o->links[i].node, (unsigned long long)c->frames,
			(unsigned long long)c->dropped, (unsigned long long)c->dropped_data,
			(unsigned long long)c->duplicated, (unsigned long long)c->corrupted,
			(unsigned long long)c->corrupted_covered, (unsigned long long)c->reordered);
	}
}

static unsigned zero_copy_links(struct sl_port *const *base, unsigned n)
{
	unsigned zc = 0;

	for (unsigned i = 0; i < n; i++)
		zc += sl_dpdk_port_zero_copy(base[i]);
	return zc;
}

_Atomic(struct dp_engine *) dp_running_engine;

/* Pages the engine's thread faulted in, counted while it runs (the
 * counters' line shows them): memory the dataplane maps is touched when it
 * is mapped (ctl_server.c map_fd, port_shm.c), since on the PVM guests
 * sluice runs on a page's first access costs 10-14 us, so a call should
 * fault in only what the engine allocates. */
static int engine_main(void *arg)
{
	struct dp_engine *e = arg;
	struct rusage ru;
	int rc;

	getrusage(RUSAGE_THREAD, &ru);
	e->count.page_faults = -(ru.ru_minflt + ru.ru_majflt);
	rc = dp_engine_run(e);
	getrusage(RUSAGE_THREAD, &ru);
	e->count.page_faults += ru.ru_minflt + ru.ru_majflt;
	return rc;
}

/* Each of the n links' descriptors that polls readable while a frame waits
 * (base: the ports unwrapped) into cfg, or none unless every link has one. */
static void links_rx_fds(struct sl_port **base, unsigned n, struct dp_idle_cfg *cfg)
{
	for (cfg->n_rx_fds = 0; cfg->n_rx_fds < n; cfg->n_rx_fds++)
		if ((cfg->rx_fds[cfg->n_rx_fds] = sl_dpdk_port_rx_fd(base[cfg->n_rx_fds])) < 0) {
			cfg->n_rx_fds = 0;
			return;
		}
}

/* Set up channel ch's engine over its links (ports of that channel; base:
 * the same unwrapped). */
static int engine_setup(struct dp_engine *e, const struct opts *o, unsigned ch, uint32_t frame,
			struct sl_port **ports, struct sl_port **base, struct dp_wake *wake, char *err, size_t len)
{
	struct dp_engine_cfg cfg = { .node = (uint16_t)o->node, .channel = ch, .max_frame = frame,
				     .payload = o->payload, .timeout_ns = (uint64_t)(o->timeout_s * 1e9),
				     .window = o->window, .rto_min_ns = (uint64_t)(o->rto_min_us * 1e3),
				     .gate_host = o->gate_host, .rx_credit = o->rx_credit, .paths = (uint8_t)o->paths,
				     .gpu_blocks = o->gpu_blocks, .stash_limit = (uint64_t)o->stash_limit_mib << 20,
				     .idle = { .busy_poll = o->busy_poll, .yield_app = o->yield_idle }, .wake = wake,
				     .all_links_wake = o->nodes > 0 && o->nlinks == (unsigned)o->nodes - 1 };

	links_rx_fds(base, o->nlinks, &cfg.idle);
	if (!cfg.gpu_blocks && o->channels > 1)
		cfg.gpu_blocks = GPU_BLOCKS_TOTAL / o->channels > GPU_BLOCKS_MIN ? GPU_BLOCKS_TOTAL / o->channels
										  : GPU_BLOCKS_MIN;

	if (dp_engine_init(e, &cfg, err, len) != 0)
		return -1;
	/* before the routes: each flow starts its controller when it is made */
	if (sl_tp_set_cc(e->tp, o->cc, (uint64_t)o->cc_target_us * 1000) != 0)
		sl_errmsg_format(err, len, "cannot set congestion control (a bug: routes exist already)");
	if (*err || add_routes(e, o, ports, err, len) != 0) {
		dp_engine_fini(e);
		return -1;
	}
	return 0;
}

/* DATA packets the engines have taken in, duplicates and void ones too. */
static uint64_t data_seen(struct dp_engine *engines, unsigned n)
{
	uint64_t sum = 0;

	for (unsigned ch = 0; ch < n; ch++) {
		const struct sl_tp_stats *s = sl_tp_get_stats(engines[ch].tp);
		sum += __atomic_load_n(&s->data_rx, __ATOMIC_RELAXED) + __atomic_load_n(&s->rx_dup, __ATOMIC_RELAXED) +
		       __atomic_load_n(&s->rx_void, __ATOMIC_RELAXED);
	}
	return sum;
}

/* Abort notices (a failure's) that the engines sent and no peer has
 * acknowledged yet, nor died. */
static uint32_t aborts_out(struct dp_engine *engines, unsigned n)
{
	uint32_t sum = 0;

	for (unsigned ch = 0; ch < n; ch++)
		sum += atomic_load_explicit(&engines[ch].aborts_out, memory_order_relaxed);
	return sum;
}

/* Keep acknowledging until the peers fall quiet, as TCP's TIME-WAIT does: a
 * rank exits as soon as its own sends are acknowledged, and a peer whose last
 * packet to it, or that packet's ACK, was lost would otherwise resend into
 * silence until its timeout and fail (3 ranks under 1% loss did, now and then).
 * And until this dataplane's abort notices are acknowledged, LINGER_ABORTS_NS
 * at most: a rank that exits right after its failed destroy took a notice
 * still queued (behind a full window) or lost with it, and the peer that
 * waited for it timed out without the failure's name (linger32).  What is
 * still unacknowledged after that goes as last words (dp_engine_last_words). */
static void linger_for_peers(struct dp_engine *engines, unsigned n)
{
	uint64_t start = dp_now_ns(NULL), now = start, quiet_since = start, seen = data_seen(engines, n);

	while (now - start < LINGER_ABORTS_NS) {
		bool quiet = now - quiet_since >= LINGER_QUIET_NS || now - start >= LINGER_MAX_NS;
		if (quiet && !aborts_out(engines, n))
			break;
		usleep(1000);
		now = dp_now_ns(NULL);
		uint64_t s = data_seen(engines, n);
		if (s != seen) {
			seen = s;
			quiet_since = now;
		}
	}
}

static int run(const struct opts *o, _Atomic bool *stop, _Atomic bool *ready, char *err, size_t len)
{
	static struct dp_engine engines[SL_MAX_CHANNELS];
	static struct dp_engine *eptr[SL_MAX_CHANNELS];
	static struct dp_wake *wakes[SL_MAX_CHANNELS];
	static struct dp_trace trace;
	/* Static: the ports outlive this call (see the end) and stay reachable.
	 * Channel ch's link i is at [ch * o->nlinks + i]. */
	static struct sl_port *ports[SL_MAX_CHANNELS * SL_MAX_PORTS], *base[SL_MAX_CHANNELS * SL_MAX_PORTS],
		*faulty[SL_MAX_CHANNELS * SL_MAX_PORTS];
	const struct sl_clock clock = { dp_now_ns, NULL };
	const char *const no_vdevs[] = { NULL };
	const unsigned nports = o->channels * o->nlinks;
	/* the ports DPDK runs: all but a shm mesh's */
	const unsigned dpdk_ports =
		o->mesh_memif ? nports : o->channels * (o->nlinks - (unsigned)(o->nodes > 0 ? o->nodes - 1 : 0));
	char prefix[64];
	unsigned lcore, ready_engines = 0;
	uint32_t frame = o->frame;
	size_t mem_mb = EAL_REST_MB + (dpdk_ports * sl_dpdk_port_pool_bytes(o->frame, PORT_DESC, PORT_DESC) >> 20);
	struct sl_eal_cfg ec = { .prefix = prefix, .engine_cpu = o->engine_cpu, .engines = o->channels,
				 .mem_mb = (unsigned)(mem_mb > EAL_MIN_MB ? mem_mb : EAL_MIN_MB),
				 /* EAL runs only the engines' lcores for a shm mesh: hugepages
				  * would bring nothing but a race with whoever reserved them
				  * (taken back between EAL's look and its first allocation,
				  * "Cannot allocate memory": perf/ALGORITHMS.md, gaps2) */
				 .huge = !o->no_huge && dpdk_ports > 0, .zero_copy = o->zero_copy && o->nodes > 0 && o->mesh_memif,
				 .links = dpdk_ports,
				 .log_level = "*:error",
				 .vdevs = no_vdevs };
	struct dp_server_cfg sc = { .socket_path = o->socket_path, .allow_any_user = o->allow_any_user,
				    .stop = stop, .trace = &trace };
	int rc = -1;

	snprintf(prefix, sizeof(prefix), "sluice-n%d-%d", o->node, (int)getpid());
	/* before the links: a peer maps them once its links to us are up */
	for (unsigned ch = 0; ch < o->channels; ch++)
		if (!(wakes[ch] = dp_wake_open(o->nodes > 0 ? o->memif_dir : NULL, (unsigned)o->node, ch, true, err, len)))
			goto out;
	if (open_shm_mesh(o, ports, err, len) != 0 || sl_eal_start(&ec, &lcore, err, len) != 0) {
		close_shm_links(ports, nports);
		goto out;
	}
	if (open_links(o, ports, err, len) != 0) {
		close_shm_links(ports, nports);
		goto out;
	}
	for (unsigned i = 0; i < nports; i++)
		base[i] = ports[i];
	if (o->nodes > 0 && o->mesh_memif)
		prime_links(ports, nports);
	if (o->nodes > 0 && wake_peers(o, ports, err, len) != 0)
		goto out;
	/* CRC32C and fault injection (--no-crc, --fault): the innermost wrap */
	if (prepare_links(o, ports, faulty, &clock, err, len) != 0)
		goto out;
	/* sluice-trace's taps (trace_tap.h), outermost: they record what the
	 * transport sends and sees.  One trace ring has one producer: channel 0's engine. */
	for (unsigned i = 0; i < o->nlinks; i++)
		ports[i] = dp_trace_tap(&trace, ports[i], o->links[i].node);
	for (unsigned i = 0; i < nports; i++)
		frame = ports[i]->max_frame < frame ? ports[i]->max_frame : frame;
	for (; ready_engines < o->channels; ready_engines++) {
		unsigned ch = ready_engines;
		eptr[ch] = &engines[ch];
		if (engine_setup(&engines[ch], o, ch, frame, ports + ch * o->nlinks, base + ch * o->nlinks, wakes[ch],
				 err, len) != 0)
			goto fini;
	}
	for (unsigned ch = 0; ch < o->channels; ch++) {
		if (rte_eal_remote_launch(engine_main, &engines[ch], lcore + ch) != 0) {
			sl_errmsg_format(err, len, "cannot launch channel %u's engine on lcore %u", ch, lcore + ch);
			for (unsigned k = 0; k < ch; k++) {
				atomic_store(&engines[k].stop, true);
				rte_eal_wait_lcore(lcore + k);
			}
			goto fini;
		}
	}
	if (!o->quiet)
		fprintf(stderr, "sluiced node %u: %u link(s) up%s%s, %u of %u zero-copy, %shugepages, payload %u B, "
			"%s reductions, stash limit %llu MiB, serving %s\n", o->node, o->nlinks,
			o->channels > 1 ? " per channel" : "", o->nodes > 0 && !o->mesh_memif ? " (mesh over shm)" : "",
			zero_copy_links(base, nports), nports, sl_eal_huge() ? "" : "no ", engines[0].payload,
			sl_simd_name(sl_simd_active()), (unsigned long long)(engines[0].stash_limit >> 20), o->socket_path);
	if (!o->quiet && o->channels > 1)
		fprintf(stderr, "sluiced node %u: %u channels, an engine each\n", o->node, o->channels);
	atomic_store(&dp_running_engine, &engines[0]);
	rc = dp_server_run(eptr, o->channels, &sc, ready, err, len);
	atomic_store(&dp_running_engine, NULL);
	linger_for_peers(engines, o->channels);
	for (unsigned ch = 0; ch < o->channels; ch++)
		atomic_store(&engines[ch].stop, true);
	for (unsigned ch = 0; ch < o->channels; ch++) {
		rte_eal_wait_lcore(lcore + ch);
		dp_engine_last_words(&engines[ch]);
	}
	for (unsigned ch = 0; ch < o->channels && !o->quiet; ch++) {
		print_counters(&engines[ch]);
		dp_idle_print(&engines[ch]);
		print_links(&engines[ch], o, base + ch * o->nlinks);
		print_faults(&engines[ch], o, faulty + ch * o->nlinks);
	}
fini:
	while (ready_engines > 0)
		dp_engine_fini(&engines[--ready_engines]);
out:
	/* Ports and EAL are left to the process's exit: 22.11's memif can crash
	 * its interrupt thread when a port is torn down while a peer's
	 * disconnect is being handled (seen with three embedded ranks). */
	return rc;
}

int dp_main(int argc, char **argv, _Atomic bool *stop, _Atomic bool *ready, char *err, size_t len)
{
	struct opts o;

	err[0] = '\0';
	if (parse_opts(argc, argv, &o) != 0) {
		sl_errmsg_format(err, len, "bad arguments (see above)");
		return -1;
	}
	return run(&o, stop, ready, err, len);
}
