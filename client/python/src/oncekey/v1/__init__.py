"""Generated code of ``package oncekey.v1`` (proto/oncekey/v1/ledger.proto); do not edit.

Regenerate with scripts/polyglot-setup (python -m grpc_tools.protoc).
"""
