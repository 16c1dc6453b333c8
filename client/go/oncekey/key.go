package oncekey

// Deterministic operation keys: a namespace plus a key built from stable business parts and an
// operation version, with child keys derived from a parent key and a step name. The same
// construction as the Rust client (client/rust/src/key.rs), so every language derives the same keys.
// Nothing here makes up a key on its own: the only random constructor is the explicit RandomKey.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyBytes is the longest key the server accepts, in bytes.
const MaxKeyBytes = 256

// OperationKey names one operation in the ledger: a namespace (the kind of operation, e.g.
// "payments.charge") and an idempotency key, with the parent operation it was derived from.
//
// Build keys from values that stay the same across every retry of the intent (order id, ticket
// id, step name) and end with an operation version you bump when the operation's meaning changes.
// Parts are joined with ':' and child steps with '/'; a '%', ':' or '/' inside a part is
// percent-encoded, so different parts never produce the same key.
//
// A key that cannot be built (bad namespace, empty part, too long) carries its error: Err reports
// it, and Do refuses it before any RPC with an error matching ErrInvalidKey.
type OperationKey struct {
	namespace, key string
	parent         *OperationRef
	err            error
}

// Key builds a key from stable business parts, the last of which should be the operation version:
// Key("tasks.create", "ticket-481", "create-task", "v1") is "ticket-481:create-task:v1".
func Key(namespace string, parts ...string) OperationKey {
	var b strings.Builder
	for i, part := range parts {
		if part == "" {
			return invalidKey(namespace, "a key needs at least one part and no empty part")
		}
		if i > 0 {
			b.WriteByte(':')
		}
		escapeInto(&b, part)
	}
	return checked(namespace, b.String(), nil)
}

// RawKey takes a key verbatim (e.g. an Idempotency-Key header your own caller sent), validated but
// not escaped.
func RawKey(namespace, key string) OperationKey { return checked(namespace, key, nil) }

// RandomKey makes a random key ("random-" and 32 hex digits).
//
// Only for intents with no stable identity of their own, and only if you store the key before the
// first attempt and reuse the stored key for every retry: a key made up again on retry is a new
// intent, and the ledger will let the side effect happen twice.
func RandomKey(namespace string) OperationKey {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return invalidKey(namespace, err.Error())
	}
	return checked(namespace, "random-"+hex.EncodeToString(b[:]), nil)
}

// Child is the key of a step of this operation in the same namespace ("<this key>/<step>"),
// recording this operation as its parent.
func (k OperationKey) Child(step string) OperationKey { return k.ChildIn(k.namespace, step) }

// ChildIn is the key of a step of this operation in another namespace (e.g. a workflow step that
// sends an email): "<this key>/<step>", recording this operation as its parent.
func (k OperationKey) ChildIn(namespace, step string) OperationKey {
	if k.err != nil {
		return k
	}
	if step == "" {
		return invalidKey(namespace, "a child step must not be empty")
	}
	var b strings.Builder
	b.WriteString(k.key)
	b.WriteByte('/')
	escapeInto(&b, step)
	return checked(namespace, b.String(), &OperationRef{Namespace: k.namespace, Key: k.key})
}

// WithParent records parent as this operation's parent without changing the key.
func (k OperationKey) WithParent(parent OperationKey) OperationKey {
	if k.err == nil && parent.err != nil {
		k.err = parent.err
	}
	k.parent = &OperationRef{Namespace: parent.namespace, Key: parent.key}
	return k
}

// Namespace is the operation's namespace, e.g. "payments.charge".
func (k OperationKey) Namespace() string { return k.namespace }

// Key is the idempotency key sent to the server.
func (k OperationKey) Key() string { return k.key }

// Parent is the operation this key was derived from (sent as Claim.parent), or nil.
func (k OperationKey) Parent() *OperationRef { return k.parent }

// Err is why the key could not be built (matching ErrInvalidKey), or nil.
func (k OperationKey) Err() error { return k.err }

// String is "namespace/key".
func (k OperationKey) String() string { return k.namespace + "/" + k.key }

func invalidKey(namespace, why string) OperationKey {
	return OperationKey{namespace: namespace, err: fmt.Errorf("%w: %s", ErrInvalidKey, why)}
}

func checked(namespace, key string, parent *OperationRef) OperationKey {
	switch {
	case !validNamespace(namespace):
		return invalidKey(namespace, fmt.Sprintf("namespace %q does not match ^[a-z0-9][a-z0-9._-]{0,127}$", namespace))
	case key == "":
		return invalidKey(namespace, "a key needs at least one part and no empty part")
	case len(key) > MaxKeyBytes:
		return invalidKey(namespace, fmt.Sprintf("the key is %d bytes long; at most %d are allowed", len(key), MaxKeyBytes))
	case !utf8.ValidString(key):
		return invalidKey(namespace, "a key must be valid UTF-8")
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return invalidKey(namespace, "a key must not contain control characters")
	}
	return OperationKey{namespace: namespace, key: key, parent: parent}
}

func escapeInto(b *strings.Builder, part string) {
	for _, c := range part {
		switch c {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteRune(c)
		}
	}
}

func validNamespace(ns string) bool {
	if ns == "" || len(ns) > 128 {
		return false
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}
