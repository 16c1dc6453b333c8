package oncekey

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// FingerprintLen is the length in bytes of a fingerprint.
const FingerprintLen = sha256.Size

// ErrInvalidJSON is wrapped by the errors of Canonicalize and FingerprintJSON for a text that is
// not JSON, or not I-JSON (RFC 7493: duplicate member names, lone surrogates, numbers out of the
// IEEE 754 double range).
var ErrInvalidJSON = errors.New("oncekey: invalid JSON")

// Fingerprint returns the SHA-256 of the RFC 8785 canonical JSON of args, the operation's
// significant arguments. args is anything encoding/json marshals (structs, maps, slices, numbers);
// attempt numbers, timestamps and trace ids must stay out of it.
//
// Numbers are lossless or refused (docs/api.md#numbers): an integer beyond ±(2^53−1), a float of
// magnitude beyond it, or a json.Number whose canonical form would change its value is refused
// with an *InexactNumberError naming its JSON path in the marshalled text (struct fields in
// order, map keys sorted); send such numbers as strings.
func Fingerprint(args any) ([]byte, error) {
	text, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("oncekey: fingerprint: %w", err)
	}
	return FingerprintJSON(string(text))
}

// FingerprintJSON returns the SHA-256 of the RFC 8785 canonical form of a JSON text: the same 32
// bytes the server computes from ClaimRequest.payload_json.
func FingerprintJSON(text string) ([]byte, error) {
	canonical, err := Canonicalize(text)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(canonical))
	return sum[:], nil
}

// Canonicalize returns the RFC 8785 (JCS) canonical form of a JSON text. A number the canonical
// form cannot keep exactly (docs/api.md#numbers: beyond ±(2^53−1), or more digits than its double
// keeps) is refused with an *InexactNumberError naming the first such number's JSON path; a text
// that is not I-JSON, or nests arrays and objects deeper than MaxDepth, with an error wrapping
// ErrInvalidJSON.
func Canonicalize(text string) (string, error) {
	p := parser{text: text}
	p.space()
	v, err := p.value()
	if err == nil {
		p.space()
		if p.pos != len(p.text) {
			err = p.errorf("trailing characters")
		}
	}
	if err != nil {
		return "", err
	}
	if p.inexact != nil {
		return "", p.inexact
	}
	var b strings.Builder
	writeValue(&b, v)
	return b.String(), nil
}

func writeValue(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		b.WriteString(formatNumber(v))
	case string:
		writeString(b, v)
	case []any:
		b.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, item)
		}
		b.WriteByte(']')
	case []member:
		sort.Slice(v, func(i, j int) bool { return lessUTF16(v[i].name, v[j].name) })
		b.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, m.name)
			b.WriteByte(':')
			writeValue(b, m.value)
		}
		b.WriteByte('}')
	}
}

// lessUTF16 orders member names by their UTF-16 code units (RFC 8785 §3.2.3).
func lessUTF16(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

// writeString escapes only '"', '\' and control characters, with JSON's short forms where they
// exist and lowercase \u00xx otherwise (RFC 8785 §3.2.2.2).
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// formatNumber prints a double the way ECMAScript's Number.prototype.toString does
// (RFC 8785 §3.2.2.3): shortest round-trip digits, exponent form below 1e-6 and from 1e21.
func formatNumber(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// Shortest digits d1.d2...dk and exponent: f = 0.d1d2...dk × 10^n.
	mantissa, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mantissa, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	k, n := len(digits), e+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	expSign := "+"
	if n-1 < 0 {
		expSign = "-"
	}
	out := digits[:1]
	if k > 1 {
		out += "." + digits[1:]
	}
	return sign + out + "e" + expSign + strconv.Itoa(abs(n-1))
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
