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
GUARD_BOTS=()
ROOM_BOT=
GATEWAY=
LLM=
# The story's exit status is the script's: stopping what it started
# neither hides a failure nor makes one (a child's own exit status, a
# process already gone).
cleanup() {
  local status=$?
  set +e
  [ -n "$BOT" ] && kill "$BOT" 2>/dev/null
  for pid in "${GUARD_BOTS[@]}"; do kill "$pid" 2>/dev/null; done
  [ -n "$ROOM_BOT" ] && kill "$ROOM_BOT" 2>/dev/null
  # The gateway runs in a process group of its own (setsid). It writes
  # its logs into HERMES_HOME while it shuts down: wait for it (SIGKILL
  # after 20 s) before the folder goes.
  if [ -n "$GATEWAY" ] && kill -- "-$GATEWAY" 2>/dev/null; then
    ( sleep 20; kill -KILL -- "-$GATEWAY" 2>/dev/null ) &
    local killer=$!
    wait "$GATEWAY" 2>/dev/null
    kill "$killer" 2>/dev/null
  fi
  [ -n "$LLM" ] && kill "$LLM" 2>/dev/null
  rm -rf "$HERMES_HOME"
  exit "$status"
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
# The legacy `xmpp_session_bridge.py`'s deployment: ejabberd in a container
# (here a stand-in that, like real docker, passes no environment: the transport
# adds -e LC_ALL=C.UTF-8).
ejabberdctl = ["docker", "exec", "ejabberd", "ejabberdctl"]

[redirect]
ttl_seconds = 3600

[loop_guard]
max_hops = 6
# The demo runs two chains within a minute; the default 20 agent messages
# per 300 s would cut the second one short.
window_messages = 40

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
MSG="@zhiwei @xiaoguo The design review moves to 3pm today. 设计评审改到下午三点。"
printf '$ %s\n' "$BIN send \"$MSG\" $CLI --agent mohe"
OUT=$("$BIN" send "$MSG" "$CLI" --agent mohe)
echo "$OUT"
$SIM tool-call "$HERMES_HOME/state.db" "$CLI" "xmpp-session-bridge send \"$MSG\" \"\$HERMES_SESSION_ID\" --agent mohe" "$OUT"

step "4. zhiwei answers in the room (zhiwei's own client, through ejabberd's API)"
ANSWER="Got it, mohe: 3pm works for me. I'll move the calendar invite."
run curl -sS -X POST "$EJ_API_URL/send_message" -H 'Content-Type: application/json' \
  -d "{\"type\":\"groupchat\",\"from\":\"zhiwei@$EJ_DOMAIN\",\"to\":\"$EJ_ROOM\",\"subject\":\"\",\"body\":\"$ANSWER\"}"
echo
echo "  ... mohe's bot handles zhiwei's answer (its own reflection came during step 3):"
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

step "8. The loop guard: three bots that answer everything, each deciding with \`admit\`"
# The guard trusts the human-origin marker only from an agent's real JID,
# which the room shows its occupants only when it is not anonymous.
run ejabberdctl change_room_option "$EJ_ROOM_NAME" "$EJ_MUC_SERVICE" anonymous false >/dev/null
for a in mohe zhiwei xiaoguo; do
  names=()
  for o in mohe zhiwei xiaoguo; do [ "$o" = "$a" ] || names+=(--name "$o"); done
  "$PY" "$ROOT/tests/ejabberd/guard_bot.py" bot --jid "$a@$EJ_DOMAIN" --password "pw-$a" \
    --room "$EJ_ROOM" --nick "$a" --agent "$a" --port "$EJ_C2S_PORT" "${names[@]}" \
    --bridge "$BIN" --config "$HERMES_HOME/session-switch.toml" --db "$HERMES_HOME/state.db" \
    >"$HERMES_HOME/$a.decisions" 2>/dev/null &
  GUARD_BOTS+=($!)
done
for a in mohe zhiwei xiaoguo; do
  until grep -q READY "$HERMES_HOME/$a.decisions"; do sleep 0.2; done
done
# Until every bot has been silent for 4 s (the bots share the CLI's
# precompiled policy, so a decision takes well under a second); then the
# room's messages as mohe's bot saw them (from, what the guard said).
settle() {
  local last= now
  sleep 2
  while :; do
    now=$(cat "$HERMES_HOME"/*.decisions | wc -l)
    [ "$now" = "$last" ] && break
    last=$now
    sleep 4
  done
  python3 - "$HERMES_HOME" "$1" <<'PY'
import json, sys
home, skip = sys.argv[1], int(sys.argv[2])
seen = [json.loads(l) for l in open(home + "/mohe.decisions") if '"decision"' in l][skip:]
agents = 0
for d in seen:
    agents += d["nick"] in ("mohe", "zhiwei", "xiaoguo") and not d["human_origin"]
    print("  %-8s %-46.46s mohe: %s (hops %s)" % (d["nick"], d["body"], d["reason"], d["hops"]))
print("  -> %d agent messages, then silence" % agents)
PY
}
SEEN=$(grep -c '"decision"' "$HERMES_HOME/mohe.decisions" || true)
run "$BIN" send "zhiwei, xiaoguo: can you both check the invite?" "$CLI" --agent mohe >/dev/null
settle "$SEEN"

step "9. A person in the room speaks: the counters reset and the agents talk again"
SEEN=$(grep -c '"decision"' "$HERMES_HOME/mohe.decisions" || true)
run "$PY" "$ROOT/tests/ejabberd/guard_bot.py" say --jid "outsider@$EJ_DOMAIN" --password pw-outsider \
  --room "$EJ_ROOM" --nick alice --port "$EJ_C2S_PORT" --body "mohe, zhiwei, xiaoguo: one more round, please" >/dev/null
settle "$SEEN"

step "10. The real room bot: mohe's bot drives a real Hermes API server (v31 line, a fake LLM)"
VENV=$ROOT/target/hermes-venv/v31
FAKE_LLM=$ROOT/../shared/hermes/fake_llm.py
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$FAKE_LLM" ]; then
  echo "  (skipped: needs $VENV from \`make hermes-venvs\` and $FAKE_LLM)"
else
  for pid in "${GUARD_BOTS[@]}"; do kill "$pid" 2>/dev/null; done
  GUARD_BOTS=()
  python3 "$FAKE_LLM" --port 0 --log "$HERMES_HOME/llm.jsonl" --port-file "$HERMES_HOME/llm.port" >/dev/null 2>&1 &
  LLM=$!
  until [ -s "$HERMES_HOME/llm.port" ]; do sleep 0.1; done
  API_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'model:\n  provider: custom\n  base_url: http://127.0.0.1:%s/v1\n  default: fake-model\n  api_key: sk-fake\n' \
    "$(cat "$HERMES_HOME/llm.port")" >"$HERMES_HOME/config.yaml"
  printf 'API_SERVER_ENABLED=true\nAPI_SERVER_KEY=sk-demo-0123456789abcdef\nAPI_SERVER_HOST=127.0.0.1\nAPI_SERVER_PORT=%s\n' \
    "$API_PORT" >"$HERMES_HOME/.env"
  printf '\n[bot]\nserver = "127.0.0.1:%s"\ntls = "insecure-plaintext"   # the test ejabberd offers no TLS\n\n[bot.agents.mohe]\npassword = "pw-mohe"\n' \
    "$EJ_C2S_PORT" >>"$HERMES_HOME/session-switch.toml"
  echo "  [bot] added to session-switch.toml; Hermes's .env names its API server (port $API_PORT)"
  setsid "$VENV/bin/python" -c 'import sys; from hermes_cli.main import main; sys.argv[0] = "hermes"; sys.exit(main())' \
    gateway run >"$HERMES_HOME/gateway.log" 2>&1 &
  GATEWAY=$!
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$API_PORT/health" >/dev/null && break; sleep 0.2; done
  # v31 warms its turn machinery (import run_agent) after /health answers; a
  # turn before that ends can meet the half-imported module (a 500).
  for _ in $(seq 300); do
    grep -qs "Turn machinery warmed\|Turn-machinery warm-up failed" "$HERMES_HOME/gateway.log" "$HERMES_HOME"/logs/*.log && break
    sleep 0.2
  done
  "$BIN" bot --agent mohe 2>"$HERMES_HOME/bot.log" &
  ROOM_BOT=$!
  for _ in $(seq 300); do grep -q "joined" "$HERMES_HOME/bot.log" && break; sleep 0.2; done
  sed 's/^/  bot: /' "$HERMES_HOME/bot.log"
  run "$BIN" send "Reminder: the design review is at 3pm." "$CLI" --agent mohe >/dev/null
  run "$PY" "$ROOT/tests/ejabberd/guard_bot.py" say --jid "outsider@$EJ_DOMAIN" --password pw-outsider \
    --room "$EJ_ROOM" --nick alice --port "$EJ_C2S_PORT" --body "mohe, what time is the review?" >/dev/null
  for _ in $(seq 600); do grep -q "replied to alice" "$HERMES_HOME/bot.log" && break; sleep 0.2; done
  echo "  ... what the bot decided:"
  grep "decide\|replied" "$HERMES_HOME/bot.log" | sed 's/^/  bot: /'
  echo "  ... the turn ran in the CLI session (the send above recorded it), where Hermes stored it:"
  xsb context "$CLI" --agent mohe --limit 2
  kill "$ROOM_BOT" && wait "$ROOM_BOT" || true
  ROOM_BOT=
  echo "  SIGTERM: $(tail -1 "$HERMES_HOME/bot.log")"
fi

step "Done: the ejabberd instance is stopped and removed next"
