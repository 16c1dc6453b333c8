package oncekey

// Typed errors: every error this package returns can be told apart with errors.Is against one of
// the sentinels below, or opened with errors.As into the type that carries its details. A failed
// RPC is an *Error (gRPC code, ErrorInfo reason, BadRequest field); status.Code and status.FromError
// still work on it.

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every Oncekey error.
const ErrorDomain = "oncekey"

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
	// ErrInvalidArgument: an option or argument the server refuses (INVALID_ARGUMENT:
	// INVALID_FIELD or TOO_LARGE, Error.Field names it), or would refuse (an attempt cap out of
	// range, a note too long, a list page size over MaxPageSize: then nothing was sent). Nothing
	// changed; the same request fails again.
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
	// ErrUnauthenticated: the server does not know the token (UNAUTHENTICATED): missing, unknown
	// or revoked. Never retried.
	ErrUnauthenticated = errors.New("oncekey: unauthenticated")
	// ErrPermissionDenied: the credentials do not allow the request (PERMISSION_DENIED, which
	// includes ErrMissingScope). Never retried.
	ErrPermissionDenied = errors.New("oncekey: permission denied")
	// ErrRateLimited: the tenant stayed over the server's admission limits through every retry
	// (RESOURCE_EXHAUSTED RATE_LIMITED); nothing changed. Error.Pushback says when to come back.
	ErrRateLimited = errors.New("oncekey: rate limited")
	// ErrInternal: the server failed in a way it should not (INTERNAL: a bug or a damaged stored
	// record). Never retried; report it.
	ErrInternal = errors.New("oncekey: internal server error")
	// ErrDuplicateIntent: the intent guard refused the run (IntentGuardRefuse): the same arguments
	// were claimed under another key of the namespace within the intent window. Nothing ran and
	// nothing was written. errors.As into *DuplicateIntentError for the other keys.
	ErrDuplicateIntent = errors.New("oncekey: duplicate intent")
	// ErrBudgetExhausted: a run of a new child operation beyond its parent's run budget
	// (FAILED_PRECONDITION BUDGET_EXHAUSTED). Nothing ran and nothing was written for the child.
	// Never retried. errors.As into *BudgetExhaustedError for the parent and the cap.
	ErrBudgetExhausted = errors.New("oncekey: run budget exhausted")
	// ErrUnreadableRecord: the record's sealed fields cannot be opened (DATA_LOSS
	// UNREADABLE_RECORD): the key they were sealed with is not in the server's key ring, or the
	// ciphertext was altered or moved. Error.Metadata names the key ("key_id") and the cause
	// ("missing_key" or "tampered"). Never retried: the same read fails the same way until the
	// key ring changes.
	ErrUnreadableRecord = errors.New("oncekey: record cannot be opened")
)

// Error is a failed RPC: the server's (or the transport's) gRPC status, with the ErrorInfo reason
// and, for INVALID_ARGUMENT, the field the google.rpc.BadRequest names.
type Error struct {
	// Code is the gRPC code.
	Code codes.Code
	// Reason is the ErrorInfo reason, e.g. ReasonKeyReused; ReasonUnspecified when the status
	// carries none or one this client does not know (the message names it).
	Reason ErrorReason
	// Field is the field a BadRequest names (INVALID_ARGUMENT only).
	Field string
	// Message is the status message.
	Message string
	// Pushback is how long the server asked to wait before retrying (grpc-retry-pushback-ms or
	// google.rpc.RetryInfo); negative when it asked not to retry; zero when it said nothing.
	Pushback time.Duration
	// Metadata is the ErrorInfo metadata (e.g. `scope` for MISSING_SCOPE; the parent and the cap
	// for BUDGET_EXHAUSTED, also read into *BudgetExhaustedError); nil when there is none.
	Metadata map[string]string

	st        *status.Status
	rawReason string // the reason as sent
}

// Error is "oncekey: CODE REASON: message", the reason left out when it says what the code does
// (NOT_FOUND NOT_FOUND).
func (e *Error) Error() string {
	if code := codeName(e.Code); e.rawReason != "" && e.rawReason != code {
		return fmt.Sprintf("oncekey: %s %s: %s", code, e.rawReason, e.Message)
	}
	return fmt.Sprintf("oncekey: %s: %s", codeName(e.Code), e.Message)
}

// GRPCStatus lets status.FromError and status.Code read the status.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Is matches the sentinel the status stands for: its reason's (see ErrorReason), or its code's.
func (e *Error) Is(target error) bool {
	if s := reasonSentinels[e.Reason]; s != nil && s == target {
		return true
	}
	switch target {
	case ErrUnavailable:
		return e.Code == codes.Unavailable || e.Code == codes.DeadlineExceeded
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrInvalidArgument:
		return e.Code == codes.InvalidArgument
	case ErrUnauthenticated:
		return e.Code == codes.Unauthenticated
	case ErrPermissionDenied:
		return e.Code == codes.PermissionDenied
	case ErrRateLimited:
		return e.Code == codes.ResourceExhausted
	case ErrInternal:
		return e.Code == codes.Internal
	case ErrUnreadableRecord:
		return e.Code == codes.DataLoss
	}
	return false
}

// transient reports whether resending the identical request may cure the failure: UNAVAILABLE,
// DEADLINE_EXCEEDED (an attempt timed out) and RESOURCE_EXHAUSTED (rate limited). Never
// INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED or FAILED_PRECONDITION, nor a spent run
// budget (BUDGET_EXHAUSTED), whatever its code: only a new parent makes room.
func (e *Error) transient() bool {
	if e.Reason == ReasonBudgetExhausted {
		return false
	}
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
				e.rawReason = d.GetReason()
				e.Reason = parseReason(e.rawReason)
				e.Metadata = d.GetMetadata()
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

// asError converts err to an *Error (or its reason's own type, see typed) when it carries a gRPC
// status, else returns it unchanged.
func asError(err error) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	if st, ok := status.FromError(err); ok {
		return fromStatus(st).typed()
	}
	return err
}

// Reason returns the ErrorInfo reason of err (e.g. ReasonKeyReused), or ReasonUnspecified when it
// has none.
func Reason(err error) ErrorReason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if st, ok := status.FromError(err); ok {
		return fromStatus(st).Reason
	}
	return ReasonUnspecified
}

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
