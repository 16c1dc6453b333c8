package oncekey

// ErrorInfo reasons, read through the proto's ErrorReason (the one list of reasons;
// docs/api.md#errors): the wire string is the value's name without ERROR_REASON_. Every reason
// maps to the sentinel errors.Is matches it with; TestEveryErrorReasonIsMapped walks the enum.

import (
	"strings"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// ErrorReason is the google.rpc.ErrorInfo reason of a failed RPC: a value of the proto's
// oncekey.v1.ErrorReason. ReasonUnspecified when the status carries none, or one this client
// does not know (*Error's message still names it).
type ErrorReason int32

// The reasons (docs/api.md#errors).
const (
	// ReasonUnspecified: no reason, or one newer than this client.
	ReasonUnspecified = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	// ReasonInvalidField: a field is missing, malformed or out of range (Error.Field names it).
	ReasonInvalidField = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_INVALID_FIELD)
	// ReasonTooLarge: a field exceeds its limit (Error.Field names it).
	ReasonTooLarge = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_TOO_LARGE)
	// ReasonKeyReused: the key was first claimed with other arguments.
	ReasonKeyReused = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_KEY_REUSED)
	// ReasonLeaseLost: the lease token is not the record's current one.
	ReasonLeaseLost = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_LEASE_LOST)
	// ReasonAlreadySettled: this token already settled the record differently.
	ReasonAlreadySettled = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_ALREADY_SETTLED)
	// ReasonNotFound: the record is absent or expired.
	ReasonNotFound = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	// ReasonUnauthenticated: a missing, unknown or revoked bearer token.
	ReasonUnauthenticated = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED)
	// ReasonPermissionDenied: valid credentials that do not allow the request.
	ReasonPermissionDenied = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED)
	// ReasonStoreUnavailable: the server's store cannot answer; retry with the same key.
	ReasonStoreUnavailable = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_STORE_UNAVAILABLE)
	// ReasonRateLimited: the tenant is over an admission limit.
	ReasonRateLimited = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
	// ReasonKeepAliveReplaced: a newer KeepAlive stream for the same lease replaced this one.
	ReasonKeepAliveReplaced = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_KEEPALIVE_REPLACED)
	// ReasonNotAwaitingApproval: an Approve or Reject of an operation that does not await approval.
	ReasonNotAwaitingApproval = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_NOT_AWAITING_APPROVAL)
	// ReasonUnsettledAtMostOnce: a Purge of an unsettled at-most-once operation without force.
	ReasonUnsettledAtMostOnce = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_UNSETTLED_AT_MOST_ONCE)
	// ReasonMissingScope: the token lacks the scope the RPC needs.
	ReasonMissingScope = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_MISSING_SCOPE)
	// ReasonInternal: the server could not read a stored record (a bug or damaged data).
	ReasonInternal = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_INTERNAL)
	// ReasonBudgetExhausted: a Claim of a new child operation beyond its parent's run budget.
	ReasonBudgetExhausted = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_BUDGET_EXHAUSTED)
	// ReasonUnreadableRecord: the record's sealed fields cannot be opened (its key is not in the
	// server's key ring, or the ciphertext was altered or moved); Error.Metadata has key_id and
	// cause.
	ReasonUnreadableRecord = ErrorReason(oncekeyv1.ErrorReason_ERROR_REASON_UNREADABLE_RECORD)
)

// reasonPrefix is the prefix of the proto's value names that the wire string leaves out.
var reasonPrefix = strings.TrimSuffix(oncekeyv1.ErrorReason_ERROR_REASON_UNSPECIFIED.String(), "UNSPECIFIED")

// String is the reason as the wire spells it, e.g. "KEY_REUSED"; "" for ReasonUnspecified.
func (r ErrorReason) String() string {
	if r == ReasonUnspecified {
		return ""
	}
	return strings.TrimPrefix(oncekeyv1.ErrorReason(r).String(), reasonPrefix)
}

// MarshalText writes the wire string (so JSON shows "KEY_REUSED", not a number).
func (r ErrorReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// parseReason reads an ErrorInfo reason: ReasonUnspecified for one this client does not know.
func parseReason(wire string) ErrorReason {
	if wire == "" {
		return ReasonUnspecified
	}
	return ErrorReason(oncekeyv1.ErrorReason_value[reasonPrefix+wire])
}

// reasonSentinels is the sentinel each reason matches. KEEPALIVE_REPLACED has none: the
// keep-alive loop stops on it and never returns it.
var reasonSentinels = map[ErrorReason]error{
	ReasonInvalidField:        ErrInvalidArgument,
	ReasonTooLarge:            ErrInvalidArgument,
	ReasonKeyReused:           ErrKeyReused,
	ReasonLeaseLost:           ErrLeaseLost,
	ReasonAlreadySettled:      ErrLeaseLost,
	ReasonNotFound:            ErrNotFound,
	ReasonUnauthenticated:     ErrUnauthenticated,
	ReasonPermissionDenied:    ErrPermissionDenied,
	ReasonStoreUnavailable:    ErrUnavailable,
	ReasonRateLimited:         ErrRateLimited,
	ReasonKeepAliveReplaced:   nil,
	ReasonNotAwaitingApproval: ErrNotAwaitingApproval,
	ReasonUnsettledAtMostOnce: ErrUnsettledAtMostOnce,
	ReasonMissingScope:        ErrMissingScope,
	ReasonInternal:            ErrInternal,
	ReasonBudgetExhausted:     ErrBudgetExhausted,
	ReasonUnreadableRecord:    ErrUnreadableRecord,
}
