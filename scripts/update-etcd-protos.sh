#!/usr/bin/env bash
# Refreshes proto/third_party/etcd from Debian's golang-etcd-server-dev
# (install it by hand for this; neither the build nor the tests need it).
# The gogoproto and google.api annotations, which only Go needs, are
# removed; nothing else changes. Run it after an etcd upgrade and commit
# the result with the version it names.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC=/usr/share/gocode/src/go.etcd.io/etcd
DEST="$ROOT/proto/third_party/etcd"
version="$(dpkg-query -W -f='${Version}' golang-etcd-server-dev)"
upstream="${version%%-*}"
for rel in etcdserver/etcdserverpb/rpc.proto mvcc/mvccpb/kv.proto auth/authpb/auth.proto; do
  mkdir -p "$DEST/$(dirname "$rel")"
  {
    printf '%s\n' \
      "// From etcd v$upstream (Debian's golang-etcd-server-dev $version), Apache License 2.0" \
      "// (LICENSE beside this tree). The gogoproto and google.api annotations, which" \
      "// only Go needs, are removed; nothing else is changed. See ../README.md." ""
    perl -0pe '
      s/import "gogoproto\/gogo.proto";//g;
      s/import "google\/api\/annotations.proto";//g;
      s/option \(gogoproto\.[a-z_]+\) = [a-z]+;//g;
      s/additional_bindings \{[^}]*\}//g;
      s/option \(google\.api\.http\) = \{[^}]*\};//g;
      s/ *\[\(gogoproto\.[^\]]*\]//g;
      s/[ \t]+$//mg;
      s/\n{3,}/\n\n/g;
      s/\{\n\n\s*\}/{}/g;
      s/\/\/ for grpc-gateway\n\n//g;
    ' "$SRC/$rel"
  } >"$DEST/$rel"
done
cp /usr/share/common-licenses/Apache-2.0 "$DEST/LICENSE"
echo "update-etcd-protos: $DEST from etcd $version"
