package oncekey

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

type vector struct {
	Name      string `json:"name"`
	Input     string `json:"input"`
	Canonical string `json:"canonical"`
	SHA256    string `json:"sha256"`
	Error     bool   `json:"error"`
}

// TestVectors checks the shared RFC 8785 vectors (tests/vectors/fingerprint.json).
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
