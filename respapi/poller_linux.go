package respapi

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// poller is one event loop: an epoll instance and the goroutine that serves its
// connections. The goroutine waits for events through Go's own netpoller (an epoll fd
// is itself pollable), so an idle loop holds no P.
//
// Why not gnet, which was tried first: its loops wait in epoll_wait inside a system
// call, holding their P until sysmon takes it back, up to 10 ms later; with a loop per
// P, every other goroutine of the node (Redis loads, forwarding, leases) waited that
// long, and TestRedisJoinKeepsCounts (node) failed on Redis loads that timed out, where
// it passes with goroutines per connection. This loop does what that one did for us, a
// read and a write per batch of commands, in a file.
type poller struct {
	l      *loops
	epfd   int
	file   *os.File        // epfd as Go's netpoller knows it
	rc     syscall.RawConn // file's: Read waits for events without holding a P
	wakefd int             // an eventfd that post writes to, to wake the loop
	buf    []byte          // what each read reads into
	events []unix.EpollEvent
	conns  map[int]*loopConn // by fd; the loop's own

	quit bool // stop's task ran: the loop ends (the loop's own)

	mu     sync.Mutex
	tasks  []func() // posted by other goroutines, run by the loop
	woken  bool     // wakefd was written and the loop has not taken the tasks yet
	exited bool     // the loop has ended
	done   chan struct{}
}

const (
	yieldEvery = 200 * time.Microsecond
	pollBuf    = 64 << 10 // the most one read takes
	pollEvents = 128      // the most events one wait returns
	readEvents = unix.EPOLLIN | unix.EPOLLRDHUP
)

func newPoller(l *loops) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	p := &poller{l: l, epfd: epfd, wakefd: -1, buf: make([]byte, pollBuf),
		events: make([]unix.EpollEvent, pollEvents), conns: map[int]*loopConn{}, done: make(chan struct{})}
	if p.wakefd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err == nil {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, p.wakefd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p.wakefd)})
	}
	if err == nil {
		err = unix.SetNonblock(epfd, true)
	}
	if err == nil {
		p.file = os.NewFile(uintptr(epfd), "epoll")
		p.rc, err = p.file.SyscallConn()
	}
	if err != nil {
		p.closeFDs()
		return nil, fmt.Errorf("event loop: %w", err)
	}
	go p.run()
	return p, nil
}

// run serves events until stop.
func (p *poller) run() {
	defer close(p.done)
	lastYield := nanotime()
	for {
		var werr error
		err := p.rc.Read(func(uintptr) bool {
			n, err := unix.EpollWait(p.epfd, p.events, 0)
			switch {
			case err == unix.EINTR:
				return true
			case err != nil:
				werr = err
				return true
			case n == 0:
				return false // wait, in the netpoller, for epfd to be readable
			}
			for _, ev := range p.events[:n] {
				p.handle(ev)
			}
			return true
		})
		if err != nil || werr != nil || p.quit {
			p.exit()
			return
		}
		// A busy loop always finds events and never parks: every yieldEvery it lets the
		// other goroutines of its P (another loop, a parked session coming back) have a
		// turn, or they would wait for the scheduler's 10 ms preemption when the GC or
		// another process takes a core (make bench's p99.9 of unpipelined SW.INCR shows
		// it). Not after every round: that costs CPU on every SW.INCR (redis-benchmark).
		if now := nanotime(); now-lastYield > int64(yieldEvery) {
			runtime.Gosched()
			lastYield = nanotime()
		}
	}
}

func (p *poller) handle(ev unix.EpollEvent) {
	fd := int(ev.Fd)
	if fd == p.wakefd {
		p.runTasks()
		return
	}
	lc := p.conns[fd]
	if lc == nil {
		return
	}
	if ev.Events&unix.EPOLLOUT != 0 && !lc.flush() {
		return
	}
	if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		n, err := unix.Read(fd, p.buf)
		switch {
		case n > 0:
			lc.traffic(p.buf[:n])
		case err == unix.EAGAIN || err == unix.EINTR:
		default:
			if err == nil {
				err = errEOF
			}
			lc.closeNow(err)
		}
	}
}

var errEOF = errors.New("connection closed by the client")

// add serves lc's fd from now on (on the loop).
func (p *poller) add(lc *loopConn) error {
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, lc.fd, &unix.EpollEvent{Events: readEvents, Fd: int32(lc.fd)}); err != nil {
		return err
	}
	p.conns[lc.fd] = lc
	return nil
}

// watchWrites tells epoll whether lc is waiting for room to write (on the loop).
func (p *poller) watchWrites(lc *loopConn, on bool) error {
	ev := uint32(readEvents)
	if on {
		ev |= unix.EPOLLOUT
	}
	return unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, lc.fd, &unix.EpollEvent{Events: ev, Fd: int32(lc.fd)})
}

// remove stops serving lc's fd and closes it (on the loop).
func (p *poller) remove(lc *loopConn) {
	delete(p.conns, lc.fd)
	unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, lc.fd, nil)
	unix.Close(lc.fd)
}

// exit closes the loop's connections and its epoll fd (not within Read: Close waits
// for Read to let go of the file). Tasks posted from now on run where they are posted.
func (p *poller) exit() {
	for _, lc := range p.conns {
		lc.closeNow(errClosing)
	}
	p.mu.Lock()
	p.exited = true
	tasks := p.tasks
	p.tasks = nil
	p.mu.Unlock()
	for _, f := range tasks {
		f()
	}
	p.file.Close()
}

// post runs f on the loop, soon; from any goroutine.
func (p *poller) post(f func()) {
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		f()
		return
	}
	p.tasks = append(p.tasks, f)
	wake := !p.woken
	p.woken = true
	p.mu.Unlock()
	if wake {
		var one = [8]byte{1}
		unix.Write(p.wakefd, one[:])
	}
}

func (p *poller) runTasks() {
	var b [8]byte
	unix.Read(p.wakefd, b[:])
	p.mu.Lock()
	tasks := p.tasks
	p.tasks, p.woken = nil, false
	p.mu.Unlock()
	for _, f := range tasks {
		f()
	}
}

// stop closes what is left and ends the loop; its connections must be closed.
func (p *poller) stop() {
	p.post(func() { p.quit = true })
	<-p.done
	unix.Close(p.wakefd)
}

var errClosing = errors.New("server closing")

func (p *poller) closeFDs() {
	if p.wakefd >= 0 {
		unix.Close(p.wakefd)
	}
	unix.Close(p.epfd)
}

func closeFD(fd int) { unix.Close(fd) }

func nanotime() int64 { return time.Now().UnixNano() }

// dupSocket returns a non-blocking duplicate of c's descriptor, for a loop to serve.
func dupSocket(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	cerr := rc.Control(func(s uintptr) { fd, err = unix.Dup(int(s)) })
	if cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// writeFD writes b to fd once, without blocking: how much the socket took.
func writeFD(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		switch err {
		case nil:
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, err
	}
}
