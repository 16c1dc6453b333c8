package oncekey_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/oncekey/oncekey/client/go/oncekey"
)

type Charge struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

type Receipt struct {
	ID string `json:"id"`
}

// Do makes a side effect idempotent in one call: the second run replays the stored receipt.
func ExampleDo() {
	client, err := oncekey.Dial(os.Getenv("ONCEKEY_EXAMPLE_ADDR"), oncekey.WithTenant("example-do"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	charge := Charge{Order: "order-9", Amount: 1250}
	key := oncekey.Key("payments.charge", charge.Order, "v1")
	for attempt := 1; attempt <= 2; attempt++ {
		receipt, err := oncekey.Do(context.Background(), client, key, charge, func(ctx context.Context) (Receipt, error) {
			fmt.Println("charging with fencing token", oncekey.LeaseFrom(ctx).Token())
			return Receipt{ID: "rcpt-1"}, nil
		})
		fmt.Println(attempt, receipt.ID, err)
	}
	// The same key with other arguments is refused.
	_, err = oncekey.Do(context.Background(), client, key, Charge{Order: "order-9", Amount: 99},
		func(ctx context.Context) (Receipt, error) { return Receipt{}, nil })
	fmt.Println(errors.Is(err, oncekey.ErrKeyReused))
	// Output:
	// charging with fencing token 1
	// 1 rcpt-1 <nil>
	// 2 rcpt-1 <nil>
	// true
}

// Final fails the key for good: later runs get the stored error without running.
func ExampleFinal() {
	client, err := oncekey.Dial(os.Getenv("ONCEKEY_EXAMPLE_ADDR"), oncekey.WithTenant("example-final"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	key := oncekey.Key("payments.charge", "order-10", "v1")
	charge := func(ctx context.Context) (Receipt, error) {
		return Receipt{}, oncekey.Final(errors.New("card declined"))
	}
	_, err = oncekey.Do(context.Background(), client, key, "args", charge)
	fmt.Println(err)
	_, err = oncekey.Do(context.Background(), client, key, "args", charge)
	var failed *oncekey.OperationFailedError
	fmt.Println(errors.As(err, &failed), failed.Message)
	// Output:
	// card declined
	// true card declined
}

// MakeIdempotent wraps a function once; every call site then runs it once per key. By default the
// key is derived from the argument (the convention every Oncekey client library shares), so equal
// arguments are one operation, in any language.
func ExampleMakeIdempotent() {
	client, err := oncekey.Dial(os.Getenv("ONCEKEY_EXAMPLE_ADDR"), oncekey.WithTenant("example-wrap"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	charge := oncekey.MakeIdempotent(client, "payments.charge", func(ctx context.Context, c Charge) (Receipt, error) {
		fmt.Println("charging", c.Amount, "for", c.Order)
		return Receipt{ID: "rcpt-" + c.Order}, nil
	})
	for attempt := 1; attempt <= 2; attempt++ {
		receipt, err := charge(context.Background(), Charge{Order: "order-11", Amount: 1250})
		fmt.Println(attempt, receipt.ID, err)
	}
	key, _ := oncekey.CallKey(Charge{Order: "order-11", Amount: 1250})
	fmt.Println(key)
	// Output:
	// charging 1250 for order-11
	// 1 rcpt-order-11 <nil>
	// 2 rcpt-order-11 <nil>
	// sha256:674fe090f4cfdd126bd7ff8cf8f66dd771dbe406cd2f509f52e73b0c3546066f
}
