#!/usr/bin/env bash
# with-ejabberd.sh CMD [ARGS...] - run CMD against a fresh isolated ejabberd
#
# Starts one ejabberd instance (start.sh) in a new folder
# ${EJ_TMP:-/tmp}/session-switch-ej.XXXXXX on free loopback ports it picks
# itself (so a stale instance or a parallel demo never collides), exports the
# EJ_* variables start.sh prints, puts $EJ_BIN (the instance's `ejabberdctl`
# and the `docker` stand-in) first in PATH, runs CMD, then stops the instance
# and removes its folder. Exit status: CMD's (1 if the instance would not
# start).
#
# The instance is stopped on every exit: CMD's success or failure, Ctrl-C,
# SIGTERM (trap EXIT INT TERM). CMD runs in its own session/process group
# (setsid), and INT/TERM sent to this script are forwarded to that whole
# group, so `timeout N with-ejabberd.sh ...` also ends the tests it started
# before the instance is stopped.
#
# Example:  tests/ejabberd/with-ejabberd.sh cargo test --workspace
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=tests/ejabberd/lib.sh
. "$HERE/lib.sh"

[ $# -ge 1 ] || die "usage: with-ejabberd.sh CMD [ARGS...]"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to pick free ports"

# Four distinct ports that can be bound on 127.0.0.1 right now, taken from
# below Linux's ephemeral range (32768-60999), so an outgoing connection's
# local port cannot take one of them between now and ejabberd's start.
pick_ports() {
  python3 - <<'EOF'
import random, socket
ports, socks = [], []
while len(ports) < 4:
    p = random.randint(20000, 32000)
    if p in ports:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    socks.append(s)
    ports.append(p)
print(*ports)
EOF
}

DIR=
CHILD=
# shellcheck disable=SC2317  # invoked by the traps below
cleanup() {
  local rc=$?
  trap '' INT TERM # a second Ctrl-C must not leave the node running
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
    kill -TERM -- "-$CHILD" 2>/dev/null
  fi
  if [ -n "$DIR" ]; then
    bash "$HERE/stop.sh" "$DIR" --rm || { log "ERROR: could not stop the instance in $DIR"; rc=1; }
    if find_pid >/dev/null; then
      log "ERROR: a beam.smp of $DIR is still running"
      rc=1
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
# shellcheck disable=SC2317  # invoked by the traps below
forward() {
  if [ -n "$CHILD" ]; then
    kill "-$1" -- "-$CHILD" 2>/dev/null
  else
    exit "$2" # still starting the instance: the EXIT trap stops it
  fi
}
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM

DIR=$(mktemp -d "${EJ_TMP:-/tmp}/session-switch-ej.XXXXXX") || die "mktemp failed"
read -r EJ_C2S_PORT EJ_HTTP_PORT EJ_DIST_PORT EJ_C2S_TLS_PORT < <(pick_ports)
[ -n "$EJ_C2S_TLS_PORT" ] || die "could not pick free ports"
# The node name only has to be unique on this machine (no epmd is used).
EJ_NODE="ssw${DIR##*.}@localhost"
export EJ_C2S_PORT EJ_HTTP_PORT EJ_DIST_PORT EJ_C2S_TLS_PORT EJ_NODE

ENV_LINES=$(bash "$HERE/start.sh" "$DIR") || die "the ejabberd instance did not start"
eval "$ENV_LINES"
export PATH="$EJ_BIN:$PATH"
log "ejabberd $EJ_NODE in $EJ_HOME (c2s $EJ_C2S_PORT, http $EJ_HTTP_PORT); running: $*"

# Own session and process group, so INT/TERM can be forwarded to everything
# CMD started; stdin stays the caller's. bash starts an asynchronous command
# with SIGINT ignored (no job control in a script): `env --default-signal`
# restores it, so a forwarded Ctrl-C ends CMD as it would in a terminal.
setsid env --default-signal=INT,QUIT "$@" <&0 &
CHILD=$!
RC=0
while :; do
  wait "$CHILD"
  RC=$?
  # `wait` also returns when a trapped signal arrives: wait again until the
  # child has really exited.
  kill -0 "$CHILD" 2>/dev/null || break
done
CHILD=
exit "$RC"
