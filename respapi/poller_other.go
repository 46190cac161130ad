//go:build !linux

package respapi

import (
	"errors"
	"syscall"
)

// Event loops are built on epoll (poller_linux.go); elsewhere every connection is
// served on a goroutine of its own (stream.go).
type poller struct{ l *loops }

var errNoLoops = errors.New("event loops need Linux")

func newPoller(*loops) (*poller, error)             { return nil, errNoLoops }
func (p *poller) post(f func())                     { f() }
func (p *poller) add(*loopConn) error               { return errNoLoops }
func (p *poller) watchWrites(*loopConn, bool) error { return errNoLoops }
func (p *poller) remove(*loopConn)                  {}
func (p *poller) stop()                             {}
func closeFD(int)                                   {}
func dupSocket(syscall.Conn) (int, error)           { return -1, errNoLoops }
func writeFD(int, []byte) (int, error)              { return 0, errNoLoops }

var errEOF = errors.New("connection closed by the client")
