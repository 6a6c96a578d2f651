#!/usr/bin/env bash
# start.sh - start an ISOLATED ejabberd 23.01 test instance (Debian package)
#
# Usage:  start.sh [INSTANCE_DIR]
#   INSTANCE_DIR  folder for config, Mnesia spool, logs and pid file; created
#                 if missing (default: a new /tmp/ejabberd-test.XXXXXX).
#                 An existing non-empty folder must be one made by start.sh.
#
# Stdout: `export NAME='value'` lines only (use: eval "$(bash start.sh DIR)");
#         the same lines are saved in INSTANCE_DIR/env. Progress -> stderr.
#
# What it does (idempotent, every step bounded in time):
#   1. apt-get install ejabberd if missing (no service is started by it);
#   2. writes INSTANCE_DIR/etc (ejabberd.yml from this folder, ejabberdctl.cfg);
#   2b. makes a test CA and a certificate for EJ_DOMAIN signed by it
#      (openssl), for the client port with STARTTLS (EJ_C2S_TLS_PORT); the
#      CA's certificate is printed as EJ_CA_FILE;
#   3. starts the node unless it is already running, waits until
#      `ejabberdctl status` succeeds (EJ_START_TIMEOUT, default 60 s);
#   4. registers admin + EJ_USERS (password: pw-<user>), creates room
#      EJ_ROOM_NAME@conference.EJ_DOMAIN (persistent, mam, allow_subscription,
#      logging) and MUC/Sub-subscribes EJ_SUBSCRIBERS (nick = user name).
#      Users that are not subscribers (default: `outsider`) are printed as
#      EJ_OUTSIDERS: the room silently drops what they post (docs/src/design/ejabberd-facts.md).
#
# Settings (env, read only when INSTANCE_DIR has no instance.conf yet; after
# that the saved values win - use a new folder to change them):
#   EJ_DOMAIN=meeting.localhost EJ_C2S_PORT=25222 EJ_C2S_TLS_PORT=25223 EJ_HTTP_PORT=25280
#   EJ_DIST_PORT=25210 EJ_NODE=ejtest@localhost EJ_ROOM_NAME=coregroup
#   EJ_USERS="mohe zhiwei xiaoguo outsider" EJ_SUBSCRIBERS="mohe zhiwei xiaoguo"
# Timeouts: EJ_START_TIMEOUT=60 EJ_INSTALL_TIMEOUT=900 EJ_CTL_TIMEOUT=30
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=tests/ejabberd/lib.sh
. "$HERE/lib.sh"

: "${EJ_START_TIMEOUT:=60}"
: "${EJ_INSTALL_TIMEOUT:=900}"

ME=$(id -un)
[ "$ME" = root ] || [ "$ME" = ejabberd ] ||
  die "run as root (or as user ejabberd): Debian's ejabberdctl refuses other users (exit 7)"

# ---------------------------------------------------------------- 1. install
MADE_POLICY=0
cleanup() { [ "$MADE_POLICY" = 1 ] && rm -f /usr/sbin/policy-rc.d; return 0; }
trap cleanup EXIT

apt_install() {
  DEBIAN_FRONTEND=noninteractive timeout -k 10 "$EJ_INSTALL_TIMEOUT" \
    apt-get install -y -q -o DPkg::Lock::Timeout=120 ejabberd >&2
}

ensure_installed() {
  if [ -x "$EJ_CTL_BIN" ] &&
    dpkg-query -W -f='${Status}' ejabberd 2>/dev/null | grep -q 'ok installed'; then
    return 0
  fi
  [ "$ME" = root ] || die "ejabberd is not installed and we are not root"
  log "ejabberd not installed: apt-get install -y ejabberd (about 15 s)"
  local t0=$SECONDS
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    # keep the package's postinst from starting the system-wide ejabberd
    printf '#!/bin/sh\n# temporary (ejabberd test start.sh)\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    MADE_POLICY=1
  fi
  if ! apt_install; then
    log "install failed; apt-get update and one retry"
    timeout -k 10 300 apt-get update -q >&2 || true
    apt_install || die "apt-get install ejabberd failed"
  fi
  cleanup
  MADE_POLICY=0
  [ -x "$EJ_CTL_BIN" ] || die "ejabberd installed but $EJ_CTL_BIN missing"
  log "ejabberd installed in $((SECONDS - t0)) s"
}
ensure_installed

# ------------------------------------------------------------ instance folder
if [ -n "${1:-}" ]; then
  mkdir -p -- "$1"
  DIR=$(canon_dir "$1")
else
  DIR=$(canon_dir "$(mktemp -d /tmp/ejabberd-test.XXXXXX)")
fi
if [ ! -e "$DIR/$EJ_MARKER" ]; then
  [ -z "$(ls -A "$DIR")" ] ||
    die "$DIR is not empty and was not made by start.sh; refusing to use it"
  : >"$DIR/$EJ_MARKER"
fi

if [ -f "$DIR/instance.conf" ]; then
  # shellcheck disable=SC1091
  . "$DIR/instance.conf"   # saved settings win over the environment
else
  : "${EJ_DOMAIN:=meeting.localhost}" "${EJ_C2S_PORT:=25222}" "${EJ_HTTP_PORT:=25280}"
  : "${EJ_DIST_PORT:=25210}" "${EJ_NODE:=ejtest@localhost}" "${EJ_ROOM_NAME:=coregroup}"
  : "${EJ_USERS:=mohe zhiwei xiaoguo outsider}"
  : "${EJ_SUBSCRIBERS=mohe zhiwei xiaoguo}"
fi
# Folders saved before the TLS port existed get its default.
: "${EJ_C2S_TLS_PORT:=25223}"
for v in EJ_C2S_PORT EJ_C2S_TLS_PORT EJ_HTTP_PORT EJ_DIST_PORT; do
  [[ ${!v} =~ ^[0-9]{2,5}$ ]] || die "$v must be a port number"
done
[[ $EJ_DOMAIN =~ ^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$ ]] || die "bad EJ_DOMAIN"
[[ $EJ_NODE =~ ^[A-Za-z0-9_-]+@[A-Za-z0-9-]+$ ]] || die "EJ_NODE must be name@host (short host, e.g. ejtest@localhost)"
[[ $EJ_ROOM_NAME =~ ^[a-z0-9_.-]+$ ]] || die "bad EJ_ROOM_NAME"
for u in $EJ_USERS $EJ_SUBSCRIBERS; do
  [[ $u =~ ^[a-z0-9_.-]+$ ]] || die "bad user name '$u'"
done
{
  printf "EJ_DOMAIN='%s'\nEJ_C2S_PORT='%s'\nEJ_C2S_TLS_PORT='%s'\nEJ_HTTP_PORT='%s'\nEJ_DIST_PORT='%s'\n" \
    "$EJ_DOMAIN" "$EJ_C2S_PORT" "$EJ_C2S_TLS_PORT" "$EJ_HTTP_PORT" "$EJ_DIST_PORT"
  printf "EJ_NODE='%s'\nEJ_ROOM_NAME='%s'\nEJ_USERS='%s'\nEJ_SUBSCRIBERS='%s'\n" \
    "$EJ_NODE" "$EJ_ROOM_NAME" "$EJ_USERS" "$EJ_SUBSCRIBERS"
} >"$DIR/instance.conf"

MUC="conference.$EJ_DOMAIN"
OUTSIDERS=
for u in $EJ_USERS; do
  case " $EJ_SUBSCRIBERS " in *" $u "*) ;; *) OUTSIDERS="${OUTSIDERS:+$OUTSIDERS }$u" ;; esac
done
ROOM_JID="$EJ_ROOM_NAME@$MUC"

# Layout: etc/ bin/ (root-owned, world-readable); db/ log/ muclog/ run/
# (owned by ejabberd, the user the node runs as).
mkdir -p "$DIR/etc" "$DIR/bin" "$DIR/db" "$DIR/log" "$DIR/muclog" "$DIR/run"
chmod 755 "$DIR" "$DIR/etc" "$DIR/bin"
if [ "$ME" = root ]; then
  chown ejabberd:ejabberd "$DIR/db" "$DIR/log" "$DIR/muclog" "$DIR/run"
fi

# ---------------------------------------------------------- 2. write config
# A test CA (etc/ca.pem, what a client is given to trust) and the server's
# key and certificate for EJ_DOMAIN signed by it (etc/server.pem, read by
# the node). A certificate that is its own CA would not do: rustls refuses
# a CA certificate as the server's.
make_certificate() {
  [ -s "$DIR/etc/server.pem" ] && [ -s "$DIR/etc/ca.pem" ] && return 0
  command -v openssl >/dev/null 2>&1 || die "openssl is needed for the test certificate"
  local t
  t=$(mktemp -d) || die "mktemp failed"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=session-switch test CA" \
      -keyout "$t/ca.key" -out "$t/ca.pem" &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=$EJ_DOMAIN" \
        -keyout "$t/server.key" -out "$t/server.csr" &&
      printf 'subjectAltName=DNS:%s,DNS:*.%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
        "$EJ_DOMAIN" "$EJ_DOMAIN" >"$t/ext" &&
      openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" \
        -CAcreateserial -days 30 -extfile "$t/ext" -out "$t/server.crt"
  } >/dev/null 2>&1 || { rm -rf "$t"; die "openssl could not make the test certificate"; }
  cat "$t/server.key" "$t/server.crt" >"$DIR/etc/server.pem"
  cp "$t/ca.pem" "$DIR/etc/ca.pem"
  rm -rf "$t"
  chmod 600 "$DIR/etc/server.pem"
  chmod 644 "$DIR/etc/ca.pem"
  if [ "$ME" = root ]; then chown ejabberd:ejabberd "$DIR/etc/server.pem"; fi
}

write_config() {
  make_certificate
  sed -e "s|^  TEST_DOMAIN: .*|  TEST_DOMAIN: \"$EJ_DOMAIN\"|" \
    -e "s|^  C2S_PORT: .*|  C2S_PORT: $EJ_C2S_PORT|" \
    -e "s|^  C2S_TLS_PORT: .*|  C2S_TLS_PORT: $EJ_C2S_TLS_PORT|" \
    -e "s|^  CERT_FILE: .*|  CERT_FILE: \"$DIR/etc/server.pem\"|" \
    -e "s|^  HTTP_PORT: .*|  HTTP_PORT: $EJ_HTTP_PORT|" \
    -e "s|^  MUC_LOG_DIR: .*|  MUC_LOG_DIR: \"$DIR/muclog\"|" \
    "$HERE/ejabberd.yml" >"$DIR/etc/ejabberd.yml"
  # Sourced by /usr/sbin/ejabberdctl --config-dir $DIR/etc (after its own
  # option parsing, so these values win over --config/--spool/--logs and env).
  cat >"$DIR/etc/ejabberdctl.cfg" <<EOF
# generated by start.sh for the isolated test instance in $DIR
ERLANG_NODE=$EJ_NODE
# fixed Erlang distribution port => no epmd daemon is started or used
ERL_DIST_PORT=$EJ_DIST_PORT
ERL_OPTIONS="-env ERL_CRASH_DUMP_BYTES 0 -kernel inet_dist_use_interface {127,0,0,1}"
EJABBERD_CONFIG_PATH=$DIR/etc/ejabberd.yml
SPOOL_DIR=$DIR/db
LOGS_DIR=$DIR/log
EJABBERD_LOG_PATH=$DIR/log/ejabberd.log
EJABBERD_PID_PATH=$DIR/run/ejabberd.pid
EJABBERD_BYPASS_WARNINGS=true
EOF
  cat >"$DIR/etc/inetrc" <<'EOF'
{lookup,["file","native"]}.
{host,{127,0,0,1}, ["localhost","hostalias"]}.
{file, resolv, "/etc/resolv.conf"}.
EOF
  chmod 644 "$DIR/etc/ejabberd.yml" "$DIR/etc/ejabberdctl.cfg" "$DIR/etc/inetrc"
  # bin/ejabberdctl: drop-in for `ejabberdctl` bound to this instance
  printf '#!/bin/sh\nexec %s --config-dir %s "$@"\n' "$EJ_CTL_BIN" "$DIR/etc" >"$DIR/bin/ejabberdctl"
  # bin/docker: stand-in for `docker exec [opts] CONTAINER ejabberdctl ARGS...`
  # that, like real docker, does not pass the caller's environment
  cp "$HERE/docker-standin.sh" "$DIR/bin/docker"
  chmod 755 "$DIR/bin/ejabberdctl" "$DIR/bin/docker"
}

port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# Setup commands go through the loopback HTTP API when curl exists (~10 ms
# each) and through ejabberdctl otherwise (~0.4 s each). EJ_SETUP_VIA=ctl
# forces ejabberdctl.
VIA=${EJ_SETUP_VIA:-}
[ -n "$VIA" ] || { command -v curl >/dev/null 2>&1 && VIA=http || VIA=ctl; }
[ "$VIA" = http ] || [ "$VIA" = ctl ] || die "EJ_SETUP_VIA must be http or ctl"
# api COMMAND JSON: POST to mod_http_api; body on stdout; fails unless HTTP 200
api() {
  local res code
  res=$(curl -sS -m 10 -X POST -H 'Content-Type: application/json' \
    -w '\n%{http_code}' -d "$2" "http://127.0.0.1:$EJ_HTTP_PORT/api/$1") || return 1
  code=${res##*$'\n'}
  printf '%s\n' "${res%$'\n'*}"
  [ "$code" = 200 ]
}

show_logs() {
  log "---- tail of $DIR/log/ejabberd.log ----"
  tail -n 25 "$DIR/log/ejabberd.log" >&2 2>/dev/null || true
  tail -n 10 "$DIR/log/error.log" >&2 2>/dev/null || true
}

# ------------------------------------------------------------------ 3. start
if PID=$(find_pid); then
  log "instance already running (pid $PID): $DIR"
  ctl status >/dev/null 2>&1 || die "pid $PID runs but 'ejabberdctl status' fails; run stop.sh $DIR"
else
  for p in "$EJ_C2S_PORT" "$EJ_C2S_TLS_PORT" "$EJ_HTTP_PORT" "$EJ_DIST_PORT"; do
    port_busy "$p" && die "127.0.0.1:$p is already in use (set EJ_*_PORT, new folder)"
  done
  if [ "$ME" = root ]; then
    su -s /bin/sh ejabberd -c "test -r '$DIR/etc' && test -w '$DIR/db'" ||
      die "user ejabberd cannot reach $DIR (is a parent folder not world-searchable?)"
  fi
  write_config
  rm -f "$DIR/run/ejabberd.pid"
  T0=$(date +%s%N)
  START_S=$SECONDS
  ctl start >&2 || die "ejabberdctl start failed"
  # Poll cheaply over HTTP when curl exists (one ejabberdctl call costs
  # ~0.4 s of Erlang VM start-up), then confirm once with ejabberdctl.
  until { [ "$VIA" = http ] && api status '{}' >/dev/null 2>&1 && ctl status >/dev/null 2>&1; } ||
    { [ "$VIA" = ctl ] && ctl status >/dev/null 2>&1; }; do
    if [ $((SECONDS - START_S)) -ge "$EJ_START_TIMEOUT" ]; then
      show_logs
      die "not ready after ${EJ_START_TIMEOUT}s; stop it with: stop.sh $DIR"
    fi
    if [ $((SECONDS - START_S)) -ge 5 ] && ! find_pid >/dev/null; then
      show_logs
      die "ejabberd exited during start-up (see $DIR/log)"
    fi
    sleep 0.2
  done
  PID=$(find_pid) || die "ready but no beam.smp found for $DIR/db"
  log "started pid $PID, ready after $((($(date +%s%N) - T0) / 1000000)) ms"
fi

# ------------------------------------------------------------ 4. users, room
T1=$(date +%s%N)
for u in admin $EJ_USERS; do
  if [ "$VIA" = http ]; then
    out=$(api register "{\"user\":\"$u\",\"host\":\"$EJ_DOMAIN\",\"password\":\"pw-$u\"}" 2>&1) && ok=1 || ok=0
  else
    out=$(ctl register "$u" "$EJ_DOMAIN" "pw-$u" 2>&1) && ok=1 || ok=0
  fi
  if [ "$ok" = 1 ]; then
    log "registered $u@$EJ_DOMAIN"
  else
    case "$out" in
      *"already registered"*) ;;
      *) die "register $u failed: $out" ;;
    esac
  fi
done

if [ "$VIA" = http ]; then
  out=$(api create_room "{\"name\":\"$EJ_ROOM_NAME\",\"service\":\"$MUC\",\"host\":\"$EJ_DOMAIN\"}" 2>&1) && ok=1 || ok=0
else
  out=$(ctl create_room "$EJ_ROOM_NAME" "$MUC" "$EJ_DOMAIN" 2>&1) && ok=1 || ok=0
fi
if [ "$ok" = 1 ]; then
  log "created room $ROOM_JID"
else
  case "$out" in
    *"already exists"*) ;;
    *) die "create_room failed: $out" ;;
  esac
fi

if [ "$VIA" = http ]; then
  # JSON object -> "name<TAB>value" lines, like the ejabberdctl output
  # shellcheck disable=SC2020
  opts=$(api get_room_options "{\"name\":\"$EJ_ROOM_NAME\",\"service\":\"$MUC\"}" |
    tr ',{}' '\n\n\n' | tr -d '"' | tr ':' '\t') || die "get_room_options failed"
else
  opts=$(ctl get_room_options "$EJ_ROOM_NAME" "$MUC") || die "get_room_options failed"
fi
for o in persistent mam allow_subscription logging; do
  if ! printf '%s\n' "$opts" | grep -qx "${o}[[:space:]]*true"; then
    ctl change_room_option "$EJ_ROOM_NAME" "$MUC" "$o" true >/dev/null ||
      die "change_room_option $o failed"
    log "room option $o set to true"
  fi
done
for u in $EJ_SUBSCRIBERS; do
  if [ "$VIA" = http ]; then
    api subscribe_room "{\"user\":\"$u@$EJ_DOMAIN\",\"nick\":\"$u\",\"room\":\"$ROOM_JID\",\"nodes\":\"urn:xmpp:mucsub:nodes:messages\"}" >/dev/null
  else
    ctl subscribe_room "$u@$EJ_DOMAIN" "$u" "$ROOM_JID" urn:xmpp:mucsub:nodes:messages >/dev/null
  fi || die "subscribe_room $u failed"
done
log "users/room ready in $((($(date +%s%N) - T1) / 1000000)) ms (via $VIA)"

# ------------------------------------------------------------------- output
{
  e() { printf "export %s='%s'\n" "$1" "$2"; }
  e EJ_HOME "$DIR"
  e EJ_NODE "$EJ_NODE"
  e EJ_PID "$PID"
  e EJ_CTL "$DIR/bin/ejabberdctl"
  e EJ_CTL_CMD "$EJ_CTL_BIN --config-dir $DIR/etc"
  e EJ_BIN "$DIR/bin"
  e EJ_DOMAIN "$EJ_DOMAIN"
  e EJ_MUC_SERVICE "$MUC"
  e EJ_ROOM_NAME "$EJ_ROOM_NAME"
  e EJ_ROOM "$ROOM_JID"
  e EJ_ADMIN_JID "admin@$EJ_DOMAIN"
  e EJ_USERS "$EJ_USERS"
  e EJ_SUBSCRIBERS "$EJ_SUBSCRIBERS"
  e EJ_OUTSIDERS "$OUTSIDERS"
  e EJ_PASSWORD_PREFIX "pw-"
  e EJ_C2S_HOST 127.0.0.1
  e EJ_C2S_PORT "$EJ_C2S_PORT"
  e EJ_C2S_TLS_PORT "$EJ_C2S_TLS_PORT"
  e EJ_CA_FILE "$DIR/etc/ca.pem"
  e EJ_HTTP_PORT "$EJ_HTTP_PORT"
  e EJ_API_URL "http://127.0.0.1:$EJ_HTTP_PORT/api"
  e EJ_DIST_PORT "$EJ_DIST_PORT"
  e EJ_LOG "$DIR/log/ejabberd.log"
  e EJ_MUC_LOG_DIR "$DIR/muclog/$EJ_ROOM_NAME"
} | tee "$DIR/env"
