package oncekey

// Run budgets (docs/api.md#run-budgets, v1.3): a parent operation (an agent run, a saga) whose
// first Claim sets a Budget limits how many child operations (keys made with OperationKey.Child,
// ChildIn or WithParent) may be created under it. A run of a new child beyond the budget is refused by the
// server with FAILED_PRECONDITION BUDGET_EXHAUSTED, which this client returns as a
// *BudgetExhaustedError, never retried, without running the child's function.

import (
	"fmt"
	"maps"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// RunBudget is at most how many child operations a parent operation may create.
type RunBudget struct {
	// MaxChildren is the most children in all (0: no total cap).
	MaxChildren uint32
	// MaxPerNamespace is the most children per child namespace, e.g. {"email.send": 3} (at most
	// 64 entries, each cap at least 1).
	MaxPerNamespace map[string]uint32
}

// BudgetUsage is a parent operation's run budget and what its children used of it
// (Record.Budget).
type BudgetUsage struct {
	// Budget is the budget the parent's first Claim set.
	Budget RunBudget
	// Children counts the child operations created under it.
	Children uint32
	// ChildrenPerNamespace counts them per child namespace.
	ChildrenPerNamespace map[string]uint32
	// Refused counts the runs of new children it refused (BUDGET_EXHAUSTED).
	Refused uint64
}

// Budget gives the operation a run budget: at most b.MaxChildren child operations in all, and at
// most b.MaxPerNamespace[ns] in namespace ns. Only the first Claim of a key sets it; it counts
// children whose first run names this operation as parent (Child, ChildIn, WithParent), never
// retries or replays of a child. A run of a new child beyond it gets a *BudgetExhaustedError.
func Budget(b RunBudget) RunOption {
	b.MaxPerNamespace = maps.Clone(b.MaxPerNamespace)
	return func(o *runOptions) { o.budget = &b }
}

func (b *RunBudget) toProto() *oncekeyv1.RunBudget {
	if b == nil {
		return nil
	}
	return &oncekeyv1.RunBudget{MaxChildren: b.MaxChildren, MaxPerNamespace: maps.Clone(b.MaxPerNamespace)}
}

func budgetFromProto(b *oncekeyv1.RunBudget) RunBudget {
	return RunBudget{MaxChildren: b.GetMaxChildren(), MaxPerNamespace: b.GetMaxPerNamespace()}
}

// BudgetLimitMaxChildren is BudgetExhaustedError.Limit when the total cap (MaxChildren) was hit.
const BudgetLimitMaxChildren = "max_children"

// BudgetExhaustedError: a run of a new child operation beyond its parent's run budget
// (FAILED_PRECONDITION BUDGET_EXHAUSTED; errors.Is ErrBudgetExhausted). Nothing ran and nothing
// was written for the child; the same run fails again until the parent's record expires or is
// purged. Never retried. The fields are the server's ErrorInfo metadata.
type BudgetExhaustedError struct {
	// ParentNamespace and ParentKey name the parent operation whose budget is spent.
	ParentNamespace, ParentKey string
	// Limit is the cap that was hit: BudgetLimitMaxChildren, or the child namespace whose
	// MaxPerNamespace cap it was.
	Limit string
	// Spent is how many children that cap had counted; Max is the cap.
	Spent, Max uint32
	// Err is the server's answer (status.Code, Reason and the message read from it).
	Err *Error
}

func (e *BudgetExhaustedError) Error() string {
	if e.Limit == "" {
		msg := ""
		if e.Err != nil {
			msg = ": " + e.Err.Message
		}
		return ErrBudgetExhausted.Error() + msg
	}
	return fmt.Sprintf("%v (%s: %d of %d spent)", ErrBudgetExhausted, e.Limit, e.Spent, e.Max)
}

// Is matches ErrBudgetExhausted.
func (e *BudgetExhaustedError) Is(target error) bool { return target == ErrBudgetExhausted }

// Unwrap gives the server's answer, an *Error.
func (e *BudgetExhaustedError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// GRPCStatus is the server's FAILED_PRECONDITION status.
func (e *BudgetExhaustedError) GRPCStatus() *status.Status {
	if e.Err != nil && e.Err.st != nil {
		return e.Err.st
	}
	return status.New(codes.FailedPrecondition, e.Error())
}

// budgetExhausted reads a BUDGET_EXHAUSTED answer's ErrorInfo metadata (a count that does not
// parse reads as 0).
func budgetExhausted(e *Error) *BudgetExhaustedError {
	count := func(name string) uint32 {
		n, _ := strconv.ParseUint(e.Metadata[name], 10, 32)
		return uint32(n)
	}
	return &BudgetExhaustedError{
		ParentNamespace: e.Metadata["parent_namespace"], ParentKey: e.Metadata["parent_key"],
		Limit: e.Metadata["limit"], Spent: count("spent"), Max: count("max"), Err: e,
	}
}

// typed is the error a failed RPC is returned as: its reason's own type when it has one
// (*BudgetExhaustedError), else e itself.
func (e *Error) typed() error {
	if e.Reason == ReasonBudgetExhausted {
		return budgetExhausted(e)
	}
	return e
}
