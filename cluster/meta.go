package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Node metadata, as gossiped in memberlist's alive messages (at most
// memberlist.MetaMaxSize = 512 bytes):
//
//	byte 0       metaVersion (2)
//	byte 1       flags (flagLeaving)
//	bytes 2..9   incarnation, big-endian uint64
//	bytes 10..11 length of the RPC address, big-endian uint16
//	then         RPC address, then the client address (to the end)
//
// decode rejects metadata of any other version rather than misread it: such a member
// is listed, but never served.
const (
	metaVersion = 2
	metaHeader  = 12
	flagLeaving = 1 << 0
	maxAddr     = 240 // two addresses and the header stay under memberlist's 512 bytes
)

type meta struct {
	rpcAddr     string
	clientAddr  string // where Redis Cluster clients reach this node (CLUSTER SLOTS); may be empty
	incarnation uint64
	leaving     bool
}

func (m meta) encode() []byte {
	b := make([]byte, metaHeader, metaHeader+len(m.rpcAddr)+len(m.clientAddr))
	b[0] = metaVersion
	if m.leaving {
		b[1] |= flagLeaving
	}
	binary.BigEndian.PutUint64(b[2:], m.incarnation)
	binary.BigEndian.PutUint16(b[10:], uint16(len(m.rpcAddr)))
	b = append(b, m.rpcAddr...)
	return append(b, m.clientAddr...)
}

var errMeta = errors.New("cluster: bad node metadata")

func decodeMeta(b []byte) (meta, error) {
	if len(b) < metaHeader {
		return meta{}, fmt.Errorf("%w: %d bytes", errMeta, len(b))
	}
	if b[0] != metaVersion {
		return meta{}, fmt.Errorf("%w: version %d", errMeta, b[0])
	}
	m := meta{leaving: b[1]&flagLeaving != 0, incarnation: binary.BigEndian.Uint64(b[2:])}
	n := int(binary.BigEndian.Uint16(b[10:]))
	if n > len(b)-metaHeader {
		return meta{}, fmt.Errorf("%w: RPC address of %d bytes in %d", errMeta, n, len(b))
	}
	m.rpcAddr, m.clientAddr = string(b[metaHeader:metaHeader+n]), string(b[metaHeader+n:])
	return m, nil
}
