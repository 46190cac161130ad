package ntp

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// The arithmetic of NTP's on-wire exchange: the other clock 5 s ahead, 10 ms each
// way, 2 ms to answer; then asymmetric ways, where the error bound covers the truth.
func TestFromExchange(t *testing.T) {
	const ahead = 5000 * ms
	// This clock: sends at 1000, the other receives at 1010 (its clock: 6010), answers
	// at 1012 (6012), the answer arrives at 1022.
	e := FromExchange(1000*ms, 6010*ms, 6012*ms, 1022*ms, time.Second)
	if e.Offset != ahead || e.Err != 10*ms || e.At != time.Second {
		t.Fatalf("symmetric: %+v; want offset %v, err 10ms", e, ahead)
	}
	// 30 ms there, 2 ms back: the estimate is off by 14 ms, within its error bound.
	e = FromExchange(1000*ms, 6030*ms, 6030*ms, 1032*ms, time.Second)
	if off := e.Offset - ahead; off != 14*ms || e.Err != 16*ms || !(off <= e.Err && off >= -e.Err) {
		t.Fatalf("asymmetric: %+v (off by %v); want off by 14ms within err 16ms", e, e.Offset-ahead)
	}
	// A clock 3 s behind, read once (Redis's TIME) in the middle of a 4 ms call.
	e = FromReading(10_000*ms, 7002*ms, 10_004*ms, time.Second)
	if e.Offset != -3000*ms || e.Err != 2*ms {
		t.Fatalf("a reading: %+v; want -3s within 2ms", e)
	}
	// The clock stepped back during the exchange: the wire time comes out negative,
	// and the bound is not.
	if e = FromExchange(1000*ms, 500*ms, 500*ms, 990*ms, time.Second); e.Err != 0 {
		t.Fatalf("stepped: err %v; want 0", e.Err)
	}
}

// An estimate is known while it is fresh and tight enough, and no longer: none (At 0),
// too old, too loose. Within takes the error bound into account.
func TestKnownAndWithin(t *testing.T) {
	e := Estimate{Offset: 2 * time.Second, Err: 100 * ms, At: 10 * time.Second}
	for _, c := range []struct {
		now  time.Duration
		err  time.Duration
		want bool
	}{
		{10 * time.Second, time.Second, true},
		{20 * time.Second, time.Second, true},
		{20*time.Second + 1, time.Second, false}, // expired
		{11 * time.Second, 50 * ms, false},       // too loose
	} {
		if got := e.Known(c.now, 10*time.Second, c.err); got != c.want {
			t.Errorf("Known(now %v, maxErr %v) = %v; want %v", c.now, c.err, got, c.want)
		}
	}
	if (Estimate{}).Known(time.Second, time.Hour, time.Hour) {
		t.Error("the zero Estimate is known")
	}
	if !e.Within(2100*ms) || e.Within(2099*ms) {
		t.Errorf("Within: 2s±100ms should be within 2.1s and not within 2.099s")
	}
	if neg := (Estimate{Offset: -4 * time.Second, Err: ms}); neg.Within(4*time.Second) || !neg.Within(4001*ms) {
		t.Errorf("Within of a clock behind")
	}
}
