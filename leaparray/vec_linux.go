package leaparray

import "golang.org/x/sys/unix"

var pageSize = unix.Getpagesize()

// mapBytes maps n bytes (a multiple of pageSize) of zeroed, private, anonymous memory.
//
// The mapping opts out of transparent huge pages (mremap keeps that as it moves it): a
// vec's capacity past its length is never written, so it costs no RSS, but where THP is
// "always" the first write near the end of a vec would make a whole 2 MiB page resident
// around it, up to 2 MiB per vec and hundreds of vecs per Spec. Without THP (the
// "madvise" default of most distributions) this changes nothing.
func mapBytes(n int) ([]byte, bool) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, false
	}
	unix.Madvise(b, unix.MADV_NOHUGEPAGE) // advice: a kernel without THP refuses it, harmlessly
	return b, true
}

// remapBytes resizes a mapping to n bytes, moving it if it must (its pages move, they are
// not copied). On failure b is left as it was.
func remapBytes(b []byte, n int) ([]byte, bool) {
	nb, err := unix.Mremap(b, n, unix.MREMAP_MAYMOVE)
	return nb, err == nil
}

func unmapBytes(b []byte) {
	if err := unix.Munmap(b); err != nil {
		panic("leaparray: munmap: " + err.Error())
	}
}
