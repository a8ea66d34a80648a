#!/usr/bin/env bash
# The man pages: `cmake --install` puts each under mandir/manN, and each renders with
# groff's warnings on (-ww) and through man(1) without a single message on stderr.
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
command -v groff >/dev/null || { echo "groff is missing (Makefile PKGS_BUILD: groff-base)"; exit 1; }
command -v man >/dev/null || { echo "man is missing (Makefile PKGS_BUILD: man-db)"; exit 1; }
cmake --install "$build" --prefix "$prefix" >/dev/null
mandir=$(find "$prefix" -type d -name man8 -printf '%h\n' | head -1)
test -n "$mandir" || { echo "no man8 directory was installed under $prefix"; exit 1; }
fail=0
for page in man8/tgproxy.8 man5/tgproxy.toml.5 man1/tgbot-emulator.1 man1/tgbot-json.1; do
    f=$mandir/$page
    if [ ! -s "$f" ]; then echo "$page: not installed"; fail=1; continue; fi
    if grep -q '@PROJECT_VERSION@' "$f"; then echo "$page: version not filled in"; fail=1; fi
    err=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$f" 2>&1 >/dev/null) || true
    [ -z "$err" ] || { echo "$page: groff -ww:"; echo "$err"; fail=1; }
    err=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null) || true
    [ -z "$err" ] || { echo "$page: man --warnings:"; echo "$err"; fail=1; }
    out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$f" 2>/dev/null | wc -l)
    [ "$out" -gt 20 ] || { echo "$page: renders to only $out lines"; fail=1; }
done
[ $fail = 0 ] && echo "man pages: ok"
exit $fail
