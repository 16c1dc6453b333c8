package oncekey

// The operator features against the real server: the approval gate (a gated run never calls its
// function before an approval; a rejection replays as a 403 failure), dry runs that write nothing,
// the attempt cap that fails a key for good with 429, purge and its refusal of unsettled
// at-most-once records, and the typed errors of these calls (scopes on a server with tokens).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

func uniqueKey(t *testing.T, ns, prefix string) OperationKey {
	t.Helper()
	return Key(ns, fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()))
}

func TestGatedRunAwaitsApprovalWithoutRunningThenRunsOnce(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	key := uniqueKey(t, "payments.refund", "order")
	var runs atomic.Int32
	refund := func() (int, error) {
		return Do(ctx, c, key, map[string]int{"cents": 500}, func(context.Context) (int, error) {
			runs.Add(1)
			return 500, nil
		}, RequireApproval(), WaitTimeout(0))
	}
	_, err := refund()
	var awaiting *AwaitingApprovalError
	if !errors.As(err, &awaiting) || !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("got %v, want an *AwaitingApprovalError", err)
	}
	if awaiting.Record.Status != StatusAwaitingApproval || !awaiting.Record.RequireApproval || runs.Load() != 0 {
		t.Fatalf("record %+v, runs %d", awaiting.Record, runs.Load())
	}
	if _, err := refund(); !errors.Is(err, ErrAwaitingApproval) || runs.Load() != 0 {
		t.Fatalf("still gated: got %v, runs %d", err, runs.Load())
	}

	rec, err := c.Approve(ctx, key, "ok: refund approved", PinArguments(map[string]int{"cents": 500}))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != StatusApproved || rec.Approval == nil || rec.Approval.Decision != DecisionApproved ||
		rec.Approval.DecidedBy != "dev" || rec.Approval.Note != "ok: refund approved" {
		t.Fatalf("approved record %+v (approval %+v)", rec, rec.Approval)
	}
	// The same decision again is OK (a lost answer is safe to resend).
	if rec, err := c.Approve(ctx, key, "ok: refund approved"); err != nil || rec.Status != StatusApproved {
		t.Fatalf("approve again: %v %+v", err, rec)
	}
	for i := 0; i < 2; i++ {
		if v, err := refund(); err != nil || v != 500 {
			t.Fatalf("run %d after approval: %v %v", i, v, err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("the function ran %d times, want 1", runs.Load())
	}
	rec, err = c.Lookup(ctx, key)
	if err != nil || rec.Status != StatusSucceeded || rec.FencingToken != 1 || rec.Attempt != 1 {
		t.Fatalf("record %+v %v", rec, err)
	}
	// The operation has moved on: another decision is refused, typed.
	_, err = c.Approve(ctx, key, "")
	var e *Error
	if !errors.Is(err, ErrNotAwaitingApproval) || !errors.As(err, &e) || e.Reason != ReasonNotAwaitingApproval {
		t.Fatalf("got %v, want NOT_AWAITING_APPROVAL", err)
	}
	if _, err := c.Reject(ctx, key, "too late"); !errors.Is(err, ErrNotAwaitingApproval) {
		t.Fatalf("reject: got %v", err)
	}
}

func TestRunWaitingForApprovalIsHeldUntilApproved(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	key := uniqueKey(t, "email.send", "held")
	// A gated first Claim would await approval; a dry run says so and creates nothing.
	if res, err := c.DryRun(ctx, key, "ada", RequireApproval()); err != nil || res.Outcome != OutcomeAwaitingApproval || res.Record != nil {
		t.Fatalf("dry run of a new key: %+v %v", res, err)
	}
	done := make(chan error, 1)
	var runs atomic.Int32
	go func() {
		_, err := Do(ctx, c, key, "ada", func(context.Context) (string, error) {
			runs.Add(1)
			return "sent", nil
		}, RequireApproval(), WaitTimeout(30*time.Second))
		done <- err
	}()
	for i := 0; i < 400; i++ { // until the record exists and a held Claim has come
		if rec, err := c.Lookup(ctx, key); err == nil && rec.DedupHits >= 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if runs.Load() != 0 {
		t.Fatal("the function ran before the approval")
	}
	if _, err := c.Approve(ctx, key, "go"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || runs.Load() != 1 {
		t.Fatalf("held run: %v, runs %d", err, runs.Load())
	}
}

func TestRejectedOperationFailsForGoodWith403(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	key := uniqueKey(t, "tasks.delete", "repo")
	if _, err := Do(ctx, c, key, "prod", func(context.Context) (int, error) { return 1, nil },
		RequireApproval(), WaitTimeout(0)); !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("got %v", err)
	}
	if _, err := c.Reject(ctx, key, "not in production", PinArguments("staging")); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("a pin on other arguments: got %v, want ErrKeyReused", err)
	}
	rec, err := c.Reject(ctx, key, "not in production", PinArguments("prod"))
	if err != nil || rec.Status != StatusFailed || rec.Approval.Decision != DecisionRejected ||
		rec.Error.Code != 403 || rec.Error.Message != "not in production" {
		t.Fatalf("rejected: %+v %v", rec, err)
	}
	ran := false
	_, err = Do(ctx, c, key, "prod", func(context.Context) (int, error) { ran = true; return 1, nil })
	var failed *OperationFailedError
	if !errors.As(err, &failed) || failed.Code != 403 || failed.Message != "not in production" || ran {
		t.Fatalf("after a rejection: %v (ran %v)", err, ran)
	}
	if _, err := c.Approve(ctx, key, ""); !errors.Is(err, ErrNotAwaitingApproval) {
		t.Fatalf("approve after reject: %v", err)
	}
	// Never gated at all, and absent.
	plain := uniqueKey(t, "email.send", "plain")
	if _, err := Do(ctx, c, plain, 1, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Approve(ctx, plain, "why not"); !errors.Is(err, ErrNotAwaitingApproval) {
		t.Fatalf("approve a plain key: %v", err)
	}
	if _, err := c.Approve(ctx, uniqueKey(t, "email.send", "absent"), ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("approve an absent key: %v", err)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	key := uniqueKey(t, "email.send", "dry")
	if res, err := c.DryRun(ctx, key, "ada"); err != nil || res.Outcome != OutcomeAcquired || res.Record != nil {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if _, err := c.Lookup(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a dry run created a record: %v", err)
	}
	if _, err := Do(ctx, c, key, "ada", func(context.Context) (string, error) { return "sent", nil }); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Lookup(ctx, key)
	res, err := c.DryRun(ctx, key, "ada")
	if err != nil || res.Outcome != OutcomeCompleted || res.Record.Status != StatusSucceeded || res.Outcome.String() != "COMPLETED" {
		t.Fatalf("dry run of a completed key: %+v %v", res, err)
	}
	if after, _ := c.Lookup(ctx, key); after.DedupHits != before.DedupHits {
		t.Fatalf("a dry run counted a dedup hit: %d → %d", before.DedupHits, after.DedupHits)
	}
}

func TestAttemptCapFailsTheKeyWith429(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	key := uniqueKey(t, "webhook.deliver", "hook")
	down := errors.New("upstream down")
	var runs atomic.Int32
	deliver := func() error {
		_, err := Do(ctx, c, key, "hook", func(context.Context) (int, error) {
			runs.Add(1)
			return 0, down
		}, MaxAttempts(2))
		return err
	}
	for i := 0; i < 2; i++ {
		if err := deliver(); !errors.Is(err, down) {
			t.Fatalf("run %d: got %v, want the function's own error", i, err)
		}
	}
	err := deliver()
	var failed *OperationFailedError
	if !errors.As(err, &failed) || failed.Code != 429 || failed.Message != "attempts exhausted" {
		t.Fatalf("past the cap: got %v", err)
	}
	rec, _ := c.Lookup(ctx, key)
	if runs.Load() != 2 || rec.Status != StatusFailed || rec.Attempt != 2 || rec.MaxAttempts != 2 {
		t.Fatalf("runs %d, record %+v", runs.Load(), rec)
	}
}

// failReceipts returns the outcome and reason of each Fail receipt in key's history, oldest first
// ("RETRYABLE NOTHING_RAN"), read with the generated client (Client.Lookup reads no history).
func failReceipts(t *testing.T, c *Client, key OperationKey) []string {
	t.Helper()
	res, err := c.Ledger.Lookup(context.Background(),
		&oncekeyv1.LookupRequest{Namespace: key.namespace, Key: key.key, IncludeHistory: true})
	if err != nil {
		t.Fatalf("lookup with history: %v", err)
	}
	var out []string
	for _, e := range res.GetHistory() {
		if e.GetKind() == oncekeyv1.EventKind_EVENT_KIND_FAIL {
			out = append(out, e.GetOutcome()+" "+e.GetReason())
		}
	}
	return out
}

// With MaxAttempts(1): a lease released saying nothing ran (ReleaseUnused, or Fail with
// NothingRan) is acquired again and its receipt says NOTHING_RAN; released by a plain RETRYABLE
// Fail, the one attempt is spent and the next Claim fails the operation with 429.
func TestAReleaseSayingNothingRanLeavesTheAttempt(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	for _, way := range []string{"ReleaseUnused", "NothingRan", "plain"} {
		key := uniqueKey(t, "jobs.run", way)
		claim := &oncekeyv1.ClaimRequest{Namespace: key.namespace, Key: key.key,
			Arguments: &oncekeyv1.ClaimRequest_PayloadJson{PayloadJson: "{}"}, MaxAttempts: 1}
		first, err := c.Claim(ctx, claim)
		if err != nil || first.GetOutcome() != oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED {
			t.Fatalf("%s: first claim %v %v", way, first, err)
		}
		token := first.GetLease().GetToken()
		var status Status
		switch way {
		case "ReleaseUnused":
			rec, err := c.ReleaseUnused(ctx, key, token, "not started")
			if err != nil {
				t.Fatalf("%s: %v", way, err)
			}
			status = rec.Status
		default:
			res, err := c.Fail(ctx, &oncekeyv1.FailRequest{Namespace: key.namespace, Key: key.key, LeaseToken: token,
				Error:       &oncekeyv1.OperationError{Message: "not started"},
				Disposition: oncekeyv1.Disposition_DISPOSITION_RETRYABLE, NothingRan: way == "NothingRan"})
			if err != nil {
				t.Fatalf("%s: %v", way, err)
			}
			status = Status(res.GetRecord().GetStatus())
		}
		if status != StatusRetry {
			t.Fatalf("%s: released to %v, want RETRY", way, status)
		}
		again, err := c.Claim(ctx, claim)
		if err != nil {
			t.Fatalf("%s: second claim: %v", way, err)
		}
		receipts := failReceipts(t, c, key)
		if way == "plain" {
			if again.GetOutcome() != oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_FAILED || again.GetRecord().GetError().GetCode() != 429 {
				t.Fatalf("plain: the attempt should be spent, got %v", again)
			}
			if len(receipts) == 0 || receipts[0] != "RETRYABLE " {
				t.Fatalf("plain: fail receipts %q", receipts)
			}
			continue
		}
		if again.GetOutcome() != oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED || again.GetLease().GetToken() != 2 {
			t.Fatalf("%s: the attempt should be left, got %v", way, again)
		}
		if len(receipts) != 1 || receipts[0] != "RETRYABLE NOTHING_RAN" {
			t.Fatalf("%s: fail receipts %q", way, receipts)
		}
	}
}

func TestBadCapsAndNotesAreRefusedBeforeSending(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	key := uniqueKey(t, "x.y", "bad")
	for _, n := range []int{-1, MaxAttemptsLimit + 1} {
		if _, err := Do(ctx, c, key, 1, func(context.Context) (int, error) { return 1, nil }, MaxAttempts(n)); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("MaxAttempts(%d): got %v", n, err)
		}
		if _, err := c.DryRun(ctx, key, 1, MaxAttempts(n)); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("DryRun MaxAttempts(%d): got %v", n, err)
		}
	}
	for _, note := range []string{string(make([]byte, MaxNoteBytes+1)), "bell\a"} {
		if _, err := c.Approve(ctx, key, note); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("note %q: got %v", note[:4], err)
		}
	}
	if _, err := c.Lookup(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("something was written: %v", err)
	}
	res, err := c.Claim(ctx, &oncekeyv1.ClaimRequest{Namespace: "x.y", Key: key.key + "-big",
		Arguments: &oncekeyv1.ClaimRequest_PayloadJson{PayloadJson: "{}"}, MaxAttempts: MaxAttemptsLimit})
	if err != nil || res.GetRecord().GetMaxAttempts() != MaxAttemptsLimit {
		t.Fatalf("the largest cap: %v %v", res, err)
	}
}

func TestPurgeAndItsForceRefusal(t *testing.T) {
	ctx := context.Background()
	c := dial(t, sharedServer)
	done := uniqueKey(t, "email.send", "purge")
	if _, err := Do(ctx, c, done, 1, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if purged, err := c.Purge(ctx, done, false); !purged || err != nil {
		t.Fatalf("purge: %v %v", purged, err)
	}
	if _, err := c.Lookup(ctx, done); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lookup after purge: %v", err)
	}
	if purged, err := c.Purge(ctx, done, false); purged || err != nil {
		t.Fatalf("purge again: %v %v", purged, err)
	}

	held := uniqueKey(t, "payments.charge", "amo")
	res, err := c.Claim(ctx, &oncekeyv1.ClaimRequest{Namespace: "payments.charge", Key: held.key,
		Arguments: &oncekeyv1.ClaimRequest_PayloadJson{PayloadJson: `{"cents":1}`},
		Semantics: oncekeyv1.Semantics_SEMANTICS_AT_MOST_ONCE})
	if err != nil || res.GetOutcome() != oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED {
		t.Fatalf("claim: %v %v", res, err)
	}
	if _, err := c.Purge(ctx, held, false); !errors.Is(err, ErrUnsettledAtMostOnce) {
		t.Fatalf("purge without force: got %v", err)
	}
	if rec, _ := c.Lookup(ctx, held); rec.Status != StatusProcessing {
		t.Fatalf("a refused purge changed the record: %+v", rec)
	}
	if purged, err := c.Purge(ctx, held, true); !purged || err != nil {
		t.Fatalf("forced purge: %v %v", purged, err)
	}
	_, err = c.Complete(ctx, &oncekeyv1.CompleteRequest{Namespace: "payments.charge", Key: held.key, LeaseToken: res.GetLease().GetToken()})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the purged holder's Complete: got %v, want ErrLeaseLost", err)
	}
}

func TestMissingScopeIsTyped(t *testing.T) {
	worker, approver := "ledger-only-token-0123456789", "approver-token-0123456789"
	sha := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf("acme:worker:%s\nacme:alice:%s:approve\n", sha(worker), sha(approver))), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &server{dir: filepath.Join(dir, "data"), port: freePort(), admin: freePort(), extra: []string{"--tokens-file", tokens}}
	if err := s.start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	ctx := context.Background()
	w, err := Dial(s.addr(), WithToken(worker))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a, err := Dial(s.addr(), WithToken(approver))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	key := uniqueKey(t, "payments.refund", "scoped")
	if _, err := Do(ctx, w, key, 5, func(context.Context) (int, error) { return 1, nil }, RequireApproval(), WaitTimeout(0)); !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("got %v", err)
	}
	_, err = w.Approve(ctx, key, "self-approved")
	var e *Error
	if !errors.Is(err, ErrMissingScope) || !errors.As(err, &e) || e.Reason != ReasonMissingScope {
		t.Fatalf("approve without the scope: got %v", err)
	}
	if _, err := a.Purge(ctx, key, false); !errors.Is(err, ErrMissingScope) {
		t.Fatalf("purge without the scope: got %v", err)
	}
	if rec, err := a.Approve(ctx, key, "checked"); err != nil || rec.Approval.DecidedBy != "alice" {
		t.Fatalf("approve: %+v %v", rec, err)
	}
	if v, err := Do(ctx, w, key, 5, func(ctx context.Context) (uint64, error) { return LeaseFrom(ctx).Token(), nil }); err != nil || v != 1 {
		t.Fatalf("run after approval: %v %v", v, err)
	}
}
