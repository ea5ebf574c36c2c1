#!/usr/bin/env bash
# Install (or upgrade) sluicegate on this host, as root. Safe to run again:
# it reinstalls the package, keeps existing settings, credentials and state,
# and restarts the service that was running.
#
#   deploy/install.sh controller [--address HOST]...      the controller host
#   deploy/install.sh agent --controller HOST:7423 --token TOKEN --ca-cert-hash sha256:HEX
#                                                           each node (on the controller's own host
#                                                           the token is made with admin.conf)
# Options for both:
#   --wheel FILE     install this wheel (default: build one from the checkout
#                    this script is in, with 'pip wheel')
#   --no-start       install and enable the unit, but do not (re)start it
#   --node-name N    (agent) the node's name (default: the host name)
#   --api-port P     (agent) the controller's API port (default 7420)
#
# Layout (the unit files in deploy/systemd/ name these paths):
#   /opt/sluicegate/venv           the virtualenv; sluicectl symlinked into /usr/local/bin
#   /etc/sluicegate/*.yaml         settings (from deploy/settings/, only when absent)
#   /etc/sluicegate/admin.conf     the cluster admin's client credential (controller host, 0600)
#   /var/lib/sluicegate            controller state, owned by the 'sluicegate' system user
#   /var/lib/sluicegate-agent      agent state (root)
# Steps by hand, and what each one does: docs/install.md.
#
# SLUICEGATE_INSTALL_ROOT=DIR stages everything under DIR instead of / (an
# image build, the install test): the settings written there name paths
# under DIR, no systemctl is run, and SLUICEGATE_INSTALL_USER names an
# existing user to own the controller's state instead of creating one.
set -euo pipefail

R="${SLUICEGATE_INSTALL_ROOT:-}"
SVC_USER="${SLUICEGATE_INSTALL_USER:-sluicegate}"
PREFIX="$R/opt/sluicegate"
VENV="$PREFIX/venv"
ETC="$R/etc/sluicegate"
UNITS="$R/etc/systemd/system"
CTL_STATE="$R/var/lib/sluicegate"
AGENT_STATE="$R/var/lib/sluicegate-agent"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"

die() { echo "error: $*" >&2; exit 2; }
say() { echo "install.sh: $*"; }
usage() { { echo 'usage: install.sh controller|agent [OPTIONS]'; sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; } >&2; exit 2; }

[ $# -ge 1 ] || usage
ROLE="$1"; shift
case "$ROLE" in controller|agent) ;; -h|--help) usage ;; *) die "first argument: expected controller or agent, got '$ROLE'" ;; esac

ADDRESSES=() WHEEL="" START=1 CONTROLLER="" TOKEN="" CA_HASH="" NODE_NAME="" API_PORT=7420
while [ $# -gt 0 ]; do
  case "$1" in
    --address) ADDRESSES+=("${2:?--address needs a value}"); shift 2 ;;
    --wheel) WHEEL="${2:?--wheel needs a file}"; shift 2 ;;
    --no-start) START=0; shift ;;
    --controller) CONTROLLER="${2:?--controller needs HOST:PORT}"; shift 2 ;;
    --token) TOKEN="${2:?--token needs a value}"; shift 2 ;;
    --ca-cert-hash) CA_HASH="${2:?--ca-cert-hash needs sha256:HEX}"; shift 2 ;;
    --node-name) NODE_NAME="${2:?--node-name needs a value}"; shift 2 ;;
    --api-port) API_PORT="${2:?--api-port needs a number}"; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ "$(id -u)" = 0 ] || [ -n "$R" ] || die "run as root (it creates a system user, /etc/sluicegate and systemd units)"
if [ "$ROLE" = agent ]; then
  [ -n "$CONTROLLER" ] || die "--controller: the controller's token port HOST:7423 is required for an agent"
  case "$CONTROLLER" in *:*) ;; *) die "--controller: expected HOST:PORT, got '$CONTROLLER'" ;; esac
fi

# 1. Python and a virtualenv (Debian ships venv separately).
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "sluicegate needs Python 3.11 or newer"
if [ ! -x "$VENV/bin/python" ]; then
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    command -v apt-get >/dev/null || die "'python3 -m venv' failed; install the venv module"
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$VENV"
    python3 -m venv "$VENV"
  fi
fi

# 2. The package: a given wheel, or one built from this checkout.
if [ -z "$WHEEL" ]; then
  [ -f "$REPO/pyproject.toml" ] || die "no --wheel given and $REPO is not a sluicegate checkout"
  BUILD="$(mktemp -d)"
  trap 'rm -rf "$BUILD"' EXIT
  say "building the wheel from $REPO"
  "$VENV/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$BUILD" "$REPO"
  WHEEL="$(ls "$BUILD"/sluicegate-*.whl)"
fi
[ -f "$WHEEL" ] || die "--wheel: no such file: $WHEEL"
# The same wheel twice (a second role on one host, a re-run) is installed once.
STAMP="$VENV/.sluicegate-wheel"
sum="$(sha256sum "$WHEEL" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" = "$sum" ]; then
  say "$(basename "$WHEEL") is already installed in $VENV"
else
  say "installing $(basename "$WHEEL") into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade --force-reinstall --no-deps "$WHEEL"
  "$VENV/bin/pip" install -q --disable-pip-version-check "$WHEEL"   # its dependencies, if any are missing
  echo "$sum" > "$STAMP"
fi
install -d "$R/usr/local/bin"
ln -sf "$VENV/bin/sluicectl" "$R/usr/local/bin/sluicectl"

# 3. Settings, directories, units.
install -d -m 0755 "$ETC"
settings() {  # name, owner group: copy deploy/settings/NAME.yaml unless one exists
  local dest="$ETC/$1.yaml"
  if [ -e "$dest" ]; then say "keeping $dest"; return 1; fi
  install -m 0640 -g "$2" "$HERE/settings/$1.yaml" "$dest"
  [ -z "$R" ] || sed -i "s#/var/lib/sluicegate#$R/var/lib/sluicegate#g; s#/etc/sluicegate#$R/etc/sluicegate#g" "$dest"
  say "wrote $dest"
}
unit() {
  install -d "$UNITS"
  install -m 0644 "$HERE/systemd/sluicegate-$1.service" "$UNITS/"
}
have_systemd() { [ -z "$R" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

if [ "$ROLE" = controller ]; then
  if ! getent passwd "$SVC_USER" >/dev/null; then
    [ -z "$R" ] || die "SLUICEGATE_INSTALL_USER: no user '$SVC_USER'"
    getent group sluicegate >/dev/null || groupadd --system sluicegate
    useradd --system --gid sluicegate --home-dir /var/lib/sluicegate --no-create-home --shell /usr/sbin/nologin sluicegate
  fi
  SVC_GROUP="$(id -gn "$SVC_USER")"
  chgrp "$SVC_GROUP" "$ETC"; chmod 0750 "$ETC"
  install -d -m 0750 -o "$SVC_USER" -g "$SVC_GROUP" "$CTL_STATE"
  settings controller "$SVC_GROUP" || true
  if [ ! -f "$CTL_STATE/pki/ca.crt" ]; then
    server="${ADDRESSES[0]:-$(hostname -f 2>/dev/null || hostname)}"
    args=(--data-dir "$CTL_STATE" --server "$server:7420" --admin-config "$ETC/admin.conf")
    for a in "${ADDRESSES[@]}" "$server"; do args+=(--address "$a"); done
    say "creating the cluster CA (sluicegate-controller init)"
    "$VENV/bin/sluicegate-controller" init "${args[@]}"
    chmod 0600 "$ETC/admin.conf"
  else
    say "keeping the cluster CA in $CTL_STATE/pki"
  fi
  chown -R "$SVC_USER:$SVC_GROUP" "$CTL_STATE"
  unit controller
  if [ -d "$R/etc/logrotate.d" ]; then
    install -m 0644 "$HERE/logrotate/sluicegate" "$R/etc/logrotate.d/sluicegate"
  fi
  SERVICE=sluicegate-controller
else
  install -d -m 0700 "$AGENT_STATE"
  if settings agent "$(id -gn)"; then
    host="${CONTROLLER%:*}"
    sed -i "s|^controller: .*|controller: $host:$API_PORT|" "$ETC/agent.yaml"
    [ -z "$NODE_NAME" ] || sed -i "s|^# nodeName: .*|nodeName: $NODE_NAME|" "$ETC/agent.yaml"
  fi
  if [ ! -f "$AGENT_STATE/pki/node.pem" ]; then
    if [ -z "$TOKEN" ] && [ -z "$CA_HASH" ] && [ -r "$ETC/admin.conf" ]; then
      # The controller's own host: make a one-use token with the admin credential.
      read -r -a words <<<"$("$VENV/bin/sluicectl" --config "$ETC/admin.conf" token create --ttl 10m \
        --description "install.sh on $(hostname)" --print-join-command)"
      for i in "${!words[@]}"; do
        case "${words[$i]}" in
          --token) TOKEN="${words[$((i + 1))]}" ;;
          --ca-cert-hash) CA_HASH="${words[$((i + 1))]}" ;;
        esac
      done
    fi
    [ -n "$TOKEN" ] && [ -n "$CA_HASH" ] ||
      die "this node has not joined: --token and --ca-cert-hash are required ('sluicectl token create --print-join-command' on the admin's machine)"
    say "joining $CONTROLLER"
    join=(--config "$ETC/agent.yaml" --controller "$CONTROLLER" --token "$TOKEN" --ca-cert-hash "$CA_HASH")
    [ -z "$NODE_NAME" ] || join+=(--node-name "$NODE_NAME")
    "$VENV/bin/sluicegate-agent" join "${join[@]}"
  else
    say "already joined (keeping $AGENT_STATE/pki)"
  fi
  unit agent
  SERVICE=sluicegate-agent
fi

# 4. Enable and (re)start.
if have_systemd; then
  systemctl daemon-reload
  systemctl enable -q "$SERVICE"
  if [ "$START" = 1 ]; then
    systemctl restart "$SERVICE"
    say "$SERVICE started: systemctl status $SERVICE; journalctl -u $SERVICE"
  fi
else
  say "systemd is not running here: unit installed in $UNITS, not started"
fi
if [ "$ROLE" = controller ]; then
  cat <<MSG
install.sh: the admin credential is $ETC/admin.conf (keep it secret; copy it to ~/.config/sluicegate/config).
Join a node: on this host run
  sluicectl --config $ETC/admin.conf token create --print-join-command --join-address ${ADDRESSES[0]:-$(hostname -f 2>/dev/null || hostname)}:7423
and on the node: deploy/install.sh agent --controller HOST:7423 --token ... --ca-cert-hash sha256:...
MSG
fi
