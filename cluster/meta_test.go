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
	} {
		got, err := decodeMeta(want.encode())
		if err != nil || got != want {
			t.Errorf("got %+v, %v; want %+v", got, err, want)
		}
	}
}

func TestMetaFitsMemberlistLimit(t *testing.T) {
	d := &delegate{meta: meta{rpcAddr: strings.Repeat("h", maxAddr), clientAddr: strings.Repeat("c", maxAddr), incarnation: 1}}
	d.leaving.Store(true)
	b := d.NodeMeta(memberlist.MetaMaxSize)
	if len(b) == 0 || len(b) > memberlist.MetaMaxSize {
		t.Fatalf("got %d bytes of metadata; want 1 to %d", len(b), memberlist.MetaMaxSize)
	}
}

func TestDecodeMetaRejectsForeignData(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("short"), append([]byte{9}, make([]byte, 20)...),
		{2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 40, 'x'}, {2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0},
		append([]byte{1, flagLeaving, 0, 0, 0, 0, 0, 0, 0, 7}, "10.0.0.1:7947"...)} { // another version
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
