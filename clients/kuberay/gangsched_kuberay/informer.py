"""List + watch of one resource into a cache, the client-go way: list,
then watch from the list's resourceVersion (bookmarks keep it fresh);
HTTP 410 Gone -> list again; any other break -> watch again from the last
version seen. Every change (and every object on a relist, with the ones
that vanished as deletions) goes to ``on_change(kind, old, new)``."""

from __future__ import annotations

import logging
import random
import threading
from typing import Any, Callable

from gangsched_kuberay import metrics
from gangsched_kuberay.kube import ApiError, Gone, Kube

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name); namespace "" for nodes


def key_of(obj: dict) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


class Informer:
    def __init__(self, kube: Kube, resource: str, namespace: str | None,
                 on_change: Callable[[str, dict | None, dict | None], None],
                 watch_timeout: int = 300) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.on_change = on_change
        self.watch_timeout = watch_timeout
        self.cache: dict[Key, dict] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.resource_version = ""
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(
            target=self._run, daemon=True,
            name=f"informer-{resource}-{namespace or 'all'}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
            except Exception:  # noqa: BLE001 - closing a dead socket
                pass

    def get(self, key: Key) -> dict | None:
        with self.lock:
            return self.cache.get(key)

    def items(self) -> list[dict]:
        with self.lock:
            return list(self.cache.values())

    def relist(self, reason: str) -> None:
        items, rv = self.kube.list(self.resource, self.namespace)
        metrics.RESYNCS.labels(f"{self.resource}_{reason}").inc()
        fresh = {key_of(o): o for o in items}
        with self.lock:
            old = self.cache
            self.cache = fresh
            self.resource_version = rv
        for key, obj in fresh.items():
            prev = old.get(key)
            if prev is None or _rv(prev) != _rv(obj):
                self.on_change("ADDED" if prev is None else "MODIFIED",
                               prev, obj)
        for key, prev in old.items():
            if key not in fresh:
                self.on_change("DELETED", prev, None)
        self.synced.set()

    def _run(self) -> None:
        delay = 0.2
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.relist("start" if not self.synced.is_set()
                                else "gone")
                    need_list = False
                timeout = int(self.watch_timeout * (1 + random.random()))
                for event in self.kube.watch(
                        self.resource, self.namespace, self.resource_version,
                        timeout, register=self._register):
                    self._apply(event)
                    delay = 0.2
                    if self._stop.is_set():
                        return
            except Gone:
                log.info("watch of %s expired (410 Gone): listing again",
                         self.resource)
                need_list = True
                continue
            except (ApiError, OSError, ValueError) as e:
                if self._stop.is_set():
                    return
                log.warning("watch of %s broke: %s", self.resource, e)
            except Exception as e:  # noqa: BLE001 - urllib3 read errors
                if self._stop.is_set():
                    return
                log.warning("watch of %s broke: %r", self.resource, e)
            self._stop.wait(delay)
            delay = min(delay * 2, 5.0)

    def _register(self, resp: Any) -> None:
        self._resp = resp

    def _apply(self, event: dict) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        rv = _rv(obj)
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = key_of(obj)
        with self.lock:
            prev = self.cache.get(key)
            if kind == "DELETED":
                self.cache.pop(key, None)
            else:
                self.cache[key] = obj
            if rv:
                self.resource_version = rv
        self.on_change(kind, prev, None if kind == "DELETED" else obj)


def _rv(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")
