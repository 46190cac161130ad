package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Node metadata, as gossiped in memberlist's alive messages (at most
// memberlist.MetaMaxSize = 512 bytes):
//
//	byte 0       metaVersion (2), or metaZoned (3) when the member has a zone
//	byte 1       flags: bit 0 flagLeaving, bits 1-7 the member's features (Config.Features)
//	bytes 2..9   incarnation, big-endian uint64
//	bytes 10..11 length of the RPC address, big-endian uint16
//	then         RPC address, then the client address (to the end)
//	             (metaZoned: big-endian uint16 length, client address, then the zone to the end)
//
// Releases before features read bit 0 alone, so a feature bit reaches them harmlessly.
// decode rejects metadata of any other version rather than misread it: such a member
// is listed, but never served. A member without a zone sends version 2, which every
// release reads; one with a zone (--zone) sends 3, which releases before zones reject.
const (
	metaVersion = 2
	metaZoned   = 3
	metaHeader  = 12
	flagLeaving = 1 << 0
	maxAddr     = 240 // two addresses and the header stay under memberlist's 512 bytes
	maxZone     = 16  // with two addresses of maxAddr, within memberlist's 512 bytes
	maxFeatures = 1<<7 - 1
)

type meta struct {
	rpcAddr     string
	clientAddr  string // where Redis Cluster clients reach this node (CLUSTER SLOTS); may be empty
	zone        string // Config.Zone; may be empty
	incarnation uint64
	leaving     bool
	features    uint8 // Config.Features: 7 bits
}

func (m meta) encode() []byte {
	b := make([]byte, metaHeader, metaHeader+len(m.rpcAddr)+2+len(m.clientAddr)+len(m.zone))
	b[0] = metaVersion
	if m.zone != "" {
		b[0] = metaZoned
	}
	b[1] = m.features << 1
	if m.leaving {
		b[1] |= flagLeaving
	}
	binary.BigEndian.PutUint64(b[2:], m.incarnation)
	binary.BigEndian.PutUint16(b[10:], uint16(len(m.rpcAddr)))
	b = append(b, m.rpcAddr...)
	if m.zone == "" {
		return append(b, m.clientAddr...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.clientAddr)))
	return append(append(b, m.clientAddr...), m.zone...)
}

var errMeta = errors.New("cluster: bad node metadata")

func decodeMeta(b []byte) (meta, error) {
	if len(b) < metaHeader {
		return meta{}, fmt.Errorf("%w: %d bytes", errMeta, len(b))
	}
	version := b[0]
	if version != metaVersion && version != metaZoned {
		return meta{}, fmt.Errorf("%w: version %d", errMeta, version)
	}
	m := meta{leaving: b[1]&flagLeaving != 0, features: b[1] >> 1, incarnation: binary.BigEndian.Uint64(b[2:])}
	n := int(binary.BigEndian.Uint16(b[10:]))
	if n > len(b)-metaHeader {
		return meta{}, fmt.Errorf("%w: RPC address of %d bytes in %d", errMeta, n, len(b))
	}
	m.rpcAddr, b = string(b[metaHeader:metaHeader+n]), b[metaHeader+n:]
	if version == metaVersion {
		m.clientAddr = string(b)
		return m, nil
	}
	if len(b) < 2 || int(binary.BigEndian.Uint16(b)) > len(b)-2 {
		return meta{}, fmt.Errorf("%w: client address cut short", errMeta)
	}
	n, b = int(binary.BigEndian.Uint16(b)), b[2:]
	m.clientAddr, m.zone = string(b[:n]), string(b[n:])
	if len(m.zone) > maxZone {
		return meta{}, fmt.Errorf("%w: zone of %d bytes", errMeta, len(m.zone))
	}
	return m, nil
}
