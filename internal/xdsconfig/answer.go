package xdsconfig

import (
	"context"
	"strings"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// maxErrorDetail bounds the error a NACK carries.
const maxErrorDetail = 4096

// refusal is the last config refused: a server that sends its version again (a
// snapshot cache does, at once, after a NACK) is answered with the same error, after
// a wait.
type refusal struct {
	version string
	msg     string
	pace    time.Duration // the backoff's last wait before answering it again
}

// answer takes a response's config, or refuses it, and is the ACK or NACK to send;
// it fails only when ctx ends while it waits to refuse a config again.
func (c *client) answer(ctx context.Context, resp *discoverypb.DiscoveryResponse) (*discoverypb.DiscoveryRequest, error) {
	if r := c.refused; r != nil && resp.GetVersionInfo() == r.version {
		r.pace = c.cfg.Backoff.Next(r.pace)
		d := c.jittered(r.pace)
		c.cfg.Logger.Debug("rate limit config from xDS sent again after its NACK: refusing it again after a wait", "version", r.version, "in", d.String())
		if !sleep(ctx, d) {
			return nil, ctx.Err()
		}
		return c.nack(resp, r.msg), nil
	}
	err := c.take(resp)
	if c.cfg.Reloaded != nil {
		c.cfg.Reloaded(err)
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > maxErrorDetail {
			msg = strings.ToValidUTF8(msg[:maxErrorDetail], "")
		}
		c.refused = &refusal{version: resp.GetVersionInfo(), msg: msg}
		c.cfg.Logger.Error("rate limit config from xDS refused (NACK): the rules in force stay",
			"version", resp.GetVersionInfo(), "version_in_force", c.version, "err", msg)
		return c.nack(resp, msg), nil
	}
	c.refused = nil
	c.version = resp.GetVersionInfo()
	c.cfg.Logger.Info("rate limit config from xDS in force", "version", c.version, "resources", len(resp.GetResources()))
	return &discoverypb.DiscoveryRequest{TypeUrl: TypeURL, VersionInfo: c.version, ResponseNonce: resp.GetNonce()}, nil
}

// nack refuses resp with msg: the version in force, resp's nonce, the error.
func (c *client) nack(resp *discoverypb.DiscoveryResponse, msg string) *discoverypb.DiscoveryRequest {
	return &discoverypb.DiscoveryRequest{TypeUrl: TypeURL, VersionInfo: c.version, ResponseNonce: resp.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: msg}}
}

// take converts a response's resources and applies them.
func (c *client) take(resp *discoverypb.DiscoveryResponse) error {
	conv, err := convert(resp.GetResources())
	if err != nil {
		return err
	}
	return conv.explain(c.apply(conv.files))
}
