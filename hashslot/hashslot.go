// Package hashslot computes a key's Redis Cluster hash slot, exactly as Redis does:
// CRC16 (XMODEM) of the key's hash tag (the bytes between its first '{' and the next
// '}', when there are some; else the whole key), mod 16384. Keys that share a tag share
// a slot: that is how a client keeps related keys on one node.
package hashslot

// Count is the number of slots.
const Count = 16384

// Of is key's slot. It does not allocate.
func Of[K string | []byte](key K) uint16 {
	key = tag(key)
	var crc uint16
	i := 0
	// Four bytes at a time, with four independent lookups (slicing by 4): faster than the
	// byte loop, which waits on each lookup before the next, and a node computes a slot
	// twice per op (BenchmarkOf).
	for ; i+4 <= len(key); i += 4 {
		crc = crc16by4[3][byte(crc>>8)^key[i]] ^ crc16by4[2][byte(crc)^key[i+1]] ^
			crc16by4[1][key[i+2]] ^ crc16by4[0][key[i+3]]
	}
	for ; i < len(key); i++ {
		crc = crc<<8 ^ crc16by4[0][byte(crc>>8)^key[i]]
	}
	return crc % Count
}

// tag is the part of key that is hashed.
func tag[K string | []byte](key K) K {
	for s := 0; s < len(key); s++ {
		if key[s] != '{' {
			continue
		}
		for e := s + 1; e < len(key); e++ {
			if key[e] == '}' {
				if e > s+1 {
					return key[s+1 : e]
				}
				return key
			}
		}
		return key
	}
	return key
}

// crc16by4[0] is CRC16/XMODEM's table (polynomial 0x1021); crc16by4[k][x] is the CRC
// of byte x followed by k zero bytes. The CRC is linear, so the CRC after four bytes is
// the XOR of each byte's table entry at its distance from the end (the two bytes of the
// CRC so far folded into the first two). Made once at start.
var crc16by4 = func() (t [4][256]uint16) {
	for i := range t[0] {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[0][i] = c
	}
	for k := 1; k < len(t); k++ {
		for i := range t[k] {
			c := t[k-1][i]
			t[k][i] = c<<8 ^ t[0][byte(c>>8)]
		}
	}
	return t
}()
