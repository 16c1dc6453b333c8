package oncekey

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	oncekeyv1 "oncekey.dev/oncekey/client/go/gen/oncekey/v1"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every Oncekey error.
const ErrorDomain = "oncekey"

// The ErrorInfo reasons of Oncekey errors (CONTRACT §7).
const (
	ReasonInvalidField     = "INVALID_FIELD"
	ReasonTooLarge         = "TOO_LARGE"
	ReasonKeyReused        = "KEY_REUSED"
	ReasonLeaseLost        = "LEASE_LOST"
	ReasonAlreadySettled   = "ALREADY_SETTLED"
	ReasonNotFound         = "NOT_FOUND"
	ReasonUnauthenticated  = "UNAUTHENTICATED"
	ReasonPermissionDenied = "PERMISSION_DENIED"
	ReasonStoreUnavailable = "STORE_UNAVAILABLE"
)

// ErrorInfo returns the google.rpc.ErrorInfo that a gRPC error from the server carries, or nil.
func ErrorInfo(err error) *errdetails.ErrorInfo {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// Reason returns the ErrorInfo reason of err (e.g. ReasonKeyReused), or "" when it has none.
func Reason(err error) string {
	if info := ErrorInfo(err); info != nil {
		return info.GetReason()
	}
	return ""
}

// ErrInProgress is returned by Run when another holder is performing the operation and it did
// not settle within the claim's wait.
var ErrInProgress = errors.New("oncekey: operation in progress elsewhere")

// ErrNeedsReconciliation is returned by Run for an at-most-once operation whose outcome is
// unknown: check the outside world, then claim with reconcile.
var ErrNeedsReconciliation = errors.New("oncekey: operation needs reconciliation")

// OperationFailedError is returned by Run when the operation failed for good, now or earlier:
// Err is the stored error (replayed to every later Run of the key).
type OperationFailedError struct {
	Err *oncekeyv1.OperationError
}

func (e *OperationFailedError) Error() string {
	return fmt.Sprintf("oncekey: operation failed: %d %s", e.Err.GetCode(), e.Err.GetMessage())
}

// FinalError marks an error of Run's function as final: the key is failed for good and the error
// is replayed to later runs. Any other error is retryable: the next Run acquires the key again.
type FinalError struct {
	Code    int32
	Message string
	Details []byte
}

func (e *FinalError) Error() string { return fmt.Sprintf("final failure %d: %s", e.Code, e.Message) }
