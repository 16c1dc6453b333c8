package oncekey

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Cancelling an at-most-once run while its function may have reached the remote side does not
// release the key (the next run would repeat the effect): the lease runs out and the operation
// then needs reconciliation. An at-least-once run is released (TestCancellationReleasesTheKey).
func TestCancellingAnAtMostOnceRunLeavesItToReconciliation(t *testing.T) {
	c := dial(t, sharedServer)
	key := Key("cancel.amo", "op-1")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Do(ctx, c, key, "a", func(ctx context.Context) (string, error) {
		cancel() // the caller gives up while the request is out
		<-ctx.Done()
		return "", ctx.Err()
	}, AtMostOnce(), LeaseTTL(time.Second))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNeedsReconciliation) {
		t.Fatalf("want the cancellation, left to reconciliation; got %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := c.Lookup(context.Background(), key)
		if err != nil || rec.Status != StatusProcessing && rec.Status != StatusUnknown {
			t.Fatalf("record %+v, %v; want PROCESSING until its lease runs out, then UNKNOWN", rec, err)
		}
		if rec.Status == StatusUnknown {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never ran out")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var runs atomic.Int32
	_, err = Do(context.Background(), c, key, "a", func(context.Context) (string, error) { runs.Add(1); return "again", nil }, AtMostOnce())
	if !errors.Is(err, ErrNeedsReconciliation) || runs.Load() != 0 {
		t.Fatalf("the next run: %v after %d runs", err, runs.Load())
	}
	// A function that knows nothing went out says so explicitly, and the key is released.
	key2 := Key("cancel.amo", "op-2")
	ctx2, cancel2 := context.WithCancel(context.Background())
	_, err = Do(ctx2, c, key2, "a", func(ctx context.Context) (string, error) {
		cancel2()
		return "", &FailureError{Err: ctx.Err(), Disposition: DispositionRetryable}
	}, AtMostOnce())
	if rec, lerr := c.Lookup(context.Background(), key2); !errors.Is(err, context.Canceled) || lerr != nil || rec.Status != StatusRetry {
		t.Fatalf("an explicit retryable failure: %v; record %+v, %v", err, rec, lerr)
	}
}
