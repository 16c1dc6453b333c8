package oncekey

// Running an acquired operation and recording its outcome: the function runs under a context that
// the caller's cancellation and a lost lease both cancel, while the lease is kept alive; then the
// outcome is recorded (Complete with the result, or Fail with the disposition the error chooses) on
// the client's own settle deadline, never the caller's, so that a caller who gave up still
// releases its key. The caller gets the function's own error back, not the settle's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"unicode/utf8"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// maxMessageBytes is the longest error message stored; longer ones are cut.
const maxMessageBytes = 16 * 1024

// jsonContentType is the content type of results stored as JSON.
const jsonContentType = "application/json"

// FailureError says how an error of the function settles the operation; any other error is
// retryable. Build it with Final or Abandon, or directly to also store a code and details.
type FailureError struct {
	// Err is the function's error; its message is stored.
	Err error
	// Disposition is how the failure settles the operation.
	Disposition Disposition
	// Code is the caller's own error code, stored with the failure.
	Code int32
	// Details are opaque details stored with the failure (at most 64 KiB).
	Details []byte
}

func (e *FailureError) Error() string {
	if e.Err == nil {
		return "operation failed"
	}
	return e.Err.Error()
}

func (e *FailureError) Unwrap() error { return e.Err }

// Final marks err as a failure for good: the key is failed and every later run of it gets the
// stored error (ErrOperationFailed) without running. Final(nil) is nil.
func Final(err error) error {
	if err == nil {
		return nil
	}
	return &FailureError{Err: err, Disposition: DispositionFinal}
}

// Abandon marks err as a failure before any side effect (e.g. the arguments did not validate): the
// record is deleted and the key may be claimed again, even with other arguments. Abandon(nil) is
// nil.
func Abandon(err error) error {
	if err == nil {
		return nil
	}
	return &FailureError{Err: err, Disposition: DispositionAbandon}
}

// acquired runs fn under lease, keeping it alive, then records the outcome.
func acquired[T any](ctx context.Context, c *Client, key OperationKey, lease *Lease, o *runOptions,
	fn func(context.Context) (T, error)) (Result[T], error) {
	var zero Result[T]
	runCtx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, lease))
	defer cancel(nil)

	// The keep-alive outlives the caller's cancellation: the function may still be performing
	// the effect, and it stops only when the function has returned.
	kaCtx, stopKeepAlive := context.WithCancel(context.WithoutCancel(ctx))
	kaDone := make(chan struct{})
	var lost atomic.Pointer[Error]
	go func() {
		defer close(kaDone)
		c.keepAlive(kaCtx, lease, o.leaseTTL, func(e *Error) {
			lost.Store(e)
			lease.markLost()
			cancel(ErrLeaseLost)
		})
	}()
	value, fnErr, panicked := invoke(runCtx, fn)
	stopKeepAlive() // before settling, so the keep-alive never sees our own settle
	<-kaDone

	if e := lost.Load(); e != nil {
		// The server already refused this lease; a settle would only be refused again.
		return zero, &LeaseLostError{Token: lease.token, Err: fnErr, cause: e}
	}
	if o.semantics == SemanticsAtMostOnce && panicked == nil && callerCancelled(ctx, fnErr) {
		// The function may have reached the remote side before it stopped, and cannot say: the
		// key is not released (the next run would repeat the effect). Its lease runs out and the
		// operation then needs reconciliation.
		c.log.Warn("oncekey: an at-most-once run was cancelled by its caller; its outcome is left to reconciliation",
			slog.String("namespace", key.namespace), slog.Uint64("token", lease.token))
		return zero, &UnsettledError{Err: errLeftToReconciliation, FuncErr: fnErr}
	}
	settleCtx, cancelSettle := context.WithTimeout(context.WithoutCancel(ctx), c.settleTimeout)
	defer cancelSettle()
	if fnErr != nil {
		err := c.fail(settleCtx, key, lease, fnErr)
		if panicked != nil {
			panic(panicked)
		}
		return zero, err
	}
	raw, err := encode(value)
	if err != nil {
		final := Final(fmt.Errorf("oncekey: the result cannot be stored: %w", err))
		return zero, c.fail(settleCtx, key, lease, final)
	}
	res, err := c.Complete(settleCtx, &oncekeyv1.CompleteRequest{
		Namespace: key.namespace, Key: key.key, LeaseToken: lease.token, Result: raw.toProto(),
	})
	if err != nil {
		return zero, c.settleError(settleCtx, lease, nil, err)
	}
	return Result[T]{Value: value, Record: recordFromProto(res.GetRecord())}, nil
}

// callerCancelled: the caller's context ended and the function returned that as a plain error
// (not a *FailureError, which says how to settle).
func callerCancelled(ctx context.Context, fnErr error) bool {
	var f *FailureError
	return ctx.Err() != nil && fnErr != nil && !errors.As(fnErr, &f) &&
		(errors.Is(fnErr, context.Canceled) || errors.Is(fnErr, context.DeadlineExceeded))
}

// invoke calls fn, turning a panic into an error (re-raised once the key is released).
func invoke[T any](ctx context.Context, fn func(context.Context) (T, error)) (v T, err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
			err = fmt.Errorf("oncekey: the operation panicked: %v", p)
		}
	}()
	v, err = fn(ctx)
	return v, err, nil
}

// fail records fnErr with the disposition it asks for and returns what the caller should see:
// fnErr itself once recorded.
func (c *Client) fail(ctx context.Context, key OperationKey, lease *Lease, fnErr error) error {
	req := &oncekeyv1.FailRequest{
		Namespace: key.namespace, Key: key.key, LeaseToken: lease.token,
		Error:       &oncekeyv1.OperationError{Message: truncate(fnErr.Error(), maxMessageBytes)},
		Disposition: oncekeyv1.Disposition_DISPOSITION_RETRYABLE,
	}
	var f *FailureError
	if errors.As(fnErr, &f) {
		req.Disposition = oncekeyv1.Disposition(f.Disposition)
		req.Error.Code, req.Error.Details = f.Code, f.Details
	}
	if _, err := c.Fail(ctx, req); err != nil {
		return c.settleError(ctx, lease, fnErr, err)
	}
	return fnErr
}

// settleError is what a failed Complete or Fail means to the caller.
func (c *Client) settleError(ctx context.Context, lease *Lease, fnErr, err error) error {
	var e *Error
	if errors.As(err, &e) && errors.Is(e, ErrLeaseLost) {
		return &LeaseLostError{Token: lease.token, Err: fnErr, cause: e}
	}
	if ctx.Err() != nil {
		err = &settleTimeoutError{timeout: c.settleTimeout}
	}
	return &UnsettledError{Err: err, FuncErr: fnErr}
}

// encode is the stored form of a result: Raw as is, anything else as JSON.
func encode[T any](v T) (Raw, error) {
	switch r := any(v).(type) {
	case Raw:
		return r, nil
	case *Raw:
		if r != nil {
			return *r, nil
		}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return Raw{}, err
	}
	return Raw{Body: body, ContentType: jsonContentType}, nil
}

// decode is the value of a stored result: Raw as is, anything else from JSON.
func decode[T any](r Raw) (T, error) {
	var v T
	switch p := any(&v).(type) {
	case *Raw:
		*p = r
		return v, nil
	case **Raw:
		*p = &r
		return v, nil
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		return v, &DecodeError{Err: err, Result: r}
	}
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
