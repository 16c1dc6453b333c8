package oncekey

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestErrorMessagesSayTheirThingOnce pins the text of every typed error: each says what happened
// once, with "oncekey:" once at the front, never its cause's words again.
func TestErrorMessagesSayTheirThingOnce(t *testing.T) {
	withReason := func(code codes.Code, reason, msg string) *Error {
		st, _ := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain})
		return fromStatus(st)
	}
	unavailable := fromStatus(status.New(codes.Unavailable, "no connection to the server within 5s (connecting)"))
	settleTimeout := (&Client{settleTimeout: time.Minute}).settleError(expired(t), &Lease{token: 2}, nil, context.DeadlineExceeded)
	for _, c := range []struct {
		err  error
		want string
	}{
		{&LeaseLostError{Token: 5, Err: ErrLeaseLost},
			"oncekey: the lease (token 5) was lost before the outcome was recorded"},
		{&LeaseLostError{Token: 5, Err: fmt.Errorf("charge: %w", ErrLeaseLost)},
			"oncekey: the lease (token 5) was lost before the outcome was recorded"},
		{&LeaseLostError{Token: 5, Err: context.Canceled},
			"oncekey: the lease (token 5) was lost before the outcome was recorded"},
		{&LeaseLostError{Token: 5, Err: errors.New("card declined")},
			"oncekey: the lease (token 5) was lost before the outcome was recorded: card declined"},
		{&LeaseLostError{Token: 3, Lapsed: true},
			"oncekey: the lease (token 3) had run out before the Claim's answer arrived; the operation did not run"},
		{withReason(codes.NotFound, "NOT_FOUND", "no such record"), "oncekey: NOT_FOUND: no such record"},
		{withReason(codes.FailedPrecondition, "KEY_REUSED", "the key was first claimed with different arguments"),
			"oncekey: FAILED_PRECONDITION KEY_REUSED: the key was first claimed with different arguments"},
		{unavailable, "oncekey: UNAVAILABLE: no connection to the server within 5s (connecting)"},
		{&UnsettledError{Err: unavailable},
			"oncekey: the outcome could not be recorded: UNAVAILABLE: no connection to the server within 5s (connecting)"},
		{&UnsettledError{Err: unavailable, FuncErr: errors.New("card declined")},
			"card declined; oncekey: the failure could not be recorded: UNAVAILABLE: no connection to the server within 5s (connecting)"},
		{&UnsettledError{Err: errLeftToReconciliation, FuncErr: context.Canceled},
			"context canceled; oncekey: the cancelled at-most-once operation may have had its effect, so it was not released: it needs reconciliation once its lease runs out"},
		{settleTimeout, "oncekey: the outcome could not be recorded: no answer within the settle timeout (1m0s)"},
		{&OperationFailedError{Code: 403, Message: "checked by finance"}, "oncekey: operation failed (code 403): checked by finance"},
		{&OperationFailedError{Message: "card declined"}, "oncekey: operation failed: card declined"},
		{&OperationFailedError{}, "oncekey: operation failed"},
		{&InProgressError{RetryAfter: time.Second}, "oncekey: operation in progress elsewhere (retry after 1s)"},
		{&NeedsReconciliationError{}, "oncekey: operation needs reconciliation"},
		{&AwaitingApprovalError{}, "oncekey: operation awaits approval"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%T:\n got %q\nwant %q", c.err, got, c.want)
		}
	}
	if !errors.Is(settleTimeout, ErrUnavailable) {
		t.Errorf("a settle that timed out is not ErrUnavailable: %v", settleTimeout)
	}
}

func expired(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	t.Cleanup(cancel)
	<-ctx.Done()
	return ctx
}
