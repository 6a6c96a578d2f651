#!/usr/bin/env bash
# `make deb-test`: checks the Debian package `make deb` built, unpacked with
# `dpkg-deb -x` into a temporary folder that is removed on any exit. Each
# failure prints one line naming what is wrong and exits 1.
#
# Usage: tests/deb/check-deb.sh target/debian/session-switch_VERSION_ARCH.deb
set -euo pipefail

fail() { echo "deb-test: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || fail "usage: check-deb.sh PACKAGE.deb (one package; make deb removes older ones)"
deb=$1
[[ -f $deb ]] || fail "no package at $deb: run make deb"
command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing (Debian's dpkg package)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/session-switch-deb-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x could not unpack $deb"

# Control fields: the name the docs use, an architecture, the dependencies
# dpkg-shlibdeps found for the binary ($auto), a maintainer.
field() { dpkg-deb --field "$deb" "$1"; }
[[ $(field Package) == session-switch ]] || fail "Package is '$(field Package)', not session-switch"
for f in Version Architecture Maintainer Depends Section Description; do
  [[ -n $(field "$f") ]] || fail "the control field $f is empty or missing"
done
field Depends | grep -q 'libc6' || fail "Depends ($(field Depends)) does not name libc6: \$auto found no libraries"
dpkg-deb -e "$deb" "$tmp/control" || fail "dpkg-deb -e could not read the control area of $deb"
for s in preinst postinst prerm postrm; do
  [[ ! -e $tmp/control/$s ]] || fail "the package has a $s script: installing it must enable and start nothing"
done

# The files, where Debian expects them.
doc=usr/share/doc/session-switch
unit=lib/systemd/system/session-switch-bot@.service
for f in usr/bin/xmpp-session-bridge "$unit" "$doc/README.Debian" "$doc/README.md" \
         "$doc/examples/session-switch.toml" "$doc/copyright" \
         usr/share/man/man1/xmpp-session-bridge.1.gz; do
  [[ -f $root/$f ]] || fail "/$f is not in the package"
done
[[ -x $root/usr/bin/xmpp-session-bridge ]] || fail "/usr/bin/xmpp-session-bridge is not executable"
extra=$(cd "$root" && find . -type f | sed 's#^\./##' | grep -Ev "^(usr/bin/|$unit\$|$doc/|usr/share/man/man1/)" || true)
[[ -z $extra ]] || fail "files the package should not hold: $extra"

# The binary runs and names the package's version.
bin=$root/usr/bin/xmpp-session-bridge
version=$("$bin" --version) || fail "xmpp-session-bridge --version failed"
upstream=$(field Version); upstream=${upstream%-*}
[[ $version == "xmpp-session-bridge $upstream" ]] ||
  fail "--version says '$version', the package is $upstream"
echo "deb-test: $version"

# The embedded precompiled policy loads on this CPU (made for the baseline
# CPU, it loads on every CPU of the architecture): a command that runs the
# policy logs whether it compiled anything.
"$bin" --db "$tmp/state.db" init-db >/dev/null 2>"$tmp/init-db.err" ||
  fail "init-db failed: $(cat "$tmp/init-db.err")"
RUST_LOG=session_switch::runtime=debug "$bin" --config "$root/$doc/examples/session-switch.toml" \
  --db "$tmp/state.db" resolve xmpp-mohe-v2 --agent mohe \
  >/dev/null 2>"$tmp/resolve.err" || fail "resolve with the example config failed: $(cat "$tmp/resolve.err")"
grep -q 'precompiled in the host binary, nothing compiled' "$tmp/resolve.err" ||
  fail "the embedded precompiled policy was not used on this CPU: $(grep -m1 'precompiled' "$tmp/resolve.err" || echo 'no line about it')"
echo "deb-test: the embedded policy ran precompiled, nothing compiled"

# The unit's ExecStart, run as systemd would ($$ is $, %i the instance),
# with the unpacked binary: without User= ($USER unset) or HERMES_HOME it
# exits 2 with a line saying what to set; with both it execs the bot.
exec_start=$(sed -n 's/^ExecStart=//p' "$root/$unit")
[[ $exec_start == *"exec /usr/bin/xmpp-session-bridge bot --agent"* ]] ||
  fail "the unit's ExecStart does not exec /usr/bin/xmpp-session-bridge bot --agent: $exec_start"
command_line=${exec_start//\$\$/\$}
command_line=${command_line//%i/mohe}
command_line=${command_line//\/usr\/bin\/xmpp-session-bridge/$bin}
status=0
env -u USER -u HERMES_HOME bash -c "$command_line" 2>"$tmp/unit.err" || status=$?
[[ $status -eq 2 ]] && grep -q 'systemctl edit session-switch-bot@mohe' "$tmp/unit.err" ||
  fail "ExecStart without User= and HERMES_HOME: exit $status, '$(cat "$tmp/unit.err")' (want 2 and what to set)"
mkdir "$tmp/home"
status=0
USER=nobody HERMES_HOME=$tmp/home bash -c "$command_line" 2>"$tmp/bot.err" || status=$?
[[ $status -eq 2 ]] && grep -q 'session-switch.toml' "$tmp/bot.err" ||
  fail "ExecStart with an empty HERMES_HOME: exit $status, '$(tail -n1 "$tmp/bot.err")' (want the bot's exit 2 for a missing config)"
echo "deb-test: the unit's ExecStart refuses an unset User=/HERMES_HOME and runs the bot otherwise"

# systemd's own check of the unit, where systemd is installed (it checks that
# the commands ExecStart names exist on this machine).
if command -v systemd-analyze >/dev/null; then
  if ! systemd-analyze verify "$root/$unit" >"$tmp/verify.out" 2>&1 ||
     grep -q 'session-switch-bot@' "$tmp/verify.out"; then
    fail "systemd-analyze verify: $(cat "$tmp/verify.out")"
  fi
  echo "deb-test: systemd-analyze verify passed"
else
  echo "deb-test: systemd-analyze not installed: the unit's systemd check skipped"
fi

echo "deb-test: $(basename "$deb") ok ($(du -k "$deb" | cut -f1) KiB)"
echo "deb-test: files:"
dpkg-deb --contents "$deb" | awk '{print "  " $6 ($1 ~ /^-/ ? " (" $3 " bytes)" : "")}' | grep -v '/$'
