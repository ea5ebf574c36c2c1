#!/usr/bin/env python3
"""Regenerate sluicegate/v1/*_pb2*.py(i) from proto/ — the only way to produce them.

Usage: python scripts/gen_proto.py [--out DIR]

With --out, writes into DIR instead of the repository (the staleness test
uses this to compare a fresh generation with what is committed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"


def generate(out: Path) -> list[Path]:
    protos = sorted(PROTO_ROOT.rglob("*.proto"))
    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *[str(p.relative_to(PROTO_ROOT)) for p in protos],
    ]
    code = protoc.main(args)
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")
    pkg = out / "sluicegate" / "v1"
    init = pkg / "__init__.py"
    init.write_text('"""Generated gRPC/protobuf modules for sluicegate.v1 (scripts/gen_proto.py). Do not edit."""\n')
    return sorted(pkg.iterdir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT)
    ns = parser.parse_args()
    for path in generate(ns.out):
        print(path.relative_to(ns.out))


if __name__ == "__main__":
    sys.exit(main())
