// Package oncekey is the Go client of Oncekey, the shared idempotency ledger: a side effect
// (charge a card, send an email, create a task) runs at most once per key, and every retry of the
// same intent gets the stored outcome instead of a second effect. Import it as
// github.com/oncekey/oncekey/client/go/oncekey (module github.com/oncekey/oncekey/client/go).
//
// Dial connects to a server. Do is the one-call way to make a side effect idempotent: it claims
// the key, runs the function only when the claim acquired it (the server keeps its lease alive
// meanwhile, across restarts of the server), records the result as JSON and replays it to every
// later run of the key. Run also says whether the value was replayed; Reconcile settles an
// at-most-once operation whose outcome is unknown.
//
// MakeIdempotent wraps a function once, so that call sites call it as before:
//
//	send := oncekey.MakeIdempotent(client, "email.send", sendEmail)
//	receipt, err := send(ctx, email)
//
// By default a call's fingerprinted arguments are the JSON array [email] and its key is
// "sha256:" with the hex fingerprint of that array, the convention every Oncekey client library
// shares (CallArguments, CallKey), so one call made from two languages is one operation; KeyFunc
// and ArgsFunc choose them instead, and MakeIdempotentRun also says whether a call was replayed.
//
// Client.ListAll iterates over the tenant's records (by namespace, status and parent), page after
// page; Client.ListRecords reads one page; ReconcileRecord settles a listed record whose outcome is
// unknown. Client.Approve, Client.Reject and Client.Purge are the operator's calls.
//
// Agent safety (v1.3): the IntentGuard option (with IntentWindow and RepeatIntent) refuses, or
// flags in Result.IntentMatches, a new key whose arguments another key of the namespace was
// claimed with lately (an agent that made up a fresh key for a retry): a refused run returns a
// *DuplicateIntentError (ErrDuplicateIntent) without running. The Budget option caps how many
// child operations a parent may create: a run of a new child beyond it returns a
// *BudgetExhaustedError (ErrBudgetExhausted), never retried. Client.ListAllDuplicateIntents lists
// what the guard saw.
//
// Transient failures (UNAVAILABLE, timeouts, rate limits) are retried with exponential backoff and
// full jitter, honouring the server's pushback; the outcome is recorded on the client's own
// deadline, so a cancelled call still releases its key (an at-most-once call whose effect may have
// happened is left to reconciliation instead). Errors are typed: match them with errors.Is against
// ErrKeyReused, ErrLeaseLost, ErrInProgress, ErrNeedsReconciliation, ErrOperationFailed,
// ErrAwaitingApproval, ErrDuplicateIntent, ErrBudgetExhausted, ErrInvalidArgument, ErrUnavailable
// and the others, or errors.As into *Error (with its ErrorReason), *InProgressError,
// *OperationFailedError, *LeaseLostError, *DuplicateIntentError, *BudgetExhaustedError and
// *InexactNumberError for details.
//
// Key builds deterministic operation keys (with Child and ChildIn for steps of a parent
// operation); Fingerprint computes the RFC 8785 fingerprint of arguments, refusing numbers it
// cannot keep exactly (beyond ±(2^53−1), or more digits than a double keeps) with their JSON path.
// Client.Claim, Client.Complete, Client.Fail and Client.Renew send one RPC each with retries, and
// Client.Ledger is the generated oncekey.v1 client, for full control.
package oncekey
