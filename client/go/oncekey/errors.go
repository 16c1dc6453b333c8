package oncekey

// Typed errors: every error this package returns can be told apart with errors.Is against one of
// the sentinels below, or opened with errors.As into the type that carries its details. A failed
// RPC is an *Error (gRPC code, ErrorInfo reason, BadRequest field); status.Code and status.FromError
// still work on it.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every Oncekey error.
const ErrorDomain = "oncekey"

// The ErrorInfo reasons of Oncekey errors.
const (
	ReasonInvalidField      = "INVALID_FIELD"
	ReasonTooLarge          = "TOO_LARGE"
	ReasonKeyReused         = "KEY_REUSED"
	ReasonLeaseLost         = "LEASE_LOST"
	ReasonAlreadySettled    = "ALREADY_SETTLED"
	ReasonNotFound          = "NOT_FOUND"
	ReasonUnauthenticated   = "UNAUTHENTICATED"
	ReasonPermissionDenied  = "PERMISSION_DENIED"
	ReasonStoreUnavailable  = "STORE_UNAVAILABLE"
	ReasonRateLimited       = "RATE_LIMITED"
	ReasonKeepAliveReplaced = "KEEPALIVE_REPLACED"
	// ReasonNotAwaitingApproval: an Approve or Reject of an operation that does not await approval.
	ReasonNotAwaitingApproval = "NOT_AWAITING_APPROVAL"
	// ReasonUnsettledAtMostOnce: a Purge of an unsettled at-most-once operation without force.
	ReasonUnsettledAtMostOnce = "UNSETTLED_AT_MOST_ONCE"
	// ReasonMissingScope: the token lacks the scope the RPC needs.
	ReasonMissingScope = "MISSING_SCOPE"
)

// Sentinels for errors.Is.
var (
	// ErrKeyReused: the key was first claimed with other arguments (FAILED_PRECONDITION
	// KEY_REUSED). Nothing ran and nothing changed.
	ErrKeyReused = errors.New("oncekey: key reused with other arguments")
	// ErrLeaseLost: the lease no longer holds the operation (LEASE_LOST, or ALREADY_SETTLED:
	// someone settled it with this token). Another holder took it over; this run's outcome was not
	// recorded. It is also the context.Cause of the function's context when the loss is noticed
	// while the function runs.
	ErrLeaseLost = errors.New("oncekey: lease lost")
	// ErrInProgress: another holder is performing the operation and it did not settle within the
	// wait. errors.As into *InProgressError for RetryAfter.
	ErrInProgress = errors.New("oncekey: operation in progress elsewhere")
	// ErrNeedsReconciliation: an at-most-once operation's holder vanished and its outcome is
	// unknown. Check the outside world by the key, then use Reconcile.
	ErrNeedsReconciliation = errors.New("oncekey: operation needs reconciliation")
	// ErrOperationFailed: the operation failed for good earlier; errors.As into
	// *OperationFailedError for the stored error.
	ErrOperationFailed = errors.New("oncekey: operation failed")
	// ErrUnavailable: the server stayed unreachable or unavailable through every retry (UNAVAILABLE,
	// an attempt that timed out, or an open circuit breaker). Safe to retry later with the same key.
	ErrUnavailable = errors.New("oncekey: server unavailable")
	// ErrNotFound: Lookup found no record.
	ErrNotFound = errors.New("oncekey: no such record")
	// ErrInvalidKey: an OperationKey could not be built (bad namespace, empty part, too long).
	ErrInvalidKey = errors.New("oncekey: invalid key")
	// ErrInvalidArgument: an option or argument the server would refuse (an attempt cap out of
	// range, a note too long); nothing was sent.
	ErrInvalidArgument = errors.New("oncekey: invalid argument")
	// ErrAwaitingApproval: the operation waits for an approval that did not come within the wait;
	// nothing ran. errors.As into *AwaitingApprovalError for the record. Run it again once someone
	// approved it; a rejection makes it ErrOperationFailed (code 403, the approver's note).
	ErrAwaitingApproval = errors.New("oncekey: operation awaits approval")
	// ErrNotAwaitingApproval: an Approve or Reject of an operation that does not await approval: it
	// never did, was decided otherwise, or has moved on since (FAILED_PRECONDITION
	// NOT_AWAITING_APPROVAL). Never retried.
	ErrNotAwaitingApproval = errors.New("oncekey: operation does not await approval")
	// ErrUnsettledAtMostOnce: a Purge of an unsettled at-most-once operation without force
	// (FAILED_PRECONDITION UNSETTLED_AT_MOST_ONCE): purging it would let its effect run again.
	ErrUnsettledAtMostOnce = errors.New("oncekey: unsettled at-most-once operation needs force to purge")
	// ErrMissingScope: the token lacks the scope the RPC needs (PERMISSION_DENIED MISSING_SCOPE):
	// `approve` for Approve and Reject, `admin` for Purge, `ledger` for the rest; the message names
	// it. Never retried.
	ErrMissingScope = errors.New("oncekey: the token lacks the scope this call needs")
)

// Error is a failed RPC: the server's (or the transport's) gRPC status, with the ErrorInfo reason
// and, for INVALID_ARGUMENT, the field the google.rpc.BadRequest names.
type Error struct {
	// Code is the gRPC code.
	Code codes.Code
	// Reason is the ErrorInfo reason, e.g. ReasonKeyReused; "" when the status carries none.
	Reason string
	// Field is the field a BadRequest names (INVALID_ARGUMENT only).
	Field string
	// Message is the status message.
	Message string
	// Pushback is how long the server asked to wait before retrying (grpc-retry-pushback-ms or
	// google.rpc.RetryInfo); negative when it asked not to retry; zero when it said nothing.
	Pushback time.Duration

	st *status.Status
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("oncekey: %s %s: %s", codeName(e.Code), e.Reason, e.Message)
	}
	return fmt.Sprintf("oncekey: %s: %s", codeName(e.Code), e.Message)
}

// GRPCStatus lets status.FromError and status.Code read the status.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Is matches the sentinel the status stands for.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrKeyReused:
		return e.Reason == ReasonKeyReused
	case ErrLeaseLost:
		return e.Reason == ReasonLeaseLost || e.Reason == ReasonAlreadySettled
	case ErrUnavailable:
		return e.Code == codes.Unavailable || e.Code == codes.DeadlineExceeded
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrNotAwaitingApproval:
		return e.Reason == ReasonNotAwaitingApproval
	case ErrUnsettledAtMostOnce:
		return e.Reason == ReasonUnsettledAtMostOnce
	case ErrMissingScope:
		return e.Reason == ReasonMissingScope
	}
	return false
}

// transient reports whether resending the identical request may cure the failure: UNAVAILABLE,
// DEADLINE_EXCEEDED (an attempt timed out) and RESOURCE_EXHAUSTED (rate limited). Never
// INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED or FAILED_PRECONDITION.
func (e *Error) transient() bool {
	switch e.Code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// fromStatus makes an *Error of a gRPC status (pushback read from the trailer by the caller).
func fromStatus(st *status.Status) *Error {
	e := &Error{Code: st.Code(), Message: st.Message(), st: st}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == ErrorDomain || d.GetDomain() == "" {
				e.Reason = d.GetReason()
			}
		case *errdetails.BadRequest:
			if v := d.GetFieldViolations(); len(v) > 0 {
				e.Field = v[0].GetField()
			}
		case *errdetails.RetryInfo:
			if r := d.GetRetryDelay(); r != nil && e.Pushback == 0 {
				e.Pushback = r.AsDuration()
			}
		}
	}
	return e
}

// asError converts err to an *Error when it carries a gRPC status, else returns it unchanged.
func asError(err error) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	if st, ok := status.FromError(err); ok {
		return fromStatus(st)
	}
	return err
}

// Reason returns the ErrorInfo reason of err (e.g. ReasonKeyReused), or "" when it has none.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if st, ok := status.FromError(err); ok {
		return fromStatus(st).Reason
	}
	return ""
}

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
	return fmt.Sprintf("%v: %d %s", ErrOperationFailed, e.Code, e.Message)
}

// Is matches ErrOperationFailed.
func (e *OperationFailedError) Is(target error) bool { return target == ErrOperationFailed }

// LeaseLostError: the lease was lost while the function ran or before its outcome was recorded
// (errors.Is ErrLeaseLost). The side effect may have happened; the fencing token tells downstream
// systems the holders apart. Also returned, with Err nil, when every lease acquired within the wait
// timeout had run out (on this machine's clock) before its Claim's answer arrived: the function
// then never ran, and each such lease was released for a retry.
type LeaseLostError struct {
	// Token is the fencing token of the lost lease.
	Token uint64
	// Err is the function's own error, if it failed.
	Err error
	// cause is the server's answer (LEASE_LOST or ALREADY_SETTLED).
	cause *Error
}

func (e *LeaseLostError) Error() string {
	msg := fmt.Sprintf("oncekey: the lease (token %d) was lost before the outcome was recorded", e.Token)
	if e.Err != nil && !errors.Is(e.Err, context.Canceled) {
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

// UnsettledError: the function finished but its outcome could not be recorded (the server stayed
// unreachable through every retry of the settle). The lease will run out and the operation will be
// acquired again (at-least-once) or need reconciliation (at-most-once). errors.Is matches both the
// function's error and the settle's (e.g. ErrUnavailable).
type UnsettledError struct {
	// Err is why the Complete or Fail failed.
	Err error
	// FuncErr is the function's own error, if it failed.
	FuncErr error
}

func (e *UnsettledError) Error() string {
	if e.FuncErr != nil {
		return fmt.Sprintf("%v (and the failure could not be recorded: %v)", e.FuncErr, e.Err)
	}
	return fmt.Sprintf("oncekey: the outcome could not be recorded: %v", e.Err)
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

// codeName spells a gRPC code the canonical way (FAILED_PRECONDITION, not FailedPrecondition).
func codeName(c codes.Code) string {
	names := [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
		"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
		"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
		"UNAUTHENTICATED"}
	if int(c) < len(names) {
		return names[c]
	}
	return c.String()
}

// CodeName spells err's gRPC code the canonical upper-snake way (e.g. "FAILED_PRECONDITION"), or
// "" when err carries no gRPC status.
func CodeName(err error) string {
	if st, ok := status.FromError(err); ok && err != nil {
		return codeName(st.Code())
	}
	return ""
}
