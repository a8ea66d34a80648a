#!/bin/sh
# scripts/botapi-page.sh (make regen's page lookup): BOTAPI_HTML first, then
# TGKIT_SHARED_DIR/botapi/, then a curl download, else a message that says what to do.
# Downloads use file:// URLs: no network is touched.
set -u
lookup=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
check() { # check NAME CONDITION...
    name=$1
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
mkdir -p "$t/shared/botapi" "$t/dl"
printf '<h3><a class="anchor" name="available-methods"></a>Available methods</h3>\n' \
    >"$t/page.html"
cp "$t/page.html" "$t/shared/botapi/botapi.html"
echo '<html>a captive portal</html>' >"$t/notpage.html"

out=$(BOTAPI_HTML="$t/page.html" TGKIT_SHARED_DIR="$t/shared" "$lookup" "$t/dl" 2>"$t/err")
rc=$?
check "BOTAPI_HTML wins over the shared folder" [ $rc -eq 0 -a "$out" = "$t/page.html" ]

BOTAPI_HTML="$t/nope.html" "$lookup" "$t/dl" >/dev/null 2>"$t/err"
check "a missing BOTAPI_HTML is an error" [ $? -eq 1 ]
check "  that names the file" grep -q "BOTAPI_HTML=$t/nope.html: no such readable file" "$t/err"

out=$(env -u BOTAPI_HTML TGKIT_SHARED_DIR="$t/shared" "$lookup" "$t/dl" 2>/dev/null)
check "the shared folder's page" [ "$out" = "$t/shared/botapi/botapi.html" ]

out=$(env -u BOTAPI_HTML TGKIT_SHARED_DIR=/nonexistent BOTAPI_URL="file://$t/page.html" \
    "$lookup" "$t/dl" 2>"$t/err")
same=no
cmp -s "$t/page.html" "$t/dl/botapi.html" && same=yes
check "else a download" [ "$out" = "$t/dl/botapi.html" -a $same = yes ]
check "  that says where it went" grep -q "saved as $t/dl/botapi.html" "$t/err"
rm -f "$t/dl/botapi.html"

env -u BOTAPI_HTML TGKIT_SHARED_DIR=/nonexistent BOTAPI_URL="file://$t/gone.html" \
    "$lookup" "$t/dl" >"$t/out" 2>"$t/err"
rc=$?
check "no page anywhere fails" [ $rc -eq 1 -a ! -s "$t/out" ]
check "  saying the download failed" grep -q "cannot find Telegram's Bot API page (the download failed" "$t/err"
check "  and how to pass a saved page" grep -q "make regen BOTAPI_HTML=/path/to/botapi.html" "$t/err"
check "  or where to put it" grep -q "put it at /nonexistent/botapi/botapi.html" "$t/err"
check "  leaving no partial file" [ ! -e "$t/dl/botapi.html" -a ! -e "$t/dl/botapi.html.part" ]

env -u BOTAPI_HTML TGKIT_SHARED_DIR=/nonexistent BOTAPI_URL="file://$t/notpage.html" \
    "$lookup" "$t/dl" >"$t/out" 2>"$t/err"
rc=$?
check "a page that is not the Bot API page is refused" [ $rc -eq 1 -a ! -e "$t/dl/botapi.html" ]
check "  saying so" grep -q "did not look like the Bot API page" "$t/err"

if [ $fails -ne 0 ]; then
    echo "--- last stderr:"
    cat "$t/err"
    exit 1
fi
