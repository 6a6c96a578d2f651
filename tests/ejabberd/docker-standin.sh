#!/usr/bin/env bash
# Stand-in for `docker`, installed by start.sh as INSTANCE/bin/docker.
#
# Emulates only `docker exec [OPTIONS] CONTAINER ejabberdctl ARGS...` (the
# legacy tool's production form) by running this instance's INSTANCE/bin/ejabberdctl,
# so code that runs `docker exec ejabberd ejabberdctl ...` is tested unchanged
# with PATH="$EJ_BIN:$PATH".
#
# Like real docker, the command does NOT see the caller's environment: it runs
# under `env -i` with only a minimal PATH plus the `-e`/`--env` values
# (`-e NAME` without a value passes the caller's NAME, as docker does). So a
# caller that forgets `-e LC_ALL=C.UTF-8` gets the double-encoded non-ASCII
# text it would get in production (docs/src/design/ejabberd-facts.md).
# CONTAINER must equal $EJ_DOCKER_CONTAINER (default "ejabberd"), else it
# fails the way docker does (exit 1, "No such container").
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
[ "${1:-}" = exec ] || { echo "docker stand-in: only 'docker exec' is supported" >&2; exit 125; }
shift
envs=()
add_env() {
  case "$1" in
    *=*) envs+=("$1") ;;
    *) [ -n "${!1+x}" ] && envs+=("$1=${!1}") ;;
  esac
  return 0
}
while [ $# -gt 0 ]; do
  case "$1" in
    -i | -t | -it | -ti | -d | --interactive | --tty | --detach | --privileged) shift ;;
    -e | --env) add_env "${2:?docker stand-in: -e needs a value}"; shift 2 ;;
    --env=*) add_env "${1#--env=}"; shift ;;
    -u | --user | -w | --workdir) shift 2 ;;
    --user=* | --workdir=*) shift ;;
    --) shift; break ;;
    -*) echo "docker stand-in: unsupported option $1" >&2; exit 125 ;;
    *) break ;;
  esac
done
container=${1:-}
[ -n "$container" ] || { echo "docker stand-in: missing CONTAINER" >&2; exit 125; }
shift
if [ "$container" != "${EJ_DOCKER_CONTAINER:-ejabberd}" ]; then
  echo "Error response from daemon: No such container: $container" >&2
  exit 1
fi
cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  ejabberdctl | */ejabberdctl)
    exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      "${envs[@]}" "$here/ejabberdctl" "$@"
    ;;
  *)
    # docker's own answer when the command is not in the container
    echo "OCI runtime exec failed: exec: \"$cmd\": executable file not found in \$PATH" >&2
    exit 127
    ;;
esac
