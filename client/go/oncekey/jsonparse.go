package oncekey

// A strict RFC 8259 parser for Canonicalize: it keeps what RFC 8785 needs (numbers as float64,
// objects as member lists so that duplicate names are caught, strings checked for lone
// surrogates), and notes the first number, in text order, that the canonical form cannot keep
// exactly (numbers.go), with its JSON path.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects a fingerprinted JSON text may have (the
// outermost counts as 1), as the server's payload_json (docs/api.md): 128 allowed, 129 refused.
const MaxDepth = 128

type member struct {
	name  string
	value any
}

// parser is a strict RFC 8259 parser that keeps what RFC 8785 needs: numbers as float64, objects
// as member lists (so that duplicates are caught), strings checked for lone surrogates.
type parser struct {
	text string
	pos  int
	// path is where the parser is: member names (string) and array indexes (int).
	path []any
	// inexact is the first number the canonical form cannot keep exactly, if any.
	inexact *InexactNumberError
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

// nest refuses a container that would open deeper than MaxDepth (the path holds one step per
// open container, so its length is the depth outside this one).
func (p *parser) nest() error {
	if len(p.path) >= MaxDepth {
		return p.errorf("arrays and objects nest deeper than %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) object() (any, error) {
	if err := p.nest(); err != nil {
		return nil, err
	}
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
		p.path = append(p.path, name)
		v, err := p.value()
		p.path = p.path[:len(p.path)-1]
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
	if err := p.nest(); err != nil {
		return nil, err
	}
	p.pos++ // [
	items := []any{}
	p.space()
	if p.pos < len(p.text) && p.text[p.pos] == ']' {
		p.pos++
		return items, nil
	}
	for {
		p.space()
		p.path = append(p.path, len(items))
		v, err := p.value()
		p.path = p.path[:len(p.path)-1]
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
	literal := p.text[start:p.pos]
	f, err := strconv.ParseFloat(literal, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, p.errorf("number out of the double range")
	}
	if p.inexact == nil {
		if why, ok := inexactLiteral(literal, f); !ok {
			p.inexact = &InexactNumberError{Path: jsonPath(p.path), Why: why}
		}
	}
	return f, nil
}
