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
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^key[i]]
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

// crc16tab is CRC16/XMODEM's table (polynomial 0x1021), made once at start.
var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
