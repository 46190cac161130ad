package rlsbench

import (
	"strings"
	"testing"
)

func TestRatioComparesTheSameDescriptorCount(t *testing.T) {
	rows := []Row{
		{Server: Baseline, Descriptors: 1, CPUMicros: 100},
		{Server: Baseline, Descriptors: 3, CPUMicros: 200},
		{Server: "leapcount, 1 node", Nodes: 1, Descriptors: 1, CPUMicros: 20},
		{Server: "leapcount, 1 node", Nodes: 1, Descriptors: 3, CPUMicros: 50},
	}
	if x, ok := Ratio(rows, 1, 3); !ok || x != 4 {
		t.Fatalf("Ratio(1 node, 3 descriptors) = %v, %v; want 4, true", x, ok)
	}
	if _, ok := Ratio(rows, 3, 1); ok {
		t.Fatal("a cluster size not measured has a ratio")
	}
	if _, ok := Ratio(rows[2:], 1, 1); ok {
		t.Fatal("a ratio without the baseline")
	}
	tab := Table(rows)
	if !strings.Contains(tab, "| leapcount, 1 node | 1 | 0 | 20.0 | 50,000 | 5.0× | 5.0× | 0.00 | 0.00 |") {
		t.Fatalf("table:\n%s", tab)
	}
}

func TestRatioSameCountComparesAsManyInstances(t *testing.T) {
	rows := []Row{
		{Server: Baseline, Instances: 1, Descriptors: 1, CPUMicros: 100},
		{Server: "envoyproxy/ratelimit ×3 + Redis", Instances: 3, Descriptors: 1, CPUMicros: 150},
		{Server: "leapcount, 3 nodes", Nodes: 3, Descriptors: 1, CPUMicros: 50},
	}
	if x, ok := Ratio(rows, 3, 1); !ok || x != 2 {
		t.Fatalf("Ratio(3 nodes) = %v, %v; want 2 (against one instance), true", x, ok)
	}
	if x, ok := RatioSameCount(rows, 3, 1); !ok || x != 3 {
		t.Fatalf("RatioSameCount(3 nodes) = %v, %v; want 3 (against three instances), true", x, ok)
	}
	if _, ok := RatioSameCount(rows, 1, 1); ok {
		t.Fatal("a ratio against instances not measured")
	}
	if tab := Table(rows); !strings.Contains(tab, "| leapcount, 3 nodes | 1 | 0 | 50.0 | 20,000 | 2.0× | 3.0× | 0.00 | 0.00 |") {
		t.Fatalf("table:\n%s", tab)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

// A TLS row is set against the same node's plaintext row, never against the baseline,
// and does not take the plaintext row's place in the baseline ratios.
func TestTLSRowComparesWithThePlaintextRow(t *testing.T) {
	rows := []Row{
		{Server: Baseline, Descriptors: 1, CPUMicros: 100},
		{Server: "leapcount, 1 node", Nodes: 1, Descriptors: 1, CPUMicros: 20},
		{Server: "leapcount, 1 node, over TLS", Nodes: 1, Descriptors: 1, CPUMicros: 25, TLS: true},
	}
	if x, ok := TLSCost(rows, 1); !ok || x != 0.8 {
		t.Fatalf("TLSCost = %v, %v; want 0.8, true", x, ok)
	}
	if x, ok := Ratio(rows, 1, 1); !ok || x != 5 {
		t.Fatalf("Ratio(1 node) = %v, %v; want 5 (the plaintext row), true", x, ok)
	}
	tab := Table(rows)
	if !strings.Contains(tab, "| leapcount, 1 node, over TLS | 1 | 0 | 25.0 | 40,000 | 0.80× of plaintext's | - |") {
		t.Fatalf("table:\n%s", tab)
	}
}
