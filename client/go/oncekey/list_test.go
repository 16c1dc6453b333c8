package oncekey

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// listed collects a listing, failing the test on an error.
func listed(t *testing.T, c *Client, filter ListFilter) []*Record {
	t.Helper()
	var all []*Record
	for rec, err := range c.ListAll(context.Background(), filter) {
		if err != nil {
			t.Fatalf("ListAll(%+v): %v", filter, err)
		}
		all = append(all, rec)
	}
	return all
}

// eventually polls until the listing filter selects want records (listing may lag changes by a
// few seconds) and returns them.
func eventually(t *testing.T, c *Client, filter ListFilter, want int) []*Record {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := listed(t, c, filter)
		if len(all) == want || time.Now().After(deadline) {
			if len(all) != want {
				t.Fatalf("ListAll(%+v) lists %d records, want %d", filter, len(all), want)
			}
			return all
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func names(records []*Record) []string {
	var out []string
	for _, r := range records {
		out = append(out, fmt.Sprintf("%s/%s %v", r.Namespace, r.Key, r.Status))
	}
	sort.Strings(out)
	return out
}

// Listing pages through a tenant's records with every filter, typed.
func TestListRecordsPagesThroughEveryFilter(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	for i := range 7 {
		if _, err := Do(ctx, c, Key("list.a", fmt.Sprint("done-", i)), i, func(context.Context) (int, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		_, err := Do(ctx, c, Key("list.a", fmt.Sprint("retry-", i)), i, func(context.Context) (int, error) { return 0, errors.New("later") })
		if err == nil || err.Error() != "later" {
			t.Fatal(err)
		}
	}
	parent := Key("list.flow", "order-1")
	for _, step := range []string{"charge", "email", "ship"} {
		if _, err := Do(ctx, c, parent.ChildIn("list.b", step), step, func(context.Context) (string, error) { return step, nil }); err != nil {
			t.Fatal(err)
		}
	}

	all := eventually(t, c, ListFilter{PageSize: 2}, 12)
	if len(names(all)) != 12 || names(all)[0] != "list.a/done-0 SUCCEEDED" {
		t.Fatalf("listed %v", names(all))
	}
	// Page by hand: several pages of at most 2, no record twice.
	seen, pages, token := map[string]bool{}, 0, ""
	for {
		page, err := c.ListRecords(ctx, ListFilter{PageSize: 2}, token)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Records) > 2 {
			t.Fatalf("a page of %d records", len(page.Records))
		}
		for _, r := range page.Records {
			if seen[r.Namespace+"/"+r.Key] {
				t.Fatalf("%s/%s listed twice", r.Namespace, r.Key)
			}
			seen[r.Namespace+"/"+r.Key] = true
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if pages < 6 || len(seen) != 12 {
		t.Fatalf("%d pages, %d records", pages, len(seen))
	}

	retries := eventually(t, c, ListFilter{Namespace: "list.a", Statuses: []Status{StatusRetry}}, 2)
	for _, r := range retries {
		if r.Status != StatusRetry || r.Error == nil || r.Error.Message != "later" || r.Semantics != SemanticsAtLeastOnce {
			t.Fatalf("a RETRY record listed as %+v", r)
		}
	}
	done := eventually(t, c, ListFilter{Namespace: "list.a", Statuses: []Status{StatusSucceeded, StatusFailed}}, 7)
	if r := done[0]; r.Result == nil || r.Result.ContentType != jsonContentType || r.Attempt != 1 || r.CreatedAt.IsZero() {
		t.Fatalf("a SUCCEEDED record listed as %+v", r)
	}
	children := eventually(t, c, ListFilter{Parent: parent.Ref()}, 3)
	for _, r := range children {
		if r.Namespace != "list.b" || r.Parent == nil || *r.Parent != *parent.Ref() {
			t.Fatalf("a child listed as %+v", r)
		}
	}

	// Breaking out of the loop stops the listing.
	n := 0
	for range c.ListAll(ctx, ListFilter{PageSize: 1}) {
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("the loop went on to %d", n)
	}
}

// A page size the server would refuse is refused before sending; a page token of another filter
// is refused by the server, typed.
func TestListRecordsRefusesBadPages(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	if _, err := c.ListRecords(ctx, ListFilter{PageSize: MaxPageSize + 1}, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("page size %d: %v", MaxPageSize+1, err)
	}
	var e *Error
	_, err := c.ListRecords(ctx, ListFilter{}, "not-a-token")
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || e.Field != "page_token" || e.Reason != ReasonInvalidField {
		t.Fatalf("a bad page token: %v", err)
	}
	for rec, err := range c.ListAll(ctx, ListFilter{Statuses: []Status{StatusUnspecified}}) {
		if rec != nil || !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("an unspecified status: %v, %v", rec, err)
		}
	}
}

// The reconciliation loop: at-most-once operations whose holder vanished are listed as UNKNOWN,
// and ReconcileRecord settles each from the listing alone, without their arguments.
func TestReconcileRecordSettlesListedUnknownOperations(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	args := map[string]any{"order": "order-7", "amount": 1250}
	fp, _ := Fingerprint(args)
	for _, order := range []string{"order-7", "order-8"} {
		// A holder that claims and vanishes: no keep-alive, no settle.
		key := Key("list.charge", order)
		_, err := c.Claim(ctx, &oncekeyv1.ClaimRequest{Namespace: key.Namespace(), Key: key.Key(),
			Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: fp},
			Semantics: oncekeyv1.Semantics_SEMANTICS_AT_MOST_ONCE, LeaseTtl: durationpb.New(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
	}
	unknown := ListFilter{Namespace: "list.charge", Statuses: []Status{StatusUnknown}}
	for _, rec := range eventually(t, c, unknown, 2) {
		res, err := ReconcileRecord(ctx, c, rec, func(ctx context.Context) (string, error) {
			return "found " + rec.Key, nil // asked the outside world by the key
		})
		if err != nil || res.Value != "found "+rec.Key || res.Replayed {
			t.Fatalf("reconciling %s: %+v, %v", rec.Key, res, err)
		}
	}
	eventually(t, c, unknown, 0)
	v, err := Do(ctx, c, Key("list.charge", "order-7"), args, func(context.Context) (string, error) { return "ran again", nil }, AtMostOnce())
	if err != nil || v != "found order-7" {
		t.Fatalf("a later run: %q, %v", v, err)
	}
	if _, err := ReconcileRecord(ctx, c, &Record{Namespace: "list.charge", Key: "k"}, func(context.Context) (int, error) { return 0, nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a record without its fingerprint: %v", err)
	}
}
