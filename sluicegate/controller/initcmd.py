"""``sluicegate-controller init | certs renew | hash-token``: setting up and keeping the cluster PKI.

``init`` creates the cluster CA and the controller's serving certificate in
``DATA_DIR/pki`` (kept if they exist), and writes a first cluster-admin
credential as a client config file.  ``certs renew`` re-issues the serving
certificate (same names; a running controller picks it up at the next
handshake) or an admin credential.  ``hash-token`` prints the SHA-256 that
the token file stores for a bearer token read from standard input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from sluicegate import clientconfig
from sluicegate.controller import datacmd
from sluicegate.security import pki
from sluicegate.security.authn import hash_token
from sluicegate.security.authority import AuthorityError, init_pki, issue_server_cert, load_ca
from sluicegate.security.identity import CLUSTER_ADMIN_GROUP

COMMANDS = ("init", "certs", "hash-token", *datacmd.COMMANDS)


def write_admin_config(
    pki_dir: Path, path: Path, *, server: str, user: str = "admin", days: int = pki.USER_DAYS
) -> None:
    ca_key, ca_cert = load_ca(pki_dir)
    key = pki.new_key()
    cert = pki.issue(
        ca_key,
        ca_cert,
        key.public_key(),
        common_name=user,
        organizations=(CLUSTER_ADMIN_GROUP,),
        client=True,
        days=days,
    )
    clientconfig.write(path, servers=[server], ca=pki.cert_pem(ca_cert), cert=pki.cert_pem(cert), key=pki.key_pem(key))


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] in datacmd.COMMANDS:
        return datacmd.main(argv)
    p = argparse.ArgumentParser(prog="sluicegate-controller", description="Set up the cluster PKI.")
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("init", help="create the cluster CA, the serving certificate and an admin credential")
    i.add_argument("--data-dir", required=True, help="the controller's data directory (the PKI goes to DATA_DIR/pki)")
    i.add_argument(
        "--address",
        action="append",
        default=[],
        help="a name or IP the controller is reached at (repeatable; localhost and 127.0.0.1 always)",
    )
    i.add_argument("--server", default="127.0.0.1:7420", help="HOST:PORT written into the admin config")
    i.add_argument(
        "--admin-config",
        default=None,
        help="where to write the admin's client config (default $SLUICEGATE_CONFIG or ~/.config/sluicegate/config)",
    )
    i.add_argument("--admin-user", default="admin")
    i.add_argument(
        "--force", action="store_true", help="replace an existing CA (every certificate it issued stops working)"
    )
    c = sub.add_parser("certs", help="renew certificates")
    csub = c.add_subparsers(dest="what", required=True)
    r = csub.add_parser("renew", help="re-issue the serving certificate, or (--admin-config) an admin credential")
    r.add_argument("--data-dir", required=True)
    r.add_argument("--address", action="append", default=[], help="names/IPs (default: those it has)")
    r.add_argument("--admin-config", help="re-issue the admin credential into this client config instead")
    r.add_argument("--server", default="127.0.0.1:7420")
    r.add_argument("--admin-user", default="admin")
    sub.add_parser("hash-token", help="print the token file's sha256 for a token read from standard input")
    ns = p.parse_args(argv)
    try:
        if ns.command == "hash-token":
            token = sys.stdin.readline().strip()
            if not token:
                print("error: no token on standard input", file=sys.stderr)
                return 2
            print(hash_token(token))
            return 0
        pki_dir = Path(ns.data_dir) / "pki"
        if ns.command == "init":
            created = init_pki(pki_dir, addresses=ns.address, force=ns.force)
            ca = pki.load_cert((pki_dir / "ca.crt").read_bytes())
            print(("created" if created else "kept the existing") + f" cluster CA in {pki_dir}")
            admin = Path(ns.admin_config) if ns.admin_config else clientconfig.default_path()
            if created or not admin.exists():
                write_admin_config(pki_dir, admin, server=ns.server, user=ns.admin_user)
                print(f"wrote the {ns.admin_user} (cluster-admin) client config to {admin}")
            print(f"CA certificate hash (for 'sluicegate-agent join --ca-cert-hash'): {pki.ca_cert_hash(ca)}")
            print(f"next: set 'pkiDir: {pki_dir.resolve()}' in the controller's settings (or --pki-dir) and start it")
            return 0
        if ns.admin_config:
            write_admin_config(pki_dir, Path(ns.admin_config), server=ns.server, user=ns.admin_user)
            print(f"re-issued the {ns.admin_user} credential in {ns.admin_config}")
            return 0
        cert = issue_server_cert(pki_dir, addresses=ns.address or None)
        print(
            f"re-issued {pki_dir / 'server.crt'} (valid until {cert.not_valid_after_utc:%Y-%m-%d}); "
            "a running controller uses it from its next TLS handshake"
        )
        return 0
    except (pki.PkiError, AuthorityError, clientconfig.ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
