package oncekey

// The intent guard (docs/api.md#intent-guard, v1.3): a Claim of a new key whose arguments another
// live key of the namespace was claimed with within the intent window is a suspected duplicate (an
// agent that made up a fresh key for a retry). In warn mode the run goes on and Result.IntentMatches
// names the other keys; in refuse mode the run ends with a *DuplicateIntentError and the function
// never runs. ListDuplicateIntents and ListAllDuplicateIntents list what the guard saw.

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"google.golang.org/grpc"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// IntentGuardMode is what the intent guard does with a suspected duplicate intent. A Claim's mode
// can make the namespace's setting (the server's --intent-guard, the tenant's limits line)
// stricter, never looser.
type IntentGuardMode int

// Intent guard modes.
const (
	// IntentGuardUnspecified (the default): the namespace's setting; off when it has none.
	IntentGuardUnspecified IntentGuardMode = iota
	// IntentGuardOff: no check.
	IntentGuardOff
	// IntentGuardWarn: the run goes on as usual; Result.IntentMatches names the other keys.
	IntentGuardWarn
	// IntentGuardRefuse: the run ends with a *DuplicateIntentError (errors.Is ErrDuplicateIntent)
	// without running the function, and nothing is written for the key; unless RepeatIntent.
	IntentGuardRefuse
)

// String is the mode as the server spells it, e.g. "REFUSE".
func (m IntentGuardMode) String() string {
	return strings.TrimPrefix(oncekeyv1.IntentGuard(m).String(), "INTENT_GUARD_")
}

// MinIntentWindow and MaxIntentWindow bound the intent window a run may ask for.
const (
	MinIntentWindow = time.Second
	MaxIntentWindow = 24 * time.Hour
)

// IntentGuard sets the intent guard for this run's Claim (default: the namespace's setting). It
// only checks the Claim of a new key: retries and replays of a key are never suspected.
func IntentGuard(mode IntentGuardMode) RunOption {
	return func(o *runOptions) { o.intentGuard = mode }
}

// IntentWindow asks for an intent window of d (MinIntentWindow ..= MaxIntentWindow): the guard
// looks back the longer of d and the namespace's window (default 10 min).
func IntentWindow(d time.Duration) RunOption { return func(o *runOptions) { o.intentWindow = d } }

// RepeatIntent says the repeat is deliberate: IntentGuardRefuse acts as IntentGuardWarn for this
// run (the run goes on, Result.IntentMatches still names the other keys).
func RepeatIntent() RunOption { return func(o *runOptions) { o.repeatIntent = true } }

// IntentMatch is another key claimed with the same arguments in the same namespace within the
// intent window.
type IntentMatch struct {
	// Key is the other key (in the same namespace).
	Key string
	// Status is its record's status now (StatusProcessing while its first Claim is under way).
	Status Status
	// ClaimedAt is when it was claimed with these arguments.
	ClaimedAt time.Time
	// Refused: the guard refused that Claim (OutcomeDuplicateIntent), so it has no record.
	Refused bool
}

// IntentMatches reads the intent matches of a Claim's answer (ClaimResponse.intent_matches), for
// callers of Client.Claim; nil when there are none.
func IntentMatches(res *oncekeyv1.ClaimResponse) []IntentMatch {
	return intentMatchesFromProto(res.GetIntentMatches())
}

func intentMatchesFromProto(ms []*oncekeyv1.IntentMatch) []IntentMatch {
	if len(ms) == 0 {
		return nil
	}
	out := make([]IntentMatch, 0, len(ms))
	for _, m := range ms {
		out = append(out, IntentMatch{Key: m.GetKey(), Status: Status(m.GetStatus()),
			ClaimedAt: toTime(m.GetClaimedAt()), Refused: m.GetRefused()})
	}
	return out
}

// DuplicateIntentError: the intent guard refused the run (IntentGuardRefuse): the same arguments
// were claimed under another key of the namespace within the intent window (errors.Is
// ErrDuplicateIntent). The function did not run and nothing was written for the key. Use the
// other key (its outcome is that intent's), or run again with RepeatIntent if the repeat is
// deliberate.
type DuplicateIntentError struct {
	// Namespace and Key are the refused run's operation.
	Namespace, Key string
	// Matches are the other keys, most recent first (at most 8).
	Matches []IntentMatch
}

func (e *DuplicateIntentError) Error() string {
	others := "another key"
	if len(e.Matches) > 1 {
		others = fmt.Sprintf("%d other keys", len(e.Matches))
	}
	return fmt.Sprintf("%v: these arguments were claimed under %s of %s within the intent window",
		ErrDuplicateIntent, others, e.Namespace)
}

// Is matches ErrDuplicateIntent.
func (e *DuplicateIntentError) Is(target error) bool { return target == ErrDuplicateIntent }

// DuplicateIntent is one set of arguments claimed under more than one key of a namespace within
// its intent window (refused Claims included).
type DuplicateIntent struct {
	Namespace string
	// Fingerprint is the arguments' fingerprint (FingerprintLen bytes).
	Fingerprint []byte
	// Claims are the keys claimed with them, oldest first (at most 16).
	Claims []IntentMatch
}

// DuplicateIntentFilter selects the duplicate intents to list; the zero filter lists every one of
// the caller's tenant.
type DuplicateIntentFilter struct {
	// Namespace keeps the duplicate intents of one namespace.
	Namespace string
	// PageSize is how many a page holds at most: 0 for the server's default (100), at most
	// MaxPageSize. A page may hold fewer and still not be the last.
	PageSize int
}

// DuplicateIntentPage is one page of a listing of duplicate intents.
type DuplicateIntentPage struct {
	// Intents are the page's duplicate intents, in a stable order.
	Intents []*DuplicateIntent
	// NextPageToken asks for the next page (with the same filter); "" after the last page.
	NextPageToken string
}

// ListDuplicateIntents reads one page of the caller's suspected duplicate intents that filter
// selects: the first page with pageToken "", the next with the page's NextPageToken. Retried on
// transient failures like ListRecords, with its errors.
func (c *Client) ListDuplicateIntents(ctx context.Context, filter DuplicateIntentFilter, pageToken string) (DuplicateIntentPage, error) {
	if filter.PageSize < 0 || filter.PageSize > MaxPageSize {
		return DuplicateIntentPage{}, fmt.Errorf("%w: DuplicateIntentFilter.PageSize must be between 1 and %d (0: the server's default), got %d",
			ErrInvalidArgument, MaxPageSize, filter.PageSize)
	}
	req := &oncekeyv1.ListDuplicateIntentsRequest{
		Namespace: filter.Namespace, PageSize: uint32(filter.PageSize), PageToken: pageToken,
	}
	var res *oncekeyv1.ListDuplicateIntentsResponse
	err := c.call(ctx, "ListDuplicateIntents", 0, true, func(ctx context.Context, o ...grpc.CallOption) (err error) {
		res, err = c.Ledger.ListDuplicateIntents(ctx, req, o...)
		return err
	})
	if err != nil {
		return DuplicateIntentPage{}, err
	}
	page := DuplicateIntentPage{NextPageToken: res.GetNextPageToken(),
		Intents: make([]*DuplicateIntent, 0, len(res.GetIntents()))}
	for _, d := range res.GetIntents() {
		page.Intents = append(page.Intents, &DuplicateIntent{Namespace: d.GetNamespace(),
			Fingerprint: d.GetFingerprint(), Claims: intentMatchesFromProto(d.GetClaims())})
	}
	return page, nil
}

// ListAllDuplicateIntents iterates over every duplicate intent filter selects, reading page after
// page (ListDuplicateIntents) as the loop goes on, as ListAll does for records: an error is
// yielded once, with a nil intent, and ends the iteration.
func (c *Client) ListAllDuplicateIntents(ctx context.Context, filter DuplicateIntentFilter) iter.Seq2[*DuplicateIntent, error] {
	return pages(func(token string) ([]*DuplicateIntent, string, error) {
		page, err := c.ListDuplicateIntents(ctx, filter, token)
		return page.Intents, page.NextPageToken, err
	})
}
