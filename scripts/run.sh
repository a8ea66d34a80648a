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
existed=false
[ -s run/tgproxy.toml ] && existed=true
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
# The file, once written, is the operator's: TGPROXY_PORT only shapes a new one. Say what the
# file really listens on, and say so when a TGPROXY_PORT given now does not apply.
bind=$(sed -n 's/^[[:space:]]*bind-to[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' run/tgproxy.toml | head -n 1)
if $existed && [ -n "${TGPROXY_PORT:-}" ] && [ "$bind" != "127.0.0.1:$TGPROXY_PORT" ]; then
    echo "run: TGPROXY_PORT=$TGPROXY_PORT not applied: run/tgproxy.toml already exists" \
        "(bind-to = \"${bind:-see the file}\"); edit it, or delete it to write a new one"
fi
"$bin" access run/tgproxy.toml --no-qr
echo "run: serving on ${bind:-the bind-to of run/tgproxy.toml}; Ctrl-C stops"
exec "$bin" run run/tgproxy.toml
