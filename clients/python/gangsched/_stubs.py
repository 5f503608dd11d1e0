"""The generated protobuf / gRPC modules, with a clear error when the
build has not generated them (see clients/python/README.md)."""

from __future__ import annotations

try:
    from gangsched.v1 import admin_pb2, admin_pb2_grpc  # noqa: F401
    from gangsched.v1 import scheduler_pb2, scheduler_pb2_grpc  # noqa: F401
    from gangsched.v1 import types_pb2  # noqa: F401
except ImportError as e:  # pragma: no cover - an installation error
    raise ImportError(
        "gangsched's generated stubs (gangsched.v1.*_pb2) were not found: "
        "build the project (they are generated into build/clients/python) "
        "or install the package with its setup.py, which generates them"
    ) from e
