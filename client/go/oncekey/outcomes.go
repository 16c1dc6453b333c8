package oncekey

// The errors a run (Do, Run, Reconcile, a wrapped function) ends with besides a failed RPC: what
// the ledger answered instead of letting the function run, and what became of a run whose outcome
// could not be recorded. Each message says its thing once: a cause's own "oncekey:" prefix and
// words the message already says are left out.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// InProgressError: another holder is performing the operation (errors.Is ErrInProgress).
type InProgressError struct {
	// RetryAfter is how long the server suggested waiting before claiming again.
	RetryAfter time.Duration
	// Record is the record at the last Claim.
	Record *Record
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", ErrInProgress, e.RetryAfter)
}

// Is matches ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// NeedsReconciliationError: the at-most-once operation's outcome is unknown (errors.Is
// ErrNeedsReconciliation).
type NeedsReconciliationError struct {
	// Record is the record (status StatusUnknown).
	Record *Record
}

func (e *NeedsReconciliationError) Error() string { return ErrNeedsReconciliation.Error() }

// Is matches ErrNeedsReconciliation.
func (e *NeedsReconciliationError) Is(target error) bool { return target == ErrNeedsReconciliation }

// AwaitingApprovalError: the operation awaits an approval that did not come within the wait
// (errors.Is ErrAwaitingApproval); the function did not run.
type AwaitingApprovalError struct {
	// Record is the record (status StatusAwaitingApproval).
	Record *Record
}

func (e *AwaitingApprovalError) Error() string { return ErrAwaitingApproval.Error() }

// Is matches ErrAwaitingApproval.
func (e *AwaitingApprovalError) Is(target error) bool { return target == ErrAwaitingApproval }

// OperationFailedError is the stored error of an operation that failed for good, replayed to every
// later run of its key (errors.Is ErrOperationFailed).
type OperationFailedError struct {
	// Code is the caller's own error code.
	Code int32
	// Message is the stored message.
	Message string
	// Details are the stored opaque details.
	Details []byte
}

func (e *OperationFailedError) Error() string {
	msg := ErrOperationFailed.Error()
	if e.Code != 0 {
		msg += fmt.Sprintf(" (code %d)", e.Code)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is matches ErrOperationFailed.
func (e *OperationFailedError) Is(target error) bool { return target == ErrOperationFailed }

// LeaseLostError: the lease was lost while the function ran or before its outcome was recorded
// (errors.Is ErrLeaseLost). The side effect may have happened; the fencing token tells downstream
// systems the holders apart. Also returned, with Lapsed set, when every lease acquired within the
// wait timeout had run out (on this machine's clock) before its Claim's answer arrived: the
// function then never ran, and each such lease was released for a retry.
type LeaseLostError struct {
	// Token is the fencing token of the lost lease.
	Token uint64
	// Err is the function's own error, if it failed.
	Err error
	// Lapsed: the lease had run out before the Claim's answer arrived; the function did not run.
	Lapsed bool
	// cause is the server's answer (LEASE_LOST or ALREADY_SETTLED).
	cause *Error
}

func (e *LeaseLostError) Error() string {
	if e.Lapsed {
		return fmt.Sprintf("oncekey: the lease (token %d) had run out before the Claim's answer arrived; "+
			"the operation did not run", e.Token)
	}
	msg := fmt.Sprintf("oncekey: the lease (token %d) was lost before the outcome was recorded", e.Token)
	// The function's own error, unless it only repeats the loss (its context's cancellation, or
	// context.Cause: ErrLeaseLost).
	if e.Err != nil && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, ErrLeaseLost) {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is matches ErrLeaseLost.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// Unwrap gives the function's own error, unless it is only the cancellation the loss caused.
func (e *LeaseLostError) Unwrap() error {
	if errors.Is(e.Err, context.Canceled) {
		return nil
	}
	return e.Err
}

// GRPCStatus is the server's LEASE_LOST (or ALREADY_SETTLED) status.
func (e *LeaseLostError) GRPCStatus() *status.Status {
	if e.cause != nil {
		return e.cause.st
	}
	return status.New(codes.FailedPrecondition, "lease lost")
}

// UnsettledError: the function finished but its outcome was not recorded: the server stayed
// unreachable through every retry of the settle (errors.Is ErrUnavailable), or the caller cancelled
// an at-most-once run whose function returned the cancellation, so its effect may have happened
// (errors.Is ErrNeedsReconciliation). The lease will run out and the operation will be acquired
// again (at-least-once) or need reconciliation (at-most-once). errors.Is matches both the
// function's error and why the outcome was not recorded.
type UnsettledError struct {
	// Err is why the Complete or Fail failed.
	Err error
	// FuncErr is the function's own error, if it failed.
	FuncErr error
}

func (e *UnsettledError) Error() string {
	if e.Err == errLeftToReconciliation {
		return fmt.Sprintf("%v; %v", e.FuncErr, e.Err)
	}
	if e.FuncErr != nil {
		return fmt.Sprintf("%v; oncekey: the failure could not be recorded: %s", e.FuncErr, unprefixed(e.Err))
	}
	return "oncekey: the outcome could not be recorded: " + unprefixed(e.Err)
}

// errLeftToReconciliation is why a cancelled at-most-once run is not released: it matches
// ErrNeedsReconciliation, which later runs get once the lease has run out.
var errLeftToReconciliation error = &leftToReconciliation{}

type leftToReconciliation struct{}

func (*leftToReconciliation) Error() string {
	return "oncekey: the cancelled at-most-once operation may have had its effect, so it was not " +
		"released: it needs reconciliation once its lease runs out"
}

func (*leftToReconciliation) Is(target error) bool { return target == ErrNeedsReconciliation }

// settleTimeoutError: the outcome was not recorded within the client's settle timeout.
type settleTimeoutError struct{ timeout time.Duration }

func (e *settleTimeoutError) Error() string {
	return fmt.Sprintf("oncekey: no answer within the settle timeout (%v)", e.timeout)
}

// Is matches ErrUnavailable: the server did not answer in time; safe to retry with the same key.
func (e *settleTimeoutError) Is(target error) bool { return target == ErrUnavailable }

// unprefixed is err's message without this package's "oncekey: ", for nesting it in another.
func unprefixed(err error) string {
	return strings.TrimPrefix(err.Error(), "oncekey: ")
}

// Unwrap gives both errors, the function's first.
func (e *UnsettledError) Unwrap() []error {
	if e.FuncErr != nil {
		return []error{e.FuncErr, e.Err}
	}
	return []error{e.Err}
}

// DecodeError: the operation succeeded earlier, but its stored result is not JSON of the expected
// type.
type DecodeError struct {
	// Err is why decoding failed.
	Err error
	// Result is the stored result.
	Result Raw
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("oncekey: the stored result (%s) cannot be decoded: %v", e.Result.ContentType, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }
