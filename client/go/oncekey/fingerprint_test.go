package oncekey

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

type vector struct {
	Name      string         `json:"name"`
	Input     string         `json:"input"`
	Canonical string         `json:"canonical"`
	SHA256    string         `json:"sha256"`
	Error     bool           `json:"error"`
	Refused   *refusedNumber `json:"refused_number"`
}

// refusedNumber is a vector's number that the fingerprint refuses (docs/api.md#numbers).
type refusedNumber struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// TestVectors checks the shared RFC 8785 vectors (tests/vectors/fingerprint.json): canonical
// text and SHA-256, a text that is not I-JSON refused with ErrInvalidJSON, and a number that
// cannot be fingerprinted exactly refused naming its path.
func TestVectors(t *testing.T) {
	raw, err := os.ReadFile("../../../tests/vectors/fingerprint.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Vectors []vector }
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			canonical, err := Canonicalize(v.Input)
			if v.Refused != nil {
				var inexact *InexactNumberError
				if !errors.As(err, &inexact) || !errors.Is(err, ErrInexactNumber) {
					t.Fatalf("want an *InexactNumberError, got %q, %v", canonical, err)
				}
				if inexact.Path != v.Refused.Path || inexact.Why.String() != v.Refused.Why {
					t.Fatalf("refused %s (%v), want %s (%s)", inexact.Path, inexact.Why, v.Refused.Path, v.Refused.Why)
				}
				if _, err := FingerprintJSON(v.Input); !errors.Is(err, ErrInexactNumber) {
					t.Fatalf("FingerprintJSON: %v", err)
				}
				return
			}
			if v.Error {
				if !errors.Is(err, ErrInvalidJSON) {
					t.Fatalf("want ErrInvalidJSON, got %q, %v", canonical, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if canonical != v.Canonical {
				t.Fatalf("canonical\n got %s\nwant %s", canonical, v.Canonical)
			}
			fp, err := FingerprintJSON(v.Input)
			if err != nil || hex.EncodeToString(fp) != v.SHA256 {
				t.Fatalf("sha256 %x, %v; want %s", fp, err, v.SHA256)
			}
		})
	}
}

// TestFingerprintOfGoValues: native values fingerprint like their JSON text.
func TestFingerprintOfGoValues(t *testing.T) {
	type charge struct {
		Currency string  `json:"currency"`
		Amount   int     `json:"amount"`
		Rate     float64 `json:"rate"`
	}
	a, err := Fingerprint(charge{"EUR", 1250, 0.1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := FingerprintJSON(`{"rate":1e-1,"amount":1250.0,"currency":"EUR"}`)
	if hex.EncodeToString(a) != hex.EncodeToString(b) {
		t.Fatalf("%x != %x", a, b)
	}
	if _, err := Fingerprint(map[string]any{"x": func() {}}); err == nil {
		t.Fatal("want an error for an unmarshalable value")
	}
}

// TestGoValuesWithInexactNumbersAreRefused: integers beyond ±(2^53−1), floats beyond it and
// json.Number literals with more digits than a double keeps are refused naming their path, as
// the server refuses them in payload_json; numbers up to 2^53−1 fingerprint as before.
func TestGoValuesWithInexactNumbersAreRefused(t *testing.T) {
	type order struct {
		ID    int64  `json:"id"`
		Lines []any  `json:"lines"`
		Note  string `json:"note"`
	}
	for _, c := range []struct {
		args any
		path string
		why  Inexact
	}{
		{order{ID: 1 << 53}, "$.id", InexactMagnitude},
		{order{ID: -(1 << 53)}, "$.id", InexactMagnitude},
		{uint64(math.MaxUint64), "$", InexactMagnitude},
		{[]any{1, int64(math.MinInt64)}, "$[1]", InexactMagnitude},
		{order{Lines: []any{0.5, map[string]any{"unit price": 1.5e300}}}, `$.lines[1]["unit price"]`, InexactMagnitude},
		{map[string]any{"rate": json.Number("0.1000000000000000055511151231257827")}, "$.rate", InexactPrecision},
		{map[string]any{"b": uint(1<<53 + 1), "a": 1e21}, "$.a", InexactMagnitude}, // map keys in sorted order
	} {
		_, err := Fingerprint(c.args)
		var inexact *InexactNumberError
		if !errors.As(err, &inexact) || inexact.Path != c.path || inexact.Why != c.why {
			t.Errorf("%#v: got %v, want %s refused (%v)", c.args, err, c.path, c.why)
			continue
		}
		if !errors.Is(err, ErrInexactNumber) || !errors.Is(err, ErrInvalidArgument) ||
			!strings.Contains(err.Error(), c.path+": ") || !strings.Contains(err.Error(), "send it as a string") {
			t.Errorf("%v: the error does not name the path and say what to do", err)
		}
	}
	ok, err := Fingerprint(order{ID: 1<<53 - 1, Lines: []any{-(1<<53 - 1), 0.1, json.Number("4.50")}})
	want, _ := FingerprintJSON(`{"id":9007199254740991,"lines":[-9007199254740991,0.1,4.5],"note":""}`)
	if err != nil || hex.EncodeToString(ok) != hex.EncodeToString(want) {
		t.Fatalf("numbers within 2^53-1: %x, %v; want %x", ok, err, want)
	}
}

func TestNestingDeeperThanMaxDepthIsRefused(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat("[", depth) + strings.Repeat("]", depth)
	}
	if _, err := Canonicalize(nested(MaxDepth)); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	_, err := Canonicalize(nested(MaxDepth + 1))
	if !errors.Is(err, ErrInvalidJSON) || !strings.Contains(err.Error(), "deeper than 128") {
		t.Fatalf("%d levels: %v", MaxDepth+1, err)
	}
	// Objects count as arrays do, and the check is on the way in (nothing deeper is parsed).
	deep := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	if _, err := FingerprintJSON(deep); err != nil {
		t.Fatalf("%d objects: %v", MaxDepth, err)
	}
	if _, err := FingerprintJSON(`[` + deep + `]`); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("%d levels: %v", MaxDepth+1, err)
	}
}
