package oncekey

// Do's lease handling against an in-process Ledger that scripts its answers: a Claim whose answer
// was lost, and KeepAlive streams that end in the ways the server ends them.

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// scripted acquires on the first Claim; KeepAlive streams end with ends[0], ends[1], ... after one
// renewal, then stay open.
type scripted struct {
	oncekeyv1.UnimplementedLedgerServer
	mu         sync.Mutex
	loseAnswer bool   // the first Claim acquires but answers UNAVAILABLE, as if the answer was lost
	owner      string // the owner of the first Claim
	claims     int
	waits      []bool // whether each Claim asked to wait
	opens      int
	ends       []error
	completed  []uint64
}

func (s *scripted) Claim(_ context.Context, req *oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims++
	s.waits = append(s.waits, req.GetWait() != nil)
	lease := &oncekeyv1.Lease{Token: 5, Attempt: 1, ExpiresAt: timestamppb.New(time.Now().Add(time.Minute))}
	if s.claims == 1 {
		s.owner = req.GetOwner()
		if s.loseAnswer {
			return nil, status.Error(codes.Unavailable, "the answer was lost")
		}
		return &oncekeyv1.ClaimResponse{Outcome: oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED, Lease: lease}, nil
	}
	return &oncekeyv1.ClaimResponse{
		Outcome: oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_IN_PROGRESS,
		Record: &oncekeyv1.Record{Status: oncekeyv1.RecordStatus_RECORD_STATUS_PROCESSING, FencingToken: 5, Attempt: 1,
			LeaseOwner: s.owner, LeaseExpiresAt: lease.GetExpiresAt()},
	}, nil
}

func (s *scripted) KeepAlive(stream grpc.BidiStreamingServer[oncekeyv1.KeepAliveRequest, oncekeyv1.Lease]) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.opens++
	var end error
	if len(s.ends) > 0 {
		end, s.ends = s.ends[0], s.ends[1:]
	}
	s.mu.Unlock()
	if err := stream.Send(&oncekeyv1.Lease{Token: req.GetLeaseToken(), ExpiresAt: timestamppb.Now()}); err != nil {
		return err
	}
	if end != nil {
		return end
	}
	<-stream.Context().Done()
	return nil
}

func (s *scripted) Complete(_ context.Context, req *oncekeyv1.CompleteRequest) (*oncekeyv1.CompleteResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completed = append(s.completed, req.GetLeaseToken())
	return &oncekeyv1.CompleteResponse{Record: &oncekeyv1.Record{Status: oncekeyv1.RecordStatus_RECORD_STATUS_SUCCEEDED}}, nil
}

func serveScripted(t *testing.T, s *scripted) *Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	oncekeyv1.RegisterLedgerServer(srv, s)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	c, err := Dial(l.Addr().String(), WithRetryPolicy(fast))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func reasonError(code codes.Code, reason string) error {
	st, _ := status.New(code, reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain})
	return st.Err()
}

// A retried Claim whose first answer was lost finds the record held under this run's own owner:
// the lease is this run's, and the function runs under it.
func TestARetriedClaimRecognizesItsOwnLease(t *testing.T) {
	s := &scripted{loseAnswer: true}
	c := serveScripted(t, s)
	var token uint64
	_, err := Do(context.Background(), c, Key("n", "k"), "a", func(ctx context.Context) (int, error) {
		token = LeaseFrom(ctx).Token()
		return 1, nil
	})
	if err != nil || token != 5 || s.claims != 2 || len(s.completed) != 1 || s.completed[0] != 5 {
		t.Fatalf("%v: token %d, %d claims, completed %v", err, token, s.claims, s.completed)
	}
	// The retry must not ask to wait: the server would hold it on this run's own lease.
	if s.waits[0] || s.waits[1] {
		t.Fatalf("claims asked to wait: %v", s.waits)
	}
}

// Transport trouble reopens the stream; a stream replaced by a newer one stops without reopening
// and without losing the lease; LEASE_LOST loses it.
func TestKeepAliveEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ends      []error
		opens     int
		cancelled bool
	}{
		{"reopened after transport errors", []error{status.Error(codes.Unavailable, "restart"), status.Error(codes.Internal, "reset")}, 3, false},
		{"replaced stops without reopening", []error{reasonError(codes.Aborted, ReasonKeepAliveReplaced.String())}, 1, false},
		{"lease lost", []error{reasonError(codes.FailedPrecondition, ReasonLeaseLost.String())}, 1, true},
		{"already settled is lost too", []error{reasonError(codes.FailedPrecondition, ReasonAlreadySettled.String())}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{ends: tc.ends}
			c := serveScripted(t, s)
			_, err := Do(context.Background(), c, Key("n", "k"), "a", func(ctx context.Context) (int, error) {
				deadline := time.After(3 * time.Second)
				for {
					s.mu.Lock()
					opens := s.opens
					s.mu.Unlock()
					select {
					case <-ctx.Done():
						return 0, ctx.Err()
					case <-deadline:
						if opens != tc.opens {
							t.Errorf("%d streams opened, want %d", opens, tc.opens)
						}
						return 1, nil
					case <-time.After(20 * time.Millisecond):
					}
				}
			}, LeaseTTL(time.Second))
			if tc.cancelled != errors.Is(err, ErrLeaseLost) {
				t.Fatalf("lease lost: %v", err)
			}
			if !tc.cancelled && (err != nil || len(s.completed) != 1) {
				t.Fatalf("%v, completed %v", err, s.completed)
			}
			if tc.cancelled && len(s.completed) != 0 {
				t.Fatalf("completed a lost lease: %v", s.completed)
			}
		})
	}
}
