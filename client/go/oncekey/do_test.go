package oncekey

// Do, Run and Reconcile against a real server: replay, typed errors, cancellation.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

type receipt struct {
	ID    string `json:"id"`
	Lines int    `json:"lines"`
}

func TestDoRunsOnceAndReplaysTheResult(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	key := Key("email.send", "ticket-481", "notify", "v1")
	msg := email{To: "ada@example.com", Subject: "hi"}
	var calls atomic.Int32
	send := func(ctx context.Context) (receipt, error) {
		calls.Add(1)
		if LeaseFrom(ctx) == nil || LeaseFrom(ctx).Token() != 1 {
			t.Errorf("lease = %+v, want token 1", LeaseFrom(ctx))
		}
		return receipt{ID: "r-1", Lines: 3}, nil
	}
	first, err := Run(ctx, c, key, msg, send)
	if err != nil || first.Replayed || first.Value != (receipt{"r-1", 3}) || first.Record.Status != StatusSucceeded {
		t.Fatalf("first run: %+v, %v", first, err)
	}
	again, err := Run(ctx, c, key, msg, send)
	if err != nil || !again.Replayed || again.Value != first.Value {
		t.Fatalf("second run: %+v, %v", again, err)
	}
	if got, err := Do(ctx, c, key, msg, send); err != nil || got != first.Value {
		t.Fatalf("Do: %+v, %v", got, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("the function ran %d times", calls.Load())
	}
	rec, err := c.Lookup(ctx, key)
	if err != nil || rec.Result.ContentType != jsonContentType || string(rec.Result.Body) != `{"id":"r-1","lines":3}` {
		t.Fatalf("stored %+v, %v", rec, err)
	}
}

func TestDialTakesAnHTTPURL(t *testing.T) {
	c, err := Dial("http://"+sharedServer.addr(), WithTenant("go-test-url"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Lookup(context.Background(), Key("n", "absent")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("want NOT_FOUND from the server, got %v", err)
	}
}

func TestRawResultsAreStoredAsIs(t *testing.T) {
	c := dial(t, sharedServer)
	key := Key("http.post", "req-1", "v1")
	want := Raw{Code: 201, Body: []byte{0, 1, 2}, ContentType: "application/octet-stream", Metadata: map[string]string{"a": "b"}}
	fn := func(context.Context) (Raw, error) { return want, nil }
	if _, err := Do(context.Background(), c, key, "args", fn); err != nil {
		t.Fatal(err)
	}
	got, err := Run(context.Background(), c, key, "args", fn)
	if err != nil || !got.Replayed || got.Value.Code != 201 || string(got.Value.Body) != "\x00\x01\x02" ||
		got.Value.ContentType != want.ContentType || got.Value.Metadata["a"] != "b" {
		t.Fatalf("%+v, %v", got, err)
	}
}

func TestChildKeysRecordTheirParent(t *testing.T) {
	c := dial(t, sharedServer)
	order := Key("orders.place", "order-9", "v2")
	charge := order.ChildIn("payments.charge", "charge")
	if _, err := Do(context.Background(), c, charge, 1250, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Lookup(context.Background(), charge)
	if err != nil || rec.Key != "order-9:v2/charge" || rec.Parent == nil || *rec.Parent != (OperationRef{"orders.place", "order-9:v2"}) {
		t.Fatalf("%+v, %v", rec, err)
	}
}

func TestTypedErrors(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	ok := func(context.Context) (string, error) { return "done", nil }

	key := Key("typed.errors", "reused")
	if _, err := Do(ctx, c, key, "a", ok); err != nil {
		t.Fatal(err)
	}
	_, err := Do(ctx, c, key, "b", ok)
	var e *Error
	if !errors.Is(err, ErrKeyReused) || !errors.As(err, &e) || e.Code != codes.FailedPrecondition ||
		status.Code(err) != codes.FailedPrecondition || Reason(err) != ReasonKeyReused {
		t.Fatalf("key reused: %v", err)
	}

	// A final failure is the function's own error now, and the stored error later.
	declined := errors.New("card declined")
	key = Key("typed.errors", "final")
	_, err = Do(ctx, c, key, "a", func(context.Context) (string, error) {
		return "", &FailureError{Err: declined, Disposition: DispositionFinal, Code: 402}
	})
	if !errors.Is(err, declined) {
		t.Fatalf("final failure: %v", err)
	}
	_, err = Do(ctx, c, key, "a", ok)
	var failed *OperationFailedError
	if !errors.Is(err, ErrOperationFailed) || !errors.As(err, &failed) || failed.Code != 402 || failed.Message != "card declined" {
		t.Fatalf("replayed failure: %v", err)
	}

	// A plain error releases the key: the next run acquires it and the function runs again.
	key = Key("typed.errors", "retryable")
	flaky := errors.New("provider timeout")
	if _, err = Do(ctx, c, key, "a", func(context.Context) (string, error) { return "", flaky }); err != flaky {
		t.Fatalf("want the function's own error, got %v", err)
	}
	if got, err := Do(ctx, c, key, "a", ok); err != nil || got != "done" {
		t.Fatalf("after a retryable failure: %q, %v", got, err)
	}

	// Abandon forgets the key: it may be claimed again with other arguments.
	key = Key("typed.errors", "abandon")
	_, err = Do(ctx, c, key, "a", func(context.Context) (string, error) { return "", Abandon(errors.New("bad input")) })
	if err == nil || err.Error() != "bad input" {
		t.Fatalf("abandon: %v", err)
	}
	if _, err := c.Lookup(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("abandoned record: %v", err)
	}
	if _, err := Do(ctx, c, key, "other", ok); err != nil {
		t.Fatal(err)
	}

	if _, err := Do(ctx, c, Key("Bad Namespace", "x"), "a", ok); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("invalid key: %v", err)
	}
}

func TestInProgressCarriesRetryAfter(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	key := Key("typed.errors", "in-progress")
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Do(ctx, c, key, "a", func(context.Context) (int, error) {
			close(started)
			<-release
			return 7, nil
		})
		done <- err
	}()
	<-started
	_, err := Do(ctx, c, key, "a", func(context.Context) (int, error) { return 0, errors.New("must not run") }, WaitTimeout(0))
	var busy *InProgressError
	if !errors.Is(err, ErrInProgress) || !errors.As(err, &busy) || busy.RetryAfter <= 0 || busy.Record.Status != StatusProcessing {
		t.Fatalf("in progress: %v", err)
	}
	// A caller's deadline bounds the wait: the answer is still InProgressError, not the timeout.
	short, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	if _, err := Do(short, c, key, "a", func(context.Context) (int, error) { return 0, errors.New("must not run") }); !errors.Is(err, ErrInProgress) {
		t.Fatalf("with a caller deadline: %v", err)
	}
	// With a wait, a duplicate gets the holder's result without running.
	waited := make(chan int, 1)
	go func() {
		v, _ := Do(ctx, c, key, "a", func(context.Context) (int, error) { return 0, errors.New("must not run") })
		waited <- v
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := <-waited; v != 7 {
		t.Fatalf("the waiting duplicate got %d", v)
	}
}

func TestAtMostOnceNeedsReconciliation(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	key := Key("typed.errors", "at-most-once")
	fp, _ := Fingerprint("a")
	// A holder that vanishes: claims with a 1 s lease and never settles.
	res, err := c.Ledger.Claim(ctx, &oncekeyv1.ClaimRequest{Namespace: key.Namespace(), Key: key.Key(),
		Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: fp}, LeaseTtl: durationpb.New(time.Second),
		Semantics: oncekeyv1.Semantics_SEMANTICS_AT_MOST_ONCE})
	if err != nil || res.GetOutcome() != oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED {
		t.Fatalf("%v, %v", res, err)
	}
	time.Sleep(1500 * time.Millisecond)
	_, err = Do(ctx, c, key, "a", func(context.Context) (string, error) { return "", errors.New("must not run") }, AtMostOnce())
	var unknown *NeedsReconciliationError
	if !errors.Is(err, ErrNeedsReconciliation) || !errors.As(err, &unknown) || unknown.Record.Status != StatusUnknown {
		t.Fatalf("needs reconciliation: %v", err)
	}
	got, err := Reconcile(ctx, c, key, "a", func(context.Context) (string, error) { return "found it sent", nil })
	if err != nil || got.Value != "found it sent" || got.Replayed {
		t.Fatalf("reconcile: %+v, %v", got, err)
	}
	if v, err := Do(ctx, c, key, "a", func(context.Context) (string, error) { return "", errors.New("must not run") }); err != nil || v != "found it sent" {
		t.Fatalf("after reconciliation: %q, %v", v, err)
	}
}

// The caller's cancellation stops the function and the key is released (RETRY) on the client's
// own deadline; before, the settle used the cancelled context and the key stayed PROCESSING for
// the whole lease.
func TestCancellationReleasesTheKey(t *testing.T) {
	c := dial(t, sharedServer)
	key := Key("cancel.me", "op-1")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Do(ctx, c, key, "a", func(ctx context.Context) (string, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	}, LeaseTTL(time.Hour))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the cancellation, got %v", err)
	}
	rec, err := c.Lookup(context.Background(), key)
	if err != nil || rec.Status != StatusRetry {
		t.Fatalf("record %+v, %v; want RETRY", rec, err)
	}
	if v, err := Do(context.Background(), c, key, "a", func(context.Context) (string, error) { return "ran", nil }); err != nil || v != "ran" {
		t.Fatalf("the next run: %q, %v", v, err)
	}
}

// A lost lease cancels the function with context.Cause ErrLeaseLost, and Do says so.
func TestLeaseLostCancelsTheFunction(t *testing.T) {
	c := dial(t, sharedServer)
	key := Key("lease.lost", "op-1")
	var cause error
	_, err := Do(context.Background(), c, key, "a", func(ctx context.Context) (string, error) {
		// Someone settles the record with this lease's token behind the function's back.
		lease := LeaseFrom(ctx)
		if _, err := c.Ledger.Fail(context.Background(), &oncekeyv1.FailRequest{Namespace: key.Namespace(), Key: key.Key(),
			LeaseToken: lease.Token(), Error: &oncekeyv1.OperationError{Message: "x"},
			Disposition: oncekeyv1.Disposition_DISPOSITION_FINAL}); err != nil {
			t.Error(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Error("the function was not cancelled")
		}
		cause = context.Cause(ctx)
		<-lease.Lost()
		return "", ctx.Err()
	}, LeaseTTL(time.Second))
	var lost *LeaseLostError
	if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &lost) || lost.Token != 1 || lost.Lapsed || errors.Is(err, context.Canceled) {
		t.Fatalf("want a lost lease, got %v", err)
	}
	if cause != ErrLeaseLost {
		t.Fatalf("context.Cause = %v", cause)
	}
}

// A lease that had run out before its Claim's answer arrived (here: a server whose clock runs 2 s
// behind grants 1 s leases that end before "now" on this machine, as a Claim answered after its
// lease would) must not run the function: another holder may be taking it over. Each such lease is
// released as RETRY saying nothing ran, so an operation capped at one attempt keeps it (a plain
// release would use it up: the next Claim would fail it with 429), and once the wait is over Do
// says LeaseLost with no function error.
func TestALeaseThatRanOutBeforeTheAnswerArrivedRunsNothing(t *testing.T) {
	s := &server{dir: t.TempDir(), port: freePort(), admin: freePort(), env: []string{"ONCEKEY_TEST_CLOCK_SKEW_MS=-2000"}}
	if err := s.start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	c := dial(t, s)
	ctx := context.Background()
	key := Key("email.send", "late")
	var runs atomic.Int32
	_, err := Do(ctx, c, key, "x", func(context.Context) (string, error) {
		runs.Add(1)
		return "ran", nil
	}, LeaseTTL(time.Second), WaitTimeout(500*time.Millisecond), MaxAttempts(1))
	if n := runs.Load(); n != 0 {
		t.Fatalf("the function ran %d times under a lapsed lease", n)
	}
	var lost *LeaseLostError
	if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &lost) || lost.Token < 1 || lost.Err != nil || !lost.Lapsed {
		t.Fatalf("want a lost lease with no function error, got %v", err)
	}
	rec, err := c.Lookup(ctx, key)
	if err != nil || rec.Status != StatusRetry {
		t.Fatalf("record %+v, %v; want RETRY (released, not left held)", rec, err)
	}
	if rec.Error == nil || rec.Error.Message != lapsedMessage {
		t.Fatalf("stored error %+v; want %q", rec.Error, lapsedMessage)
	}
	receipts := failReceipts(t, c, key)
	for _, r := range receipts {
		if r != "RETRYABLE NOTHING_RAN" {
			t.Fatalf("fail receipts %q; want each RETRYABLE NOTHING_RAN", receipts)
		}
	}
	if len(receipts) == 0 {
		t.Fatal("no Fail receipt")
	}
	// A lease long enough to outlast the skew: acquired, the one attempt still there.
	res, err := c.Claim(ctx, &oncekeyv1.ClaimRequest{Namespace: key.namespace, Key: key.key,
		Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: rec.Fingerprint}, MaxAttempts: 1,
		LeaseTtl: durationpb.New(10 * time.Second)})
	if err != nil || res.GetOutcome() != oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED {
		t.Fatalf("claim again: %v %v; want ACQUIRED", res, err)
	}
}

func TestUnreachableServerIsUnavailable(t *testing.T) {
	c, err := Dial("127.0.0.1:1", WithTenant("t"), WithConnectTimeout(200*time.Millisecond),
		WithRetryPolicy(RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = Do(context.Background(), c, Key("x.y", "k"), 1, func(context.Context) (int, error) { return 0, nil })
	if !errors.Is(err, ErrUnavailable) || status.Code(err) != codes.Unavailable {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
}
