package cluster

import (
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{Name: "n1", BindAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:7947"}
}

func TestValidateAcceptsMinimalConfig(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("got %v; want nil", err)
	}
}

func TestValidateNamesBadFields(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"Name", func(c *Config) { c.Name = "" }},
		{"Name", func(c *Config) { c.Name = strings.Repeat("x", 129) }},
		{"BindAddr", func(c *Config) { c.BindAddr = "127.0.0.1" }},
		{"BindAddr", func(c *Config) { c.BindAddr = "127.0.0.1:99999" }},
		{"AdvertiseAddr", func(c *Config) { c.AdvertiseAddr = "a b" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = "" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = "127.0.0.1:0" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = "0.0.0.0:7947" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = ":7947" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = strings.Repeat("h", 400) + ":1" }},
		{"Join[1]", func(c *Config) { c.Join = []string{"127.0.0.1:7946", ""} }},
		{"Join[0]", func(c *Config) { c.Join = []string{"peers.example:gossip"} }},
		{"Join[0]", func(c *Config) { c.Join = []string{"peers.example:0"} }},
		{"Join[0]", func(c *Config) { c.Join = []string{":7946"} }},
		{"JoinRetry", func(c *Config) { c.JoinRetry.Attempts = -1 }},
		{"Timings.ProbeTimeout", func(c *Config) { c.Timings = Timings{ProbeInterval: time.Second, ProbeTimeout: 2 * time.Second} }},
		{"Timings.GossipInterval", func(c *Config) { c.Timings.GossipInterval = -time.Second }},
		{"Timings.SuspicionMult", func(c *Config) { c.Timings.SuspicionMult = -1 }},
	}
	for _, tc := range cases {
		cfg := validConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: got %v; want an error naming %s", tc.field, err, tc.field)
		}
	}
}

func TestValidateReportsEveryBadField(t *testing.T) {
	err := Config{}.Validate()
	for _, field := range []string{"Name", "BindAddr", "RPCAddr"} {
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("got %v; want it to name %s", err, field)
		}
	}
}

func TestStartRejectsInvalidConfig(t *testing.T) {
	if _, err := Start(Config{Name: "x"}); err == nil {
		t.Fatalf("Start with no addresses: got nil error")
	}
}
