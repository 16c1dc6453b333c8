package oncekey

// Listing (docs/api.md#listing): one page of the caller's records at a time (ListRecords), or
// every matching record page after page as an iterator (ListAll), and ReconcileRecord, which
// settles a listed at-most-once operation whose outcome is unknown. Listed records carry neither
// history, result body nor error details: Lookup has them.

import (
	"context"
	"fmt"
	"iter"

	"google.golang.org/grpc"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

// MaxPageSize is the most records one page holds.
const MaxPageSize = 1000

// ListFilter selects the records to list; every field left empty matches every record, so the
// zero ListFilter lists every live record of the caller's tenant.
type ListFilter struct {
	// Namespace keeps the records of one namespace.
	Namespace string
	// Statuses keeps the records with any of these statuses, as Lookup reports them (StatusUnknown
	// includes an at-most-once operation whose lease lapsed).
	Statuses []Status
	// Parent keeps the records whose first run named this parent operation (OperationKey.Ref).
	Parent *OperationRef
	// PageSize is how many records a page holds at most: 0 for the server's default (100), at most
	// MaxPageSize. A page may hold fewer and still not be the last.
	PageSize int
}

// RecordPage is one page of a listing.
type RecordPage struct {
	// Records are the page's records, ordered by status, then by the store's order.
	Records []*Record
	// NextPageToken asks for the next page (with the same filter); "" after the last page.
	NextPageToken string
}

// ListRecords reads one page of the caller's records that filter selects: the first page with
// pageToken "", the next with the page's NextPageToken. Retried on transient failures like Lookup.
// Errors: ErrInvalidArgument for a page size over MaxPageSize (nothing sent) or a page token of
// another filter, tenant or server store (Error.Field "page_token"); ErrMissingScope, ErrRateLimited,
// ErrUnavailable.
//
// Records are not read as one snapshot: one whose status changes while you page may be missed or
// listed twice (once under each status), and listing may lag a change by a few seconds.
func (c *Client) ListRecords(ctx context.Context, filter ListFilter, pageToken string) (RecordPage, error) {
	if filter.PageSize < 0 || filter.PageSize > MaxPageSize {
		return RecordPage{}, fmt.Errorf("%w: ListFilter.PageSize must be between 1 and %d (0: the server's default), got %d",
			ErrInvalidArgument, MaxPageSize, filter.PageSize)
	}
	req := &oncekeyv1.ListRecordsRequest{
		Namespace: filter.Namespace, PageSize: uint32(filter.PageSize), PageToken: pageToken,
	}
	for _, s := range filter.Statuses {
		req.Statuses = append(req.Statuses, oncekeyv1.RecordStatus(s))
	}
	if p := filter.Parent; p != nil {
		req.Parent = &oncekeyv1.OperationRef{Namespace: p.Namespace, Key: p.Key}
	}
	var res *oncekeyv1.ListRecordsResponse
	err := c.call(ctx, "ListRecords", 0, true, func(ctx context.Context, o ...grpc.CallOption) (err error) {
		res, err = c.Ledger.ListRecords(ctx, req, o...)
		return err
	})
	if err != nil {
		return RecordPage{}, err
	}
	page := RecordPage{NextPageToken: res.GetNextPageToken(), Records: make([]*Record, 0, len(res.GetRecords()))}
	for _, r := range res.GetRecords() {
		page.Records = append(page.Records, recordFromProto(r))
	}
	return page, nil
}

// ListAll iterates over every record filter selects, reading page after page (ListRecords) as
// the loop goes on:
//
//	for rec, err := range client.ListAll(ctx, oncekey.ListFilter{Statuses: []oncekey.Status{oncekey.StatusUnknown}}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(rec.Namespace, rec.Key)
//	}
//
// An error is yielded once, with a nil record, and ends the iteration. Breaking out of the loop
// reads no further page. To resume a listing later, page with ListRecords and keep the token.
func (c *Client) ListAll(ctx context.Context, filter ListFilter) iter.Seq2[*Record, error] {
	return pages(func(token string) ([]*Record, string, error) {
		page, err := c.ListRecords(ctx, filter, token)
		return page.Records, page.NextPageToken, err
	})
}

// pages iterates over the items of page after page that read gives (its items, the next page's
// token, "" after the last), starting from the first page (token ""). An error is yielded once,
// with a zero item, and ends the iteration; breaking out of the loop reads no further page.
func pages[T any](read func(token string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			items, next, err := read(token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items {
				if !yield(item, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}

// Ref is the reference to this operation that ListFilter.Parent takes.
func (k OperationKey) Ref() *OperationRef {
	return &OperationRef{Namespace: k.namespace, Key: k.key}
}

// ReconcileRecord is Reconcile for a record found by listing (or Lookup), when the caller no
// longer has the operation's arguments: it claims the record's key with its stored fingerprint
// and reconcile, and runs fn, which must find out from the outside world (by the key) what
// happened and return the result, or an error: plain when the effect did not happen and may run
// again, Final when it failed, Abandon to forget the key. If the operation settled meanwhile, its
// outcome is returned as Run would.
func ReconcileRecord[T any](ctx context.Context, c *Client, rec *Record, fn func(context.Context) (T, error), opts ...RunOption) (Result[T], error) {
	if rec == nil || len(rec.Fingerprint) != FingerprintLen {
		return Result[T]{}, fmt.Errorf("%w: ReconcileRecord needs a record with its %d-byte fingerprint", ErrInvalidArgument, FingerprintLen)
	}
	key := RawKey(rec.Namespace, rec.Key)
	if key.err != nil {
		return Result[T]{}, key.err
	}
	return execute(ctx, c, key, rec.Fingerprint, true, fn, opts)
}
