#!/usr/bin/env bash
# hanging-ejabberdctl.sh PIDFILE [ARGS...] - stand-in for an ejabberdctl that
# never answers (tests of the time limit).
#
# Like the real one (su -> sh -> erl), it leaves the work to a child that
# holds stdout/stderr open; it writes "SHELL_PID CHILD_PID" to PIDFILE so a
# test can check that a time-out killed the whole process group, not just
# the process it started. ARGS (ejabberd's command) are ignored.
pidfile=${1:?usage: hanging-ejabberdctl.sh PIDFILE [ARGS...]}
sleep 600 &
printf '%s %s\n' "$$" "$!" >"$pidfile"
wait
