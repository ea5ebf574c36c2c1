"""The client configuration file: where the controller is and how to prove who you are.

Looked up in order: ``--config``, ``$SLUICEGATE_CONFIG``,
``$XDG_CONFIG_HOME/sluicegate/config`` (``~/.config/sluicegate/config``).
``sluicegate-controller init`` writes the first admin's; it is YAML, mode
0600, and self-contained (PEM inline, as a kubeconfig's ``*-data`` fields)::

    servers: [controller.example:7420]
    certificateAuthority: |        # the cluster CA (PEM)
      -----BEGIN CERTIFICATE-----
    clientCertificate: |           # CN = user, O = groups
    clientKey: |
    token: ...                     # instead of a certificate: a bearer token (use the token port)

No file at all means plaintext to ``127.0.0.1:7420`` (a controller without TLS).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from sluicegate.security.pki import write_private

_FIELDS = ("servers", "certificateAuthority", "clientCertificate", "clientKey", "token")


class ConfigError(Exception):
    """The config file is unreadable or wrong; the message names the file and field."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    servers: tuple[str, ...] = ()
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    token: str | None = None
    path: str = ""

    @property
    def tls(self) -> bool:
        return self.ca is not None


class _Dumper(yaml.SafeDumper):
    """PEM blocks as YAML literal blocks, readable as they would be in a .pem file."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def default_path() -> Path:
    env = os.environ.get("SLUICEGATE_CONFIG")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sluicegate" / "config"


def load(path: str | None = None) -> ClientConfig | None:
    """The configuration at ``path`` (or the default place); None when there is none."""
    explicit = path is not None or "SLUICEGATE_CONFIG" in os.environ
    p = Path(path) if path else default_path()
    try:
        text = p.read_text()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{p}: no such client config file") from None
        return None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read client config: {exc.strerror}") from exc
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping")
    for k in raw:
        if k not in _FIELDS:
            raise ConfigError(f"{p}: {k}: unknown field (known: {', '.join(_FIELDS)})")
    servers = raw.get("servers", [])
    if isinstance(servers, str):
        servers = [servers]
    if not isinstance(servers, list) or not all(isinstance(s, str) and s for s in servers):
        raise ConfigError(f"{p}: servers: expected a list of HOST:PORT")

    def pem(name: str) -> bytes | None:
        v = raw.get(name)
        if v is None:
            return None
        if not isinstance(v, str) or "-----BEGIN" not in v:
            raise ConfigError(f"{p}: {name}: expected PEM text")
        return v.encode()

    cfg = ClientConfig(servers=tuple(servers), ca=pem("certificateAuthority"), cert=pem("clientCertificate"),
                       key=pem("clientKey"), token=raw.get("token") or None, path=str(p))
    if (cfg.cert is None) != (cfg.key is None):
        raise ConfigError(f"{p}: clientCertificate and clientKey go together")
    if (cfg.cert is not None or cfg.token) and cfg.ca is None:
        raise ConfigError(f"{p}: certificateAuthority: needed to verify the controller when credentials are sent")
    return cfg


def write(path: Path, *, servers: list[str], ca: bytes, cert: bytes | None = None, key: bytes | None = None,
          token: str | None = None) -> None:
    doc: dict[str, object] = {"servers": servers, "certificateAuthority": ca.decode()}
    if cert is not None and key is not None:
        doc["clientCertificate"] = cert.decode()
        doc["clientKey"] = key.decode()
    if token:
        doc["token"] = token
    text = "# sluicegate client configuration: keep it private (it holds a key)\n"
    text += yaml.dump(doc, Dumper=_Dumper, sort_keys=False)
    write_private(path, text.encode())
