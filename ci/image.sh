#!/usr/bin/env bash
# Builds gpubot's image without a registry and checks it the way a read-only pod runs it.
#
#   1. hadolint Dockerfile
#   2. a Debian bookworm base with debootstrap (minbase + python3, python3-venv,
#      ca-certificates), cached in $GPUBOT_IMAGE_CACHE, imported as localhost/gpubot-base:bookworm
#   3. podman build --isolation chroot -t localhost/gpubot:ci . on that base
#   4. the image's filesystem (podman image mount: read-only) run with chroot as uid 10001,
#      with only /tmp and /var/lib/gpubot writable: --version, rules lint/test, diagnose of a
#      snapshot, and `gpubot serve` answering /readyz and a webhook against the simulator
#      (which runs outside the chroot, from this checkout's gpubot).
#
# Needs root (debootstrap, mounts, chroot), podman, debootstrap, hadolint and a `gpubot` on
# PATH or in .venv (`pip install -e '.[dev]'`). Environment:
#   GPUBOT_IMAGE_CACHE  where the debootstrap tree is kept (default ~/.cache/gpubot-image)
#   DEBIAN_MIRROR       default: the bookworm mirror apt uses (/etc/apt/sources.list*)
#   IMAGE               default localhost/gpubot:ci
#   PIP_CERT / pip's global.cert   the CA bundle for pip inside the build (a build secret)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

IMAGE=${IMAGE:-localhost/gpubot:ci}
BASE=localhost/gpubot-base:bookworm
CACHE=${GPUBOT_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpubot-image}
PACKAGES=python3,python3-venv,ca-certificates
UID_GID=10001:10001
TOKEN=ci-image-token

say() { printf '\n== %s (%ss)\n' "$*" "$(($(date +%s) - start))"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

if [ -x .venv/bin/gpubot ]; then HOST_BIN=$PWD/.venv/bin; else HOST_BIN=$(dirname "$(command -v gpubot)"); fi
[ -x "$HOST_BIN/gpubot" ] || fail "no gpubot on PATH or in .venv (pip install -e '.[dev]')"
PATH=$HOST_BIN:$PATH

# ---- 1. hadolint --------------------------------------------------------------------------------
say "hadolint Dockerfile"
hadolint Dockerfile

# ---- 2. the base image --------------------------------------------------------------------------
mirror() {
  # The first bookworm (not -security/-updates) source apt uses, deb822 or one-line format.
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm( |\n|$)/ && !/security/ {
           for (i = 1; i <= NF; i++) if ($i == "URIs:") { print $(i + 1); exit } }' "$f"
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $3 == "bookworm" { print $2 }'
}
MIRROR=${DEBIAN_MIRROR:-$(mirror 2>/dev/null | head -n 1 || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

root=$CACHE/bookworm-minbase
stamp="bookworm minbase $PACKAGES $MIRROR"
if [ "$(cat "$root.stamp" 2>/dev/null)" != "$stamp" ]; then
  say "debootstrap bookworm from $MIRROR into $root"
  rm -rf "$root" "$root.stamp"
  mkdir -p "$CACHE"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR" \
    > "$CACHE/debootstrap.log" 2>&1 || { tail -n 30 "$CACHE/debootstrap.log"; fail debootstrap; }
  # What an image needs none of: apt's downloads and lists, manuals, translations; the
  # host's resolv.conf (the runtime provides one). Licences (copyright files) stay.
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/man/* \
    "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/etc/resolv.conf
  find "$root"/usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
  printf '%s\n' "$stamp" > "$root.stamp"
  podman rmi -f "$BASE" > /dev/null 2>&1 || true
fi
if ! podman image exists "$BASE"; then
  say "podman import $BASE"
  tar --numeric-owner -C "$root" -c . |
    podman import --quiet --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$BASE" > /dev/null
fi

# ---- 3. the image -------------------------------------------------------------------------------
say "podman build $IMAGE"
ca=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
ca=${ca:-/etc/ssl/certs/ca-certificates.crt}
index=${PIP_INDEX_URL:-$(python3 -m pip config get global.index-url 2>/dev/null || true)}
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
build_args=(--build-arg "BASE_IMAGE=$BASE" --build-arg "VERSION=$version"
  --build-arg "REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)")
[ -z "$index" ] || build_args+=(--build-arg "PIP_INDEX_URL=$index")
[ ! -s "$ca" ] || build_args+=(--secret "id=ca,src=$ca")
previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
podman build --isolation chroot --pull=never "${build_args[@]}" -t "$IMAGE" -f Dockerfile . \
  > "$CACHE/build.log" 2>&1 || { tail -n 40 "$CACHE/build.log"; fail "podman build"; }
# The image this build replaced, now untagged (the builder stage's layers stay as a cache).
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$IMAGE")" ]; then
  podman rmi "$previous" > /dev/null 2>&1 || true
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "image $IMAGE: $size bytes ($((size / 1000000)) MB)"
podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" | grep -v '^$' > "$CACHE/image.env"
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "$user" = "$UID_GID" ] || fail "image user is '$user', expected $UID_GID"

# ---- 4. run it from its filesystem --------------------------------------------------------------
say "podman image mount + chroot as $UID_GID"
work=$(mktemp -d)
mnt=""
mounts=()
sim_pid=""
serve_pid=""
cleanup() {
  set +e
  [ -z "$serve_pid" ] || { kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null; }
  [ -z "$sim_pid" ] || { kill "$sim_pid" 2>/dev/null; wait "$sim_pid" 2>/dev/null; }
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}"; done
  [ -z "$mnt" ] || podman image unmount "$IMAGE" > /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mnt=$(podman image mount "$IMAGE")

# The image's root stays as podman mounted it (read-only); the writable places are what a pod
# gives it: an emptyDir on /tmp and a volume on /var/lib/gpubot, owned by the user.
mkdir -p "$work/tmp" "$work/data"
chmod 1777 "$work/tmp"
chown "$UID_GID" "$work/data"
bind() { mount --bind "$1" "$mnt$2"; mounts+=("$mnt$2"); }
bind "$work/tmp" /tmp
bind "$work/data" /var/lib/gpubot
mount -t proc proc "$mnt/proc"; mounts+=("$mnt/proc")
# /dev as a container runtime makes it: a small tmpfs with the usual character devices.
mount -t tmpfs -o mode=0755,size=1m tmpfs "$mnt/dev"; mounts+=("$mnt/dev")
for dev in null zero full random urandom tty; do touch "$mnt/dev/$dev"; bind "/dev/$dev" "/dev/$dev"; done
mkdir -m 1777 "$mnt/dev/shm"
mount -t tmpfs -o mode=1777,size=16m tmpfs "$mnt/dev/shm"; mounts+=("$mnt/dev/shm")

if touch "$mnt/etc/gpubot-write-test" 2>/dev/null; then
  rm -f "$mnt/etc/gpubot-write-test"
  # podman mounts images read-only; if a storage driver did not, the check below still
  # proves the user can write nowhere else.
  echo "note: podman's image mount is writable for root here; checking as $UID_GID only"
else
  echo "the image's root filesystem is mounted read-only: $(findmnt -no OPTIONS "$mnt" | cut -d, -f1)"
fi

mapfile -t image_env < "$CACHE/image.env"
# As the pod runs it: the image's user, environment and working directory. Every step execs
# the next, so a command started with `&` has the pid of the program itself.
in_image=(chroot --userspec="$UID_GID" "$mnt" /usr/bin/env -i "${image_env[@]}"
  /bin/sh -c 'cd /var/lib/gpubot && exec "$@"' sh)
in_image() { "${in_image[@]}" "$@"; }

say "what uid ${UID_GID%%:*} may write to"
# -xdev stays on the image's root: /tmp, /var/lib/gpubot, /dev and /proc are other mounts.
writable=$(in_image find / -xdev \( -path /tmp -o -path /var/lib/gpubot -o -path /dev -o -path /proc \) \
  -prune -o -writable -print 2>/dev/null || true)
[ -z "$writable" ] || { printf '%s\n' "$writable" | head -n 20; fail "the user can write to the image's files"; }
echo "nothing on the image's root filesystem; /tmp and /var/lib/gpubot are the pod's volumes"

say "gpubot --version"
in_image gpubot --version

say "gpubot rules lint / rules test (the rules at GPUBOT_RULES_DIR=/etc/gpubot/rules)"
in_image gpubot rules lint
in_image gpubot rules test

say "gpubot diagnose --snapshot"
cp rules/tests/snapshots/healthy.json "$work/tmp/snapshot.json"
in_image gpubot diagnose --snapshot /tmp/snapshot.json --format json > "$work/diagnose.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["diagnoses"]), "diagnoses")' \
  "$work/diagnose.json"

say "gpubot serve against the simulator"
gpubot sim serve --port 0 --kubeconfig-out "$work/kubeconfig" > "$work/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 100); do [ -s "$work/kubeconfig" ] && break; sleep 0.2; done
[ -s "$work/kubeconfig" ] || { cat "$work/sim.log"; fail "the simulator wrote no kubeconfig"; }
# Files the kubeconfig names (a CA, a client certificate, a token) are inlined: the chroot
# sees only its own /tmp.
"$HOST_BIN/python" - "$work/kubeconfig" "$work/tmp/kubeconfig" <<'EOF'
import base64, pathlib, sys, yaml
config = yaml.safe_load(pathlib.Path(sys.argv[1]).read_text())
for section, key in (("clusters", "cluster"), ("users", "user")):
    for entry in config.get(section) or []:
        item = entry.get(key) or {}
        for name in ("certificate-authority", "client-certificate", "client-key"):
            if name in item:
                data = pathlib.Path(item.pop(name)).read_bytes()
                item[name + "-data"] = base64.b64encode(data).decode()
        if "tokenFile" in item:
            item["token"] = pathlib.Path(item.pop("tokenFile")).read_text().strip()
pathlib.Path(sys.argv[2]).write_text(yaml.safe_dump(config))
EOF
chmod 0644 "$work/tmp/kubeconfig"
port=$("$HOST_BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${in_image[@]}" env GPUBOT_SERVE__BEARER_TOKEN="$TOKEN" \
  gpubot serve --kubeconfig /tmp/kubeconfig --store-url sqlite:////var/lib/gpubot/gpubot.db \
  --port "$port" > "$work/serve.log" 2>&1 &
serve_pid=$!
ready=""
for _ in $(seq 150); do
  if curl -fsS "http://127.0.0.1:$port/readyz" > /dev/null 2>&1; then ready=yes; break; fi
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.2
done
[ -n "$ready" ] || { cat "$work/serve.log"; fail "gpubot serve never answered /readyz"; }
echo "/readyz: $(curl -fsS "http://127.0.0.1:$port/readyz")"
curl -fsS "http://127.0.0.1:$port/healthz" > /dev/null
curl -fsS "http://127.0.0.1:$port/metrics" | grep -q '^# HELP' || fail "/metrics has no metrics"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/alertmanager" \
  -H 'Content-Type: application/json' -d '{}')
[ "$code" = 401 ] || fail "a webhook without the token got $code, expected 401"
payload='{"version":"4","status":"firing","receiver":"gpubot","groupKey":"{}:{}","truncatedAlerts":0,
"groupLabels":{},"commonLabels":{},"commonAnnotations":{},"externalURL":"http://am:9093",
"alerts":[{"status":"firing","labels":{"alertname":"GPUXidError","node":"gpu-a1","xid":"79",
"gpu":"0","severity":"critical"},"annotations":{},"startsAt":"2025-01-01T00:00:00Z",
"endsAt":"0001-01-01T00:00:00Z","generatorURL":"","fingerprint":"ci0000000001"}]}'
curl -fsS -X POST "http://127.0.0.1:$port/alertmanager" -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -d "$payload"
echo
kill "$serve_pid"
wait "$serve_pid" || true
serve_pid=""
ls -la "$work/data"
[ -s "$work/data/gpubot.db" ] || fail "no store in the data volume"
if grep -q -E 'Read-only file system|Permission denied' "$work/serve.log"; then
  cat "$work/serve.log"
  fail "gpubot serve tried to write outside /tmp and /var/lib/gpubot"
fi

say "done: image $IMAGE, $size bytes"
