package oncekey

// MakeIdempotent: wraps a function once so that every call site runs it once per key, without
// repeating the key and the arguments. By default a call's arguments and key follow the one
// convention of every Oncekey client library (docs/api.md#default-arguments-and-key), so the same
// call claimed from Python, TypeScript, Rust or Go is one operation.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
)

// WrapOption configures MakeIdempotent: KeyFunc, ArgsFunc, or any RunOption (LeaseTTL,
// AtMostOnce, WaitTimeout, ...), which applies to every call.
type WrapOption interface{ applyWrap(*wrapOptions) }

type wrapOptions struct {
	run    []RunOption
	keyFn  any // func(A) string or func(A) OperationKey
	argsFn any // func(A) any
}

func (o RunOption) applyWrap(w *wrapOptions) { w.run = append(w.run, o) }

type wrapOptionFunc func(*wrapOptions)

func (f wrapOptionFunc) applyWrap(w *wrapOptions) { f(w) }

// KeyFunc sets the key of a call from its argument: a string is the key in the wrapper's
// namespace, taken verbatim (RawKey); an OperationKey is used as it is (its namespace and parent
// included). Give a key when one intent may carry other arguments: the same key with other
// arguments is then refused with ErrKeyReused instead of being another operation. A is the wrapped
// function's argument type (MakeIdempotent panics when it is not).
func KeyFunc[A any, K string | OperationKey](f func(A) K) WrapOption {
	return wrapOptionFunc(func(w *wrapOptions) { w.keyFn = f })
}

// ArgsFunc sets the significant arguments of a call, fingerprinted (any value encoding/json
// marshals) instead of the default [a]. Leave out what differs between retries of one intent
// (request ids, timestamps, attempt numbers). A is the wrapped function's argument type
// (MakeIdempotent panics when it is not).
func ArgsFunc[A any](f func(A) any) WrapOption {
	return wrapOptionFunc(func(w *wrapOptions) { w.argsFn = f })
}

// MakeIdempotent wraps fn so that its side effect runs once per key in namespace: call the result
// as you would call fn.
//
//	send := oncekey.MakeIdempotent(client, "email.send", sendEmail)
//	receipt, err := send(ctx, Email{To: "ada@example.com", Subject: "Your ticket #481"})
//
// By default a call's fingerprinted arguments are the JSON array [a] (just [] when a marshals to
// null) and its key is "sha256:" with the hex fingerprint of that array, the convention of every
// Oncekey client library (CallArguments, CallKey): equal arguments are one operation. KeyFunc and
// ArgsFunc choose them from a instead; RunOptions apply to every call. Each call behaves as Do:
// fn runs only when the claim acquires the key, with the lease in its context (LeaseFrom), and
// the errors are Do's. A KeyFunc or ArgsFunc for another argument type than A panics here.
func MakeIdempotent[A, R any](c *Client, namespace string, fn func(context.Context, A) (R, error), opts ...WrapOption) func(context.Context, A) (R, error) {
	run := MakeIdempotentRun(c, namespace, fn, opts...)
	return func(ctx context.Context, a A) (R, error) {
		r, err := run(ctx, a)
		return r.Value, err
	}
}

// MakeIdempotentRun is MakeIdempotent whose calls, like Run, also say whether the value was
// replayed and give the record.
func MakeIdempotentRun[A, R any](c *Client, namespace string, fn func(context.Context, A) (R, error), opts ...WrapOption) func(context.Context, A) (Result[R], error) {
	var w wrapOptions
	for _, opt := range opts {
		opt.applyWrap(&w)
	}
	keyOf := wrapKeyFunc[A](namespace, w.keyFn)
	var argsOf func(A) any
	if w.argsFn != nil {
		f, ok := w.argsFn.(func(A) any)
		if !ok {
			panic(fmt.Sprintf("oncekey.MakeIdempotent: ArgsFunc is a %T; the wrapped function takes a %v",
				w.argsFn, reflect.TypeFor[A]()))
		}
		argsOf = f
	}
	namespaceErr := Key(namespace, "probe").Err()
	return func(ctx context.Context, a A) (Result[R], error) {
		if namespaceErr != nil {
			return Result[R]{}, namespaceErr
		}
		var args any
		if argsOf != nil {
			args = argsOf(a)
		} else {
			call, err := CallArguments(a)
			if err != nil {
				return Result[R]{}, err
			}
			args = call
		}
		fp, err := Fingerprint(args)
		if err != nil {
			return Result[R]{}, err
		}
		key := RawKey(namespace, keyFromFingerprint(fp))
		if keyOf != nil {
			key = keyOf(a)
		}
		if key.err != nil {
			return Result[R]{}, key.err
		}
		return execute(ctx, c, key, fp, false, func(ctx context.Context) (R, error) { return fn(ctx, a) }, w.run)
	}
}

// wrapKeyFunc is the key function a KeyFunc gave, for argument type A (nil without one).
func wrapKeyFunc[A any](namespace string, keyFn any) func(A) OperationKey {
	switch f := keyFn.(type) {
	case nil:
		return nil
	case func(A) string:
		return func(a A) OperationKey { return RawKey(namespace, f(a)) }
	case func(A) OperationKey:
		return f
	}
	panic(fmt.Sprintf("oncekey.MakeIdempotent: KeyFunc is a %T; the wrapped function takes a %v",
		keyFn, reflect.TypeFor[A]()))
}

// CallArguments returns the default fingerprinted arguments of a call with these argument values,
// in the function's parameter order (without its context.Context): each value as encoding/json
// marshals it ([]byte as standard base64 with padding), trailing values that marshal to null (nil
// pointers, maps, slices, interfaces) dropped, so that a last argument left nil and one left out
// agree. docs/api.md#default-arguments-and-key; tests/vectors/arguments.json pins it.
func CallArguments(values ...any) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(values))
	for i, v := range values {
		text, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("oncekey: argument %d: %w", i, err)
		}
		out[i] = text
	}
	for len(out) > 0 && string(out[len(out)-1]) == "null" {
		out = out[:len(out)-1]
	}
	return out, nil
}

// CallKey returns the default key of a call with these argument values: "sha256:" and the 64
// lowercase hex digits of the fingerprint of CallArguments(values...). A number the fingerprint
// cannot keep exactly is refused with an *InexactNumberError (docs/api.md#numbers).
func CallKey(values ...any) (string, error) {
	args, err := CallArguments(values...)
	if err != nil {
		return "", err
	}
	fp, err := Fingerprint(args)
	if err != nil {
		return "", err
	}
	return keyFromFingerprint(fp), nil
}

func keyFromFingerprint(fp []byte) string { return "sha256:" + hex.EncodeToString(fp) }
