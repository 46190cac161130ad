package cluster

import (
	"strings"
	"testing"
)

func TestVersionStateRoundTripsAndRejectsGarbage(t *testing.T) {
	name, version, err := decodeVersion(encodeVersion("node-1", "v0.0.0-2026-abc"))
	if err != nil || name != "node-1" || version != "v0.0.0-2026-abc" {
		t.Fatalf("round trip: %q %q %v", name, version, err)
	}
	good := encodeVersion("n", "v")
	for _, bad := range [][]byte{nil, {}, {0x00}, good[:len(good)-1], append(append([]byte{}, good...), 0),
		encodeVersion("", "v"), encodeVersion(strings.Repeat("x", 200), "v"), encodeVersion("n", strings.Repeat("v", 65)),
		{versionsMagic, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, _, err := decodeVersion(bad); err == nil {
			t.Errorf("decodeVersion(%x) accepted", bad)
		}
	}
}

func FuzzDecodeVersion(f *testing.F) {
	f.Add(encodeVersion("a", "v1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if name, version, err := decodeVersion(b); err == nil && (len(name) > maxNameLen || len(version) > maxVersionLen) {
			t.Fatalf("accepted over-long fields")
		}
	})
}
