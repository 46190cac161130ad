// Package peerauth authenticates the connections between nodes (the rpc port), so that
// only members of the cluster can forward ops, hand counters over or renew leases.
//
// There are three modes, chosen by what the node is given:
//
//   - Certificates (--tls-cert, --tls-key, --tls-ca): mutual TLS (1.2 or later). Each
//     end presents a certificate that must chain to the cluster CA; host names are not
//     checked (peers are dialed by address), so every certificate the CA signs is a
//     member: use a CA of the cluster's own. The files are read again when they change,
//     so certificates rotate without a restart.
//   - A cluster key only (--gossip-key): TLS 1.3 with a throwaway self-signed
//     certificate, for encryption, and then each end proves it holds the key with an
//     HMAC over the session's exported keying material (RFC 5705). A proof is bound to
//     its session, so it cannot be replayed or relayed by a man in the middle.
//   - Neither: plain TCP, anyone who reaches the port is a member (loopback and tests).
//
// In every mode the two ends then exchange the cluster protocol version (ProtocolVersion)
// and the cluster name (--cluster-name), and refuse a peer of another version, logging
// it with both versions, or of another cluster. With certificates and a key, the key
// proof is required too.
//
// A handshake is bounded in time and in bytes, and costs an outsider one small read: no
// frame of the rpc protocol is read from a connection before it is done.
package peerauth
