package oncekey

// The one-call API: Do, Run and Reconcile claim an operation, run the side effect only when the
// claim acquired it (keeping the lease alive meanwhile), then record its outcome; every other
// outcome comes back without running it. The key and the arguments never change between attempts.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// DefaultWaitTimeout is how long Do waits, by default, for an operation another holder is
// performing before returning an error matching ErrInProgress.
const DefaultWaitTimeout = 60 * time.Second

// maxWait is the longest wait the server holds a Claim.
const maxWait = 60 * time.Second

// approvalPoll is the pause between Claims while an approval is awaited and the server's hold
// ended early.
const approvalPoll = 100 * time.Millisecond

// maxOwnerBytes is the longest Claim.owner the server accepts.
const maxOwnerBytes = 256

// lapsedPause is the longest pause before claiming again after releasing a lease that had run out
// before its Claim's answer arrived: whatever made the answer late may still be going on.
const lapsedPause = 100 * time.Millisecond

// lapsedMessage is the error a lease that had run out before its Claim's answer arrived is
// released with.
const lapsedMessage = "the lease ran out before the Claim's answer arrived: the operation did not run"

// Result is the outcome of Run: the value, and where it came from.
type Result[T any] struct {
	// Value is the operation's result: the one the function returned, or the stored one replayed.
	Value T
	// Replayed is true when the function did not run because the operation had already succeeded.
	Replayed bool
	// Record is the SUCCEEDED record.
	Record *Record
	// IntentMatches are the other keys of the namespace claimed with the same arguments within
	// the intent window, when the intent guard let this run's new key through anyway
	// (IntentGuardWarn, or RepeatIntent): a hint that the caller made up a new key for a retry.
	// Nil otherwise.
	IntentMatches []IntentMatch
}

// RunOption configures one Do, Run or Reconcile.
type RunOption func(*runOptions)

type runOptions struct {
	leaseTTL, retention, wait time.Duration
	semantics                 Semantics
	owner                     string
	requireApproval           bool
	maxAttempts               int64
	intentGuard               IntentGuardMode
	intentWindow              time.Duration
	repeatIntent              bool
	budget                    *RunBudget
}

// LeaseTTL sets the lease length (1 s ..= 1 h; server default 30 s); the server renews it every
// third of that while the function runs. A shorter lease lets another caller take over sooner
// after this process dies.
func LeaseTTL(d time.Duration) RunOption { return func(o *runOptions) { o.leaseTTL = d } }

// Retention sets how long the outcome is kept after it settles (server default 24 h). It must
// outlast the longest time anyone may retry the operation.
func Retention(d time.Duration) RunOption { return func(o *runOptions) { o.retention = d } }

// AtMostOnce never runs the side effect twice: if a holder vanishes mid-run, later runs get an
// error matching ErrNeedsReconciliation instead of running it again. The first Claim of a key
// fixes the semantics.
func AtMostOnce() RunOption { return func(o *runOptions) { o.semantics = SemanticsAtMostOnce } }

// WaitTimeout sets how long to wait for an operation another holder is performing (default
// DefaultWaitTimeout) before returning an *InProgressError, or, with RequireApproval, for the
// decision before returning an *AwaitingApprovalError; zero returns at once.
func WaitTimeout(d time.Duration) RunOption { return func(o *runOptions) { o.wait = d } }

// RequireApproval: nobody runs the operation before someone approves it (Client.Approve). A run
// waits for the decision up to the wait timeout, then returns an *AwaitingApprovalError (errors.Is
// ErrAwaitingApproval) without calling the function; a rejection makes it ErrOperationFailed with
// code 403. The first Claim of a key fixes this.
func RequireApproval() RunOption { return func(o *runOptions) { o.requireApproval = true } }

// MaxAttempts caps the runs of the operation (reconciliations not counted; 0 is no cap, the
// default; at most MaxAttemptsLimit): past it, a released operation fails for good with code 429,
// "attempts exhausted" (ErrOperationFailed), and a lapsed lease needs reconciliation instead of
// being taken over. The first Claim of a key fixes this.
func MaxAttempts(n int) RunOption { return func(o *runOptions) { o.maxAttempts = int64(n) } }

// MaxAttemptsLimit is the largest attempt cap the wire carries (a uint32).
const MaxAttemptsLimit = 1<<32 - 1

// claimRequest is the Claim of key with the run's options (the attempt cap, the intent guard's mode
// and window checked as the server reads them).
func (o *runOptions) claimRequest(key OperationKey, fp []byte, owner string, reconcile bool) (*oncekeyv1.ClaimRequest, error) {
	if o.maxAttempts < 0 || o.maxAttempts > MaxAttemptsLimit {
		return nil, fmt.Errorf("%w: MaxAttempts must be between 1 and %d (0: no cap), got %d",
			ErrInvalidArgument, int64(MaxAttemptsLimit), o.maxAttempts)
	}
	if o.intentGuard < IntentGuardUnspecified || o.intentGuard > IntentGuardRefuse {
		return nil, fmt.Errorf("%w: IntentGuard must be IntentGuardOff, IntentGuardWarn or IntentGuardRefuse, got %d",
			ErrInvalidArgument, int(o.intentGuard))
	}
	if o.intentWindow != 0 && (o.intentWindow < MinIntentWindow || o.intentWindow > MaxIntentWindow) {
		return nil, fmt.Errorf("%w: IntentWindow must be between %v and %v, got %v",
			ErrInvalidArgument, MinIntentWindow, MaxIntentWindow, o.intentWindow)
	}
	req := &oncekeyv1.ClaimRequest{
		Namespace: key.namespace, Key: key.key,
		Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: fp},
		Semantics: oncekeyv1.Semantics(o.semantics), Owner: owner, Reconcile: reconcile,
		RequireApproval: o.requireApproval, MaxAttempts: uint32(o.maxAttempts),
		IntentGuard: oncekeyv1.IntentGuard(o.intentGuard), RepeatIntent: o.repeatIntent,
		Budget: o.budget.toProto(),
	}
	if o.intentWindow > 0 {
		req.IntentWindow = durationpb.New(o.intentWindow)
	}
	if o.leaseTTL > 0 {
		req.LeaseTtl = durationpb.New(o.leaseTTL)
	}
	if o.retention > 0 {
		req.Retention = durationpb.New(o.retention)
	}
	if p := key.parent; p != nil {
		req.Parent = &oncekeyv1.OperationRef{Namespace: p.Namespace, Key: p.Key}
	}
	return req, nil
}

// Owner names the holder in the record's lease_owner (default: the client's owner). A per-run
// suffix is added so that a Claim whose answer was lost can recognize its own lease.
func Owner(owner string) RunOption { return func(o *runOptions) { o.owner = owner } }

// Do runs fn unless the ledger already knows the outcome of key, and returns fn's result or the
// stored one: the one-line way to make a side effect idempotent.
//
//	receipt, err := oncekey.Do(ctx, client, oncekey.Key("email.send", ticketID, "notify", "v1"), email,
//		func(ctx context.Context) (Receipt, error) { return send(ctx, email) })
//
// args are the operation's significant arguments (any value encoding/json marshals), fingerprinted
// with RFC 8785 + SHA-256: the same key with other arguments is refused with ErrKeyReused. Keep
// attempt numbers, timestamps and trace ids out of them. The result is stored as JSON (or as is,
// when T is Raw) and replayed to every later run of the key.
//
// fn runs only when the claim acquired the key. Its context is cancelled when ctx is, or when the
// lease is lost (context.Cause is then ErrLeaseLost); LeaseFrom(ctx) gives its lease (fencing
// token). An error from fn releases the key for a retry, and is what Do returns; wrap it with
// Final to fail the key for good, or Abandon to forget it. The outcome is recorded with its own
// deadline (the client's settle timeout), so a cancelled call still releases its key.
//
// A lease that had already run out (on this machine's clock) when the Claim's answer arrived runs
// nothing, since another holder may be taking the operation over: it is released for a retry
// (saying nothing ran, so not counted against MaxAttempts) and the key claimed again until the
// wait timeout, then Do returns a *LeaseLostError with no Err.
//
// Errors: ErrKeyReused, ErrInProgress (*InProgressError), ErrNeedsReconciliation,
// ErrAwaitingApproval (*AwaitingApprovalError, with RequireApproval), ErrDuplicateIntent
// (*DuplicateIntentError: the intent guard refused a new key whose arguments another key was
// claimed with), ErrBudgetExhausted (*BudgetExhaustedError: a new child beyond its parent's run
// budget),
// ErrOperationFailed (*OperationFailedError, the stored error), ErrLeaseLost (*LeaseLostError),
// ErrUnavailable (the server stayed unreachable through every retry), ctx's own error, or fn's.
func Do[T any](ctx context.Context, c *Client, key OperationKey, args any, fn func(context.Context) (T, error), opts ...RunOption) (T, error) {
	r, err := Run(ctx, c, key, args, fn, opts...)
	return r.Value, err
}

// Run is Do, also telling whether the value was replayed and giving the record.
func Run[T any](ctx context.Context, c *Client, key OperationKey, args any, fn func(context.Context) (T, error), opts ...RunOption) (Result[T], error) {
	if key.err != nil {
		return Result[T]{}, key.err
	}
	fp, err := Fingerprint(args)
	if err != nil {
		return Result[T]{}, err
	}
	return execute(ctx, c, key, fp, false, fn, opts)
}

// Reconcile settles an at-most-once operation whose outcome is unknown: it claims the key with
// reconcile and runs fn, which must find out from the outside world (by the key) what happened and
// return the result (recorded as the outcome), or an error: plain when the effect did not happen
// and may run again, Final when it failed, Abandon to forget the key. If the operation settled
// meanwhile, its outcome is returned as Run would.
func Reconcile[T any](ctx context.Context, c *Client, key OperationKey, args any, fn func(context.Context) (T, error), opts ...RunOption) (Result[T], error) {
	if key.err != nil {
		return Result[T]{}, key.err
	}
	fp, err := Fingerprint(args)
	if err != nil {
		return Result[T]{}, err
	}
	return execute(ctx, c, key, fp, true, fn, opts)
}

// execute claims key (valid) with fingerprint fp and runs fn when the claim acquires it.
func execute[T any](ctx context.Context, c *Client, key OperationKey, fp []byte, reconcile bool,
	fn func(context.Context) (T, error), opts []RunOption) (Result[T], error) {
	var zero Result[T]
	o := runOptions{wait: DefaultWaitTimeout, semantics: SemanticsAtLeastOnce, owner: c.owner}
	for _, opt := range opts {
		opt(&o)
	}
	// A per-run suffix lets a retried Claim whose first answer was lost recognize its own lease.
	base := o.owner
	if len(base) > maxOwnerBytes-17 {
		base = truncate(base, maxOwnerBytes-17)
	}
	owner := fmt.Sprintf("%s#%016x", base, rand.Uint64())
	req, err := o.claimRequest(key, fp, owner, reconcile)
	if err != nil {
		return zero, err
	}
	// Duplicates wait for an in-flight run at most o.wait, and never past the caller's deadline:
	// the answer is then InProgressError rather than the caller's timeout.
	deadline := time.Now().Add(o.wait)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(deadline) {
		deadline = d.Add(-time.Second)
	}
	// The first Claim does not wait: were its answer lost, its retry would otherwise be held
	// waiting on this run's own lease. Only once another holder is seen do Claims wait.
	waiting := false
	// The intent guard's matches, from the Claim that created the key (a later one, of the key
	// now existing, has none).
	var matches []IntentMatch
	for {
		req.Wait = nil
		if remaining := min(time.Until(deadline), maxWait); waiting && remaining > 0 {
			req.Wait = durationpb.New(remaining.Round(time.Millisecond))
		}
		res, err := c.Claim(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				c.release(ctx, key, owner)
			}
			return zero, err
		}
		if m := intentMatchesFromProto(res.GetIntentMatches()); m != nil {
			matches = m
		}
		switch res.GetOutcome() {
		case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED:
			lease := newLease(key, res.GetLease())
			if lapsed(lease) {
				if err := c.releaseLapsed(ctx, key, lease, deadline); err != nil {
					return zero, err
				}
				continue
			}
			r, err := acquired(ctx, c, key, lease, &o, fn)
			if err == nil {
				r.IntentMatches = matches
			}
			return r, err
		case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_COMPLETED:
			result := rawFromProto(res.GetRecord().GetResult())
			if result == nil {
				result = &Raw{}
			}
			v, err := decode[T](*result)
			if err != nil {
				return zero, err
			}
			return Result[T]{Value: v, Replayed: true, Record: recordFromProto(res.GetRecord()), IntentMatches: matches}, nil
		case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_FAILED:
			if e := failedFromProto(res.GetRecord().GetError()); e != nil {
				return zero, e
			}
			return zero, &OperationFailedError{}
		case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_NEEDS_RECONCILIATION:
			return zero, &NeedsReconciliationError{Record: recordFromProto(res.GetRecord())}
		case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_DUPLICATE_INTENT:
			// Refused by the intent guard: nothing was written for the key, and nothing runs.
			return zero, &DuplicateIntentError{Namespace: key.namespace, Key: key.key, Matches: matches}
		case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_AWAITING_APPROVAL:
			// Nothing runs before an approval. Claim again held by the server until the decision
			// or the wait runs out; then the caller hears it awaits approval.
			remaining := time.Until(deadline)
			if remaining <= 0 {
				return zero, &AwaitingApprovalError{Record: recordFromProto(res.GetRecord())}
			}
			if !waiting {
				waiting = true
				continue
			}
			if err := sleep(ctx, min(approvalPoll, remaining)); err != nil {
				return zero, err
			}
		case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_IN_PROGRESS:
			rec := res.GetRecord()
			// Our own earlier attempt acquired it, but its answer was lost and the retry claimed
			// again: the lease is ours.
			if rec.GetLeaseOwner() == owner && rec.GetStatus() == oncekeyv1.RecordStatus_RECORD_STATUS_PROCESSING {
				lease := &Lease{key: key, token: rec.GetFencingToken(), attempt: rec.GetAttempt(),
					expiresAt: toTime(rec.GetLeaseExpiresAt()), lost: make(chan struct{})}
				if lapsed(lease) {
					if err := c.releaseLapsed(ctx, key, lease, deadline); err != nil {
						return zero, err
					}
					continue
				}
				r, err := acquired(ctx, c, key, lease, &o, fn)
				if err == nil {
					r.IntentMatches = matches
				}
				return r, err
			}
			retryAfter := res.GetRetryAfter().AsDuration()
			remaining := time.Until(deadline)
			if remaining <= 0 {
				return zero, &InProgressError{RetryAfter: retryAfter, Record: recordFromProto(rec)}
			}
			if !waiting {
				waiting = true // claim again at once, held by the server until the holder settles
				continue
			}
			if retryAfter <= 0 {
				retryAfter = 100 * time.Millisecond
			}
			if err := sleep(ctx, min(retryAfter, remaining)); err != nil {
				return zero, err
			}
		default:
			return zero, fmt.Errorf("oncekey: unknown claim outcome %v", res.GetOutcome())
		}
	}
}

// lapsed reports whether lease had already run out on this machine's clock when its Claim's answer
// arrived (an answer slower than the lease: an overloaded server, a store failing over). Another
// holder may be taking the operation over right now, so nothing may run under it: a holder stops
// acting when its lease ends on its own clock (docs/reliability.md, "Clocks"). A lease without an
// expiry counts as run out.
func lapsed(lease *Lease) bool { return !lease.ExpiresAt().After(time.Now()) }

// releaseLapsed releases a lease that had run out before its Claim's answer arrived (see lapsed):
// Fail RETRYABLE with NothingRan (ReleaseUnused), since nothing ran under it, so the release does
// not use up one of the operation's max_attempts; unless it is already gone (taken over or
// settled). Past the deadline it returns a *LeaseLostError; otherwise it pauses briefly and
// returns nil, and the caller claims again.
func (c *Client) releaseLapsed(ctx context.Context, key OperationKey, lease *Lease, deadline time.Time) error {
	_, err := c.ReleaseUnused(ctx, key, lease.token, lapsedMessage)
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return err
	}
	remaining := time.Until(deadline)
	if remaining <= 0 {
		return &LeaseLostError{Token: lease.token, Lapsed: true}
	}
	return sleep(ctx, min(remaining, lapsedPause))
}

// release gives back a key whose Claim the caller cancelled while it was in flight: the server may
// have acquired it (under this run's unique owner) without the answer arriving. Best effort, on
// its own deadline; the lease runs out anyway if this fails.
func (c *Client) release(ctx context.Context, key OperationKey, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout+c.connectTimeout)
	defer cancel()
	rec, err := c.Lookup(ctx, key)
	if err != nil || rec.Status != StatusProcessing || rec.LeaseOwner != owner {
		return
	}
	_, _ = c.Fail(ctx, &oncekeyv1.FailRequest{
		Namespace: key.namespace, Key: key.key, LeaseToken: rec.FencingToken,
		Error:       &oncekeyv1.OperationError{Message: "the caller cancelled before the operation started"},
		Disposition: oncekeyv1.Disposition_DISPOSITION_RETRYABLE,
	})
}
