#!/usr/bin/env bash
# slow-ejabberdctl.sh SECONDS CTL... ARGS... - a transport stand-in for a
# slow room: runs the real ejabberdctl (CTL..., e.g. this
# instance's bin/ejabberdctl) with ejabberd's command ARGS, but sleeps
# SECONDS first when the command is a post (`send_stanza`, the CLI's;
# or `send_message`), as a loaded server or
# `docker exec` on a busy host would take that long to accept a post.
# Every other command (get_subscribers, ...) runs at once.
delay=${1:?usage: slow-ejabberdctl.sh SECONDS CTL... ARGS...}
shift
for arg in "$@"; do
  if [ "$arg" = send_stanza ] || [ "$arg" = send_message ]; then
    sleep "$delay"
    break
  fi
done
exec "$@"
