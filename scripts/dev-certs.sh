#!/usr/bin/env bash
# Makes what a secured gangsched on this machine needs, with openssl, into
# DIR (default ./gangsched-pki): a CA (ca.crt), a server certificate for
# localhost and 127.0.0.1 (server.crt, server.key), a client certificate
# (client.crt, client.key; CN gangsched-client, which has no role of its
# own), one token per role (admin.token, shim.token, viewer.token) and the
# server's token file with their SHA-256 digests (tokens.yaml). For trying
# TLS out; production certificates come from your CA (docs/SECURITY.md).
set -euo pipefail
DIR="${1:-gangsched-pki}"
mkdir -p "$DIR"
cd "$DIR"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt \
  -days 365 -subj "/CN=gangsched-dev-ca" 2>/dev/null
issue() {  # NAME CN [SAN]
  local ext=()
  if [[ -n "${3:-}" ]]; then
    printf 'subjectAltName=%s\n' "$3" >"$1.ext"
    ext=(-extfile "$1.ext")
  fi
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" \
    -subj "/CN=$2" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out "$1.crt" -days 365 "${ext[@]}" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
issue server localhost "DNS:localhost,IP:127.0.0.1"
issue client gangsched-client
: >tokens.yaml
for role in admin shim viewer; do
  openssl rand -hex 32 | tr -d '\n' >"$role.token"
  printf -- '- {sha256: %s, subject: %s-dev, role: %s}\n' \
    "$(sha256sum <"$role.token" | cut -c1-64)" "$role" "$role" >>tokens.yaml
done
echo "dev-certs: wrote $(pwd)"
