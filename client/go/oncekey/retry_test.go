package oncekey

// The retry policy and the breaker against an in-process Ledger that fails on demand.

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// flaky answers Complete with errs[0], errs[1], ... (with the pushback trailer when set), then OK.
type flaky struct {
	oncekeyv1.UnimplementedLedgerServer
	mu       sync.Mutex
	errs     []error
	pushback string
	calls    int
	requests []*oncekeyv1.CompleteRequest
}

func (f *flaky) Complete(ctx context.Context, req *oncekeyv1.CompleteRequest) (*oncekeyv1.CompleteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.requests = append(f.requests, req)
	if len(f.errs) == 0 {
		return &oncekeyv1.CompleteResponse{}, nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	if f.pushback != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackHeader, f.pushback))
	}
	return nil, err
}

func fakeLedger(t *testing.T, f *flaky, policy RetryPolicy, opts ...Option) *Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	oncekeyv1.RegisterLedgerServer(srv, f)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	c, err := Dial(l.Addr().String(), append([]Option{WithRetryPolicy(policy)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var fast = RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}

func complete(c *Client) error {
	_, err := c.Complete(context.Background(), &oncekeyv1.CompleteRequest{Namespace: "n", Key: "k", LeaseToken: 7})
	return err
}

func TestTransientFailuresAreRetriedWithTheIdenticalRequest(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted} {
		f := &flaky{errs: []error{status.Error(code, "x"), status.Error(code, "x"), status.Error(code, "x")}}
		if err := complete(fakeLedger(t, f, fast)); err != nil || f.calls != 4 {
			t.Fatalf("%v: %v after %d calls", code, err, f.calls)
		}
		for _, r := range f.requests {
			if r.GetLeaseToken() != 7 || r.GetKey() != "k" {
				t.Fatalf("a retry changed the request: %v", r)
			}
		}
	}
}

func TestRetriesGiveUpAfterMaxAttempts(t *testing.T) {
	f := &flaky{}
	for range 10 {
		f.errs = append(f.errs, status.Error(codes.Unavailable, "down"))
	}
	err := complete(fakeLedger(t, f, fast))
	if !errors.Is(err, ErrUnavailable) || f.calls != 5 {
		t.Fatalf("%v after %d calls", err, f.calls)
	}
}

func TestPermanentFailuresAreNeverRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.InvalidArgument, codes.FailedPrecondition, codes.Unauthenticated,
		codes.PermissionDenied, codes.NotFound, codes.Internal} {
		f := &flaky{errs: []error{status.Error(code, "no")}}
		err := complete(fakeLedger(t, f, fast))
		if status.Code(err) != code || f.calls != 1 {
			t.Fatalf("%v: %v after %d calls", code, err, f.calls)
		}
	}
}

func TestPushbackIsHonoured(t *testing.T) {
	// A negative pushback: do not retry.
	f := &flaky{errs: []error{status.Error(codes.Unavailable, "busy")}, pushback: "-1"}
	if err := complete(fakeLedger(t, f, fast)); err == nil || f.calls != 1 {
		t.Fatalf("%v after %d calls", err, f.calls)
	}
	// A positive one: wait that long, far longer than the 4 ms backoff ceiling.
	f = &flaky{errs: []error{status.Error(codes.ResourceExhausted, "busy")}, pushback: "300"}
	started := time.Now()
	if err := complete(fakeLedger(t, f, fast)); err != nil || f.calls != 2 {
		t.Fatalf("%v after %d calls", err, f.calls)
	}
	if waited := time.Since(started); waited < 300*time.Millisecond {
		t.Fatalf("retried after %v, before the 300 ms pushback", waited)
	}
}

func TestRetryInfoIsHonoured(t *testing.T) {
	st, _ := status.New(codes.ResourceExhausted, "rate limited").WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonRateLimited.String(), Domain: ErrorDomain},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(300 * time.Millisecond)})
	f := &flaky{errs: []error{st.Err()}}
	started := time.Now()
	if err := complete(fakeLedger(t, f, fast)); err != nil || f.calls != 2 {
		t.Fatalf("%v after %d calls", err, f.calls)
	}
	if waited := time.Since(started); waited < 300*time.Millisecond {
		t.Fatalf("retried after %v, before the 300 ms RetryInfo delay", waited)
	}
}

func TestBackoffIsExponentialFullJitterAndCapped(t *testing.T) {
	p := DefaultRetryPolicy
	for retry, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second,
		6: 15 * time.Second, 60: 15 * time.Second} {
		if got := p.Ceiling(retry); got != want {
			t.Errorf("Ceiling(%d) = %v, want %v", retry, got, want)
		}
	}
	seen := map[time.Duration]bool{}
	for retry := 1; retry < 10; retry++ {
		for range 20 {
			b := p.Backoff(retry)
			if b < 0 || b > p.Ceiling(retry) {
				t.Fatalf("Backoff(%d) = %v", retry, b)
			}
			seen[b] = true
		}
	}
	if len(seen) < 2 {
		t.Fatal("no jitter")
	}
}

func TestBreakerOpensAfterConsecutiveFailuresAndRefusesClaims(t *testing.T) {
	c, err := Dial("127.0.0.1:1", WithConnectTimeout(50*time.Millisecond), WithRetryPolicy(NoRetry),
		WithBreakerPolicy(BreakerPolicy{FailureThreshold: 2, CoolDown: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	claim := func() error {
		_, err := c.Claim(context.Background(), &oncekeyv1.ClaimRequest{Namespace: "n", Key: "k"})
		return err
	}
	for range 2 {
		if err := claim(); !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
	}
	started := time.Now()
	err = claim()
	if !errors.Is(err, ErrUnavailable) || time.Since(started) > time.Second {
		t.Fatalf("want an immediate refusal, got %v after %v", err, time.Since(started))
	}
	// Settlements are never refused by the breaker: they are still sent (and fail on their own).
	_, err = c.Complete(context.Background(), &oncekeyv1.CompleteRequest{Namespace: "n", Key: "k", LeaseToken: 1})
	if err == nil || !errors.Is(err, ErrUnavailable) || Reason(err) != ReasonUnspecified {
		t.Fatalf("complete: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Message == "" || e.Message[:7] == "circuit" {
		t.Fatalf("the breaker refused a settlement: %v", err)
	}
}
