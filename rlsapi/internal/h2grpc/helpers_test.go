package h2grpc

import (
	"context"

	"google.golang.org/grpc/metadata"
)

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

func metadataCtx(kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), kv...)
}
