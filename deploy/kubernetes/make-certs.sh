#!/bin/sh
# Makes the TLS files of deploy/kubernetes with openssl, into DIR:
#   ca.crt, ca.key    a CA of this cluster's own (keep ca.key out of the cluster)
#   raft.crt, raft.key the certificate every node shows to the others (raft
#                      mutual TLS). It names leasehold-raft, the name serve
#                      checks with --raft-tls-server-name: nodes dial each
#                      other at pod IPs, which no certificate can name.
#   api.crt, api.key   the API's certificate, for the Services' names.
# Usage: make-certs.sh NAMESPACE DIR   (DAYS=365 by default)
set -eu
ns=${1:?usage: make-certs.sh NAMESPACE DIR}
dir=${2:?usage: make-certs.sh NAMESPACE DIR}
days=${DAYS:-365}
mkdir -p "$dir"
cd "$dir"
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key"; }
serial() { echo "0x$(openssl rand -hex 16)"; }

key ca
openssl req -x509 -new -key ca.key -out ca.crt -days "$days" -set_serial "$(serial)" -subj "/CN=leasehold CA ($ns)" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# leaf NAME SUBJECT_ALT_NAMES EXTENDED_KEY_USAGE
leaf() {
  key "$1"
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nkeyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n' \
    "$2" "$3" > "$1.ext"
  openssl req -new -key "$1.key" -subj "/CN=$1" |
    openssl x509 -req -CA ca.crt -CAkey ca.key -set_serial "$(serial)" -days "$days" -extfile "$1.ext" -out "$1.crt"
  rm "$1.ext"
}
leaf raft "DNS:leasehold-raft" "serverAuth,clientAuth"
peers="leasehold-peers.$ns.svc"
leaf api "DNS:leasehold.$ns.svc,DNS:leasehold.$ns.svc.cluster.local,DNS:leasehold.$ns,DNS:leasehold,DNS:*.$peers,DNS:*.$peers.cluster.local,DNS:localhost,IP:127.0.0.1" \
  "serverAuth"
chmod 644 ca.crt raft.crt api.crt
