package oncekey

// Faults against a real server that the tests kill and restart on the same port and data dir:
// the outcome is never lost and the side effect never runs twice.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// The server dies between the effect and the Complete: the Complete is retried until it is back.
func TestCompleteIsRetriedAcrossARestart(t *testing.T) {
	s := newServer(t)
	c := dial(t, s)
	key := Key("restart.complete", "op-1")
	var calls atomic.Int32
	got, err := Run(context.Background(), c, key, "a", func(context.Context) (string, error) {
		calls.Add(1)
		s.kill()
		go func() {
			time.Sleep(1500 * time.Millisecond)
			if err := s.start(""); err != nil {
				t.Error(err)
			}
		}()
		return "sent", nil
	})
	if err != nil || got.Value != "sent" || got.Record.Status != StatusSucceeded {
		t.Fatalf("%+v, %v", got, err)
	}
	again, err := Run(context.Background(), c, key, "a", func(context.Context) (string, error) {
		calls.Add(1)
		return "twice", nil
	})
	if err != nil || !again.Replayed || again.Value != "sent" || calls.Load() != 1 {
		t.Fatalf("%+v, %v; the function ran %d times", again, err, calls.Load())
	}
}

// The server is down when the call starts: the Claim waits and retries until it is up.
func TestClaimWaitsForAServerThatIsStarting(t *testing.T) {
	s := newServer(t)
	c := dial(t, s)
	s.kill()
	go func() {
		time.Sleep(1500 * time.Millisecond)
		if err := s.start(""); err != nil {
			t.Error(err)
		}
	}()
	got, err := Do(context.Background(), c, Key("restart.claim", "op-1"), "a", func(context.Context) (int, error) { return 1, nil })
	if err != nil || got != 1 {
		t.Fatalf("%v, %v", got, err)
	}
}

// The server restarts while the function runs: the KeepAlive is reopened, so the lease outlives
// 2.5 lease lengths and a rival is told IN_PROGRESS; the function is not cancelled. Before, the
// restart was taken for a lost lease and the function cancelled.
func TestKeepAliveIsReopenedAfterARestart(t *testing.T) {
	s := newServer(t)
	c := dial(t, s)
	key := Key("restart.keepalive", "op-1")
	fp, _ := Fingerprint("a")
	got, err := Do(context.Background(), c, key, "a", func(ctx context.Context) (string, error) {
		s.kill()
		time.Sleep(200 * time.Millisecond)
		if err := s.start(""); err != nil {
			t.Error(err)
		}
		time.Sleep(5 * time.Second) // 2.5 lease lengths: only a renewed lease is still held
		rival, err := c.Ledger.Claim(context.Background(), &oncekeyv1.ClaimRequest{Namespace: key.Namespace(), Key: key.Key(),
			Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: fp}, Owner: "rival"})
		if err != nil || rival.GetOutcome() != oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_IN_PROGRESS {
			t.Errorf("rival claim: %v, %v", rival.GetOutcome(), err)
		}
		if ctx.Err() != nil {
			t.Errorf("the function was cancelled: %v", context.Cause(ctx))
		}
		return "done", nil
	}, LeaseTTL(2*time.Second))
	if err != nil || got != "done" {
		t.Fatalf("%q, %v", got, err)
	}
}
