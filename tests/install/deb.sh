#!/usr/bin/env bash
# The Debian packages (`make deb`), installed for real: dpkg -i, then tgproxy --version,
# pkg-config --modversion tgbot, consumers built against the installed headers (pkg-config
# and find_package), tgbot-emulator answering getMe on 127.0.0.1, the man pages found by
# man(1); then dpkg --purge, and not one of the files dpkg -L listed may remain.
# Needs root (CI runs as root) and the packages: DEB_DIR (argument or TGKIT_DEB_DIR), as
# `make deb` leaves them in build/deb; `make deb-test` builds them and runs this.
# Skips (77) without root or without packages; always purges what it installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${TGKIT_DEB_DIR:-}}
if [ "$(id -u)" != 0 ]; then echo "skip: dpkg -i needs root"; exit 77; fi
if [ -z "$dir" ] || ! ls "$dir"/tgproxy_*.deb >/dev/null 2>&1; then
    echo "skip: no packages (TGKIT_DEB_DIR unset or empty); run 'make deb-test'"
    exit 77
fi
top=$(cd "$here/../.." && pwd)
ver() { sed -n "s/^#define TG_VERSION_$1 \([0-9]*\).*/\1/p" "$top/include/tgbot/common.h"; }
version=$(ver MAJOR).$(ver MINOR).$(ver PATCH)
debs=()
for f in "$dir"/*_"$version"_*.deb; do
    case $f in *-dbgsym_*) ;; *) debs+=("$f") ;; esac
done
pkgs=()
for f in "${debs[@]}"; do pkgs+=("$(dpkg-deb -f "$f" Package)"); done
echo "packages: ${pkgs[*]}"
[ ${#pkgs[@]} = 4 ] || { echo "expected 4 packages of version $version in $dir"; exit 1; }
# Never touch a package someone else installed.
for p in "${pkgs[@]}"; do
    if [ "$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null || true)" = installed ]; then
        echo "$p is already installed on this machine; not touching it"; exit 1
    fi
done
work=$(mktemp -d)
emu=
cleanup() {
    [ -z "$emu" ] || kill "$emu" 2>/dev/null || true
    dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

dpkg -i "${debs[@]}"
for p in "${pkgs[@]}"; do
    dpkg -L "$p" | while read -r f; do [ -d "$f" ] || echo "$f"; done
done > "$work/files"
echo "installed $(wc -l < "$work/files") files"

# tgproxy: the version, the unit, the sysusers entry, the user, the state directory.
got=$(/usr/bin/tgproxy --version)
case $got in *"$version"*) ;; *) echo "tgproxy --version: '$got', expected $version"; exit 1 ;; esac
test -f /lib/systemd/system/tgproxy@.service || { echo "no tgproxy@.service"; exit 1; }
grep -q '^ExecStart=/usr/bin/tgproxy run /etc/tgproxy/%i.toml' /lib/systemd/system/tgproxy@.service ||
    { echo "tgproxy@.service: ExecStart does not run /usr/bin/tgproxy"; exit 1; }
test -f /usr/lib/sysusers.d/tgproxy.conf || { echo "no sysusers.d/tgproxy.conf"; exit 1; }
getent passwd tgproxy >/dev/null || { echo "postinst did not create the tgproxy user"; exit 1; }
[ "$(stat -c %U:%a /var/lib/tgproxy)" = tgproxy:700 ] ||
    { echo "/var/lib/tgproxy: $(stat -c %U:%a /var/lib/tgproxy), expected tgproxy:700"; exit 1; }
test -d /etc/tgproxy || { echo "no /etc/tgproxy"; exit 1; }
ex=/usr/share/doc/tgproxy/examples/tgproxy.example.toml
test -f $ex || { echo "no $ex"; exit 1; }
/usr/bin/tgproxy doctor $ex >/dev/null 2>&1 || [ $? -ne 78 ] ||
    { echo "the packaged example config does not load"; /usr/bin/tgproxy doctor $ex; exit 1; }
for page in tgproxy.8 tgproxy.toml.5 tgbot-emulator.1 tgbot-json.1; do
    man -w "${page%.*}" 2>/dev/null | grep -q "/usr/share/man/man${page##*.}/$page" ||
        { echo "man does not find $page"; exit 1; }
done

# libtgbot-dev: pkg-config and CMake consumers against /usr.
got=$(pkg-config --modversion tgbot)
[ "$got" = "$version" ] || { echo "pkg-config --modversion tgbot: $got, expected $version"; exit 1; }
cc -std=c11 -Wall -Werror -o "$work/consumer" "$here/consumer.c" $(pkg-config --cflags --libs tgbot)
"$work/consumer"
ldd "$work/consumer" | grep -Eq "libtgbot\.so[.0-9]* => /(usr/)?lib/" || { echo "consumer not linked to the packaged library"; exit 1; }
cmake -S "$here/cmake_consumer" -B "$work/cm" -DCMAKE_C_FLAGS="-std=c11 -Wall -Werror" >/dev/null
cmake --build "$work/cm" >/dev/null
"$work/cm/consumer"
"$work/cm/testing_consumer"

# tgbot-emulator: serve on a port the kernel picks, answer getMe, stop on SIGTERM.
/usr/bin/tgbot-emulator --listen 127.0.0.1:0 > "$work/emu.out" 2>&1 &
emu=$!
url=
for _ in $(seq 1 200); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/emu.out" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$emu" 2>/dev/null || break
    read -r -t 0.05 < /dev/zero || true  # bounded wait for the emulator's first line
done
[ -n "$url" ] || { echo "tgbot-emulator did not start:"; cat "$work/emu.out"; exit 1; }
reply=$(curl -sS "$url/bot123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/getMe")
case $reply in *'"ok":true'*'"is_bot":true'*) ;; *) echo "getMe: $reply"; exit 1 ;; esac
kill "$emu" && wait "$emu" || { echo "tgbot-emulator did not exit 0 on SIGTERM"; exit 1; }
emu=

# Purge: nothing the packages installed stays behind.
dpkg --purge "${pkgs[@]}"
for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null || true)
    [ -z "$st" ] || [ "$st" = not-installed ] || { echo "$p still $st after purge"; exit 1; }
done
left=0
while read -r f; do
    if [ -e "$f" ] || [ -L "$f" ]; then echo "left after purge: $f"; left=1; fi
done < "$work/files"
for d in /var/lib/tgproxy /etc/tgproxy /usr/include/tgbot /usr/share/doc/tgproxy; do
    [ ! -e "$d" ] || { echo "left after purge: $d"; left=1; }
done
[ $left = 0 ] || exit 1
echo "deb packages: installed, worked and purged ($(wc -l < "$work/files") files)"
