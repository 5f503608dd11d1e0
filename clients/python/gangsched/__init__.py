"""gangsched: a typed Python client for the gangsched gRPC API.

The hand-written modules live here; the protobuf and gRPC stubs
(``gangsched.v1.*_pb2``) are generated from ``proto/`` by the build (into
``build/clients/python``) or by ``setup.py build_py``, never checked in.
``extend_path`` lets the two directories form one package.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)  # noqa: F821 (module global)

from gangsched.client import Client, GangschedError  # noqa: E402
from gangsched.quantity import format_quantity, parse_quantity  # noqa: E402
from gangsched.spec import SpecError, node, workload_spec  # noqa: E402
from gangsched.watch import Resync, Watcher  # noqa: E402

__all__ = [
    "Client",
    "GangschedError",
    "Resync",
    "SpecError",
    "Watcher",
    "format_quantity",
    "node",
    "parse_quantity",
    "workload_spec",
]
