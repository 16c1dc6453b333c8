package oncekey

// The intent guard and run budgets (v1.3) against an in-process Ledger that scripts its answers:
// the options on the wire, the DUPLICATE_INTENT outcome (the function never runs), warn mode's
// matches, BUDGET_EXHAUSTED as a typed error that is never retried (whatever its code), and the
// duplicate-intent listing page after page; then the same against the real server.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
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

// guardLedger answers every Claim with claim(req) and records the requests; it completes every
// Complete, keeps KeepAlive streams open, and pages ListDuplicateIntents through pages.
type guardLedger struct {
	oncekeyv1.UnimplementedLedgerServer
	claim func(*oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error)
	pages map[string]*oncekeyv1.ListDuplicateIntentsResponse // by page token

	mu        sync.Mutex
	claims    []*oncekeyv1.ClaimRequest
	lists     []*oncekeyv1.ListDuplicateIntentsRequest
	completes int
}

func (g *guardLedger) Claim(_ context.Context, req *oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
	g.mu.Lock()
	g.claims = append(g.claims, req)
	g.mu.Unlock()
	return g.claim(req)
}

func (g *guardLedger) Complete(_ context.Context, req *oncekeyv1.CompleteRequest) (*oncekeyv1.CompleteResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.completes++
	return &oncekeyv1.CompleteResponse{Record: &oncekeyv1.Record{Namespace: req.GetNamespace(), Key: req.GetKey(),
		Status: oncekeyv1.RecordStatus_RECORD_STATUS_SUCCEEDED}}, nil
}

func (g *guardLedger) KeepAlive(stream grpc.BidiStreamingServer[oncekeyv1.KeepAliveRequest, oncekeyv1.Lease]) error {
	<-stream.Context().Done()
	return nil
}

func (g *guardLedger) ListDuplicateIntents(_ context.Context, req *oncekeyv1.ListDuplicateIntentsRequest) (*oncekeyv1.ListDuplicateIntentsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lists = append(g.lists, req)
	page, ok := g.pages[req.GetPageToken()]
	if !ok {
		return nil, reasonError(codes.InvalidArgument, "INVALID_FIELD")
	}
	return page, nil
}

func (g *guardLedger) claimCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.claims)
}

func serveGuard(t *testing.T, g *guardLedger) *Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	oncekeyv1.RegisterLedgerServer(srv, g)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	c, err := Dial(l.Addr().String(), WithRetryPolicy(fast), WithTenant("go-guard"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var claimedAt = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// wireMatches are two other keys as the server names them.
func wireMatches() []*oncekeyv1.IntentMatch {
	return []*oncekeyv1.IntentMatch{
		{Key: "tool-call-2", Status: oncekeyv1.RecordStatus_RECORD_STATUS_SUCCEEDED, ClaimedAt: timestamppb.New(claimedAt)},
		{Key: "tool-call-1", Status: oncekeyv1.RecordStatus_RECORD_STATUS_PROCESSING, Refused: true},
	}
}

var wantMatches = []IntentMatch{
	{Key: "tool-call-2", Status: StatusSucceeded, ClaimedAt: claimedAt},
	{Key: "tool-call-1", Status: StatusProcessing, Refused: true},
}

func sameMatches(got []IntentMatch) bool {
	if len(got) != len(wantMatches) {
		return false
	}
	for i := range got {
		if got[i].Key != wantMatches[i].Key || got[i].Status != wantMatches[i].Status ||
			!got[i].ClaimedAt.Equal(wantMatches[i].ClaimedAt) || got[i].Refused != wantMatches[i].Refused {
			return false
		}
	}
	return true
}

func duplicateIntent(*oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
	return &oncekeyv1.ClaimResponse{Outcome: oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_DUPLICATE_INTENT, IntentMatches: wireMatches()}, nil
}

func acquiredWith(matches []*oncekeyv1.IntentMatch) func(*oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
	return func(*oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
		return &oncekeyv1.ClaimResponse{Outcome: oncekeyv1.ClaimOutcome_CLAIM_OUTCOME_ACQUIRED, IntentMatches: matches,
			Lease: &oncekeyv1.Lease{Token: 1, Attempt: 1, ExpiresAt: timestamppb.New(time.Now().Add(time.Minute))}}, nil
	}
}

// The options reach the wire as the proto spells them; a run without them sends none.
func TestIntentGuardAndBudgetOptionsAreSent(t *testing.T) {
	g := &guardLedger{claim: acquiredWith(nil)}
	c := serveGuard(t, g)
	ctx := context.Background()
	perNamespace := map[string]uint32{"email.send": 3}
	budget := Budget(RunBudget{MaxChildren: 10, MaxPerNamespace: perNamespace})
	perNamespace["email.send"] = 99 // the option took a copy
	fn := func(context.Context) (int, error) { return 1, nil }
	if _, err := Do(ctx, c, Key("agent.run", "r-1"), "task", fn,
		IntentGuard(IntentGuardRefuse), IntentWindow(time.Hour), RepeatIntent(), budget); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(ctx, c, Key("agent.run", "r-2"), "task", fn); err != nil {
		t.Fatal(err)
	}
	with, without := g.claims[0], g.claims[1]
	if with.GetIntentGuard() != oncekeyv1.IntentGuard_INTENT_GUARD_REFUSE || with.GetIntentWindow().AsDuration() != time.Hour ||
		!with.GetRepeatIntent() || with.GetBudget().GetMaxChildren() != 10 ||
		len(with.GetBudget().GetMaxPerNamespace()) != 1 || with.GetBudget().GetMaxPerNamespace()["email.send"] != 3 {
		t.Fatalf("sent %v", with)
	}
	if without.GetIntentGuard() != oncekeyv1.IntentGuard_INTENT_GUARD_UNSPECIFIED || without.GetIntentWindow() != nil ||
		without.GetRepeatIntent() || without.GetBudget() != nil {
		t.Fatalf("a run without the options sent %v", without)
	}
	// MakeIdempotent takes them as WrapOptions.
	wrapped := MakeIdempotent(c, "agent.tool", func(_ context.Context, n int) (int, error) { return n, nil },
		IntentGuard(IntentGuardWarn), IntentWindow(90*time.Second))
	if _, err := wrapped(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if last := g.claims[2]; last.GetIntentGuard() != oncekeyv1.IntentGuard_INTENT_GUARD_WARN || last.GetIntentWindow().AsDuration() != 90*time.Second {
		t.Fatalf("the wrapper sent %v", last)
	}
}

// A window or mode the server would refuse is refused before anything is sent.
func TestABadIntentWindowOrModeIsRefusedUnsent(t *testing.T) {
	g := &guardLedger{claim: acquiredWith(nil)}
	c := serveGuard(t, g)
	for _, opt := range []RunOption{IntentWindow(500 * time.Millisecond), IntentWindow(25 * time.Hour),
		IntentWindow(-time.Second), IntentGuard(IntentGuardMode(9)), IntentGuard(IntentGuardMode(-1))} {
		_, err := Do(context.Background(), c, Key("n", "k"), 1, func(context.Context) (int, error) { return 1, nil }, opt)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("want ErrInvalidArgument, got %v", err)
		}
		if _, err := c.DryRun(context.Background(), Key("n", "k"), 1, opt); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("DryRun: want ErrInvalidArgument, got %v", err)
		}
	}
	if n := g.claimCount(); n != 0 {
		t.Fatalf("%d Claims were sent", n)
	}
}

// DUPLICATE_INTENT ends every one-call API with a *DuplicateIntentError naming the other keys; the
// function never runs and the Claim is sent once.
func TestADuplicateIntentIsRefusedWithoutRunning(t *testing.T) {
	g := &guardLedger{claim: duplicateIntent}
	c := serveGuard(t, g)
	ctx := context.Background()
	ran := 0
	fn := func(context.Context) (string, error) { ran++; return "sent", nil }
	key := Key("email.send", "tool-call-3")
	check := func(what string, err error) {
		t.Helper()
		var dup *DuplicateIntentError
		if !errors.Is(err, ErrDuplicateIntent) || !errors.As(err, &dup) {
			t.Fatalf("%s: want a *DuplicateIntentError, got %T %v", what, err, err)
		}
		if dup.Namespace != "email.send" || dup.Key != "tool-call-3" || !sameMatches(dup.Matches) {
			t.Fatalf("%s: %+v", what, dup)
		}
		if errors.Is(err, ErrKeyReused) || errors.Is(err, ErrInProgress) || errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("%s: %v matches another sentinel", what, err)
		}
	}
	_, err := Do(ctx, c, key, "hi", fn, IntentGuard(IntentGuardRefuse))
	check("Do", err)
	r, err := Run(ctx, c, key, "hi", fn)
	check("Run", err)
	if r.Record != nil || r.IntentMatches != nil {
		t.Fatalf("Run's result %+v", r)
	}
	_, err = Reconcile(ctx, c, key, "hi", fn)
	check("Reconcile", err)
	send := MakeIdempotent(c, "email.send", func(context.Context, string) (string, error) { ran++; return "sent", nil },
		KeyFunc(func(string) string { return "tool-call-3" }))
	_, err = send(ctx, "hi")
	check("MakeIdempotent", err)
	if ran != 0 {
		t.Fatalf("the function ran %d times", ran)
	}
	if n := g.claimCount(); n != 4 {
		t.Fatalf("%d Claims for 4 runs", n)
	}
	if got, want := err.Error(), "oncekey: duplicate intent: these arguments were claimed under 2 other keys of email.send within the intent window"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	one := &DuplicateIntentError{Namespace: "n", Matches: wantMatches[:1]}
	if got := one.Error(); got != "oncekey: duplicate intent: these arguments were claimed under another key of n within the intent window" {
		t.Fatalf("message %q", got)
	}

	// The raw Claim and a dry run show the outcome and the matches as they are.
	res, err := c.Claim(ctx, &oncekeyv1.ClaimRequest{Namespace: "email.send", Key: "tool-call-3"})
	if err != nil || Outcome(res.GetOutcome()) != OutcomeDuplicateIntent || !sameMatches(IntentMatches(res)) {
		t.Fatalf("Claim: %v, %v", res, err)
	}
	dry, err := c.DryRun(ctx, key, "hi", IntentGuard(IntentGuardRefuse))
	if err != nil || dry.Outcome != OutcomeDuplicateIntent || dry.Record != nil || !sameMatches(dry.IntentMatches) {
		t.Fatalf("DryRun: %+v, %v", dry, err)
	}
	if OutcomeDuplicateIntent.String() != "DUPLICATE_INTENT" || IntentGuardRefuse.String() != "REFUSE" ||
		IntentGuardWarn.String() != "WARN" || IntentGuardOff.String() != "OFF" {
		t.Fatalf("names %v %v %v %v", OutcomeDuplicateIntent, IntentGuardRefuse, IntentGuardWarn, IntentGuardOff)
	}
}

// In warn mode (or with RepeatIntent) the run goes on as usual and its result names the other keys.
func TestWarnModeRunsAndNamesTheOtherKeys(t *testing.T) {
	g := &guardLedger{claim: acquiredWith(wireMatches())}
	c := serveGuard(t, g)
	ran := 0
	r, err := Run(context.Background(), c, Key("email.send", "tool-call-3"), "hi",
		func(context.Context) (string, error) { ran++; return "sent", nil }, IntentGuard(IntentGuardWarn))
	if err != nil || ran != 1 || r.Value != "sent" || r.Replayed || !sameMatches(r.IntentMatches) || g.completes != 1 {
		t.Fatalf("%+v, %v (ran %d, %d completes)", r, err, ran, g.completes)
	}
	run := MakeIdempotentRun(c, "email.send", func(_ context.Context, s string) (string, error) { return s, nil })
	if r, err := run(context.Background(), "hello"); err != nil || !sameMatches(r.IntentMatches) {
		t.Fatalf("MakeIdempotentRun: %+v, %v", r, err)
	}
	// Without matches there are none.
	g.claim = acquiredWith(nil)
	if r, err := Run(context.Background(), c, Key("email.send", "k"), "hi",
		func(context.Context) (string, error) { return "sent", nil }); err != nil || r.IntentMatches != nil {
		t.Fatalf("%+v, %v", r, err)
	}
}

// budgetError is the server's BUDGET_EXHAUSTED answer.
func budgetError(code codes.Code, metadata map[string]string) error {
	st, err := status.New(code, "the run budget of agent.run/r-1 is spent: email.send 3 of 3").WithDetails(
		&errdetails.ErrorInfo{Reason: "BUDGET_EXHAUSTED", Domain: ErrorDomain, Metadata: metadata})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

var budgetMetadata = map[string]string{"parent_namespace": "agent.run", "parent_key": "r-1", "limit": "email.send", "spent": "3", "max": "3"}

// BUDGET_EXHAUSTED is a *BudgetExhaustedError with the ErrorInfo metadata, sent once and never
// retried (even under a code that would be), and the child's function never runs.
func TestBudgetExhaustedIsTypedAndNeverRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.FailedPrecondition, codes.ResourceExhausted, codes.Unavailable} {
		t.Run(codeName(code), func(t *testing.T) {
			g := &guardLedger{claim: func(*oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
				return nil, budgetError(code, budgetMetadata)
			}}
			c := serveGuard(t, g)
			ran := 0
			child := Key("agent.run", "r-1").ChildIn("email.send", "notify-4")
			_, err := Do(context.Background(), c, child, "hi", func(context.Context) (int, error) { ran++; return 1, nil })
			var be *BudgetExhaustedError
			if !errors.Is(err, ErrBudgetExhausted) || !errors.As(err, &be) {
				t.Fatalf("want a *BudgetExhaustedError, got %T %v", err, err)
			}
			if be.ParentNamespace != "agent.run" || be.ParentKey != "r-1" || be.Limit != "email.send" || be.Spent != 3 || be.Max != 3 {
				t.Fatalf("%+v", be)
			}
			if ran != 0 || g.claimCount() != 1 {
				t.Fatalf("ran %d, %d Claims", ran, g.claimCount())
			}
			var e *Error
			if Reason(err) != ReasonBudgetExhausted || status.Code(err) != code || !errors.As(err, &e) || e.Metadata["limit"] != "email.send" {
				t.Fatalf("Reason %v, code %v, *Error %v", Reason(err), status.Code(err), e)
			}
			if errors.Is(err, ErrUnavailable) != (code == codes.Unavailable) {
				t.Fatalf("errors.Is(ErrUnavailable) = %v under %v", errors.Is(err, ErrUnavailable), code)
			}
			if got := err.Error(); got != "oncekey: run budget exhausted (email.send: 3 of 3 spent)" {
				t.Fatalf("message %q", got)
			}
		})
	}
	// The raw Claim gets the same typed error; a circuit breaker is not opened by it.
	g := &guardLedger{claim: func(*oncekeyv1.ClaimRequest) (*oncekeyv1.ClaimResponse, error) {
		return nil, budgetError(codes.FailedPrecondition, map[string]string{"limit": BudgetLimitMaxChildren, "spent": "10", "max": "10"})
	}}
	c := serveGuard(t, g)
	for range 15 {
		_, err := c.Claim(context.Background(), &oncekeyv1.ClaimRequest{Namespace: "n", Key: "k"})
		var be *BudgetExhaustedError
		if !errors.As(err, &be) || be.Limit != BudgetLimitMaxChildren || be.Max != 10 {
			t.Fatalf("%T %v", err, err)
		}
	}
	if g.claimCount() != 15 {
		t.Fatalf("%d Claims for 15 calls", g.claimCount())
	}
	// Without metadata (not expected from a server) the message is the server's.
	bare := asError(budgetError(codes.FailedPrecondition, nil))
	if !errors.Is(bare, ErrBudgetExhausted) || !strings.HasSuffix(bare.Error(), ": the run budget of agent.run/r-1 is spent: email.send 3 of 3") {
		t.Fatalf("%T %v", bare, bare)
	}
}

// A record's budget and its use are read from the wire.
func TestARecordCarriesItsBudget(t *testing.T) {
	rec := recordFromProto(&oncekeyv1.Record{Namespace: "agent.run", Key: "r-1", Budget: &oncekeyv1.BudgetUsage{
		Budget:   &oncekeyv1.RunBudget{MaxChildren: 10, MaxPerNamespace: map[string]uint32{"email.send": 3}},
		Children: 4, ChildrenPerNamespace: map[string]uint32{"email.send": 3, "search.web": 1}, Refused: 2,
	}})
	b := rec.Budget
	if b == nil || b.Budget.MaxChildren != 10 || b.Budget.MaxPerNamespace["email.send"] != 3 || b.Children != 4 ||
		b.ChildrenPerNamespace["search.web"] != 1 || b.Refused != 2 {
		t.Fatalf("%+v", b)
	}
	if recordFromProto(&oncekeyv1.Record{}).Budget != nil {
		t.Fatal("a record without a budget has one")
	}
}

// ListAllDuplicateIntents pages as ListAll does, with the filter on every page.
func TestDuplicateIntentsArePagedThrough(t *testing.T) {
	fp := bytes.Repeat([]byte{7}, FingerprintLen)
	intent := func(ns string) *oncekeyv1.DuplicateIntent {
		return &oncekeyv1.DuplicateIntent{Namespace: ns, Fingerprint: fp, Claims: wireMatches()}
	}
	g := &guardLedger{pages: map[string]*oncekeyv1.ListDuplicateIntentsResponse{
		"":   {Intents: []*oncekeyv1.DuplicateIntent{intent("email.send"), intent("email.send")}, NextPageToken: "p2"},
		"p2": {Intents: []*oncekeyv1.DuplicateIntent{intent("email.send")}, NextPageToken: "p3"},
		"p3": {},
	}}
	c := serveGuard(t, g)
	ctx := context.Background()
	var all []*DuplicateIntent
	for d, err := range c.ListAllDuplicateIntents(ctx, DuplicateIntentFilter{Namespace: "email.send", PageSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, d)
	}
	if len(all) != 3 || all[0].Namespace != "email.send" || !bytes.Equal(all[0].Fingerprint, fp) || !sameMatches(all[2].Claims) {
		t.Fatalf("listed %+v", all)
	}
	if len(g.lists) != 3 || g.lists[1].GetPageToken() != "p2" || g.lists[2].GetPageToken() != "p3" {
		t.Fatalf("requests %v", g.lists)
	}
	for _, req := range g.lists {
		if req.GetNamespace() != "email.send" || req.GetPageSize() != 2 {
			t.Fatalf("request %v", req)
		}
	}
	// One page at a time.
	page, err := c.ListDuplicateIntents(ctx, DuplicateIntentFilter{}, "p2")
	if err != nil || len(page.Intents) != 1 || page.NextPageToken != "p3" {
		t.Fatalf("%+v, %v", page, err)
	}
	// Breaking out reads no further page.
	g.lists = nil
	for range c.ListAllDuplicateIntents(ctx, DuplicateIntentFilter{}) {
		break
	}
	if len(g.lists) != 1 {
		t.Fatalf("%d pages read", len(g.lists))
	}
	// An error is yielded once and ends the listing; a page size over MaxPageSize is never sent.
	g.lists = nil
	var errs []error
	for d, err := range c.ListAllDuplicateIntents(ctx, DuplicateIntentFilter{PageSize: MaxPageSize + 1}) {
		if d != nil {
			t.Fatal("an intent with the error")
		}
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], ErrInvalidArgument) || len(g.lists) != 0 {
		t.Fatalf("errors %v, %d requests", errs, len(g.lists))
	}
	if _, err := c.ListDuplicateIntents(ctx, DuplicateIntentFilter{}, "stale"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a page token the server refuses: %v", err)
	}
}

// Against the real server (API v1.3): a duplicate intent refused without running or writing,
// warn mode's matches, and a run budget refusing a new child, never a replayed one.
func TestIntentGuardAndBudgetAgainstTheServer(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	args := email{To: "ada@example.com", Subject: "Your ticket #481"}
	ran := 0
	fn := func(context.Context) (string, error) { ran++; return "sent", nil }
	if _, err := Do(ctx, c, Key("email.send", "call-1"), args, fn, IntentGuard(IntentGuardRefuse)); err != nil {
		t.Fatal(err)
	}
	_, err := Do(ctx, c, Key("email.send", "call-2"), args, fn, IntentGuard(IntentGuardRefuse))
	var dup *DuplicateIntentError
	if !errors.As(err, &dup) || dup.Key != "call-2" || len(dup.Matches) == 0 || dup.Matches[0].Key != "call-1" ||
		dup.Matches[0].Status != StatusSucceeded || ran != 1 {
		t.Fatalf("%v: %+v, ran %d", err, dup, ran)
	}
	if _, err := c.Lookup(ctx, Key("email.send", "call-2")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused key has a record: %v", err)
	}
	r, err := Run(ctx, c, Key("email.send", "call-3"), args, fn, IntentGuard(IntentGuardWarn))
	if err != nil || ran != 2 || len(r.IntentMatches) == 0 {
		t.Fatalf("warn: %+v, %v, ran %d", r, err, ran)
	}
	if _, err := Run(ctx, c, Key("email.send", "call-4"), args, fn, IntentGuard(IntentGuardRefuse), RepeatIntent()); err != nil || ran != 3 {
		t.Fatalf("a deliberate repeat: %v, ran %d", err, ran)
	}

	parent := Key("agent.run", "run-1")
	budget := Budget(RunBudget{MaxChildren: 5, MaxPerNamespace: map[string]uint32{"email.send": 2}})
	var childErrs []error
	if _, err := Do(ctx, c, parent, "task", func(ctx context.Context) (int, error) {
		for _, step := range []string{"step-0", "step-1", "step-2", "step-0"} {
			_, err := Do(ctx, c, parent.ChildIn("email.send", step), step, fn)
			childErrs = append(childErrs, err)
		}
		return 1, nil
	}, budget); err != nil {
		t.Fatal(err)
	}
	var be *BudgetExhaustedError
	if childErrs[0] != nil || childErrs[1] != nil || !errors.As(childErrs[2], &be) || childErrs[3] != nil {
		t.Fatalf("children: %v", childErrs)
	}
	if be.ParentNamespace != "agent.run" || be.ParentKey != parent.Key() || be.Limit != "email.send" || be.Spent != 2 || be.Max != 2 {
		t.Fatalf("%+v", be)
	}
	rec, err := c.Lookup(ctx, parent)
	if err != nil || rec.Budget == nil || rec.Budget.Budget.MaxChildren != 5 || rec.Budget.Children != 2 ||
		rec.Budget.ChildrenPerNamespace["email.send"] != 2 || rec.Budget.Refused != 1 {
		t.Fatalf("the parent's record: %+v, %v", rec, err)
	}
}
