package oncekey

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// argumentsCase is one case of tests/vectors/arguments.json.
type argumentsCase struct {
	Name      string          `json:"name"`
	Call      json.RawMessage `json:"call"`
	Arguments json.RawMessage `json:"arguments"`
	Canonical string          `json:"canonical"`
	SHA256    string          `json:"sha256"`
	Key       string          `json:"key"`
	Refused   *refusedNumber  `json:"refused_number"`
}

func argumentsVectors(t *testing.T) []argumentsCase {
	t.Helper()
	raw, err := os.ReadFile("../../../tests/vectors/arguments.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Cases []argumentsCase }
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no cases")
	}
	return file.Cases
}

// goValues turns a case's call into the Go values a caller would pass: integers as int64, other
// numbers as float64, {"$bytes": base64} as []byte, arrays as []any and objects as maps.
func goValues(t *testing.T, call json.RawMessage) []any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(call))
	d.UseNumber()
	var values []any
	if err := d.Decode(&values); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		values[i] = goValue(t, v)
	}
	return values
}

func goValue(t *testing.T, v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil && !strings.ContainsAny(string(v), ".eE") {
			return i
		}
		f, err := v.Float64()
		if err != nil {
			t.Fatal(err)
		}
		return f
	case []any:
		for i, item := range v {
			v[i] = goValue(t, item)
		}
		return v
	case map[string]any:
		if b64, ok := v["$bytes"].(string); ok && len(v) == 1 {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		for name, member := range v {
			v[name] = goValue(t, member)
		}
		return v
	}
	return v
}

// TestCallArgumentsVectors checks every case of the shared default-arguments vectors: the
// arguments, their canonical text and fingerprint, the key, or the refused number's path.
func TestCallArgumentsVectors(t *testing.T) {
	for _, c := range argumentsVectors(t) {
		t.Run(c.Name, func(t *testing.T) {
			values := goValues(t, c.Call)
			key, err := CallKey(values...)
			if c.Refused != nil {
				var inexact *InexactNumberError
				if !errors.As(err, &inexact) || inexact.Path != c.Refused.Path {
					t.Fatalf("want %s refused, got %q, %v", c.Refused.Path, key, err)
				}
				return
			}
			if err != nil || key != c.Key {
				t.Fatalf("key %q, %v; want %q", key, err, c.Key)
			}
			args, err := CallArguments(values...)
			if err != nil {
				t.Fatal(err)
			}
			text, _ := json.Marshal(args)
			canonical, err := Canonicalize(string(text))
			if err != nil || canonical != c.Canonical {
				t.Fatalf("canonical %s, %v; want %s", canonical, err, c.Canonical)
			}
			if want, _ := Canonicalize(string(c.Arguments)); canonical != want {
				t.Fatalf("arguments %s, want %s", canonical, want)
			}
			fp, _ := Fingerprint(args)
			if hex.EncodeToString(fp) != c.SHA256 {
				t.Fatalf("sha256 %x, want %s", fp, c.SHA256)
			}
		})
	}
}

// TestMakeIdempotentClaimsTheVectorsKeyAndFingerprint runs the single-argument cases through a
// wrapped function against the server: the record is under the case's key with its fingerprint,
// or the call is refused naming the number's path before anything is sent.
func TestMakeIdempotentClaimsTheVectorsKeyAndFingerprint(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	tested := 0
	for _, v := range argumentsVectors(t) {
		values := goValues(t, v.Call)
		if len(values) != 1 {
			continue
		}
		tested++
		t.Run(v.Name, func(t *testing.T) {
			var runs atomic.Int32
			wrapped := MakeIdempotent(c, "vectors.single", func(_ context.Context, a any) (string, error) {
				runs.Add(1)
				return "ran", nil
			})
			got, err := wrapped(ctx, values[0])
			if v.Refused != nil {
				var inexact *InexactNumberError
				if !errors.As(err, &inexact) || inexact.Path != v.Refused.Path || runs.Load() != 0 {
					t.Fatalf("want %s refused without running, got %q, %v", v.Refused.Path, got, err)
				}
				return
			}
			if err != nil || got != "ran" || runs.Load() != 1 {
				t.Fatalf("%q, %v after %d runs", got, err, runs.Load())
			}
			rec, err := c.Lookup(ctx, RawKey("vectors.single", v.Key))
			if err != nil || hex.EncodeToString(rec.Fingerprint) != v.SHA256 {
				t.Fatalf("record under %s: %+v, %v", v.Key, rec, err)
			}
		})
	}
	if tested < 3 {
		t.Fatalf("only %d single-argument cases", tested)
	}
}

type mail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	TraceID string `json:"-"`
}

// A wrapped function runs once per key: the second call replays, and the detailed variant says
// so; RunOptions given to the wrapper apply to every call.
func TestMakeIdempotentRunsOnceAndReplays(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	var runs atomic.Int32
	send := func(ctx context.Context, e mail) (string, error) {
		runs.Add(1)
		if LeaseFrom(ctx) == nil {
			t.Error("the function runs without its lease in the context")
		}
		return "msg-" + e.To, nil
	}
	wrapped := MakeIdempotentRun(c, "mail.send", send, AtMostOnce())
	e := mail{To: "ada@example.com", Subject: "Your ticket #481"}
	first, err := wrapped(ctx, e)
	if err != nil || first.Value != "msg-ada@example.com" || first.Replayed {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	second, err := MakeIdempotent(c, "mail.send", send, AtMostOnce())(ctx, e)
	if err != nil || second != "msg-ada@example.com" || runs.Load() != 1 {
		t.Fatalf("second call: %q, %v after %d runs", second, err, runs.Load())
	}
	again, err := wrapped(ctx, e)
	if err != nil || !again.Replayed || again.Record.Semantics != SemanticsAtMostOnce {
		t.Fatalf("third call: %+v, %v", again, err)
	}
	key, _ := CallKey(e)
	if again.Record.Key != key || again.Record.Namespace != "mail.send" {
		t.Fatalf("record %s/%s, want mail.send/%s", again.Record.Namespace, again.Record.Key, key)
	}
}

// KeyFunc and ArgsFunc choose the key and the fingerprinted arguments: the same key with other
// significant arguments is refused, other arguments outside them are not significant.
func TestMakeIdempotentKeyAndArgsFuncs(t *testing.T) {
	c := dial(t, sharedServer)
	ctx := context.Background()
	var runs atomic.Int32
	wrapped := MakeIdempotent(c, "mail.send", func(_ context.Context, e mail) (int32, error) {
		return runs.Add(1), nil
	}, KeyFunc(func(e mail) string { return "ticket-481:" + e.To }),
		ArgsFunc(func(e mail) any { return e.Subject }))
	if n, err := wrapped(ctx, mail{To: "ada", Subject: "s", TraceID: "1"}); err != nil || n != 1 {
		t.Fatalf("first call: %d, %v", n, err)
	}
	if n, err := wrapped(ctx, mail{To: "ada", Subject: "s", TraceID: "2"}); err != nil || n != 1 {
		t.Fatalf("a retry with another trace id: %d, %v", n, err)
	}
	if _, err := wrapped(ctx, mail{To: "ada", Subject: "other"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the same key with another subject: %v", err)
	}
	rec, err := c.Lookup(ctx, RawKey("mail.send", "ticket-481:ada"))
	want, _ := Fingerprint("s")
	if err != nil || !bytes.Equal(rec.Fingerprint, want) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	byKey := MakeIdempotent(c, "ignored", func(_ context.Context, e mail) (int32, error) { return 7, nil },
		KeyFunc(func(e mail) OperationKey { return Key("mail.other", e.To, "v1") }))
	if n, err := byKey(ctx, mail{To: "bob"}); err != nil || n != 7 {
		t.Fatalf("an OperationKey from KeyFunc: %d, %v", n, err)
	}
	if _, err := c.Lookup(ctx, Key("mail.other", "bob", "v1")); err != nil {
		t.Fatalf("no record under the OperationKey: %v", err)
	}
	bad := MakeIdempotent(c, "Not A Namespace", func(context.Context, mail) (int, error) { return 0, nil })
	if _, err := bad(ctx, mail{}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("a bad namespace: %v", err)
	}
}

// A KeyFunc or ArgsFunc of another argument type is a programming error caught when wrapping.
func TestMakeIdempotentPanicsOnAFuncOfAnotherType(t *testing.T) {
	for name, opt := range map[string]WrapOption{
		"KeyFunc":  KeyFunc(func(s string) string { return s }),
		"ArgsFunc": ArgsFunc(func(n int) any { return n }),
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(string), "oncekey.mail") {
					t.Errorf("%s: panic %v", name, p)
				}
			}()
			MakeIdempotent(nil, "mail.send", func(context.Context, mail) (int, error) { return 0, nil }, opt)
		}()
	}
}
