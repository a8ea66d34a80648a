#!/usr/bin/env bash
# `make demo`: start tgbot-emulator and an example bot against it, print the web chat's URL,
# and run until Ctrl-C (which stops both). DEMO_BOT picks the example (default
# inline_keyboard), EMULATOR_PORT the port (default 8081).
set -euo pipefail
build=${1:-build}
bot=${DEMO_BOT:-inline_keyboard}
port=${EMULATOR_PORT:-8081}
emulator="$build/tgbot-emulator"
example="$build/examples/$bot/$bot"
for f in "$emulator" "$example"; do
    if [ ! -x "$f" ]; then
        echo "demo: $f is not built" >&2
        exit 1
    fi
done
# Any well-formed token works with the emulator; this one is only for the demo.
token="1000001:AAHdemoTokenForTheLocalEmulatorAAAAAAA"
"$emulator" --listen "127.0.0.1:$port" --bot "$token:${bot}_bot" &
emu=$!
trap 'kill $bot_pid $emu 2>/dev/null; wait 2>/dev/null' EXIT INT TERM
bot_pid=
for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/control/state" && break
    kill -0 $emu 2>/dev/null || exit 1
    sleep 0.1
done
TELEGRAM_BOT_TOKEN="$token" TELEGRAM_API_URL="http://127.0.0.1:$port" "$example" &
bot_pid=$!
echo
echo "demo: the $bot example is talking to the emulator."
echo "demo: open http://127.0.0.1:$port/ , pick @${bot}_bot and send /start"
echo "demo: press Ctrl-C to stop both"
wait $emu
