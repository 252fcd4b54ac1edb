#!/usr/bin/env bash
# tools/stage-gdb.sh: take Debian's gdb (and eu-stack) to the GPU machine,
# which has no debugger and no package registry, the way DPDK goes there
# (../shared/device/README.md).  Run here, in the project's root: it
# downloads the packages into .device/gdb (git ignores .device/) and writes
# .device/use-gdb.sh.  There, with .device carried: `. .device/use-gdb.sh;
# gdbx -batch -ex 'thread apply all bt' -p PID` (how GPU-NOTES.md section 10
# found the sanitizer stall).
set -euo pipefail

pkgs=(gdb elfutils libbabeltrace1 libboost-regex1.74.0 libdebuginfod1 libdw1 libelf1 libasm1 libipt2
	libmpfr6 libgmp10 libpython3.11 libpython3.11-minimal libpython3.11-stdlib libreadline8
	libsource-highlight4v5 libncursesw6 libtinfo6 libicu72 libxxhash0 libexpat1 libcurl3-gnutls libzstd1
	liblzma5 libffi8 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libldap-2.5-0 libgnutls30 libnettle8
	libhogweed6 libidn2-0 libunistring2 libtasn1-6 libp11-kit0 libbrotli1 libsasl2-2 libgssapi-krb5-2
	libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 libglib2.0-0 libpcre2-8-0 libssl3
	libuuid1 libmount1 libblkid1 libselinux1)
mkdir -p .device/gdb
(cd .device/gdb && apt-get download "${pkgs[@]}")
cat >.device/use-gdb.sh <<'USE'
# . .device/use-gdb.sh: unpack gdb and eu-stack with their libraries into /opt/gdb once
if [ ! -e /opt/gdb/.unpacked ]; then
	for f in .device/gdb/*.deb; do dpkg -x "$f" /opt/gdb; done
	touch /opt/gdb/.unpacked
fi
gdb_libs=/opt/gdb/usr/lib/x86_64-linux-gnu:/opt/gdb/lib/x86_64-linux-gnu
gdbx() { LD_LIBRARY_PATH=$gdb_libs PYTHONHOME=/opt/gdb/usr /opt/gdb/usr/bin/gdb "$@"; }
eustack() { LD_LIBRARY_PATH=$gdb_libs /opt/gdb/usr/bin/eu-stack "$@"; }
USE
echo "staged $(ls .device/gdb | wc -l) packages in .device/gdb; carry .device and source .device/use-gdb.sh there"
