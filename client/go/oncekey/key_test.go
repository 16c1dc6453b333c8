package oncekey

import (
	"errors"
	"strings"
	"testing"
)

func TestKeysAreDeterministicAndInjective(t *testing.T) {
	k := Key("tasks.create", "ticket-481", "create-task", "v1")
	if k.Err() != nil || k.Key() != "ticket-481:create-task:v1" || k.Namespace() != "tasks.create" {
		t.Fatalf("%v %v", k, k.Err())
	}
	if k != Key("tasks.create", "ticket-481", "create-task", "v1") {
		t.Fatal("not deterministic")
	}
	x, y := Key("n", "a:b", "c"), Key("n", "a", "b:c")
	if x.Key() == y.Key() || x.Key() != "a%3Ab:c" {
		t.Fatalf("%q %q", x.Key(), y.Key())
	}
	if got := Key("n", "100%", "a/b").Key(); got != "100%25:a%2Fb" {
		t.Fatalf("%q", got)
	}
	if got := RawKey("n", "a:b/c").Key(); got != "a:b/c" {
		t.Fatalf("%q", got)
	}
}

func TestChildrenRecordTheirParent(t *testing.T) {
	order := Key("orders.place", "order-9", "v2")
	charge := order.ChildIn("payments.charge", "charge")
	if charge.Namespace() != "payments.charge" || charge.Key() != "order-9:v2/charge" ||
		*charge.Parent() != (OperationRef{"orders.place", "order-9:v2"}) {
		t.Fatalf("%v %v", charge, charge.Parent())
	}
	refund := charge.Child("refund/partial")
	if refund.Key() != "order-9:v2/charge/refund%2Fpartial" || refund.Parent().Key != charge.Key() ||
		refund.Namespace() != "payments.charge" {
		t.Fatalf("%v %v", refund, refund.Parent())
	}
	audited := Key("n", "x").WithParent(order)
	if audited.Key() != "x" || *audited.Parent() != (OperationRef{"orders.place", "order-9:v2"}) {
		t.Fatalf("%v", audited.Parent())
	}
}

func TestInvalidKeysAreRefused(t *testing.T) {
	for name, k := range map[string]OperationKey{
		"namespace":     Key("Bad", "x"),
		"no parts":      Key("n"),
		"empty part":    Key("n", "a", ""),
		"control":       Key("n", "a\nb"),
		"too long":      Key("n", strings.Repeat("x", 257)),
		"invalid utf-8": RawKey("n", "\xff"),
		"empty step":    Key("n", "a").Child(""),
		"bad parent":    Key("n", "a").WithParent(Key("", "x")),
	} {
		if !errors.Is(k.Err(), ErrInvalidKey) {
			t.Errorf("%s: %v", name, k.Err())
		}
	}
	if err := Key("n", strings.Repeat("x", 256)).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestRandomKeysAreExplicitAndDistinct(t *testing.T) {
	a, b := RandomKey("n"), RandomKey("n")
	if a == b || !strings.HasPrefix(a.Key(), "random-") || len(a.Key()) != len("random-")+32 {
		t.Fatalf("%v %v", a, b)
	}
}
