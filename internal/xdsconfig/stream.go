package xdsconfig

import (
	"context"
	"errors"
	"io"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// session runs one ADS stream until it fails or ctx ends: the first request names the
// node and the version in force, and every response is answered, ACK or NACK.
// answered reports whether any response came.
func (c *client) session(ctx context.Context, conn grpc.ClientConnInterface) (answered bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(c.headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, c.headers)
	}
	opts := []grpc.CallOption{grpc.WaitForReady(true)} // wait for the connection: it retries every ConnectRetry
	if c.cfg.MaxMessageBytes > 0 {
		opts = append(opts, grpc.MaxCallRecvMsgSize(c.cfg.MaxMessageBytes))
	}
	st, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx, opts...)
	if err != nil {
		return false, err
	}
	first := &discoverypb.DiscoveryRequest{Node: c.node, TypeUrl: TypeURL, VersionInfo: c.version}
	if err := send(st, first); err != nil {
		return false, err
	}
	c.cfg.Logger.Info("xDS stream for the rate limit config open", "server", c.cfg.Server, "node_id", c.cfg.NodeID, "version", c.version)
	for {
		resp, err := st.Recv()
		if err != nil {
			return answered, err
		}
		answered = true
		if resp.GetTypeUrl() != TypeURL {
			c.cfg.Logger.Warn("xDS response of a type not subscribed to, left unanswered", "type_url", resp.GetTypeUrl())
			continue
		}
		req, err := c.answer(ctx, resp)
		if err != nil {
			return answered, err
		}
		if err := send(st, req); err != nil {
			return answered, err
		}
	}
}

// send sends req; when the stream has ended, the error is its status.
func send(st discoverypb.AggregatedDiscoveryService_StreamAggregatedResourcesClient, req *discoverypb.DiscoveryRequest) error {
	err := st.Send(req)
	if errors.Is(err, io.EOF) {
		_, err = st.Recv()
	}
	return err
}
