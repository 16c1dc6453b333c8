package oncekey

// Lossless numbers (docs/api.md#numbers): RFC 8785 compares numbers as IEEE 754 doubles, so two
// arguments whose numbers differ beyond what a double holds would share a fingerprint. A number is
// fingerprinted only when its magnitude is at most 2^53 − 1 and, in a JSON text, its canonical
// form has exactly the literal's value; anything else is refused naming its JSON path, so the
// caller sends it as a string. The same rule as the server's (proto/src/fingerprint/exact.rs) and
// every client library's; tests/vectors/fingerprint.json pins it.

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// MaxExactNumber is the largest magnitude a fingerprinted number may have: 2^53 − 1, up to which
// every integer is exactly a double in every language (JavaScript's Number.MAX_SAFE_INTEGER).
const MaxExactNumber = 1<<53 - 1

// ErrInexactNumber is matched by an *InexactNumberError.
var ErrInexactNumber = errors.New("oncekey: a number cannot be fingerprinted exactly")

// Inexact says what a double cannot hold of a refused number.
type Inexact int

const (
	// InexactMagnitude: beyond ±(2^53−1), where neighbouring integers share a double.
	InexactMagnitude Inexact = iota + 1
	// InexactPrecision: more digits than a double keeps; the canonical form would change the value.
	InexactPrecision
)

// String is "magnitude" or "precision" (the shared vectors' `why`).
func (w Inexact) String() string {
	switch w {
	case InexactMagnitude:
		return "magnitude"
	case InexactPrecision:
		return "precision"
	}
	return fmt.Sprintf("Inexact(%d)", int(w))
}

// InexactNumberError refuses arguments holding a number the fingerprint cannot keep exactly
// (errors.Is ErrInexactNumber, and ErrInvalidArgument: the server refuses such arguments too).
// Nothing was sent; send the number as a string.
type InexactNumberError struct {
	// Path is the number's JSONPath from the arguments' root, e.g. `$.id` or
	// `$.lines[2]["unit price"]`: identifier members as .name, others as ["name"] (JSON string
	// syntax), array items as [i]; the first such number in text order.
	Path string
	// Why is what a double cannot hold of it.
	Why Inexact
}

func (e *InexactNumberError) Error() string {
	why := "a number with more digits than a double keeps cannot be fingerprinted exactly"
	if e.Why == InexactMagnitude {
		why = fmt.Sprintf("a number beyond ±(2^53−1) (%d) cannot be fingerprinted exactly", MaxExactNumber)
	}
	return fmt.Sprintf("oncekey: %s: %s; send it as a string", e.Path, why)
}

// Is matches ErrInexactNumber and ErrInvalidArgument.
func (e *InexactNumberError) Is(target error) bool {
	return target == ErrInexactNumber || target == ErrInvalidArgument
}

// inexactLiteral judges a JSON number literal, given the double f it denotes.
func inexactLiteral(literal string, f float64) (Inexact, bool) {
	if math.Abs(f) > MaxExactNumber {
		return InexactMagnitude, false
	}
	if decimalOf(literal) != decimalOf(formatNumber(f)) {
		return InexactPrecision, false
	}
	return 0, true
}

// decimal is the exact value of a number literal: its sign, significant digits without leading
// or trailing zeros, and the power of ten of the last digit; digits "" for zero (of any sign).
type decimal struct {
	negative bool
	digits   string
	exponent int64
}

func decimalOf(literal string) decimal {
	unsigned, negative := strings.CutPrefix(literal, "-")
	mantissa, exponent := unsigned, int64(0)
	if at := strings.IndexAny(unsigned, "eE"); at >= 0 {
		mantissa, exponent = unsigned[:at], saturatingExponent(unsigned[at+1:])
	}
	whole, fraction, _ := strings.Cut(mantissa, ".")
	significant := strings.TrimLeft(whole+fraction, "0")
	trimmed := strings.TrimRight(significant, "0")
	if trimmed == "" {
		return decimal{}
	}
	trailing := int64(len(significant) - len(trimmed))
	return decimal{negative: negative, digits: trimmed,
		exponent: saturatingAdd(saturatingAdd(exponent, -int64(len(fraction))), trailing)}
}

// saturatingExponent is an exponent's value ("+12", "-3", "7"), saturating far beyond any
// double's range.
func saturatingExponent(text string) int64 {
	sign := int64(1)
	switch {
	case strings.HasPrefix(text, "-"):
		sign, text = -1, text[1:]
	case strings.HasPrefix(text, "+"):
		text = text[1:]
	}
	var n int64
	for i := 0; i < len(text); i++ {
		if n > math.MaxInt64/20 {
			break // already far beyond any double's exponent
		}
		n = n*10 + int64(text[i]-'0')
	}
	return sign * n
}

func saturatingAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// jsonPath spells a parser path the way the server does: `$`, then `.name` for identifier
// members, `["name"]` (JSON string syntax) for other members and `[i]` for items.
func jsonPath(steps []any) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, step := range steps {
		switch s := step.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		case string:
			if isIdentifier(s) {
				b.WriteString("." + s)
			} else {
				b.WriteByte('[')
				writeString(&b, s)
				b.WriteByte(']')
			}
		}
	}
	return b.String()
}

func isIdentifier(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}
