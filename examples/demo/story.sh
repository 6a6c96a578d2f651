#!/usr/bin/env bash
# The session switch, told end to end against a real ejabberd. Run by
# `make demo` through tests/ejabberd/with-ejabberd.sh, which starts an
# isolated ejabberd (EJ_* variables, the `docker` stand-in first in PATH)
# and stops it when this script ends.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
BIN=${XSB_BIN:-$ROOT/target/debug/xmpp-session-bridge}
PY=$ROOT/target/venv/bin/python
SIM="python3 $ROOT/examples/demo/hermes_sim.py"
: "${EJ_ROOM:?run me through tests/ejabberd/with-ejabberd.sh (make demo)}"

HERMES_HOME=$(mktemp -d /tmp/session-switch-demo.XXXXXX)
export HERMES_HOME
BOT=
cleanup() {
  [ -n "$BOT" ] && kill "$BOT" 2>/dev/null
  rm -rf "$HERMES_HOME"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() {
  printf '$ %s\n' "$*"
  "$@"
}
xsb() { run "$BIN" "$@"; }

step "Setup: a fresh Hermes home with an empty state.db and the agents' config"
cat >"$HERMES_HOME/session-switch.toml" <<EOF
[xmpp]
room = "$EJ_ROOM"
transport = "ejabberdctl"
# The seed's deployment: ejabberd in a container (here a stand-in that,
# like real docker, passes no environment: the bridge adds -e LC_ALL=C.UTF-8).
ejabberdctl = ["docker", "exec", "ejabberd", "ejabberdctl"]

[redirect]
ttl_seconds = 3600

[[agents]]
name = "mohe"
jid = "mohe@$EJ_DOMAIN"
sessions = ["xmpp-mohe-v2", "xmpp-mohe"]

[[agents]]
name = "zhiwei"
jid = "zhiwei@$EJ_DOMAIN"
sessions = ["xmpp-zhiwei"]

[[agents]]
name = "xiaoguo"
jid = "xiaoguo@$EJ_DOMAIN"
sessions = ["xmpp-xiaoguo"]
EOF
echo "HERMES_HOME=$HERMES_HOME (config: session-switch.toml)"
xsb init-db
xsb agents

CLI=$(date +%Y%m%d_%H%M%S)_7c0afe
step "1. A person talks to mohe in CLI session $CLI"
$SIM cli-session "$HERMES_HOME/state.db" "$CLI"
xsb context "$CLI" --agent mohe

step "2. mohe's gateway bot is in the room (a real XMPP client, as mohe)"
exec 3< <("$PY" "$ROOT/tests/ejabberd/muc_probe.py" listen --jid "mohe@$EJ_DOMAIN" \
  --password pw-mohe --room "$EJ_ROOM" --nick mohe --port "$EJ_C2S_PORT" --count 2 --timeout 60)
read -r ready <&3
echo "  joined: $ready"
$SIM bot "$HERMES_HOME/state.db" "$BIN" "$HERMES_HOME/session-switch.toml" mohe xmpp-mohe-v2 "$EJ_ROOM" <&3 &
BOT=$!

step "3. From the CLI session, mohe speaks in the room"
MSG="The design review moves to 3pm today. 设计评审改到下午三点。"
printf '$ %s\n' "$BIN send \"$MSG\" $CLI --agent mohe"
OUT=$("$BIN" send "$MSG" "$CLI" --agent mohe)
echo "$OUT"
$SIM tool-call "$HERMES_HOME/state.db" "$CLI" "xmpp-session-bridge send \"$MSG\" \"\$HERMES_SESSION_ID\" --agent mohe" "$OUT"

step "4. zhiwei answers in the room (zhiwei's own client, through ejabberd's API)"
ANSWER="Got it, mohe: 3pm works for me. I'll move the calendar invite."
run curl -sS -X POST "$EJ_API_URL/send_message" -H 'Content-Type: application/json' \
  -d "{\"type\":\"groupchat\",\"from\":\"zhiwei@$EJ_DOMAIN\",\"to\":\"$EJ_ROOM\",\"subject\":\"\",\"body\":\"$ANSWER\"}"
echo
echo "  ... mohe's bot handles the room's two messages:"
wait "$BOT"
BOT=

step "5. The record: mohe's bot loads the CLI session for the next hour"
xsb active
xsb resolve xmpp-mohe-v2 --agent mohe
xsb resolve xmpp-zhiwei --agent zhiwei

step "6. What mohe's model sees when the room talks: the CLI conversation and zhiwei's answer"
xsb context xmpp-mohe-v2 --agent mohe

step "7. clear ends the switch: the bot falls back to its XMPP session, where mohe's line is tagged [YOU]"
xsb clear --agent mohe
xsb resolve xmpp-mohe-v2 --agent mohe
xsb context xmpp-mohe-v2 --agent mohe

step "Done: the ejabberd instance is stopped and removed next"
