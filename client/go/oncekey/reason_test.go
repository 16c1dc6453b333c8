package oncekey

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// sentinels are every sentinel a failed RPC can match.
var sentinels = []error{
	ErrInvalidArgument, ErrKeyReused, ErrLeaseLost, ErrNotFound, ErrUnauthenticated,
	ErrPermissionDenied, ErrUnavailable, ErrRateLimited, ErrNotAwaitingApproval,
	ErrUnsettledAtMostOnce, ErrMissingScope, ErrInternal, ErrBudgetExhausted, ErrUnreadableRecord,
}

// TestEveryErrorReasonIsMapped walks the proto's ErrorReason, the one list of reasons: every
// reason a server sends is read back as itself and matches a sentinel by its reason alone (the
// gRPC code UNKNOWN decides nothing), except KEEPALIVE_REPLACED, which the keep-alive loop
// handles and never returns.
func TestEveryErrorReasonIsMapped(t *testing.T) {
	if len(oncekeyv1.ErrorReason_name) < 16 {
		t.Fatalf("the generated ErrorReason has only %d values", len(oncekeyv1.ErrorReason_name))
	}
	for number, name := range oncekeyv1.ErrorReason_name {
		if number == 0 {
			continue
		}
		wire := strings.TrimPrefix(name, "ERROR_REASON_")
		t.Run(wire, func(t *testing.T) {
			st, err := status.New(codes.Unknown, "m").WithDetails(&errdetails.ErrorInfo{Reason: wire, Domain: ErrorDomain})
			if err != nil {
				t.Fatal(err)
			}
			if _, decided := reasonSentinels[parseReason(wire)]; !decided {
				t.Fatalf("%s has no entry in reasonSentinels", wire)
			}
			got := asError(st.Err())
			if r := fmt.Sprint(Reason(got)); r != wire {
				t.Fatalf("Reason = %q, want %q", r, wire)
			}
			var matched []error
			for _, s := range sentinels {
				if errors.Is(got, s) {
					matched = append(matched, s)
				}
			}
			if wire == "KEEPALIVE_REPLACED" {
				if len(matched) != 0 {
					t.Fatalf("KEEPALIVE_REPLACED matches %v", matched)
				}
				return
			}
			if len(matched) == 0 {
				t.Fatalf("%s matches no sentinel", wire)
			}
		})
	}
}

// TestAnUnknownReasonIsKeptVerbatim: a reason newer than this client is not any known one, and
// the error still names it.
func TestAnUnknownReasonIsKeptVerbatim(t *testing.T) {
	st, _ := status.New(codes.FailedPrecondition, "later").WithDetails(&errdetails.ErrorInfo{Reason: "SOMETHING_NEW", Domain: ErrorDomain})
	err := asError(st.Err())
	if Reason(err) != ReasonUnspecified || !strings.Contains(err.Error(), "SOMETHING_NEW") {
		t.Fatalf("Reason %v, message %q", Reason(err), err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			t.Fatalf("an unknown reason matches %v", s)
		}
	}
}
