package oncekey

// The README's example, run as written (only the server address changed) in a scratch module that
// uses this client through a replace directive, as the README's install section says.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Approval gate")
	_, rest, ok2 := strings.Cut(section, "```go\n")
	code, _, ok3 := strings.Cut(rest, "```\n")
	if !ok || !ok2 || !ok3 || !strings.Contains(code, `"127.0.0.1:50051"`) {
		t.Fatal("README.md has no approval-gate Go example dialing 127.0.0.1:50051")
	}
	dir := scratchModule(t, strings.Replace(code, "127.0.0.1:50051", sharedServer.addr(), 1))
	lines := strings.Split(strings.TrimSpace(goCmd(t, dir, "run", ".")), "\n")
	if len(lines) != 3 || lines[0] != "awaiting approval: AWAITING_APPROVAL" ||
		!strings.HasPrefix(lines[1], "refunding 1500 on order-") || lines[2] != "1500 <nil>" {
		t.Fatalf("the approval example printed\n%s", strings.Join(lines, "\n"))
	}
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
