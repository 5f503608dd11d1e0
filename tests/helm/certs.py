"""Secrets the chart expects users to create, made for a test run with
Debian's openssl: a CA, certificates it signs (kubernetes.io/tls Secret
data: tls.crt, tls.key, ca.crt) and bearer tokens with the tokens file
that lists their SHA-256 digests."""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import tempfile


class Authority:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="gangsched-helm-ca-")
        self.key = os.path.join(self.dir, "ca.key")
        self.cert = os.path.join(self.dir, "ca.crt")
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                 "-subj", "/CN=gangsched test CA", "-keyout", self.key,
                 "-out", self.cert)

    def tls_secret(self, cn: str, dns: list[str] = ()) -> dict[str, bytes]:
        """A certificate for server and client use, as a Secret's data."""
        stem = os.path.join(self.dir, cn)
        san = ",".join(["DNS:localhost", "IP:127.0.0.1"] +
                       [f"DNS:{d}" for d in dns])
        _openssl("req", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
                 f"/CN={cn}", "-keyout", stem + ".key", "-out", stem + ".csr")
        ext = stem + ".ext"
        with open(ext, "w", encoding="utf-8") as f:
            f.write(f"subjectAltName={san}\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
        _openssl("x509", "-req", "-in", stem + ".csr", "-CA", self.cert,
                 "-CAkey", self.key, "-CAcreateserial", "-days", "2",
                 "-extfile", ext, "-out", stem + ".crt")
        return {"tls.crt": _read(stem + ".crt"),
                "tls.key": _read(stem + ".key"), "ca.crt": _read(self.cert)}


def token() -> tuple[bytes, str]:
    """A bearer token (as `openssl rand -hex 32` makes one) and its
    SHA-256 in hex, which is what the tokens file lists."""
    text = secrets.token_hex(32)
    return text.encode(), hashlib.sha256(text.encode()).hexdigest()


def tokens_file(entries: list[dict[str, str]]) -> bytes:
    lines = []
    for e in entries:
        lines.append("- {" + ", ".join(f"{k}: {v}" for k, v in e.items())
                     + "}")
    return ("\n".join(lines) + "\n").encode()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
