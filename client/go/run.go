package oncekey

import (
	"context"
	"errors"
	"fmt"
	"io"

	oncekeyv1 "oncekey.dev/oncekey/client/go/gen/oncekey/v1"
)

// Outcome is the result of Run.
type Outcome struct {
	// Result is the operation's result: the one fn returned, or the stored one replayed.
	Result *oncekeyv1.OperationResult
	// Replayed is true when fn did not run because the operation had already succeeded.
	Replayed bool
}

// Func performs the side effect while the caller holds the lease. ctx is cancelled when the lease
// is lost. A *FinalError fails the key for good; any other error releases it for a retry.
type Func func(ctx context.Context, lease *oncekeyv1.Lease) (*oncekeyv1.OperationResult, error)

// Run claims req's key and performs fn only when the claim acquired it, keeping the lease alive
// over the KeepAlive stream meanwhile, then completes (or fails) the key with fn's outcome. When
// the operation already succeeded, Run returns the stored result without calling fn. Set
// req.Wait to have duplicates of an in-flight operation wait for its outcome.
func (c *Client) Run(ctx context.Context, req *oncekeyv1.ClaimRequest, fn Func) (*Outcome, error) {
	claimed, err := c.Ledger.Claim(ctx, req)
	if err != nil {
		return nil, err
	}
	switch claimed.GetOutcome() {
	case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED:
	case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_COMPLETED:
		return &Outcome{Result: claimed.GetRecord().GetResult(), Replayed: true}, nil
	case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_FAILED:
		return nil, &OperationFailedError{Err: claimed.GetRecord().GetError()}
	case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_IN_PROGRESS:
		return nil, ErrInProgress
	case oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_NEEDS_RECONCILIATION:
		return nil, ErrNeedsReconciliation
	default:
		return nil, fmt.Errorf("oncekey: unknown claim outcome %v", claimed.GetOutcome())
	}
	lease := claimed.GetLease()
	ns, key := req.GetNamespace(), req.GetKey()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kaDone := c.keepAlive(runCtx, cancel, &oncekeyv1.KeepAliveRequest{
		Namespace: ns, Key: key, LeaseToken: lease.GetToken(), LeaseTtl: req.GetLeaseTtl(),
	})
	result, fnErr := fn(runCtx, lease)
	cancel(nil) // closes the keep-alive stream before settling
	<-kaDone

	if fnErr != nil {
		fail := &oncekeyv1.FailRequest{
			Namespace: ns, Key: key, LeaseToken: lease.GetToken(),
			Error:       &oncekeyv1.OperationError{Message: fnErr.Error()},
			Disposition: oncekeyv1.Disposition_DISPOSITION_RETRYABLE,
		}
		var final *FinalError
		if errors.As(fnErr, &final) {
			fail.Error = &oncekeyv1.OperationError{Code: final.Code, Message: final.Message, Details: final.Details}
			fail.Disposition = oncekeyv1.Disposition_DISPOSITION_FINAL
		}
		if _, err := c.Ledger.Fail(ctx, fail); err != nil {
			return nil, errors.Join(fnErr, err)
		}
		if final != nil {
			return nil, &OperationFailedError{Err: fail.Error}
		}
		return nil, fnErr
	}
	if result == nil {
		result = &oncekeyv1.OperationResult{}
	}
	if _, err := c.Ledger.Complete(ctx, &oncekeyv1.CompleteRequest{
		Namespace: ns, Key: key, LeaseToken: lease.GetToken(), Result: result,
	}); err != nil {
		return nil, err
	}
	return &Outcome{Result: result}, nil
}

// keepAlive holds a KeepAlive stream open until ctx ends; if the server ends it first (the lease
// was lost), it cancels ctx with the stream's error so that fn stops.
func (c *Client) keepAlive(ctx context.Context, cancel context.CancelCauseFunc, req *oncekeyv1.KeepAliveRequest) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		stream, err := c.Ledger.KeepAlive(ctx)
		if err == nil {
			err = stream.Send(req)
		}
		for err == nil {
			_, err = stream.Recv()
		}
		if ctx.Err() != nil {
			return // Run closed the stream
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("oncekey: keep-alive ended: lease lost")
		}
		cancel(err)
	}()
	return done
}
