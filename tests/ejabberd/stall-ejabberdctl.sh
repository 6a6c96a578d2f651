#!/usr/bin/env bash
# stall-ejabberdctl.sh WHEN PIDFILE CTL... ARGS... - a transport stand-in
# for crash tests (kill -9 at each step of a send). Runs the real
# ejabberdctl (CTL...) with ejabberd's command ARGS, except a post (`send_stanza`, the bridge's; or `send_message`):
#   WHEN=before  never posts: writes its pid to PIDFILE and hangs;
#   WHEN=after   posts for real, then writes its pid to PIDFILE and hangs.
# The hang is this very process (exec sleep), so the test ends it by pid.
when=${1:?usage: stall-ejabberdctl.sh before|after PIDFILE CTL... ARGS...}
pidfile=${2:?usage: stall-ejabberdctl.sh before|after PIDFILE CTL... ARGS...}
shift 2
for arg in "$@"; do
  [ "$arg" = send_stanza ] || [ "$arg" = send_message ] || continue
  if [ "$when" = after ]; then
    "$@" || exit
  fi
  echo "$$" >"$pidfile.tmp" && mv "$pidfile.tmp" "$pidfile"
  exec sleep 600
done
exec "$@"
