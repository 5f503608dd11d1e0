"""gangsched-kuberay's command line (``--help`` documents every flag)."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
import threading

from prometheus_client import start_http_server

import gangsched
from gangsched_kuberay import app as app_module, kube as kube_module, logs

log = logging.getLogger("gangsched_kuberay")


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"true or false, not {text!r}")


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"HOST:PORT, not {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gangsched-kuberay",
        description="The Kubernetes scheduler for the pods of RayClusters "
        "(schedulerName: gangsched): turns each RayCluster into a gangsched "
        "workload, binds its pods where gangsched says, deletes the pods "
        "gangsched evicts, and tells users why a cluster waits.")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="kubeconfig to use (default: the in-cluster service "
                   "account); a plain http:// server is fine for tests")
    p.add_argument("--gangsched", metavar="HOST:PORT",
                   default="127.0.0.1:50051",
                   help="gangsched's gRPC address (default %(default)s)")
    p.add_argument("--metrics-listen", metavar="ADDR", default=":9102",
                   type=_address,
                   help="Prometheus /metrics address, HOST:PORT or :PORT "
                   "(default %(default)s)")
    p.add_argument("--scheduler-name", metavar="NAME", default="gangsched",
                   help="pods with this spec.schedulerName are scheduled "
                   "(default %(default)s)")
    p.add_argument("--leader-election", metavar="true|false", type=_bool,
                   default=True,
                   help="take a coordination.k8s.io Lease before acting, so "
                   "two replicas can run (default true)")
    p.add_argument("--lease-namespace", metavar="NS",
                   default=app_module.default_lease_namespace(),
                   help="namespace of the Lease (default: the pod's own, "
                   "else 'default')")
    p.add_argument("--lease-name", metavar="NAME", default="gangsched-kuberay",
                   help="name of the Lease (default %(default)s)")
    p.add_argument("--lease-duration", metavar="SECONDS", type=float,
                   default=15.0,
                   help="a standby takes over this long after the leader "
                   "stopped renewing (default %(default)s)")
    p.add_argument("--namespace", metavar="NS", action="append", default=[],
                   help="watch RayClusters in this namespace; repeatable "
                   "(default: all namespaces)")
    p.add_argument("--default-queue", metavar="QUEUE", default="default",
                   help="queue of a RayCluster without a gangsched.io/queue "
                   "(or kai.scheduler/queue) label (default %(default)s)")
    p.add_argument("--tolerate-taint", metavar="KEY[=VALUE][:EFFECT]",
                   action="append", default=[],
                   help="an override: pods may go to nodes with this "
                   "taint even when their templates lack the toleration "
                   "(without an effect: NoSchedule and PreferNoSchedule; "
                   "NoExecute only when named, as it evicts pods that do not "
                   "tolerate it themselves); a pod that tolerates what it "
                   "needs needs no flag; repeatable")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="log line format (default %(default)s)")
    p.add_argument("--log-level", default="INFO",
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="(default %(default)s)")
    p.add_argument("--bind-workers", metavar="N", type=int, default=16,
                   help="concurrent Kubernetes writes (default %(default)s)")
    p.add_argument("--gangsched-timeout", metavar="SECONDS", type=float,
                   default=10.0,
                   help="deadline of each gangsched call; UNAVAILABLE is "
                   "retried with the same request id (default %(default)s)")
    p.add_argument("--tls-ca", metavar="FILE",
                   help="reach gangsched over TLS, verifying it with these "
                   "CA certificates (PEM)")
    p.add_argument("--tls-cert", metavar="FILE",
                   help="client certificate for mTLS (PEM, with --tls-key)")
    p.add_argument("--tls-key", metavar="FILE",
                   help="the client certificate's key (PEM)")
    p.add_argument("--tls-server-name", metavar="NAME",
                   help="the name gangsched's certificate must carry, when "
                   "--gangsched is an address")
    p.add_argument("--token-file", metavar="FILE",
                   default=os.environ.get("GANGSCHED_TOKEN_FILE"),
                   help="bearer token for gangsched (role shim), first line "
                   "of FILE, read again when it changes (default "
                   "$GANGSCHED_TOKEN_FILE)")
    p.add_argument("--heartbeat-timeout", metavar="SECONDS", type=float,
                   default=30.0,
                   help="an event stream quiet this long (no HEARTBEAT) is "
                   "reopened (default %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.setup(args.log_format, args.log_level)
    if args.bind_workers < 1:
        log.error("--bind-workers must be >= 1")
        return 2
    try:
        api_client = kube_module.load_config(args.kubeconfig)
    except Exception as e:  # noqa: BLE001 - any config error ends here
        log.error("cannot load the Kubernetes configuration: %s", e)
        return 2
    host, port = args.metrics_listen
    try:
        start_http_server(port, addr=host)
    except OSError as e:
        log.error("cannot serve metrics on %s:%d: %s", host, port, e)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        log.error("--tls-cert and --tls-key go together")
        return 2
    for flag in ("tls_ca", "tls_cert", "tls_key", "token_file"):
        path = getattr(args, flag)
        if path and not os.access(path, os.R_OK):
            log.error("--%s: %s cannot be read", flag.replace("_", "-"), path)
            return 2
    client = gangsched.Client(
        args.gangsched, timeout=args.gangsched_timeout, tls_ca=args.tls_ca,
        tls_cert=args.tls_cert, tls_key=args.tls_key,
        tls_server_name=args.tls_server_name, token_file=args.token_file)
    app = app_module.App(
        kube_module.Kube(api_client), client,
        scheduler_name=args.scheduler_name, namespaces=args.namespace,
        default_queue=args.default_queue,
        leader_election=args.leader_election,
        lease_namespace=args.lease_namespace, lease_name=args.lease_name,
        lease_seconds=args.lease_duration,
        tolerated_taints=args.tolerate_taint,
        bind_workers=args.bind_workers,
        heartbeat_timeout=args.heartbeat_timeout)
    done = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        app.stop_event.set()
        done.set()
    # kill -USR1 writes every thread's stack to stderr (a stuck shim).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("gangsched-kuberay: gangsched %s, scheduler name %s, "
             "namespaces %s, leader election %s", args.gangsched,
             args.scheduler_name, args.namespace or "all",
             args.leader_election)
    app.start()
    while not done.is_set() and not app.stop_event.is_set():
        done.wait(0.5)
    app.stop()
    client.close()
    return app.exit_code


if __name__ == "__main__":
    sys.exit(main())
