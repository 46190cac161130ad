#!/bin/sh
# A development CA and a server certificate it signs, for docker-compose.tls.yml and
# for trying TLS by hand: DIR/ca.pem, DIR/server.pem and DIR/server-key.pem (default
# DIR ./certs), valid 30 days, for localhost, 127.0.0.1 and the compose services
# node1-node4. The key is left readable by every user, for the node image's user
# 65534: fine for development, never for production (cert-manager or your CA there).
set -eu
dir=${1:-certs}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
	-subj "/CN=leapcount development CA" -keyout ca-key.pem -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-subj "/CN=leapcount" -keyout server-key.pem -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:node1,DNS:node2,DNS:node3,DNS:node4\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 \
	-extfile server.ext -out server.pem 2>/dev/null
rm -f server.csr server.ext ca.srl
chmod 0644 server-key.pem
chmod 0600 ca-key.pem
echo "dev-certs.sh: wrote $(pwd)/ca.pem, server.pem, server-key.pem"
