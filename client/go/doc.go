// Package oncekey is the Go client of Oncekey, the shared idempotency ledger.
//
// Dial connects to a server; Client.Run claims a key, runs the side effect only when the claim
// acquired it (keeping the lease alive over the KeepAlive stream meanwhile), then completes or
// fails the key, and replays the stored outcome to every later run with the same key. Fingerprint
// computes the RFC 8785 fingerprint of an operation's arguments; Reason reads the
// google.rpc.ErrorInfo reason of an error. Client.Ledger is the generated oncekey.v1 client for
// full control over each RPC.
package oncekey
