#!/usr/bin/env bash
# libsluice_dp.so defines no thread-local data of its own.  libsluice dlopens
# it in embedded mode: a dlopened library's __thread block is malloc'd per
# thread, and GCC 12's LeakSanitizer misreads a small one's bounds and crashed
# every embedded run at exit (CI's sanitizer build without CUDA); the
# initial-exec model instead makes dlopen fail once cudart_static's 8 KiB of
# TLS shares the block.  Use a pthread key (engine.c's this_tid).
set -euo pipefail
cd "$(dirname "$0")/.."
if hits=$(grep -rnE '\b(__thread|_Thread_local|thread_local)\b' --include='*.[ch]' dataplane proto coll gpu_dma |
	grep -vE '^[^:]+:[0-9]+:\s*(/?\*|//)'); then
	echo "thread-local data in the sources of libsluice_dp.so (use a pthread key; see this script's comment):"
	echo "$hits"
	exit 1
fi
echo "no thread-local data in dataplane/, proto/, coll/, gpu_dma/"
