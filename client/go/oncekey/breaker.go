package oncekey

// A circuit breaker: after FailureThreshold consecutive transient failures (the server or the
// network is down) it refuses new work (Claim, Lookup) at once with an error matching
// ErrUnavailable for CoolDown, then lets one probe through (half-open): its success closes the
// circuit, its failure opens it again. Answers that prove the server is up (any success, or a
// non-transient error such as FAILED_PRECONDITION) reset the count.
//
// Settlements (Complete, Fail, Renew) and KeepAlive never wait on the breaker: refusing to record
// an outcome could let a takeover repeat the side effect. Their answers still count.

import (
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// BreakerPolicy says when the circuit breaker opens and for how long.
type BreakerPolicy struct {
	// FailureThreshold is the number of consecutive transient failures that opens the circuit
	// (default 10); 0 disables the breaker.
	FailureThreshold int
	// CoolDown is how long an open circuit refuses calls before letting one probe through
	// (default 5 s).
	CoolDown time.Duration
}

// DefaultBreakerPolicy opens after 10 consecutive transient failures, for 5 s.
var DefaultBreakerPolicy = BreakerPolicy{FailureThreshold: 10, CoolDown: 5 * time.Second}

type breakerState int

const (
	closed breakerState = iota
	open
	halfOpen
)

type breaker struct {
	policy   BreakerPolicy
	mu       sync.Mutex
	state    breakerState
	failures int
	until    time.Time
}

// admit lets a call through, or refuses it while the circuit is open (or a probe is in flight).
func (b *breaker) admit() error {
	if b.policy.FailureThreshold <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case open:
		if now := time.Now(); now.Before(b.until) {
			return fromStatus(status.Newf(codes.Unavailable,
				"circuit open after %d consecutive failures; next probe in %v", b.failures, b.until.Sub(now).Round(time.Millisecond)))
		}
		b.state = halfOpen
		return nil
	case halfOpen:
		return fromStatus(status.New(codes.Unavailable, "circuit half-open: a probe is in flight"))
	}
	return nil
}

// record counts an answer: failed is true for a transient failure.
func (b *breaker) record(failed bool) {
	if b.policy.FailureThreshold <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !failed {
		b.state, b.failures = closed, 0
		return
	}
	b.failures++
	if b.state != closed || b.failures >= b.policy.FailureThreshold {
		b.state, b.until = open, time.Now().Add(b.policy.CoolDown)
	}
}

// release gives the probe slot back when a probe ended without an answer (its caller went away).
func (b *breaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == halfOpen {
		b.state, b.until = open, time.Now()
	}
}
