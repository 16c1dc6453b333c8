package oncekey

// Connecting: the target, credentials (bearer token or dev-mode tenant header), TLS, timeouts,
// retries and the circuit breaker, over one gRPC channel shared by every call of a Client; and one
// retrying method per unary RPC for callers who drive the ledger by hand.

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// TenantHeader is the metadata header naming the tenant against a dev-mode server (no tokens).
const TenantHeader = "x-oncekey-tenant"

// Defaults of a Client's options.
const (
	// DefaultTimeout bounds each attempt of a unary call (a Claim that asks the server to wait
	// gets that much longer).
	DefaultTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds how long an attempt waits for a connection.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultSettleTimeout bounds the recording of an outcome (Complete or Fail, with retries),
	// which runs on its own deadline, not the caller's.
	DefaultSettleTimeout = 60 * time.Second
)

// Client is a connection to an Oncekey server; safe for concurrent use. Every call goes through
// one gRPC channel, one retry policy and one circuit breaker.
type Client struct {
	// Ledger is the generated oncekey.v1 client with the credentials attached: no timeout, no
	// retries. For full control; Do, Run and the Client's methods cover the common path.
	Ledger oncekeyv1.LedgerClient

	conn           *grpc.ClientConn
	retry          RetryPolicy
	breaker        *breaker
	timeout        time.Duration
	connectTimeout time.Duration
	settleTimeout  time.Duration
	owner          string
	log            *slog.Logger
}

// Option configures Dial.
type Option func(*options)

type options struct {
	token, tenant, owner                   string
	creds                                  credentials.TransportCredentials
	dial                                   []grpc.DialOption
	retry                                  RetryPolicy
	breaker                                BreakerPolicy
	timeout, connectTimeout, settleTimeout time.Duration
	log                                    *slog.Logger
}

// WithToken sends `authorization: Bearer <token>` with every call (servers with a tokens file).
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTenant sends the tenant header with every call (dev-mode servers without tokens).
func WithTenant(tenant string) Option { return func(o *options) { o.tenant = tenant } }

// WithTransportCredentials sets TLS (e.g. credentials.NewTLS); the default is plaintext.
func WithTransportCredentials(c credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = c }
}

// WithRetryPolicy sets how transient failures are retried (default DefaultRetryPolicy).
func WithRetryPolicy(p RetryPolicy) Option { return func(o *options) { o.retry = p } }

// WithBreakerPolicy sets when the circuit breaker opens (default DefaultBreakerPolicy).
func WithBreakerPolicy(p BreakerPolicy) Option { return func(o *options) { o.breaker = p } }

// WithTimeout bounds each attempt of a unary call (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithConnectTimeout bounds how long an attempt waits for a connection (default
// DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option { return func(o *options) { o.connectTimeout = d } }

// WithSettleTimeout bounds the recording of an outcome, retries included (default
// DefaultSettleTimeout). It runs on its own deadline so that a caller who gives up still releases
// or records the key.
func WithSettleTimeout(d time.Duration) Option { return func(o *options) { o.settleTimeout = d } }

// WithOwner names this process in the records' lease_owner (default "go-client/<host>/<pid>").
func WithOwner(owner string) Option { return func(o *options) { o.owner = owner } }

// WithLogger sets where the client logs retries and lost leases (default slog.Default()). Keys,
// tokens and bodies are never logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithDialOptions adds grpc-go dial options.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, opts...) }
}

// Dial creates a client for target: "host:port" (plaintext unless WithTransportCredentials),
// "http://host:port", "https://host:port" (TLS with the system's roots unless
// WithTransportCredentials), or any grpc-go target. It connects lazily, on the first call, so it
// does not fail for a server that is down.
func Dial(target string, opts ...Option) (*Client, error) {
	o := options{
		retry: DefaultRetryPolicy, breaker: DefaultBreakerPolicy,
		timeout: DefaultTimeout, connectTimeout: DefaultConnectTimeout, settleTimeout: DefaultSettleTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if rest, ok := strings.CutPrefix(target, "https://"); ok {
		target = rest
		if o.creds == nil {
			o.creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
	} else {
		target = strings.TrimPrefix(target, "http://")
	}
	if o.creds == nil {
		o.creds = insecure.NewCredentials()
	}
	if o.retry.MaxAttempts < 1 {
		return nil, fmt.Errorf("oncekey: RetryPolicy.MaxAttempts must be at least 1, got %d", o.retry.MaxAttempts)
	}
	if o.owner == "" {
		host, _ := os.Hostname()
		o.owner = fmt.Sprintf("go-client/%s/%d", host, os.Getpid())
	}
	if o.log == nil {
		o.log = slog.Default()
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
		// Reconnect quickly after a server restart (grpc's default waits 1 s, growing to 2 min).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 20 * time.Second, // grpc's default; a slow handshake goes on between attempts
		}),
		// HTTP/2 pings notice a dead connection (and so a dead KeepAlive stream) within ~30 s.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
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
	return &Client{
		Ledger: oncekeyv1.NewLedgerClient(conn), conn: conn, retry: o.retry,
		breaker: &breaker{policy: o.breaker}, timeout: o.timeout, connectTimeout: o.connectTimeout,
		settleTimeout: o.settleTimeout, owner: o.owner, log: o.log,
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Claim sends a Claim, retrying transient failures. Its answer is in the response's outcome
// (CLAIM_OUTCOME_DUPLICATE_INTENT when the intent guard refused it: IntentMatches reads the other
// keys). A Claim of a new child beyond its parent's run budget fails with a *BudgetExhaustedError.
func (c *Client) Claim(ctx context.Context, req *oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
	var res *oncekeyv1.ClaimResponse
	err := c.call(ctx, "Claim", req.GetWait().AsDuration(), true, func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		res, err = c.Ledger.Claim(ctx, req, opts...)
		return err
	})
	return res, err
}

// Complete sends a Complete, retrying transient failures (an identical Complete that the server
// already applied answers OK, so a lost answer is safe to retry).
func (c *Client) Complete(ctx context.Context, req *oncekeyv1.CompleteRequest) (*oncekeyv1.CompleteResponse, error) {
	var res *oncekeyv1.CompleteResponse
	err := c.call(ctx, "Complete", 0, false, func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		res, err = c.Ledger.Complete(ctx, req, opts...)
		return err
	})
	return res, err
}

// Fail sends a Fail, retrying transient failures (an identical Fail is safe to resend).
// req.NothingRan says that nothing ran under the lease (typically one that had run out before its
// Claim's answer arrived, so the caller never started): the acquisition is then not counted
// against the operation's max_attempts, and the receipt's reason is NOTHING_RAN. Set it only when
// nothing ran; ReleaseUnused is the usual way.
func (c *Client) Fail(ctx context.Context, req *oncekeyv1.FailRequest) (*oncekeyv1.FailResponse, error) {
	var res *oncekeyv1.FailResponse
	err := c.call(ctx, "Fail", 0, false, func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		res, err = c.Ledger.Fail(ctx, req, opts...)
		return err
	})
	return res, err
}

// ReleaseUnused sends a Fail RETRYABLE with NothingRan, storing message as the error: it releases a
// lease under which nothing ran (one that had run out before its Claim's answer arrived, so the
// caller never started), so that the next Claim acquires it again and the acquisition does not
// count against the operation's max_attempts. It returns the record (RETRY). For an effect that
// may have run, use Fail.
func (c *Client) ReleaseUnused(ctx context.Context, key OperationKey, token uint64, message string) (*Record, error) {
	if key.err != nil {
		return nil, key.err
	}
	res, err := c.Fail(ctx, &oncekeyv1.FailRequest{
		Namespace: key.namespace, Key: key.key, LeaseToken: token,
		Error:       &oncekeyv1.OperationError{Message: message},
		Disposition: oncekeyv1.Disposition_DISPOSITION_RETRYABLE,
		NothingRan:  true,
	})
	if err != nil {
		return nil, err
	}
	return recordFromProto(res.GetRecord()), nil
}

// Renew sends a Renew, retrying transient failures.
func (c *Client) Renew(ctx context.Context, req *oncekeyv1.RenewRequest) (*oncekeyv1.RenewResponse, error) {
	var res *oncekeyv1.RenewResponse
	err := c.call(ctx, "Renew", 0, false, func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		res, err = c.Ledger.Renew(ctx, req, opts...)
		return err
	})
	return res, err
}

// Lookup reads the record of key; an error matching ErrNotFound when there is none.
func (c *Client) Lookup(ctx context.Context, key OperationKey) (*Record, error) {
	if key.err != nil {
		return nil, key.err
	}
	var res *oncekeyv1.LookupResponse
	err := c.call(ctx, "Lookup", 0, true, func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		res, err = c.Ledger.Lookup(ctx, &oncekeyv1.LookupRequest{Namespace: key.namespace, Key: key.key}, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return recordFromProto(res.GetRecord()), nil
}
