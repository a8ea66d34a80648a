#!/bin/sh
# layers.sh SRC_DIR: fail when a tgproxy source includes a layer above its own.
#
# src/proxy is in folders by dependency, lowest first (docs/DESIGN.md):
#   wire      pure, fuzzed parsers and codecs: bytes in, values out
#   config    TOML -> a validated struct config
#   services  threads of their own or blocking I/O (DNS, DoH, the ACL updater, page fetches)
#   engine    the event loop and a connection's life
#   daemon    the process: CLI, workers, operators' endpoints
# A file may include src/core, its own layer and the layers below; nothing from src/bot or
# src/emulator. Every file sits in one of the folders, and every include names its layer
# ("proxy/engine/conn.h"), so the rule is read straight from the #include lines. src/core
# includes no proxy header at all. Run by ctest as proxy/layers.
set -u
src=${1:?usage: layers.sh SRC_DIR}
[ -d "$src/proxy" ] || { echo "layers.sh: $src/proxy: no such directory" >&2; exit 2; }
order="wire config services engine daemon"

rank() { # rank NAME -> 1..5, or 0 when NAME is not a layer
    i=1
    for l in $order; do
        [ "$l" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo 0
}

bad=0
for f in $(cd "$src" && find proxy core -name '*.[ch]' | sort); do
    case $f in
    core/*)
        own=core
        mine=0
        ;;
    proxy/*/*)
        own=${f#proxy/}
        own=${own%%/*}
        mine=$(rank "$own")
        if [ "$mine" = 0 ]; then
            echo "$src/$f: folder '$own' is not a layer ($order)"
            bad=1
            continue
        fi
        ;;
    *)
        echo "$src/$f: outside the layer folders; move it into one of: $order"
        bad=1
        continue
        ;;
    esac
    # Each quoted include with its line number: "12 proxy/engine/conn.h".
    incs=$(awk -F'"' '/^[ \t]*#[ \t]*include[ \t]*"/ { print FNR, $2 }' "$src/$f")
    [ -n "$incs" ] || continue
    while read -r line inc; do
        case $inc in
        core/*) ;;
        proxy/*/*)
            to=${inc#proxy/}
            to=${to%%/*}
            r=$(rank "$to")
            if [ "$own" = core ]; then
                echo "$src/$f:$line: includes $inc: src/core includes no proxy header"
                bad=1
            elif [ "$r" = 0 ]; then
                echo "$src/$f:$line: includes $inc: '$to' is not a layer ($order)"
                bad=1
            elif [ "$r" -gt "$mine" ]; then
                echo "$src/$f:$line: includes $inc: layer $to is above $own"
                bad=1
            fi
            ;;
        *)
            if [ "$own" != core ]; then
                echo "$src/$f:$line: includes \"$inc\": name core/ or proxy/<layer>/ headers"
                bad=1
            fi
            ;;
        esac
    done <<EOF
$incs
EOF
done
if [ $bad != 0 ]; then
    echo "layers: FAILED (a layer includes only itself, the layers below it and src/core)"
    exit 1
fi
echo "layers: ok ($order)"
