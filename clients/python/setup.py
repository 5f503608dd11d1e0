"""Generates the gRPC stubs (gangsched/v1/*_pb2*.py) from ../../proto while
building, so they are never checked in: protoc with Debian's
grpc_python_plugin, or grpc_tools when that is what is installed."""

from __future__ import annotations

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "..", "proto")
FILES = [f"gangsched/v1/{n}.proto" for n in ("types", "scheduler", "admin")]


def generate(out: str) -> None:
    os.makedirs(os.path.join(out, "gangsched", "v1"), exist_ok=True)
    plugin = shutil.which("grpc_python_plugin")
    if shutil.which("protoc") and plugin:
        cmd = ["protoc", f"-I{PROTO}", f"--python_out={out}",
               f"--grpc_python_out={out}",
               f"--plugin=protoc-gen-grpc_python={plugin}"]
    else:
        cmd = ["python3", "-m", "grpc_tools.protoc", f"-I{PROTO}",
               f"--python_out={out}", f"--grpc_python_out={out}"]
    subprocess.run(cmd + FILES, check=True, cwd=PROTO)
    open(os.path.join(out, "gangsched", "v1", "__init__.py"), "a").close()


class BuildWithStubs(build_py):
    def run(self) -> None:
        generate(HERE)
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
