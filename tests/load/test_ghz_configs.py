#!/usr/bin/python3
"""Checks the ghz load-test configs in clients/ghz against the proto.

Run with Debian's interpreter (python3-protobuf) and protoc:

    /usr/bin/python3 tests/load/test_ghz_configs.py \
        --proto-dir proto --configs-dir clients/ghz

For every clients/ghz/*.json config:
  - it is a JSON object with only keys ghz knows, and the ones a run needs;
  - "proto" names a file under --proto-dir, and "call" a service/method
    defined in that file (ghz resolves the call in the file it is given);
  - every field used in "data" exists in the method's input type, with the
    proto's exact name, recursively (nested messages, repeated fields, map
    values), and enum values are names of the enum;
  - template placeholders are only {{.RequestNumber}}, {{.UUID}} and
    {{.TimestampUnix}};
  - "data", with the placeholders replaced by sample values, parses with
    google.protobuf.json_format.ParseDict into the request message.

GHZ_PROTO_DIR / GHZ_CONFIGS_DIR may be used instead of the flags.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

from google.protobuf import descriptor_pb2, descriptor_pool, json_format
from google.protobuf import message_factory

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

PROTO_DIR = os.environ.get("GHZ_PROTO_DIR", os.path.join(REPO, "proto"))
CONFIGS_DIR = os.environ.get("GHZ_CONFIGS_DIR", os.path.join(REPO, "clients", "ghz"))

# Keys of ghz's JSON config (runner.Config in bojand/ghz).
GHZ_KEYS = {
    "proto", "protoset", "call", "cacert", "cert", "key", "skipTLS", "cname",
    "authority", "insecure", "total", "concurrency", "connections", "qps", "rps",
    "duration", "duration-stop", "max-duration", "timeout", "data", "data-file",
    "binary-file", "metadata", "metadata-file", "stream-interval", "output",
    "format", "connect-timeout", "keepalive", "cpus", "import-paths", "name",
    "tags", "reflect-metadata", "debug", "host", "enable-compression",
    "load-schedule", "load-start", "load-end", "load-step", "load-step-duration",
    "load-max-duration", "concurrency-schedule", "concurrency-start",
    "concurrency-end", "concurrency-step", "concurrency-step-duration",
    "concurrency-max-duration", "skipFirst", "count-errors", "lb-strategy",
    "async", "stream-call-duration", "stream-call-count",
    "stream-dynamic-messages", "max-recv-message-size", "max-send-message-size",
}
REQUIRED_KEYS = ("proto", "import-paths", "call", "host", "insecure", "total",
                 "concurrency", "data")

ALLOWED_PLACEHOLDERS = {
    "{{.RequestNumber}}": "7",
    "{{.UUID}}": str(uuid.UUID(int=0x1234)),
    "{{.TimestampUnix}}": "1700000000",
}
PLACEHOLDER_RE = re.compile(r"\{\{.*?\}\}")
TEMPLATE_START_RE = re.compile(r"\{\{|\}\}")

# Filled by load_descriptors().
_POOL = None
_FILES = None  # file name -> FileDescriptorProto


def load_descriptors(proto_dir):
    """protoc --descriptor_set_out over every .proto under proto_dir."""
    # third_party/ (etcd's API, for --store=etcd) is no service of ours.
    protos = sorted(
        rel for rel in (
            os.path.relpath(p, proto_dir)
            for p in glob.glob(os.path.join(proto_dir, "**", "*.proto"), recursive=True))
        if not rel.startswith("third_party" + os.sep))
    if not protos:
        raise RuntimeError("no .proto files under %r" % proto_dir)
    tmp = tempfile.mkdtemp(prefix="ghz-configs-")
    try:
        out = os.path.join(tmp, "descriptors.pb")
        cmd = ["protoc", "-I" + proto_dir, "--descriptor_set_out=" + out,
               "--include_imports"] + protos
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError("protoc failed (%d): %s" % (proc.returncode, proc.stderr))
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pool = descriptor_pool.DescriptorPool()
    files = {}
    for fdp in fds.file:  # dependencies come first with --include_imports
        pool.Add(fdp)
        files[fdp.name] = fdp
    return pool, files


def message_class(descriptor):
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)


def find_method(pool, files, proto_file, call):
    """(MethodDescriptor, error) for "pkg.Service/Method" or "pkg.Service.Method"."""
    if "/" in call:
        service_name, _, method_name = call.partition("/")
    else:
        service_name, _, method_name = call.rpartition(".")
    if not service_name or not method_name:
        return None, "call %r is not 'package.Service/Method'" % call
    fdp = files.get(proto_file)
    if fdp is None:
        return None, "proto %r was not compiled from the proto dir" % proto_file
    prefix = fdp.package + "." if fdp.package else ""
    in_file = {prefix + s.name for s in fdp.service}
    if service_name not in in_file:
        return None, "service %r is not defined in %s (it defines %s)" % (
            service_name, proto_file, sorted(in_file))
    service = pool.FindServiceByName(service_name)
    method = service.methods_by_name.get(method_name)
    if method is None:
        return None, "service %s has no method %r (it has %s)" % (
            service_name, method_name, sorted(service.methods_by_name))
    return method, None


def field_errors(descriptor, value, path):
    """Every field used in value that descriptor does not have, recursively."""
    FD = descriptor_pb2.FieldDescriptorProto
    errors = []
    if not isinstance(value, dict):
        return ["%s: expected a JSON object for %s, got %r"
                % (path, descriptor.full_name, value)]
    for key, sub in value.items():
        field = descriptor.fields_by_name.get(key)
        here = "%s.%s" % (path, key)
        if field is None:
            errors.append("%s: %s has no field %r (fields: %s)" % (
                here, descriptor.full_name, key, sorted(descriptor.fields_by_name)))
            continue
        is_map = (field.type == FD.TYPE_MESSAGE
                  and field.message_type.GetOptions().map_entry)
        if is_map:
            if not isinstance(sub, dict):
                errors.append("%s: map field wants a JSON object, got %r" % (here, sub))
                continue
            value_field = field.message_type.fields_by_name["value"]
            for k, v in sub.items():
                errors += value_errors(value_field, v, "%s[%r]" % (here, k))
        elif field.label == FD.LABEL_REPEATED:
            if not isinstance(sub, list):
                errors.append("%s: repeated field wants a JSON list, got %r" % (here, sub))
                continue
            for i, v in enumerate(sub):
                errors += value_errors(field, v, "%s[%d]" % (here, i))
        else:
            errors += value_errors(field, sub, here)
    return errors


def value_errors(field, value, path):
    FD = descriptor_pb2.FieldDescriptorProto
    if field.type == FD.TYPE_MESSAGE:
        if field.message_type.full_name.startswith("google.protobuf."):
            return []  # well-known types have their own JSON forms; ParseDict checks them
        return field_errors(field.message_type, value, path)
    if field.type == FD.TYPE_ENUM and isinstance(value, str):
        if value not in field.enum_type.values_by_name:
            return ["%s: %r is not a value of %s (values: %s)" % (
                path, value, field.enum_type.full_name,
                sorted(field.enum_type.values_by_name))]
    return []


def strings_in(value):
    """Every string (keys and values) in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


def substitute(value):
    """value with every allowed placeholder replaced by its sample value."""
    if isinstance(value, str):
        for placeholder, sample in ALLOWED_PLACEHOLDERS.items():
            value = value.replace(placeholder, sample)
        return value
    if isinstance(value, dict):
        return {substitute(k): substitute(v) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v) for v in value]
    return value


def check_config(path, proto_dir, pool, files):
    """Every problem of one config as a list of strings (empty: fine)."""
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        return ["not readable JSON: %s" % e]
    if not isinstance(config, dict):
        return ["the config is not a JSON object"]
    problems = []
    unknown = sorted(set(config) - GHZ_KEYS)
    if unknown:
        problems.append("keys ghz does not know: %s" % unknown)
    missing = [k for k in REQUIRED_KEYS if k not in config]
    if missing:
        return problems + ["missing keys: %s" % missing]
    if config["import-paths"] != ["proto"]:
        problems.append("import-paths should be [\"proto\"] (relative to the repo "
                        "root), got %r" % config["import-paths"])
    if not os.path.isfile(os.path.join(proto_dir, config["proto"])):
        problems.append("proto %r does not exist under %s" % (config["proto"], proto_dir))
    if config["insecure"] is not True:
        problems.append("insecure should be true (the server listens in plaintext)")
    for key in ("total", "concurrency"):
        if not isinstance(config[key], int) or config[key] <= 0:
            problems.append("%s should be a positive integer, got %r" % (key, config[key]))
    if (isinstance(config.get("total"), int) and isinstance(config.get("concurrency"), int)
            and config["total"] < config["concurrency"]):
        problems.append("total must not be smaller than concurrency")

    method, error = find_method(pool, files, config["proto"], config["call"])
    if error:
        return problems + [error]
    if method.client_streaming or method.server_streaming:
        problems.append("%s is a streaming method" % config["call"])

    data = config["data"]
    placeholders = set()
    for s in strings_in(data):
        placeholders.update(PLACEHOLDER_RE.findall(s))
        if TEMPLATE_START_RE.search(PLACEHOLDER_RE.sub("", s)):
            problems.append("unbalanced template braces in %r" % s)
    bad = sorted(placeholders - set(ALLOWED_PLACEHOLDERS))
    if bad:
        problems.append("placeholders other than %s: %s" % (sorted(ALLOWED_PLACEHOLDERS), bad))

    problems += field_errors(method.input_type, data, "data")

    message = message_class(method.input_type)()
    try:
        json_format.ParseDict(substitute(data), message)
    except json_format.ParseError as e:
        problems.append("data does not parse into %s: %s" % (method.input_type.full_name, e))
    else:
        if message.ByteSize() == 0:
            problems.append("data parses into an empty %s" % method.input_type.full_name)
    return problems


class GhzConfigsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        global _POOL, _FILES
        if _POOL is None:
            _POOL, _FILES = load_descriptors(PROTO_DIR)
        cls.configs = sorted(glob.glob(os.path.join(CONFIGS_DIR, "*.json")))

    def test_the_expected_configs_exist(self):
        names = {os.path.basename(p) for p in self.configs}
        for expected in ("allocate-dry-run.json", "allocate-release.json",
                         "release.json", "get-workload.json"):
            self.assertIn(expected, names)

    def test_every_config_matches_the_proto(self):
        self.assertTrue(self.configs, "no *.json under %s" % CONFIGS_DIR)
        for path in self.configs:
            with self.subTest(config=os.path.basename(path)):
                problems = check_config(path, PROTO_DIR, _POOL, _FILES)
                self.assertFalse(problems, "\n%s:\n  %s" % (path, "\n  ".join(problems)))

    def test_configs_call_what_they_are_named_for(self):
        calls = {}
        for path in self.configs:
            with open(path) as f:
                calls[os.path.basename(path)] = json.load(f)
        self.assertEqual(calls["allocate-dry-run.json"]["call"],
                         "gangsched.v1.Scheduler/Allocate")
        self.assertIs(calls["allocate-dry-run.json"]["data"].get("dry_run"), True)
        alloc = calls["allocate-release.json"]
        self.assertEqual(alloc["call"], "gangsched.v1.Scheduler/Allocate")
        self.assertFalse(alloc["data"].get("dry_run", False))
        self.assertIn("{{.RequestNumber}}", alloc["data"]["request_id"])
        self.assertEqual(alloc["data"]["workload"]["id"], "ghz/{{.RequestNumber}}")
        release = calls["release.json"]
        self.assertEqual(release["call"], "gangsched.v1.Scheduler/Release")
        # Release frees exactly what allocate-release.json created.
        self.assertEqual(release["data"]["workload_id"], alloc["data"]["workload"]["id"])
        self.assertEqual(release["total"], alloc["total"])
        self.assertNotEqual(release["data"].get("request_id"), alloc["data"]["request_id"])
        self.assertEqual(calls["get-workload.json"]["call"],
                         "gangsched.v1.Scheduler/GetWorkload")
        self.assertTrue(calls["get-workload.json"]["data"]["workload_id"])


class CheckerCatchesMistakesTest(unittest.TestCase):
    """The checker itself fails on broken copies of the real configs."""

    @classmethod
    def setUpClass(cls):
        global _POOL, _FILES
        if _POOL is None:
            _POOL, _FILES = load_descriptors(PROTO_DIR)
        cls.tmp = tempfile.mkdtemp(prefix="ghz-configs-broken-")
        with open(os.path.join(CONFIGS_DIR, "allocate-release.json")) as f:
            cls.good = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def problems_of(self, mutate):
        config = json.loads(json.dumps(self.good))
        mutate(config)
        path = os.path.join(self.tmp, "broken.json")
        with open(path, "w") as f:
            json.dump(config, f)
        return check_config(path, PROTO_DIR, _POOL, _FILES)

    def assertCaught(self, mutate, needle):
        problems = self.problems_of(mutate)
        self.assertTrue(any(needle in p for p in problems),
                        "expected a problem mentioning %r, got %r" % (needle, problems))

    def test_the_unbroken_copy_passes(self):
        self.assertEqual(self.problems_of(lambda c: None), [])

    def test_top_level_field_name(self):
        def mutate(c):
            c["data"]["dryRun"] = c["data"].pop("dry_run")
        self.assertCaught(mutate, "'dryRun'")

    def test_nested_field_name(self):
        def mutate(c):
            c["data"]["workload"]["groups"][1]["min_cnt"] = 1
        self.assertCaught(mutate, "'min_cnt'")

    def test_field_in_nested_placement(self):
        def mutate(c):
            c["data"]["workload"]["placement"]["topologyKey"] = "zone"
        self.assertCaught(mutate, "'topologyKey'")

    def test_enum_value(self):
        def mutate(c):
            c["data"]["workload"]["placement"]["strategy"] = "BINPACK"
        self.assertCaught(mutate, "'BINPACK' is not a value")

    def test_map_value_type(self):
        def mutate(c):
            c["data"]["workload"]["groups"][0]["resources"] = ["cpu"]
        self.assertCaught(mutate, "map field")

    def test_unknown_placeholder(self):
        def mutate(c):
            c["data"]["request_id"] = "ghz-{{.RequestNum}}"
        self.assertCaught(mutate, "{{.RequestNum}}")

    def test_unknown_method(self):
        def mutate(c):
            c["call"] = "gangsched.v1.Scheduler/Allocat"
        self.assertCaught(mutate, "no method 'Allocat'")

    def test_service_of_another_file(self):
        def mutate(c):
            c["call"] = "gangsched.v1.Admin/ListQueues"
        self.assertCaught(mutate, "not defined in gangsched/v1/scheduler.proto")

    def test_wrong_json_type_fails_parse(self):
        def mutate(c):
            c["data"]["workload"]["groups"][0]["min_count"] = "one"
        self.assertCaught(mutate, "does not parse")

    def test_unknown_ghz_key(self):
        def mutate(c):
            c["import_paths"] = c.pop("import-paths")
        self.assertCaught(mutate, "keys ghz does not know")


def main():
    global PROTO_DIR, CONFIGS_DIR
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--proto-dir")
    parser.add_argument("--configs-dir")
    args, rest = parser.parse_known_args()
    if args.proto_dir:
        PROTO_DIR = os.path.abspath(args.proto_dir)
    if args.configs_dir:
        CONFIGS_DIR = os.path.abspath(args.configs_dir)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
