package oncekey

// Retries of unary RPCs: a transient failure (UNAVAILABLE, a timed-out attempt, RESOURCE_EXHAUSTED)
// is retried by resending the identical request after an exponential backoff with full jitter, or
// after exactly the delay the server asked for (grpc-retry-pushback-ms, gRFC A6, or a
// google.rpc.RetryInfo; a negative pushback stops retrying). INVALID_ARGUMENT, UNAUTHENTICATED,
// PERMISSION_DENIED, FAILED_PRECONDITION and every other code are returned at once, and so is a
// spent run budget (BUDGET_EXHAUSTED, as a *BudgetExhaustedError) whatever its code.
//
// Each attempt first waits (at most the connect timeout) for a connection, so that a server
// restarting for a few seconds costs one attempt rather than all of them, then gets its own
// timeout. Nothing here changes a request between attempts.

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// PushbackHeader is the metadata key (trailer or header) by which a server asks a client to wait
// before retrying.
const PushbackHeader = "grpc-retry-pushback-ms"

// RetryPolicy says how transient failures are retried.
type RetryPolicy struct {
	// MaxAttempts counts attempts in total, the first included (default 5); 1 disables retries.
	MaxAttempts int
	// InitialBackoff is the backoff ceiling before the first retry (default 500 ms); it doubles on
	// each retry.
	InitialBackoff time.Duration
	// MaxBackoff is the largest backoff ceiling (default 15 s).
	MaxBackoff time.Duration
}

// DefaultRetryPolicy is the policy of a client without WithRetryPolicy: 5 attempts, 500 ms initial
// and 15 s largest backoff ceiling, full jitter (the Rust client's defaults).
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, InitialBackoff: 500 * time.Millisecond, MaxBackoff: 15 * time.Second}

// NoRetry sends every call once.
var NoRetry = RetryPolicy{MaxAttempts: 1}

// Ceiling is the backoff ceiling before retry number retry (1-based): InitialBackoff *
// 2^(retry-1), capped at MaxBackoff.
func (p RetryPolicy) Ceiling(retry int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < retry && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Backoff is a full-jitter delay before retry number retry: uniform in [0, Ceiling(retry)].
func (p RetryPolicy) Backoff(retry int) time.Duration {
	c := p.Ceiling(retry)
	if c <= 0 {
		return 0
	}
	return rand.N(c + 1)
}

// rpcFunc sends one attempt of a unary RPC.
type rpcFunc func(ctx context.Context, opts ...grpc.CallOption) error

// call runs rpc under the client's retry policy. extra lengthens each attempt's timeout (a Claim's
// wait); guarded calls pass the circuit breaker first (calls that start new work; settlements do
// not, so that an open circuit never refuses to record an outcome).
func (c *Client) call(ctx context.Context, method string, extra time.Duration, guarded bool, rpc rpcFunc) error {
	for attempt := 1; ; attempt++ {
		if guarded {
			if err := c.breaker.admit(); err != nil {
				return err
			}
		}
		err := c.attempt(ctx, extra, rpc)
		if err == nil {
			c.breaker.record(false)
			return nil
		}
		if ctx.Err() != nil {
			c.breaker.release()
			return ctx.Err()
		}
		var e *Error
		if !errors.As(err, &e) {
			return err
		}
		c.breaker.record(e.transient())
		if !e.transient() || attempt >= c.retry.MaxAttempts || e.Pushback < 0 {
			return e.typed()
		}
		delay := e.Pushback
		if delay == 0 {
			delay = c.retry.Backoff(attempt)
		}
		c.log.Debug("oncekey: retrying", slog.String("method", method), slog.Int("attempt", attempt+1),
			slog.Duration("delay", delay), slog.String("code", codeName(e.Code)), slog.String("reason", e.Reason.String()))
		if err := sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// attempt sends rpc once, with the client's per-attempt timeout (plus extra), after waiting for a
// connection. Its failure is an *Error with the server's pushback, or the context's error.
func (c *Client) attempt(ctx context.Context, extra time.Duration, rpc rpcFunc) error {
	actx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	defer cancel()
	if err := c.awaitConnection(actx); err != nil {
		return err
	}
	var header, trailer metadata.MD
	err := rpc(actx, grpc.Header(&header), grpc.Trailer(&trailer))
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := fromStatus(st)
	if p, ok := pushback(trailer, header); ok {
		e.Pushback = p
	}
	return e
}

// awaitConnection waits until the channel is ready, for at most the connect timeout; a server that
// is restarting is waited for instead of failing the attempt at once.
func (c *Client) awaitConnection(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	for {
		state := c.conn.GetState()
		switch state {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			c.conn.Connect()
		case connectivity.Shutdown:
			return fromStatus(status.New(codes.Canceled, "the client is closed"))
		}
		if !c.conn.WaitForStateChange(ctx, state) {
			return fromStatus(status.Newf(codes.Unavailable, "no connection to the server within %v (%s)",
				c.connectTimeout, strings.ToLower(state.String())))
		}
	}
}

// pushback reads grpc-retry-pushback-ms: a positive delay, or a negative one when the value is
// negative or malformed (do not retry).
func pushback(mds ...metadata.MD) (time.Duration, bool) {
	for _, md := range mds {
		if v := md.Get(PushbackHeader); len(v) > 0 {
			ms, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
			if err != nil || ms < 0 {
				return -1, true
			}
			return time.Duration(ms) * time.Millisecond, true
		}
	}
	return 0, false
}

// sleep waits d, or returns ctx's error if it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
