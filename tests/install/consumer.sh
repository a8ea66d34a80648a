#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds two tiny consumers against the
# *installed* library: one with pkg-config, one with CMake's find_package(tgbot).
set -euo pipefail
build=$1
here=$2
# A sanitized library needs sanitized consumers (the runtime must come first).
san=${3:-}
CFLAGS="-std=c11 -Wall -Werror"
[ -z "$san" ] || CFLAGS="$CFLAGS -fsanitize=$san"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name tgbot.pc -printf '%h\n' | head -1)
test -n "$libdir" || { echo "tgbot.pc was not installed"; exit 1; }
test -f "$prefix/include/tgbot/tgbot.h" || { echo "headers were not installed"; exit 1; }
export PKG_CONFIG_PATH="$libdir"
# pkg-config, shared library
cc $CFLAGS -o "$prefix/consumer" "$here/consumer.c" $(pkg-config --cflags --libs tgbot)
LD_LIBRARY_PATH="$libdir/.." "$prefix/consumer"
# static libtgbot; its dependencies (Requires.private) stay shared, as Debian ships them
deps=$(pkg-config --print-requires-private tgbot | awk '{print $1}')
cc $CFLAGS -o "$prefix/consumer_static" "$here/consumer.c" \
    $(pkg-config --cflags tgbot) -Wl,-Bstatic -L"$libdir/.." -ltgbot -Wl,-Bdynamic \
    $(pkg-config --libs $deps) -lpthread
"$prefix/consumer_static"
# find_package
cmake -S "$here/cmake_consumer" -B "$prefix/cm" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="$CFLAGS" >/dev/null
cmake --build "$prefix/cm" >/dev/null
LD_LIBRARY_PATH="$libdir/.." "$prefix/cm/consumer"
test -x "$prefix/bin/tgbot-emulator" || { echo "tgbot-emulator was not installed"; exit 1; }
"$prefix/cm/testing_consumer"
# the test helper through pkg-config too (tgbot_testing.pc: static, with libtgbot.a)
cc $CFLAGS -o "$prefix/testing_consumer_pc" "$here/testing_consumer.c" \
    $(pkg-config --cflags --libs tgbot_testing)
"$prefix/testing_consumer_pc"
echo "install consumers: ok"
