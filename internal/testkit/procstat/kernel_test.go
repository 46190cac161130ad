package procstat

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// Reads and writes of this process are counted, and a thread that sleeps is switched
// off its CPU.
func TestSyscallsAndSwitchesOfSelf(t *testing.T) {
	pid := os.Getpid()
	s0, err := Syscalls(pid)
	if err != nil {
		t.Fatal(err)
	}
	w0, err := Switches(pid)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 10 {
		f.Write([]byte("x"))
		runtime.Gosched()
	}
	if s1, err := Syscalls(pid); err != nil || s1-s0 < 10 {
		t.Fatalf("Syscalls went from %d to %d (%v) over 10 writes", s0, s1, err)
	}
	// A thread that sleeps in the kernel is switched off its CPU: the event measured,
	// not a wait for a condition.
	runtime.LockOSThread()
	syscall.Nanosleep(&syscall.Timespec{Nsec: 1e6}, nil)
	runtime.UnlockOSThread()
	if w1, err := Switches(pid); err != nil || w1 <= w0 {
		t.Fatalf("Switches went from %d to %d (%v)", w0, w1, err)
	}
}

func TestSumFieldsNamesAMissingField(t *testing.T) {
	if n, err := sumFields([]byte("syscr: 3\nsyscw: 4\n"), "syscr:", "syscw:"); err != nil || n != 7 {
		t.Fatalf("sumFields = %d, %v; want 7", n, err)
	}
	if _, err := sumFields([]byte("syscr: 3\n"), "syscr:", "syscw:"); err == nil {
		t.Fatal("a missing field was not an error")
	}
}
