package oncekey

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	oncekeyv1 "oncekey.dev/oncekey/client/go/gen/oncekey/v1"
)

// TenantHeader is the metadata header naming the tenant against a dev-mode server (no tokens).
const TenantHeader = "x-oncekey-tenant"

// Client is a connection to an Oncekey server; safe for concurrent use.
type Client struct {
	// Ledger is the generated oncekey.v1.Ledger client, with the credentials attached.
	Ledger oncekeyv1.LedgerClient
	conn   *grpc.ClientConn
}

// Option configures Dial.
type Option func(*options)

type options struct {
	token, tenant string
	creds         credentials.TransportCredentials
	dial          []grpc.DialOption
}

// WithToken sends `authorization: Bearer <token>` with every call (servers with a tokens file).
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTenant sends the tenant header with every call (dev-mode servers without tokens).
func WithTenant(tenant string) Option { return func(o *options) { o.tenant = tenant } }

// WithTransportCredentials sets TLS; the default is plaintext.
func WithTransportCredentials(c credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = c }
}

// WithDialOptions adds grpc-go dial options.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, opts...) }
}

// Dial creates a client for target ("host:port", or any grpc-go target). Like grpc.NewClient it
// connects lazily, on the first call.
func Dial(target string, opts ...Option) (*Client, error) {
	o := options{creds: insecure.NewCredentials()}
	for _, opt := range opts {
		opt(&o)
	}
	var md []string
	if o.token != "" {
		md = append(md, "authorization", "Bearer "+o.token)
	}
	if o.tenant != "" {
		md = append(md, TenantHeader, o.tenant)
	}
	withMD := func(ctx context.Context) context.Context {
		if len(md) == 0 {
			return ctx
		}
		return metadata.AppendToOutgoingContext(ctx, md...)
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(o.creds),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(withMD(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
			method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(withMD(ctx), desc, cc, method, opts...)
		}),
	}, o.dial...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, err
	}
	return &Client{Ledger: oncekeyv1.NewLedgerClient(conn), conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
