package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/internal/xdsconfig"
)

// Rules from xDS are the only source of rules (not with --limits), and serve the gRPC
// front end alone: a Config that says otherwise is refused, naming the flag.
func TestLimitsFromXDSAreOneSourceAndWantGRPC(t *testing.T) {
	for _, c := range []struct {
		grpc, limits, flag, want string
	}{
		{"127.0.0.1:0", "rules.yaml", "limits", "give one or the other"},
		{"", "", "grpc", "serve only the gRPC front end"},
	} {
		cfg := Config{Name: "n1", GRPCAddr: c.grpc, Limits: c.limits, LimitsXDS: &xdsconfig.Config{}}.WithDefaults()
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != c.flag || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--grpc %q, --limits %q with xDS: got %v; want an error of --%s saying %q", c.grpc, c.limits, err, c.flag, c.want)
		}
	}
	cfg := Config{Name: "n1", GRPCAddr: "127.0.0.1:0", LimitsXDS: &xdsconfig.Config{}}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("xDS with --grpc: %v; want it valid", err)
	}
}
