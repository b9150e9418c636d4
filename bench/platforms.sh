#!/usr/bin/env bash
# The hostile suite inside a real Docker container, with Docker's default seccomp profile and
# capabilities, as root and as a user: the platform most instructors grade on (Gradescope-like
# autograder images, JupyterHub and Kubernetes pods).
#
# No registry: the image is built from Debian's packages (debootstrap) and `docker import`ed. The
# daemon is Docker from Debian's packages (docker.io); where none is running, one is started for
# this run (vfs storage, no network) and stopped at the end. The course and its .venv are mounted
# read-only; the container's own Python (Debian 13's 3.13, the course's version) runs the course's installed
# packages.
#
#   make platforms        (needs root: apt-get install docker.io debootstrap)
#
# Prints a table: platform, user, the level and mechanisms `python -m autograder isolation` names,
# and the hostile suite's result; each run's isolation check and failures in $CACHE/run-<user>.log.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${CKPT_PLATFORMS_CACHE:-/var/tmp/ckpt-platforms}"
IMAGE="ckpt-platforms/debian:trixie"
SITE="$("$ROOT/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

die() { echo "make platforms: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (to run Docker's daemon and debootstrap)"
command -v docker >/dev/null && command -v debootstrap >/dev/null \
  || die "needs Docker and debootstrap from Debian's packages: apt-get install docker.io debootstrap"
PYVER="$("$ROOT/.venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
[ "$PYVER" = 3.13 ] || echo "note: the image's Python (Debian 13: 3.13) must be the course's minor version ($PYVER)" >&2

mkdir -p "$CACHE"
started=""
if ! docker info >/dev/null 2>&1; then
  export DOCKER_HOST="unix://$CACHE/docker.sock"
  if ! docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null || die "no Docker daemon, and no dockerd to start one"
    dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs \
      --data-root="$CACHE/data" --exec-root="$CACHE/exec" --pidfile="$CACHE/dockerd.pid" \
      -H "$DOCKER_HOST" >"$CACHE/dockerd.log" 2>&1 &
    started=$!
    trap '[ -n "$started" ] && kill "$started" 2>/dev/null; wait "$started" 2>/dev/null || true' EXIT
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || die "dockerd did not start: see $CACHE/dockerd.log"
  fi
fi

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  if [ ! -x "$CACHE/rootfs/usr/bin/python3" ]; then
    echo "building a Debian 13 root file system with debootstrap (a few minutes)..." >&2
    rm -rf "$CACHE/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates trixie "$CACHE/rootfs" \
      http://deb.debian.org/debian >"$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed: see $CACHE/debootstrap.log"
  fi
  tar -C "$CACHE/rootfs" -c . | docker import - "$IMAGE" >/dev/null
fi

# Inside: a venv of Debian's Python whose site-packages point at the course's; the hostile suite
# at the machine's own Landlock ABI and at ABI 2 (the platform emulations need root privileges a
# container does not have).
INNER='set -e
python3 -m venv --without-pip /tmp/v
echo "import site; site.addsitedir(\"'"$SITE"'\")" > /tmp/v/lib/python'"$PYVER"'/site-packages/course.pth
cd "'"$ROOT"'"
/tmp/v/bin/python -m autograder isolation > /tmp/isolation.txt 2>&1 || true
level=$(sed -n "s/^Level available: //p" /tmp/isolation.txt)
ns=$(grep -q "no namespaces (refused here)" /tmp/isolation.txt && echo "without namespaces" || echo "with namespaces")
/tmp/v/bin/python -m pytest -q -p no:cacheprovider tests/sandbox/test_hostile.py -k "abi-kernel or abi-2" > /tmp/pytest.txt 2>&1 || true
cat /tmp/isolation.txt; grep -E "^(FAILED|ERROR)" /tmp/pytest.txt || true
echo "$level|$ns|$(tail -1 /tmp/pytest.txt)"'

printf '%-34s %-6s %-8s %-20s %s\n' platform user level namespaces "hostile suite (tests/sandbox/test_hostile.py)"
status=0
for user in root 1000; do
  line=$(docker run --rm --network none --user "$user" -e HOME=/tmp -e PYTHONDONTWRITEBYTECODE=1 \
    -v "$ROOT:$ROOT:ro" -v "$(dirname "$SITE"):$(dirname "$SITE"):ro" \
    --tmpfs /tmp:exec,size=4g "$IMAGE" bash -c "$INNER" 2>&1 | tee "$CACHE/run-$user.log" | grep '|' | tail -1 || true)
  IFS='|' read -r level ns result <<<"$line"
  printf '%-34s %-6s %-8s %-20s %s\n' "Docker $(docker version -f '{{.Server.Version}}'), default seccomp" \
    "$user" "${level:-?}" "${ns:-?}" "${result:-failed: see $CACHE/run-$user.log}"
  case "$result" in *passed*) case "$result" in *failed*|*error*) status=1 ;; esac ;; *) status=1 ;; esac
done
exit $status
