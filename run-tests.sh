#!/usr/bin/env bash
# The whole test suite in one command: install what is missing, then build
# and test twice: an optimized build, and one with AddressSanitizer and
# UndefinedBehaviorSanitizer.  Extra arguments go to both `meson test` runs.
set -euo pipefail
cd "$(dirname "$0")"
tools/deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build
meson test -C build --print-errorlogs "$@"
[ -d build-san ] || meson setup build-san -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ninja -C build-san
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C build-san --print-errorlogs "$@"
