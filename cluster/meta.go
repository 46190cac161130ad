package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Node metadata, as gossiped in memberlist's alive messages (at most
// memberlist.MetaMaxSize = 512 bytes):
//
//	byte 0       metaVersion
//	byte 1       flags (flagLeaving)
//	bytes 2..9   incarnation, big-endian uint64
//	bytes 10..   RPC address
//
// The address runs to the end, so any new field needs a new version; decode rejects
// versions it does not know rather than misread them.
const (
	metaVersion = 1
	metaHeader  = 10
	flagLeaving = 1 << 0
	maxRPCAddr  = 300 // keeps metaHeader+address well under memberlist's 512-byte limit
)

type meta struct {
	rpcAddr     string
	incarnation uint64
	leaving     bool
}

func (m meta) encode() []byte {
	b := make([]byte, metaHeader, metaHeader+len(m.rpcAddr))
	b[0] = metaVersion
	if m.leaving {
		b[1] |= flagLeaving
	}
	binary.BigEndian.PutUint64(b[2:], m.incarnation)
	return append(b, m.rpcAddr...)
}

var errMeta = errors.New("cluster: bad node metadata")

func decodeMeta(b []byte) (meta, error) {
	if len(b) < metaHeader {
		return meta{}, fmt.Errorf("%w: %d bytes", errMeta, len(b))
	}
	if b[0] != metaVersion {
		return meta{}, fmt.Errorf("%w: version %d", errMeta, b[0])
	}
	return meta{
		leaving:     b[1]&flagLeaving != 0,
		incarnation: binary.BigEndian.Uint64(b[2:]),
		rpcAddr:     string(b[metaHeader:]),
	}, nil
}
