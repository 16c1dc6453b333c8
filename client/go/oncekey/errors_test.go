package oncekey

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestReason(t *testing.T) {
	st, err := status.New(codes.FailedPrecondition, "key reused").WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonKeyReused.String(), Domain: ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	if got := Reason(st.Err()); got != ReasonKeyReused {
		t.Fatalf("Reason = %v", got)
	}
	if got := Reason(errors.New("plain")); got != ReasonUnspecified {
		t.Fatalf("Reason of a plain error = %v", got)
	}
	if got := Reason(status.Error(codes.Unavailable, "no details")); got != ReasonUnspecified {
		t.Fatalf("Reason without details = %v", got)
	}
}
