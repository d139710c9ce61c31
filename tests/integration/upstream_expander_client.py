"""A BestOptions client in a process of its own, speaking an upstream release's messages.

Run by ``test_grpc_expander``: upstream's messages share the package ``grpcplugin``
and the message names of Foresight's own, so they cannot be loaded beside them in
one process. Arguments: ``--generated DIR`` (modules protoc generated from
``tests/integration/protos/expander.proto``, release 1.34.5 and later) or
``--release 1.33`` (the messages of 1.33, whose node and pod fields 2 and 4 are
Kubernetes messages: built here as bytes, which is the same on the wire, because the
Kubernetes .proto files they import are not vendored); ``--port``, ``--ca`` and
``--request`` (JSON: ``{"options": [...], "nodes": {...}}``). Prints the answer as
JSON: ``{"options": [[id, count], ...]}`` or ``{"error": "<status code name>"}``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

METHOD = "/grpcplugin.Expander/BestOptions"


def release_133_messages() -> tuple[Any, Any]:
    """1.33's request and response: Option.pod = 4, BestOptionsRequest.nodeMap = 2."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="ca133/expander.proto", package="grpcplugin")
    proto.syntax = "proto3"
    option = proto.message_type.add(name="Option")
    option.field.add(name="nodeGroupId", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    option.field.add(name="nodeCount", number=2, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    option.field.add(name="debug", number=3, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    option.field.add(name="pod", number=4, type=f.TYPE_BYTES, label=f.LABEL_REPEATED)
    request = proto.message_type.add(name="BestOptionsRequest")
    request.field.add(
        name="options",
        number=1,
        type=f.TYPE_MESSAGE,
        type_name=".grpcplugin.Option",
        label=f.LABEL_REPEATED,
    )
    entry = request.nested_type.add(name="NodeMapEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=f.TYPE_BYTES, label=f.LABEL_OPTIONAL)
    request.field.add(
        name="nodeMap",
        number=2,
        type=f.TYPE_MESSAGE,
        type_name=".grpcplugin.BestOptionsRequest.NodeMapEntry",
        label=f.LABEL_REPEATED,
    )
    response = proto.message_type.add(name="BestOptionsResponse")
    response.field.add(
        name="options",
        number=1,
        type=f.TYPE_MESSAGE,
        type_name=".grpcplugin.Option",
        label=f.LABEL_REPEATED,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    find = pool.FindMessageTypeByName
    return (
        message_factory.GetMessageClass(find("grpcplugin.BestOptionsRequest")),
        message_factory.GetMessageClass(find("grpcplugin.BestOptionsResponse")),
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generated", type=Path)
    parser.add_argument("--release", default="")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", type=Path, required=True)
    parser.add_argument("--request", required=True)
    args = parser.parse_args()
    wanted = json.loads(args.request)
    if args.release == "1.33":
        request_class, response_class = release_133_messages()
        options = [_option(o, "pod") for o in wanted["options"]]
        request = request_class(options=options, nodeMap=_bytes(wanted.get("nodes")))
    else:
        sys.path.insert(0, str(args.generated))
        module = importlib.import_module("expander_pb2")
        request_class, response_class = module.BestOptionsRequest, module.BestOptionsResponse
        options = [_option(o, "podBytes") for o in wanted["options"]]
        request = request_class(options=options, nodeBytesMap=_bytes(wanted.get("nodes")))
    credentials = grpc.ssl_channel_credentials(root_certificates=args.ca.read_bytes())
    with grpc.secure_channel(f"localhost:{args.port}", credentials) as channel:
        call = channel.unary_unary(
            METHOD,
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=response_class.FromString,
        )
        try:
            response = call(request, timeout=5)
        except grpc.RpcError as exc:
            print(json.dumps({"error": exc.code().name}))
            return 0
    print(json.dumps({"options": [[o.nodeGroupId, o.nodeCount] for o in response.options]}))
    return 0


def _option(option: dict[str, Any], pods: str) -> dict[str, Any]:
    """The option with its pods (given as text) as the bytes field ``pods``."""
    fields = {key: value for key, value in option.items() if key != "pods"}
    return fields | {pods: [pod.encode() for pod in option.get("pods", [])]}


def _bytes(nodes: dict[str, str] | None) -> dict[str, bytes]:
    return {key: value.encode() for key, value in (nodes or {}).items()}


if __name__ == "__main__":
    raise SystemExit(main())
