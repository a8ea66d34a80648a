#!/usr/bin/env bash
# Where is Telegram's Bot API page (the generator's input)? Prints its path on stdout.
#   1. $BOTAPI_HTML, when set (a missing file there is an error, not a reason to look further);
#   2. $TGKIT_SHARED_DIR/botapi/botapi.html (default: ../shared beside the checkout);
#   3. a download of $BOTAPI_URL (default https://core.telegram.org/bots/api) with curl into
#      DOWNLOAD_DIR (first argument, default build/), when the network allows;
#   4. otherwise: exit 1 with what to do.
# The page is Telegram's text, never committed: it stays outside the tree or in build/.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dl_dir=${1:-$root/build}
url=${BOTAPI_URL:-https://core.telegram.org/bots/api}
shared=${TGKIT_SHARED_DIR:-$root/../shared}

if [ -n "${BOTAPI_HTML:-}" ]; then
    if [ -r "$BOTAPI_HTML" ]; then
        printf '%s\n' "$BOTAPI_HTML"
        exit 0
    fi
    echo "botapi-page: BOTAPI_HTML=$BOTAPI_HTML: no such readable file" >&2
    exit 1
fi
if [ -r "$shared/botapi/botapi.html" ]; then
    printf '%s\n' "$shared/botapi/botapi.html"
    exit 0
fi

why="curl is not installed"
if command -v curl >/dev/null 2>&1; then
    mkdir -p "$dl_dir" || exit 1
    out="$dl_dir/botapi.html"
    echo "botapi-page: no BOTAPI_HTML and no $shared/botapi/botapi.html; downloading $url" >&2
    if err=$(curl -fsSL --max-time 60 --retry 1 -o "$out.part" "$url" 2>&1) &&
        grep -q 'id="available-methods"\|name="available-methods"' "$out.part"; then
        mv "$out.part" "$out"
        echo "botapi-page: saved as $out" >&2
        printf '%s\n' "$out"
        exit 0
    fi
    if [ -z "$err" ]; then
        why="$url did not look like the Bot API page (no \"Available methods\" section)"
    else
        why="the download failed: ${err##*curl: }"
    fi
    rm -f "$out.part"
fi
cat >&2 <<EOF
botapi-page: cannot find Telegram's Bot API page ($why).
  The generator reads the page https://core.telegram.org/bots/api saved as HTML. Either
    - save it from a machine with a network (curl -fsSL -o botapi.html $url)
      and run: make regen BOTAPI_HTML=/path/to/botapi.html
    - or put it at $shared/botapi/botapi.html
      (or point TGKIT_SHARED_DIR at the folder holding botapi/).
EOF
exit 1
