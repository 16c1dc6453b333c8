package oncekey

// The lease an operation runs under, and the goroutine that keeps it alive through the server's
// KeepAlive stream while the operation runs.
//
// The stream is reopened after a transport failure or a server restart (the server's first renewal
// then says whether the lease still holds). The lease is lost only when the server answers
// LEASE_LOST, or ALREADY_SETTLED (someone settled it with this token); a stream replaced by a newer
// one for the same lease (ABORTED KEEPALIVE_REPLACED) just stops, since the newer one renews it.
// The goroutine stops when its context ends, so a caller that goes away lets the lease run out.

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// Lease is the lease an operation runs under; LeaseFrom gives it to the function Do runs.
//
// Pass Token to downstream systems that can fence (reject writes carrying a smaller token than one
// they have seen). A long function can watch Lost, or its context: when the lease is lost the
// context is cancelled with context.Cause ErrLeaseLost.
type Lease struct {
	key     OperationKey
	token   uint64
	attempt uint32

	mu        sync.Mutex
	expiresAt time.Time
	lost      chan struct{}
	lostOnce  sync.Once
}

func newLease(key OperationKey, l *oncekeyv1.Lease) *Lease {
	return &Lease{key: key, token: l.GetToken(), attempt: l.GetAttempt(),
		expiresAt: toTime(l.GetExpiresAt()), lost: make(chan struct{})}
}

// Token is the fencing token: +1 on every acquisition of the operation.
func (l *Lease) Token() uint64 { return l.token }

// Attempt is which acquisition this is (1 for the first; more after takeovers and retryable
// failures).
func (l *Lease) Attempt() uint32 { return l.attempt }

// Key is the operation this lease is on.
func (l *Lease) Key() OperationKey { return l.key }

// ExpiresAt is when the lease runs out unless renewed again (updated by every renewal).
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Lost is closed once the server said the lease is lost.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

func (l *Lease) renewed(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiresAt = at
}

func (l *Lease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

type leaseKey struct{}

// LeaseFrom returns the lease of the operation whose function ctx was given to, or nil.
func LeaseFrom(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// keepAlive renews l over KeepAlive streams until ctx ends; it calls lost (once, then returns)
// when the server says the lease is lost.
func (c *Client) keepAlive(ctx context.Context, l *Lease, ttl time.Duration, lost func(*Error)) {
	req := &oncekeyv1.KeepAliveRequest{Namespace: l.key.namespace, Key: l.key.key, LeaseToken: l.token}
	period := 30 * time.Second // the server's default lease
	if ttl > 0 {
		req.LeaseTtl = durationpb.New(ttl)
		period = ttl
	}
	maxBackoff := min(max(period/3, 100*time.Millisecond), 5*time.Second)
	backoff := min(100*time.Millisecond, maxBackoff)
	for {
		renewed, err := c.keepAliveStream(ctx, l, req)
		if ctx.Err() != nil {
			return
		}
		if renewed {
			backoff = min(100*time.Millisecond, maxBackoff)
		}
		var e *Error
		if errors.As(err, &e) {
			switch {
			case e.Reason == ReasonLeaseLost || e.Reason == ReasonAlreadySettled:
				c.log.Warn("oncekey: lease lost", slog.String("namespace", l.key.namespace), slog.Uint64("token", l.token))
				lost(e)
				return
			case e.Code == codes.Aborted && e.Reason == ReasonKeepAliveReplaced:
				c.log.Debug("oncekey: keep-alive replaced by a newer stream", slog.String("namespace", l.key.namespace))
				return
			case !reopenable(e):
				c.log.Warn("oncekey: keep-alive stopped", slog.String("namespace", l.key.namespace),
					slog.String("code", codeName(e.Code)), slog.String("reason", e.Reason.String()))
				return
			}
		}
		// A transport failure, a restart, or a stream the server ended OK while we still hold the
		// lease (it is shutting down): reopen, and the first renewal says whether it still holds.
		c.log.Debug("oncekey: keep-alive interrupted; reopening", slog.String("namespace", l.key.namespace), slog.Any("error", err))
		jittered := backoff/2 + rand.N(backoff/2+1)
		if sleep(ctx, jittered) != nil {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// keepAliveStream runs one KeepAlive stream until it ends; renewed tells whether it renewed at all.
func (c *Client) keepAliveStream(ctx context.Context, l *Lease, req *oncekeyv1.KeepAliveRequest) (renewed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// WaitForReady: while the server restarts, wait for it instead of failing at once.
	stream, err := c.Ledger.KeepAlive(ctx, grpc.WaitForReady(true))
	if err != nil {
		return false, asError(err)
	}
	if err := stream.Send(req); err != nil {
		// The stream broke; its status comes from Recv.
		_, err = stream.Recv()
		return false, asError(err)
	}
	for {
		lease, err := stream.Recv()
		if err != nil {
			return renewed, asError(err)
		}
		renewed = true
		l.renewed(toTime(lease.GetExpiresAt()))
	}
}

// reopenable: errors after which reopening the stream may work (transport trouble, not a refusal).
func reopenable(e *Error) bool {
	switch e.Code {
	case codes.Unknown, codes.Internal, codes.Canceled:
		return true
	}
	return e.transient()
}
