#!/usr/bin/env bash
# `make run`: start tgproxy on 127.0.0.1 with a FakeTLS secret generated on first run and kept
# in run/, print its tg:// and https://t.me links, and serve until Ctrl-C.
set -euo pipefail
build=${1:-build}
bin="$build/tgproxy"
if [ ! -x "$bin" ]; then
    echo "run: $bin is not built" >&2
    exit 1
fi
mkdir -p run
chmod 700 run
port=${TGPROXY_PORT:-8443}
domain=${TGPROXY_DOMAIN:-www.google.com}
if [ ! -s run/secret ]; then
    "$bin" generate-secret --hex "$domain" > run/secret
    chmod 600 run/secret
    echo "run: generated a new FakeTLS secret for $domain in run/secret"
fi
if [ ! -s run/tgproxy.toml ]; then
    cat > run/tgproxy.toml <<TOML
# Written by 'make run' on first start; edit freely (see docs/tgproxy.md).
bind-to = "127.0.0.1:$port"
public-host = "127.0.0.1"

[secrets]
main = "$(cat run/secret)"
TOML
    chmod 600 run/tgproxy.toml
fi
"$bin" access run/tgproxy.toml --no-qr
echo "run: serving on 127.0.0.1:$port; Ctrl-C stops"
exec "$bin" run run/tgproxy.toml
