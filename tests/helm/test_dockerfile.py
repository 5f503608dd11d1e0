"""The repository's Dockerfile, checked without a container runtime (none
runs on the CI machines, so the image itself is never built here): the
build stage uses the scripts CI runs; every package the final stage
installs has an apt candidate, and covers what the built binaries link
(ldd -> dpkg -S) and what the shim imports; every COPY source exists in the
repository or in the build tree the build stage makes; the final stage's
file layout, assembled in a temporary directory, runs the shim; the user
is the chart's non-root uid; the default command's flags exist.

Run by ctest (image.dockerfile) with GANGSCHED_SERVER, GANGSCHED_CTL and
GANGSCHED_BUILD_DIR naming the built server, CLI and build tree.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCE = "/src"            # the build stage's WORKDIR
BUILD = "/src/build"       # and its build tree


@dataclasses.dataclass
class Instruction:
    op: str
    args: str


@dataclasses.dataclass
class Stage:
    image: str
    name: str
    instructions: list[Instruction]

    def all(self, op: str) -> list[Instruction]:
        return [i for i in self.instructions if i.op == op]


def parse(path: str) -> list[Stage]:
    """Stages of a Dockerfile: continuation lines joined, comments out."""
    with open(path) as f:
        text = f.read()
    logical, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    stages: list[Stage] = []
    for line in logical:
        op, _, args = line.strip().partition(" ")
        op = op.upper()
        if op == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) == 3 and \
                parts[1].upper() == "AS" else ""
            stages.append(Stage(parts[0], name, []))
        else:
            stages[-1].instructions.append(Instruction(op, args.strip()))
    return stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse(os.path.join(ROOT, "Dockerfile"))


def env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        pytest.fail(f"{name} must be set")
    return value


def installed_packages(stage: Stage) -> list[str]:
    packages = []
    for run in stage.all("RUN"):
        for command in run.args.split("&&"):
            words = shlex.split(command)
            if words[:2] == ["apt-get", "install"]:
                packages += [w for w in words[2:] if not w.startswith("-")]
    return packages


def test_two_stages_on_debian_12_with_the_ci_scripts(
        stages: list[Stage]) -> None:
    assert [s.image for s in stages] == ["debian:12", "debian:12-slim"]
    build = " ".join(i.args for i in stages[0].all("RUN"))
    # Only what building needs, and only what ships is built.
    assert "bash scripts/install-deps.sh build" in build
    assert "bash scripts/build.sh" in build
    assert "GANGSCHED_TESTS=OFF" in build
    assert stages[0].all("WORKDIR")[0].args == SOURCE
    assert f"GANGSCHED_BUILD_DIR={BUILD}" in build
    assert not installed_packages(stages[0]), "the build stage installs " \
        "through scripts/install-deps.sh only"


def test_every_final_package_has_an_apt_candidate(
        stages: list[Stage]) -> None:
    packages = installed_packages(stages[-1])
    assert packages
    assert not without_candidate(packages)


def without_candidate(packages: list[str]) -> list[str]:
    """The packages apt has no candidate version of."""
    out = subprocess.run(["apt-cache", "policy", *packages],
                         capture_output=True, text=True, check=True).stdout
    candidates = dict(re.findall(r"^(\S+):\n(?:.*\n)*?\s+Candidate: (\S+)",
                                 out, re.M))
    return [p for p in packages if candidates.get(p, "(none)") == "(none)"]


def install_sets() -> dict[str, list[str]]:
    """scripts/install-deps.sh's package arrays, by name."""
    with open(os.path.join(ROOT, "scripts", "install-deps.sh")) as f:
        text = f.read()
    return {name: body.split() for name, body in
            re.findall(r"^(\w+_PACKAGES)=\((.*?)\)", text, re.M | re.S)}


def test_the_build_set_leaves_the_test_tools_out() -> None:
    """scripts/run.sh and the image install the build set only: no Go (the
    etcd .proto files are in proto/third_party), no browser, no etcd, no
    second compiler, no GoogleTest."""
    sets = install_sets()
    build, extra = sets["BUILD_PACKAGES"], sets["TEST_PACKAGES"]
    assert build and extra and not set(build) & set(extra)
    test_only = [p for p in build if p.startswith(("golang", "clang", "llvm"))
                 or p in ("chromium", "etcd-server", "prometheus",
                          "libgtest-dev", "libbenchmark-dev",
                          "python3-matplotlib", "python3-pytest")]
    assert not test_only, f"test tools in the build set: {test_only}"
    with open(os.path.join(ROOT, "proto", "CMakeLists.txt")) as f:
        assert "/usr/share/gocode" not in f.read()


def test_every_install_deps_package_has_an_apt_candidate() -> None:
    packages = [p for names in install_sets().values() for p in names]
    assert not without_candidate(packages)


def owning_packages(paths: set[str]) -> set[str]:
    """The Debian packages holding these files (one dpkg -S for all: each
    call reads every package's file list)."""
    wanted = {p: os.path.realpath(p) for p in paths}
    out = subprocess.run(["dpkg", "-S", *sorted(set(wanted) |
                                                 set(wanted.values()))],
                         capture_output=True, text=True).stdout
    owner = {}
    for line in out.splitlines():
        package, _, path = line.rpartition(": ")
        if package and not line.startswith("diversion"):
            owner[path] = package.split(":")[0].split(",")[0]
    missing = [p for p, real in wanted.items()
               if p not in owner and real not in owner]
    assert not missing, f"no Debian package holds {missing}"
    return {owner.get(p) or owner[real] for p, real in wanted.items()}


def test_the_final_stage_installs_what_the_binaries_link(
        stages: list[Stage]) -> None:
    libraries = set()
    for binary in (env("GANGSCHED_SERVER"), env("GANGSCHED_CTL")):
        out = subprocess.run(["ldd", binary], capture_output=True,
                             text=True, check=True).stdout
        assert "not found" not in out, out
        libraries |= set(re.findall(r"=> (/\S+)", out))
    needed = owning_packages(libraries)
    missing = needed - set(installed_packages(stages[-1]))
    assert not missing, f"linked but not installed: {sorted(missing)}"


def third_party_imports(package_dir: str) -> set[str]:
    own = {"gangsched", "gangsched_kuberay"}
    found = set()
    for dirpath, _, files in os.walk(package_dir):
        for name in files:
            if not name.endswith(".py"):
                continue
            with open(os.path.join(dirpath, name)) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    found.add(node.module or "")
    return {m for m in found if m.split(".")[0] not in own
            and m.split(".")[0] not in sys.stdlib_module_names}


def test_the_final_stage_installs_what_the_shim_imports(
        stages: list[Stage]) -> None:
    origins = set()
    for package in ("clients/kuberay/gangsched_kuberay",
                    "clients/python/gangsched"):
        for module in third_party_imports(os.path.join(ROOT, package)):
            spec = importlib.util.find_spec(module)
            assert spec is not None and spec.origin, module
            origins.add(spec.origin)
    needed = owning_packages(origins)
    assert "python3-kubernetes" in needed
    missing = needed - set(installed_packages(stages[-1]))
    assert not missing, f"imported but not installed: {sorted(missing)}"


def copies(stage: Stage) -> list[tuple[str | None, list[str], str]]:
    """(--from stage or None, sources, destination) of each COPY."""
    out = []
    for c in stage.all("COPY"):
        words = shlex.split(c.args)
        origin = None
        while words[0].startswith("--"):
            if words[0].startswith("--from="):
                origin = words[0].split("=", 1)[1]
            words.pop(0)
        out.append((origin, words[:-1], words[-1]))
    return out


def dockerignored(rel: str) -> bool:
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        patterns = [p.strip().rstrip("/") for p in f
                    if p.strip() and not p.startswith("#")]
    parts = rel.split("/")
    return any(fnmatch.fnmatch("/".join(parts[:i + 1]), p.lstrip("*/"))
               or fnmatch.fnmatch(parts[i], p.replace("**/", ""))
               for p in patterns for i in range(len(parts)))


def local_path(source: str, build_dir: str) -> str:
    """Where a path of the build stage is on this machine."""
    if source == BUILD or source.startswith(BUILD + "/"):
        return build_dir + source[len(BUILD):]
    assert source.startswith(SOURCE + "/"), source
    return os.path.join(ROOT, source[len(SOURCE) + 1:])


def test_every_copy_source_exists(stages: list[Stage]) -> None:
    build_dir = env("GANGSCHED_BUILD_DIR")
    names = {s.name for s in stages if s.name}
    missing = []
    for stage in stages:
        for origin, sources, _ in copies(stage):
            for source in sources:
                if origin is None:
                    path = os.path.join(ROOT, source)
                    if source != "." and (not os.path.exists(path)
                                          or dockerignored(source)):
                        missing.append(source)
                    continue
                assert origin in names, f"COPY --from={origin}: no stage"
                if not os.path.exists(local_path(source, build_dir)):
                    missing.append(f"{origin}:{source}")
    assert not missing, missing
    assert dockerignored("build") and dockerignored(".git")
    assert not dockerignored("clients/python/gangsched/client.py")


def test_the_image_layout_runs_the_shim(stages: list[Stage]) -> None:
    """The final stage's COPY --from=build files and its gangsched-kuberay
    script, laid out under a temporary root: `gangsched-kuberay --help`
    works, so the client, its generated stubs and the shim fit together."""
    build_dir = env("GANGSCHED_BUILD_DIR")
    root = tempfile.mkdtemp(prefix="gangsched-image-")
    try:
        for origin, sources, dest in copies(stages[-1]):
            assert origin == "build"
            for source in sources:
                src = local_path(source, build_dir)
                target = root + dest
                if os.path.isdir(src):
                    shutil.copytree(src, target, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns(
                                        "__pycache__"))
                else:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy2(src, target)
        script = shim_script(stages[-1])
        assert script.startswith("#!/usr/bin/python3\n")
        script = script.replace('"/usr/lib/', f'"{root}/usr/lib/')
        path = os.path.join(root, "usr/local/bin/gangsched-kuberay")
        with open(path, "w") as f:
            f.write(script)
        done = subprocess.run(["/usr/bin/python3", path, "--help"],
                              capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        assert "--gangsched HOST:PORT" in done.stdout
        assert os.path.exists(os.path.join(
            root, "usr/lib/gangsched/python/gangsched/v1/scheduler_pb2.py"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def shim_script(stage: Stage) -> str:
    for run in stage.all("RUN"):
        if "> /usr/local/bin/gangsched-kuberay" in run.args:
            words = shlex.split(run.args.split(">", 1)[0])
            assert words[:2] == ["printf", "%s\\n"], words
            return "\n".join(words[2:]) + "\n"
    raise AssertionError("no RUN writes /usr/local/bin/gangsched-kuberay")


def test_it_runs_as_the_charts_non_root_user(stages: list[Stage]) -> None:
    users = stages[-1].all("USER")
    assert users, "the final stage sets no USER (root)"
    uid, _, gid = users[-1].args.partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid and int(gid) != 0
    with open(os.path.join(ROOT, "helm", "gangsched", "values.yaml")) as f:
        values = yaml.safe_load(f)
    assert int(uid) == values["podSecurityContext"]["runAsUser"] == \
        values["containerSecurityContext"]["runAsUser"]
    assert int(gid) == values["podSecurityContext"]["fsGroup"]


def test_the_entrypoint_and_commands_are_the_charts(
        stages: list[Stage]) -> None:
    final = stages[-1]
    entrypoint = json.loads(final.all("ENTRYPOINT")[-1].args)
    assert entrypoint == ["gangsched"]
    installed = {dest for _, _, dest in copies(final)}
    assert {"/usr/local/bin/gangsched", "/usr/local/bin/gangschedctl"} <= \
        installed
    shim_script(final)
    help_text = subprocess.run([env("GANGSCHED_SERVER"), "--help"],
                               capture_output=True, text=True).stdout
    for arg in json.loads(final.all("CMD")[-1].args):
        assert arg.split("=", 1)[0] in help_text, arg
