package oncekey

// The README's examples, run as written (only the server address changed) in a scratch module that
// uses this client through a replace directive, as the README's install section says.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
)

func TestReadmeExampleRunsAsWritten(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	code, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 || !strings.Contains(code, `"127.0.0.1:50051"`) {
		t.Fatal("README.md has no Go example dialing 127.0.0.1:50051")
	}
	dir := scratchModule(t, strings.Replace(code, "127.0.0.1:50051", sharedServer.addr(), 1))
	want := "sending to ada@example.com\n1 msg-1 <nil>\n2 msg-1 <nil>\n"
	if got := goCmd(t, dir, "run", "."); got != want {
		t.Fatalf("first run printed\n%s\nwant\n%s", got, want)
	}
	if got := goCmd(t, dir, "run", "."); got != "1 msg-1 <nil>\n2 msg-1 <nil>\n" {
		t.Fatalf("second run printed\n%s", got)
	}
}

// TestReadmeApprovalExampleRunsAsWritten runs the approval-gate example the same way.
func TestReadmeApprovalExampleRunsAsWritten(t *testing.T) {
	dir := scratchModule(t, readmeExample(t, "## Approval gate"))
	lines := strings.Split(strings.TrimSpace(goCmd(t, dir, "run", ".")), "\n")
	if len(lines) != 3 || lines[0] != "awaiting approval: AWAITING_APPROVAL" ||
		!strings.HasPrefix(lines[1], "refunding 1500 on order-") || lines[2] != "1500 <nil>" {
		t.Fatalf("the approval example printed\n%s", strings.Join(lines, "\n"))
	}
}

// TestReadmeWrapperExampleRunsAsWritten runs the MakeIdempotent example twice: the second run only
// replays.
func TestReadmeWrapperExampleRunsAsWritten(t *testing.T) {
	dir := scratchModule(t, readmeExample(t, "## Wrapping a function"))
	if got := goCmd(t, dir, "run", "."); got != "welcoming grace@example.com\n1 msg-2 <nil>\n2 msg-2 <nil>\n" {
		t.Fatalf("first run printed\n%s", got)
	}
	if got := goCmd(t, dir, "run", "."); got != "1 msg-2 <nil>\n2 msg-2 <nil>\n" {
		t.Fatalf("second run printed\n%s", got)
	}
}

// TestReadmeListingExampleRunsAsWritten leaves two at-most-once charges of the README's tenant
// unknown (their holder claims and vanishes), then runs the reconciliation-loop example, which
// must list and settle both.
func TestReadmeListingExampleRunsAsWritten(t *testing.T) {
	c, err := Dial(sharedServer.addr(), WithTenant("demo"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	fp, _ := Fingerprint(map[string]any{"amount": 1250})
	var keys []string
	for i := range 2 {
		key := Key("payments.charge", fmt.Sprintf("readme-%d-%d", time.Now().UnixNano(), i))
		keys = append(keys, key.Key())
		if _, err := c.Claim(ctx, &oncekeyv1.ClaimRequest{Namespace: key.Namespace(), Key: key.Key(),
			Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: fp},
			Semantics: oncekeyv1.Semantics_SEMANTICS_AT_MOST_ONCE, LeaseTtl: durationpb.New(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, c, ListFilter{Namespace: "payments.charge", Statuses: []Status{StatusUnknown}}, 2)
	dir := scratchModule(t, readmeExample(t, "## Listing and reconciliation"))
	got := goCmd(t, dir, "run", ".")
	for _, key := range keys {
		if want := fmt.Sprintf("reconciled %s ch_%s <nil>\n", key, key); !strings.Contains(got, want) {
			t.Fatalf("the listing example printed\n%s\nwithout %q", got, want)
		}
		if rec, err := c.Lookup(ctx, RawKey("payments.charge", key)); err != nil || rec.Status != StatusSucceeded {
			t.Fatalf("%s after the example: %+v, %v", key, rec, err)
		}
	}
}

// readmeExample is the first Go example after section in the README, dialing the test server.
func readmeExample(t *testing.T, section string) string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), section)
	_, rest, ok2 := strings.Cut(after, "```go\n")
	code, _, ok3 := strings.Cut(rest, "```\n")
	if !ok || !ok2 || !ok3 || !strings.Contains(code, `"127.0.0.1:50051"`) {
		t.Fatalf("README.md has no Go example dialing 127.0.0.1:50051 after %q", section)
	}
	return strings.Replace(code, "127.0.0.1:50051", sharedServer.addr(), 1)
}

// scratchModule writes code as the main package of a new module that uses this client.
func scratchModule(t *testing.T, code string) string {
	t.Helper()
	self, err := filepath.Abs("..") // the module root
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"mod", "init", "example.com/readme"},
		{"mod", "edit", "-replace", "github.com/oncekey/oncekey/client/go=" + self},
		{"mod", "tidy"},
	} {
		goCmd(t, dir, args...)
	}
	return dir
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return goCmdEnv(t, dir, []string{"GOFLAGS=-mod=mod", "GOWORK=off"}, args...)
}

// goCmdEnv runs the go command in dir with more environment variables and returns its stdout.
func goCmdEnv(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
