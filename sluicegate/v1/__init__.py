"""Generated gRPC/protobuf modules for sluicegate.v1 (scripts/gen_proto.py). Do not edit."""
