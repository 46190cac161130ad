package h2grpc

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// A connection closed for flooding, whose client goes on sending, still hands the
// client everything written before the end, the GOAWAY last: closing the socket with
// the client's bytes unread resets it, and the kernel drops what it had not sent yet
// (the client reads slowly, or not yet). The hostile-client suite saw a PING flood's
// connection reset before its GOAWAY (make test-long, 2026-12-04).
func TestAFloodsConnectionEndsWithItsGoAwayNotAReset(t *testing.T) {
	client, server := tcpPair(t)
	go func() { // the flood, for as long as the connection takes it
		b := make([]byte, 16<<10)
		for {
			if _, err := client.Write(b); err != nil {
				return
			}
		}
	}()
	// More than the client's receive buffer takes while it does not read: the rest
	// waits in the server's send queue.
	sent := append(bytes.Repeat([]byte{'a'}, 4<<20), "GOAWAY"...)
	wrote := make(chan error, 1)
	go func() {
		_, err := server.Write(sent)
		closeWrite(server)
		wrote <- err
	}()
	c := &conn{nc: server, calmed: true}
	done := make(chan struct{})
	go func() { // once the client's bytes past the drain's bound have arrived
		defer close(done)
		c.linger()
	}()
	time.Sleep(100 * time.Millisecond) // the client not reading yet: a span, not a condition
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if !bytes.Equal(got, sent) {
		t.Fatalf("read %d of %d bytes, then %v; want all of them, the GOAWAY last, and the end", len(got), len(sent), err)
	}
	<-done
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}
