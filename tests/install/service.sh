#!/usr/bin/env bash
# Installs the build into a scratch prefix and checks the systemd unit that comes with it:
# ExecStart points into that prefix, the hardening keys are there, `systemd-analyze verify`
# accepts it without a warning and `systemd-analyze security` rates its exposure low.
# Exits 77 (ctest: skipped) when systemd-analyze is not installed.
set -euo pipefail
build=$1
command -v systemd-analyze >/dev/null || { echo "systemd-analyze not installed: skipped"; exit 77; }
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
unit="$prefix/lib/systemd/system/tgproxy@.service"
test -f "$unit" || { echo "tgproxy@.service was not installed"; exit 1; }
grep -qx 'u tgproxy - "tgproxy MTProto proxy" - -' "$prefix/lib/sysusers.d/tgproxy.conf" ||
    { echo "sysusers.d/tgproxy.conf missing or wrong"; exit 1; }
grep -qx "ExecStart=$prefix/bin/tgproxy run /etc/tgproxy/%i.toml" "$unit" ||
    { echo "ExecStart does not follow the install prefix:"; grep ExecStart= "$unit"; exit 1; }
for key in 'User=tgproxy' 'AmbientCapabilities=CAP_NET_BIND_SERVICE' \
    'CapabilityBoundingSet=CAP_NET_BIND_SERVICE' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
    'ProtectHome=yes' 'PrivateTmp=yes' 'PrivateDevices=yes' 'ExecReload=/bin/kill -HUP $MAINPID' \
    'Restart=on-failure' 'RestartPreventExitStatus=64 65 78' 'SystemCallFilter=@system-service'; do
    grep -qxF "$key" "$unit" || { echo "missing hardening key: $key"; exit 1; }
done
grep -qE '^LimitNOFILE=[0-9]+$' "$unit" || { echo "missing LimitNOFILE"; exit 1; }
# A packager's staged install: ExecStart names the final path, not the staging directory.
DESTDIR="$prefix/stage" cmake --install "$build" --prefix /usr >/dev/null
grep -qx "ExecStart=/usr/bin/tgproxy run /etc/tgproxy/%i.toml" \
    "$prefix/stage/usr/lib/systemd/system/tgproxy@.service" ||
    { echo "a DESTDIR install does not name /usr/bin/tgproxy"; exit 1; }
# A template verifies as an instance; the binary it names must exist (it does: installed).
inst="$prefix/tgproxy@verify.service"
cp "$unit" "$inst"
out=$(systemd-analyze verify "$inst" 2>&1) || { echo "$out"; exit 1; }
# verify only warns about unknown keys or bad values: any line naming the unit is a failure.
if grep -F "tgproxy@verify.service" <<<"$out"; then exit 1; fi
# Exposure 0 (locked down) .. 10 (unprotected); a network daemon with this unit scores < 2.5.
systemd-analyze security --offline=yes --threshold=25 "$inst" >/dev/null 2>&1 ||
    { systemd-analyze security --offline=yes "$inst" 2>&1 | tail -1; exit 1; }
echo "tgproxy@.service: installed, verified, hardened"
