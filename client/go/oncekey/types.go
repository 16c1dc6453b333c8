package oncekey

// Native Go views of the ledger's messages (records, results, errors), converted from the
// generated oncekey.v1 types so that user code never handles protobuf on the common path.

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// Status is where an operation stands.
type Status int

// Record statuses.
const (
	StatusUnspecified Status = iota
	// StatusProcessing: acquired by a holder whose side effect is under way.
	StatusProcessing
	// StatusSucceeded: completed; the result is replayed to later runs.
	StatusSucceeded
	// StatusFailed: failed for good; the error is replayed to later runs.
	StatusFailed
	// StatusRetry: released after a retryable failure; the next run acquires it.
	StatusRetry
	// StatusUnknown: an at-most-once operation whose lease ran out; it needs reconciliation.
	StatusUnknown
	// StatusAwaitingApproval: created with RequireApproval; nobody acquires it before someone
	// Approves (or Rejects) it.
	StatusAwaitingApproval
	// StatusApproved: approved; the next run acquires it.
	StatusApproved
)

// Outcome is what a Claim answered (or, for a dry run, would answer).
type Outcome int

// Claim outcomes.
const (
	OutcomeUnspecified Outcome = iota
	// OutcomeAcquired: the caller holds the operation and performs it.
	OutcomeAcquired
	// OutcomeCompleted: it succeeded earlier; the stored result is replayed.
	OutcomeCompleted
	// OutcomeFailed: it failed for good earlier; the stored error is replayed.
	OutcomeFailed
	// OutcomeInProgress: another holder is performing it.
	OutcomeInProgress
	// OutcomeNeedsReconciliation: an at-most-once operation's outcome is unknown.
	OutcomeNeedsReconciliation
	// OutcomeAwaitingApproval: it waits for an approval.
	OutcomeAwaitingApproval
	// OutcomeDuplicateIntent: the intent guard refused it (IntentGuardRefuse): the same arguments
	// were claimed under another key of the namespace within the intent window. Nothing was
	// written; do not perform the effect.
	OutcomeDuplicateIntent
)

// String is the outcome as the server spells it, e.g. "ACQUIRED".
func (o Outcome) String() string {
	return strings.TrimPrefix(oncekeyv1.ClaimOutcome(o).String(), "CLAIM_OUTCOME_")
}

// Decision is what an approver decided.
type Decision int

// Decisions.
const (
	DecisionUnspecified Decision = iota
	// DecisionApproved: the operation may be acquired.
	DecisionApproved
	// DecisionRejected: the operation failed for good (error code 403, message = the note).
	DecisionRejected
)

// String is the decision as the server spells it, e.g. "APPROVED".
func (d Decision) String() string {
	return strings.TrimPrefix(oncekeyv1.ApprovalDecision(d).String(), "APPROVAL_DECISION_")
}

// Approval is the decision on an operation that awaited approval.
type Approval struct {
	Decision Decision
	// DecidedBy is the approver's token label ("dev" on a dev-mode server).
	DecidedBy string
	// Note is the approver's note (a rejection's error message).
	Note      string
	DecidedAt time.Time
}

// String is the status as the server spells it, e.g. "PROCESSING".
func (s Status) String() string {
	return strings.TrimPrefix(oncekeyv1.RecordStatus(s).String(), "RECORD_STATUS_")
}

// Semantics says what a lost lease means for an operation; fixed by the first Claim of a key.
type Semantics int

// Semantics values.
const (
	// SemanticsAtLeastOnce (default): another caller may take over once the lease runs out.
	SemanticsAtLeastOnce Semantics = 1
	// SemanticsAtMostOnce: never run twice; a lease that ran out makes the outcome unknown until
	// reconciled.
	SemanticsAtMostOnce Semantics = 2
)

// Disposition says how a failed run settles the operation.
type Disposition int

// Dispositions.
const (
	// DispositionRetryable (the default for any error): released; the next run acquires it again.
	DispositionRetryable Disposition = 1
	// DispositionFinal: failed for good; the error is replayed to every later run.
	DispositionFinal Disposition = 2
	// DispositionAbandon: deleted; nothing happened outside, and the key may be claimed again,
	// even with other arguments (e.g. validation failed before any side effect).
	DispositionAbandon Disposition = 3
)

// Raw is a stored result as the ledger keeps it. Use it as the result type of Do or Run to store
// and replay bytes (an HTTP response, say) instead of JSON.
type Raw struct {
	// Code is the caller's own status code (e.g. an HTTP status).
	Code int32
	// Body is replayed byte for byte (at most the server's --max-result-bytes, default 1 MiB).
	Body []byte
	// ContentType is the media type of Body.
	ContentType string
	// Metadata holds extra string pairs (at most 32 entries of at most 1 KiB).
	Metadata map[string]string
}

// OperationRef names another operation of the same tenant.
type OperationRef struct {
	Namespace, Key string
}

// Record is one operation's entry in the ledger.
type Record struct {
	Namespace, Key string
	Status         Status
	// Fingerprint is the SHA-256 of the arguments of the first Claim.
	Fingerprint []byte
	Semantics   Semantics
	// FencingToken is the current fencing token: +1 on every acquisition.
	FencingToken uint64
	// Attempt counts the acquisitions so far.
	Attempt uint32
	// DedupHits counts the Claims answered from the record instead of acquiring it.
	DedupHits uint64
	// LeaseOwner is who holds (or last held) the lease.
	LeaseOwner string
	// LeaseExpiresAt is when the current lease runs out; zero once settled.
	LeaseExpiresAt time.Time
	// Result is the stored outcome when Status is StatusSucceeded.
	Result *Raw
	// Error is the stored error when Status is StatusFailed (and the last one on StatusRetry).
	Error *OperationFailedError
	// Parent is the parent operation named by the first Claim, if any.
	Parent                          *OperationRef
	CreatedAt, UpdatedAt, ExpiresAt time.Time
	// RequireApproval says the operation waits for an approval before anyone acquires it.
	RequireApproval bool
	// MaxAttempts is the most acquisitions allowed, reconciliations not counted (0: no cap).
	MaxAttempts uint32
	// Approval is the approval decision, once made.
	Approval *Approval
	// Budget is the run budget of this operation's children and what they used of it, when its
	// first Claim set one (the Budget option); nil otherwise.
	Budget *BudgetUsage
}

func toTime(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func rawFromProto(r *oncekeyv1.OperationResult) *Raw {
	if r == nil {
		return nil
	}
	return &Raw{Code: r.GetCode(), Body: r.GetBody(), ContentType: r.GetContentType(), Metadata: r.GetMetadata()}
}

func (r Raw) toProto() *oncekeyv1.OperationResult {
	return &oncekeyv1.OperationResult{Code: r.Code, Body: r.Body, ContentType: r.ContentType, Metadata: r.Metadata}
}

func failedFromProto(e *oncekeyv1.OperationError) *OperationFailedError {
	if e == nil {
		return nil
	}
	return &OperationFailedError{Code: e.GetCode(), Message: e.GetMessage(), Details: e.GetDetails()}
}

func recordFromProto(r *oncekeyv1.Record) *Record {
	if r == nil {
		return nil
	}
	rec := &Record{
		Namespace: r.GetNamespace(), Key: r.GetKey(), Status: Status(r.GetStatus()),
		Fingerprint: r.GetFingerprint(), Semantics: Semantics(r.GetSemantics()),
		FencingToken: r.GetFencingToken(), Attempt: r.GetAttempt(), DedupHits: r.GetDedupHits(),
		LeaseOwner: r.GetLeaseOwner(), LeaseExpiresAt: toTime(r.GetLeaseExpiresAt()),
		Result: rawFromProto(r.GetResult()), Error: failedFromProto(r.GetError()),
		CreatedAt: toTime(r.GetCreatedAt()), UpdatedAt: toTime(r.GetUpdatedAt()), ExpiresAt: toTime(r.GetExpiresAt()),
		RequireApproval: r.GetRequireApproval(), MaxAttempts: r.GetMaxAttempts(),
	}
	if a := r.GetApproval(); a != nil {
		rec.Approval = &Approval{Decision: Decision(a.GetDecision()), DecidedBy: a.GetDecidedBy(),
			Note: a.GetNote(), DecidedAt: toTime(a.GetDecidedAt())}
	}
	if p := r.GetParent(); p != nil {
		rec.Parent = &OperationRef{Namespace: p.GetNamespace(), Key: p.GetKey()}
	}
	if b := r.GetBudget(); b != nil {
		rec.Budget = &BudgetUsage{
			Budget: budgetFromProto(b.GetBudget()), Children: b.GetChildren(),
			ChildrenPerNamespace: b.GetChildrenPerNamespace(), Refused: b.GetRefused(),
		}
	}
	return rec
}
