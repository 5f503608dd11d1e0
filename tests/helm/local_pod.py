"""One container of a rendered pod, run on this machine as the kubelet would
run it: its volumes materialised in a temporary directory (ConfigMaps from
the rendered objects, Secrets from what the test provides, emptyDirs), its
mount paths, downward-API variables and $(VAR) references resolved, and
the addresses it listens on or dials moved to loopback ports. So the real
binaries run with the chart's own command line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from typing import Any

from server_process import free_port

# Downward API fields the chart uses, as a local process sees them.
FIELD_VALUES = {"status.podIP": "127.0.0.1"}


class LocalContainer:
    """A container of a Deployment's or StatefulSet's pod (a claim template
    is an empty directory). `objects` maps (kind, name) to rendered objects;
    `secrets` maps a Secret's name to its data; `binaries` maps a command to
    a path; `dials` maps host:port addresses the container dials to local
    ones."""

    def __init__(self, workload: dict, container: str,
                 objects: dict[tuple[str, str], dict],
                 secrets: dict[str, dict[str, bytes]],
                 binaries: dict[str, str], namespace: str,
                 dials: dict[str, str] | None = None) -> None:
        spec = workload["spec"]["template"]["spec"]
        self.container = next(c for c in spec["containers"]
                              if c["name"] == container)
        self.dir = tempfile.mkdtemp(prefix=f"gangsched-helm-{container}-")
        self.namespace = namespace
        self.binaries = binaries
        self.dials = dict(dials or {})
        claims = [{"name": t["metadata"]["name"], "emptyDir": {}} for t in
                  workload["spec"].get("volumeClaimTemplates") or []]
        self.volumes = {v["name"]: self._materialise(v, objects, secrets)
                        for v in (spec.get("volumes") or []) + claims}
        self.ports = {p["containerPort"]: free_port()
                      for p in self.container.get("ports") or []}
        self.log_path = os.path.join(self.dir, "output.log")
        self.proc: subprocess.Popen | None = None

    def _materialise(self, volume: dict, objects: dict, secrets: dict) -> str:
        path = os.path.join(self.dir, "volumes", volume["name"])
        os.makedirs(path)
        if "configMap" in volume:
            data = objects[("ConfigMap", volume["configMap"]["name"])]["data"]
            self._write(path, {k: v.encode() for k, v in data.items()},
                        volume["configMap"].get("items"))
        elif "secret" in volume:
            name = volume["secret"]["secretName"]
            if name not in secrets:
                raise KeyError(f"the test provides no Secret {name!r}")
            self._write(path, secrets[name], volume["secret"].get("items"))
        elif "emptyDir" not in volume:
            raise ValueError(f"volume {volume['name']}: not a kind run here")
        return path

    @staticmethod
    def _write(path: str, data: dict[str, bytes],
               items: list[dict] | None) -> None:
        chosen = {i["key"]: i["path"] for i in items} if items else \
            {k: k for k in data}
        for key, rel in chosen.items():
            with open(os.path.join(path, rel), "wb") as f:
                f.write(data[key])

    def env(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for var in self.container.get("env") or []:
            if "value" in var:
                env[var["name"]] = var["value"]
                continue
            field = var["valueFrom"]["fieldRef"]["fieldPath"]
            env[var["name"]] = self.namespace \
                if field == "metadata.namespace" else FIELD_VALUES[field]
        return env

    def argv(self, extra: list[str] = ()) -> list[str]:
        env = self.env()
        command = list(self.container["command"])
        command[0] = self.binaries[command[0]]
        args = [self._rewrite(a, env) for a in self.container.get("args", [])]
        return command + args + list(extra)

    def _rewrite(self, arg: str, env: dict[str, str]) -> str:
        arg = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg)
        mounts = {m["mountPath"]: self.volumes[m["name"]]
                  for m in self.container.get("volumeMounts") or []}
        if mounts:
            # One pass, longest path first: a local directory may itself be
            # under a mount path (/tmp).
            paths = "|".join(re.escape(p) for p in
                             sorted(mounts, key=len, reverse=True))
            arg = re.sub(rf"(^|=|,)({paths})(?=/|$|,)",
                         lambda m: m.group(1) + mounts[m.group(2)], arg)
        for port, local in self.ports.items():
            arg = re.sub(rf"(=|^)(0\.0\.0\.0|127\.0\.0\.1)?:{port}$",
                         rf"\g<1>127.0.0.1:{local}", arg)
        for remote, local in self.dials.items():
            arg = arg.replace(remote, local)
        return arg

    def local_port(self, container_port: int) -> int:
        return self.ports[container_port]

    def start(self, extra: list[str] = ()) -> "LocalContainer":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(extra), env=self.env(), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def describe(self) -> str:
        status = "running" if self.alive() else \
            f"exited {self.proc.returncode if self.proc else '-'}"
        return f"{' '.join(self.argv())} ({status})\n{self.output()}"

    def terminate(self) -> None:
        """SIGTERM without waiting (stop() waits): stops several at once."""
        if self.alive():
            self.proc.terminate()

    def kill(self) -> None:
        """SIGKILL, for a process that would not stop on SIGTERM."""
        if self.alive():
            self.proc.kill()
            self.proc.wait(5)

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def stop_all(containers: list["LocalContainer"]) -> None:
        """Stops containers together, the last started first."""
        for c in reversed(containers):
            c.terminate()
        for c in reversed(containers):
            c.stop()

    def __enter__(self) -> "LocalContainer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
