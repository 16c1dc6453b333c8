package oncekey

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// FingerprintLen is the length in bytes of a fingerprint.
const FingerprintLen = sha256.Size

// ErrInvalidJSON is wrapped by every error of Canonicalize and FingerprintJSON: the text is not
// JSON, or not I-JSON (RFC 7493: duplicate member names, lone surrogates, numbers out of the
// IEEE 754 double range).
var ErrInvalidJSON = errors.New("invalid JSON")

// Fingerprint returns the SHA-256 of the RFC 8785 canonical JSON of args, the operation's
// significant arguments. args is anything encoding/json marshals (structs, maps, slices, numbers);
// attempt numbers, timestamps and trace ids must stay out of it.
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

// Canonicalize returns the RFC 8785 (JCS) canonical form of a JSON text.
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
	var b strings.Builder
	writeValue(&b, v)
	return b.String(), nil
}

type member struct {
	name  string
	value any
}

// parser is a strict RFC 8259 parser that keeps what RFC 8785 needs: numbers as float64, objects
// as member lists (so that duplicates are caught), strings checked for lone surrogates.
type parser struct {
	text string
	pos  int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrInvalidJSON, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	for p.pos < len(p.text) && strings.IndexByte(" \t\n\r", p.text[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *parser) value() (any, error) {
	if p.pos >= len(p.text) {
		return nil, p.errorf("unexpected end")
	}
	switch c := p.text[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		for _, lit := range []struct {
			text  string
			value any
		}{{"true", true}, {"false", false}, {"null", nil}} {
			if strings.HasPrefix(p.text[p.pos:], lit.text) {
				p.pos += len(lit.text)
				return lit.value, nil
			}
		}
		return nil, p.errorf("unexpected character %q", c)
	}
}

func (p *parser) object() (any, error) {
	p.pos++ // {
	members := []member{}
	seen := map[string]bool{}
	p.space()
	if p.pos < len(p.text) && p.text[p.pos] == '}' {
		p.pos++
		return members, nil
	}
	for {
		p.space()
		if p.pos >= len(p.text) || p.text[p.pos] != '"' {
			return nil, p.errorf("expected a member name")
		}
		name, err := p.string()
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, p.errorf("duplicate member name %q", name)
		}
		seen[name] = true
		p.space()
		if p.pos >= len(p.text) || p.text[p.pos] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.pos++
		p.space()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		members = append(members, member{name, v})
		p.space()
		if p.pos < len(p.text) && p.text[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.text) && p.text[p.pos] == '}' {
			p.pos++
			return members, nil
		}
		return nil, p.errorf("expected ',' or '}'")
	}
}

func (p *parser) array() (any, error) {
	p.pos++ // [
	items := []any{}
	p.space()
	if p.pos < len(p.text) && p.text[p.pos] == ']' {
		p.pos++
		return items, nil
	}
	for {
		p.space()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		p.space()
		if p.pos < len(p.text) && p.text[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.text) && p.text[p.pos] == ']' {
			p.pos++
			return items, nil
		}
		return nil, p.errorf("expected ',' or ']'")
	}
}

func (p *parser) string() (string, error) {
	p.pos++ // "
	var b strings.Builder
	for {
		if p.pos >= len(p.text) {
			return "", p.errorf("unterminated string")
		}
		c := p.text[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c == '\\':
			if p.pos+1 >= len(p.text) {
				return "", p.errorf("unterminated escape")
			}
			esc := p.text[p.pos+1]
			p.pos += 2
			if i := strings.IndexByte(`"\/bfnrt`, esc); i >= 0 {
				b.WriteByte("\"\\/\b\f\n\r\t"[i])
				continue
			}
			if esc != 'u' {
				return "", p.errorf("invalid escape \\%c", esc)
			}
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || !strings.HasPrefix(p.text[p.pos:], `\u`) {
					return "", p.errorf("lone surrogate")
				}
				p.pos += 2
				low, err := p.hex4()
				if err != nil {
					return "", err
				}
				r = utf16.DecodeRune(r, low)
				if r == utf8.RuneError {
					return "", p.errorf("lone surrogate")
				}
			}
			b.WriteRune(r)
		default:
			r, size := utf8.DecodeRuneInString(p.text[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8")
			}
			b.WriteString(p.text[p.pos : p.pos+size])
			p.pos += size
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.text) {
		return 0, p.errorf("short \\u escape")
	}
	n, err := strconv.ParseUint(p.text[p.pos:p.pos+4], 16, 32)
	if err != nil {
		return 0, p.errorf("invalid \\u escape")
	}
	p.pos += 4
	return rune(n), nil
}

func (p *parser) number() (any, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.text) && p.text[p.pos] >= '0' && p.text[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.text[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	if n := digits(); n == 0 || (n > 1 && p.text[intStart] == '0') {
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(p.text) && p.text[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.pos < len(p.text) && (p.text[p.pos] == 'e' || p.text[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.text) && (p.text[p.pos] == '+' || p.text[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	f, err := strconv.ParseFloat(p.text[start:p.pos], 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, p.errorf("number out of the double range")
	}
	return f, nil
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
