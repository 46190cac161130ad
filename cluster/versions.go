package cluster

import (
	"encoding/binary"
	"errors"
	"sync"
)

// Each member's build version travels in memberlist's push-pull state (LocalState and
// MergeRemoteState), not in its metadata, which memberlist bounds at 512 bytes and
// whose two addresses may nearly fill it. A push-pull with a random peer runs every
// PushPullInterval and at every join, so a member's version is known to all within a
// few intervals.
//
//	byte 0       versionsMagic
//	then         uvarint length, member name; uvarint length, version
const (
	versionsMagic = 0x76
	maxVersionLen = 64
	maxNameLen    = 128 // as Config.Validate bounds a member name
)

var errVersionState = errors.New("cluster: bad version state")

func encodeVersion(name, version string) []byte {
	b := []byte{versionsMagic}
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, uint64(len(version)))
	return append(b, version...)
}

// decodeVersion reads what encodeVersion wrote; anything else is an error, never a
// panic or a large allocation (the bytes come from the network).
func decodeVersion(b []byte) (name, version string, err error) {
	if len(b) == 0 || b[0] != versionsMagic {
		return "", "", errVersionState
	}
	b = b[1:]
	field := func(limit int) (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(limit) || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	name, ok1 := field(maxNameLen)
	version, ok2 := field(maxVersionLen)
	if !ok1 || !ok2 || name == "" || len(b) != 0 {
		return "", "", errVersionState
	}
	return name, version, nil
}

// versions are the members' versions heard so far, by name. Only members in the table
// are kept (see table.list), so a peer cannot grow it without bound.
type versions struct {
	mu     sync.Mutex
	byName map[string]string
}

func (v *versions) set(name, version string) {
	v.mu.Lock()
	if v.byName == nil {
		v.byName = map[string]string{}
	}
	v.byName[name] = version
	v.mu.Unlock()
}

func (v *versions) get(name string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.byName[name]
}

// keepOnly drops the versions of names not in keep.
func (v *versions) keepOnly(keep map[string]bool) {
	v.mu.Lock()
	for n := range v.byName {
		if !keep[n] {
			delete(v.byName, n)
		}
	}
	v.mu.Unlock()
}
