// Package oncekey is the Go client of Oncekey, the shared idempotency ledger: a side effect
// (charge a card, send an email, create a task) runs at most once per key, and every retry of the
// same intent gets the stored outcome instead of a second effect.
//
// Dial connects to a server. Do is the one-line way to make a function idempotent: it claims the
// key, runs the function only when the claim acquired it (the server keeps its lease alive
// meanwhile, across restarts of the server), records the result as JSON and replays it to every
// later run of the key. Run also says whether the value was replayed; Reconcile settles an
// at-most-once operation whose outcome is unknown.
//
// Transient failures (UNAVAILABLE, timeouts, rate limits) are retried with exponential backoff and
// full jitter, honouring the server's pushback; the outcome is recorded on the client's own
// deadline, so a cancelled call still releases its key. Errors are typed: match them with
// errors.Is against ErrKeyReused, ErrLeaseLost, ErrInProgress, ErrNeedsReconciliation,
// ErrOperationFailed and ErrUnavailable, or errors.As into *Error, *InProgressError,
// *OperationFailedError and *LeaseLostError for details.
//
// Key builds deterministic operation keys (with Child and ChildIn for steps of a parent
// operation); Fingerprint computes the RFC 8785 fingerprint of arguments. Client.Claim,
// Client.Complete, Client.Fail and Client.Renew send one RPC each with retries, and Client.Ledger
// is the generated oncekey.v1 client, for full control.
package oncekey
