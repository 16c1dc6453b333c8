package oncekey

// The operator's calls: Approve and Reject an operation that awaits approval (the token needs the
// `approve` scope), Purge a record (the `admin` scope), and DryRun, which asks what a Claim would
// get now without writing anything. Like every unary call they are retried on transient failures:
// Approve and Reject are safe to resend (the same decision again is OK), and Purge reports a
// record that is gone, because an earlier attempt whose answer was lost purged it or because there
// was none, as false.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/grpc"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// MaxNoteBytes is the longest note of an Approve or Reject the server accepts.
const MaxNoteBytes = 1024

// DecisionOption configures an Approve or Reject.
type DecisionOption func(*decision)

type decision struct {
	args    any
	pinArgs bool
}

// PinArguments pins the decision to the arguments the approver saw: if the operation was claimed
// with other arguments, the decision is refused with ErrKeyReused.
func PinArguments(args any) DecisionOption {
	return func(d *decision) { d.args, d.pinArgs = args, true }
}

// Approve approves an operation that awaits approval: it becomes APPROVED and the next run
// acquires it. note (at most MaxNoteBytes, no control characters but newline and tab) is kept
// with the decision. The same decision again is OK. Errors: ErrNotAwaitingApproval when the
// operation does not await approval (anymore), ErrMissingScope without the `approve` scope,
// ErrNotFound when there is no record.
func (c *Client) Approve(ctx context.Context, key OperationKey, note string, opts ...DecisionOption) (*Record, error) {
	req, err := decisionRequest(key, note, opts)
	if err != nil {
		return nil, err
	}
	var res *oncekeyv1.ApproveResponse
	err = c.call(ctx, "Approve", 0, true, func(ctx context.Context, o ...grpc.CallOption) (err error) {
		res, err = c.Ledger.Approve(ctx, &oncekeyv1.ApproveRequest{
			Namespace: req.namespace, Key: req.key, Fingerprint: req.fingerprint, Note: note}, o...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return recordFromProto(res.GetRecord()), nil
}

// Reject rejects an operation that awaits approval: it fails for good with error {403, note},
// which every later run gets as an *OperationFailedError. Arguments and errors as Approve.
func (c *Client) Reject(ctx context.Context, key OperationKey, note string, opts ...DecisionOption) (*Record, error) {
	req, err := decisionRequest(key, note, opts)
	if err != nil {
		return nil, err
	}
	var res *oncekeyv1.RejectResponse
	err = c.call(ctx, "Reject", 0, true, func(ctx context.Context, o ...grpc.CallOption) (err error) {
		res, err = c.Ledger.Reject(ctx, &oncekeyv1.RejectRequest{
			Namespace: req.namespace, Key: req.key, Fingerprint: req.fingerprint, Note: note}, o...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return recordFromProto(res.GetRecord()), nil
}

// Purge removes the record of key and its history, in any state; its fencing sequence goes on, so
// the old holder's Complete, Fail and Renew get ErrLeaseLost. An unsettled at-most-once operation
// needs force (its effect may then run again; without it: ErrUnsettledAtMostOnce). It reports
// true when this call purged the record, false when there was none (never was, expired, or purged
// by an earlier attempt of this call). ErrMissingScope without the `admin` scope.
func (c *Client) Purge(ctx context.Context, key OperationKey, force bool) (bool, error) {
	if key.err != nil {
		return false, key.err
	}
	err := c.call(ctx, "Purge", 0, true, func(ctx context.Context, o ...grpc.CallOption) error {
		_, err := c.Ledger.Purge(ctx, &oncekeyv1.PurgeRequest{Namespace: key.namespace, Key: key.key, Force: force}, o...)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// DryRunResult is what a Claim would get now.
type DryRunResult struct {
	// Outcome is what the Claim would answer.
	Outcome Outcome
	// Record is the record as stored; nil when the key has none.
	Record *Record
	// IntentMatches are the other keys the intent guard would name (OutcomeDuplicateIntent, or a
	// new key it would let through in warn mode); nil when none.
	IntentMatches []IntentMatch
}

// DryRun asks what a run of key with args and opts would get now (OutcomeAcquired,
// OutcomeCompleted, OutcomeAwaitingApproval, OutcomeDuplicateIntent, ...), writing nothing: no record, no lease, no dedup
// hit, no receipt.
func (c *Client) DryRun(ctx context.Context, key OperationKey, args any, opts ...RunOption) (DryRunResult, error) {
	if key.err != nil {
		return DryRunResult{}, key.err
	}
	fp, err := Fingerprint(args)
	if err != nil {
		return DryRunResult{}, err
	}
	o := runOptions{semantics: SemanticsAtLeastOnce, owner: c.owner}
	for _, opt := range opts {
		opt(&o)
	}
	req, err := o.claimRequest(key, fp, truncate(o.owner, maxOwnerBytes), false)
	if err != nil {
		return DryRunResult{}, err
	}
	req.DryRun = true
	res, err := c.Claim(ctx, req)
	if err != nil {
		return DryRunResult{}, err
	}
	return DryRunResult{Outcome: Outcome(res.GetOutcome()), Record: recordFromProto(res.GetRecord()),
		IntentMatches: IntentMatches(res)}, nil
}

type decisionTarget struct {
	namespace, key string
	fingerprint    []byte
}

// decisionRequest checks an Approve's or Reject's key, note and pin as the server does.
func decisionRequest(key OperationKey, note string, opts []DecisionOption) (decisionTarget, error) {
	if key.err != nil {
		return decisionTarget{}, key.err
	}
	if len(note) > MaxNoteBytes {
		return decisionTarget{}, fmt.Errorf("%w: note: at most %d bytes", ErrInvalidArgument, MaxNoteBytes)
	}
	if strings.IndexFunc(note, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0 {
		return decisionTarget{}, fmt.Errorf("%w: note: must not contain control characters other than newline and tab", ErrInvalidArgument)
	}
	var d decision
	for _, opt := range opts {
		opt(&d)
	}
	t := decisionTarget{namespace: key.namespace, key: key.key}
	if d.pinArgs {
		fp, err := Fingerprint(d.args)
		if err != nil {
			return decisionTarget{}, err
		}
		t.fingerprint = fp
	}
	return t, nil
}
