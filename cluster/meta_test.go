package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, want := range []meta{
		{rpcAddr: "10.0.0.1:7947", incarnation: 1_700_000_000_123_456_789},
		{rpcAddr: "node.example:7947", incarnation: 1, leaving: true},
		{rpcAddr: "10.0.0.1:7947", clientAddr: "client.example:7380", incarnation: 2},
		{rpcAddr: "10.0.0.1:7947", clientAddr: "client.example:7380", zone: "eu-west-1a", incarnation: 3},
		{rpcAddr: "10.0.0.1:7947", zone: "rack-7", incarnation: 4, leaving: true},
		{rpcAddr: "10.0.0.1:7947", incarnation: 5, features: maxFeatures},
		{rpcAddr: "10.0.0.1:7947", incarnation: 6, features: 1, leaving: true},
	} {
		got, err := decodeMeta(want.encode())
		if err != nil || got != want {
			t.Errorf("got %+v, %v; want %+v", got, err, want)
		}
	}
}

func TestMetaFitsMemberlistLimit(t *testing.T) {
	d := &delegate{meta: meta{rpcAddr: strings.Repeat("h", maxAddr), clientAddr: strings.Repeat("c", maxAddr), zone: strings.Repeat("z", maxZone), incarnation: 1}}
	d.leaving.Store(true)
	b := d.NodeMeta(memberlist.MetaMaxSize)
	if len(b) == 0 || len(b) > memberlist.MetaMaxSize {
		t.Fatalf("got %d bytes of metadata; want 1 to %d", len(b), memberlist.MetaMaxSize)
	}
}

func TestDecodeMetaRejectsForeignData(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("short"), append([]byte{9}, make([]byte, 20)...),
		{2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 40, 'x'}, {2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0},
		append([]byte{1, flagLeaving, 0, 0, 0, 0, 0, 0, 0, 7}, "10.0.0.1:7947"...),                    // another version
		{3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 'x', 0},                                                  // a zoned client address cut short
		{3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 'x', 0, 1},                                               // (its length past the end)
		append([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, strings.Repeat("z", maxZone+1)...)} { // a zone too long
		if _, err := decodeMeta(b); !errors.Is(err, errMeta) {
			t.Errorf("decodeMeta(%q): got %v; want errMeta", b, err)
		}
	}
}

func TestMemberWithForeignMetadataDoesNotServe(t *testing.T) {
	e := &events{tab: newTable("self"), log: discard()}
	e.NotifyJoin(&memberlist.Node{Name: "stranger", Meta: []byte("hello")})
	m, ok := e.tab.get("stranger")
	if !ok || m.State != StateAlive || m.Serving() {
		t.Fatalf("got %+v, %v; want listed alive and not serving", m, ok)
	}
}

// A member without a zone sends the metadata every release reads (version 2); only one
// with a zone sends version 3.
func TestMetaWithoutAZoneIsVersion2(t *testing.T) {
	if b := (meta{rpcAddr: "10.0.0.1:7947", clientAddr: "c:1"}).encode(); b[0] != metaVersion {
		t.Fatalf("version %d without a zone; want %d", b[0], metaVersion)
	}
	if b := (meta{rpcAddr: "10.0.0.1:7947", zone: "a"}).encode(); b[0] != metaZoned {
		t.Fatalf("version %d with a zone; want %d", b[0], metaZoned)
	}
	if err := (Config{Name: "n", BindAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:1", Zone: "eu west"}).Validate(); err == nil || !strings.Contains(err.Error(), "Zone") {
		t.Fatalf("Validate of a zone with a space: %v; want an error naming Zone", err)
	}
}

// Features ride in the flags byte's upper bits: a release before them reads the same
// version and sees bit 0 (leaving) alone, so it neither rejects the member nor takes it
// for leaving.
func TestFeaturesReachOlderReleasesHarmlessly(t *testing.T) {
	b := (meta{rpcAddr: "10.0.0.1:7947", clientAddr: "c:1", features: maxFeatures}).encode()
	if b[0] != metaVersion || b[1]&flagLeaving != 0 {
		t.Fatalf("version %d, flags %#x; want version %d and the leaving bit clear", b[0], b[1], metaVersion)
	}
	if err := (Config{Name: "n", BindAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:1", Features: maxFeatures + 1}).Validate(); err == nil || !strings.Contains(err.Error(), "Features") {
		t.Fatalf("Validate of 8 feature bits: %v; want an error naming Features", err)
	}
}
