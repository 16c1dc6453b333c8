package oncekey

// The real oncekey server binary for the tests: started on free loopback ports over a fresh data
// dir, and killed or restarted on the same port and data dir to test retries and keep-alives.
// The binary is $ONCEKEY_BIN, else $CARGO_TARGET_DIR/debug/oncekey (scripts/test builds it); the
// tests fail, never skip, when it is missing.

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// sharedServer serves the tests that need a server but do not kill it.
var sharedServer *server

func TestMain(m *testing.M) {
	if _, err := serverBinary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "oncekey-go-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedServer = &server{dir: dir, port: freePort(), admin: freePort()}
	if err := sharedServer.start(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("ONCEKEY_EXAMPLE_ADDR", sharedServer.addr()) // for the examples (package oncekey_test)
	code := m.Run()
	sharedServer.kill()
	os.RemoveAll(dir)
	os.Exit(code)
}

func serverBinary() (string, error) {
	bin := os.Getenv("ONCEKEY_BIN")
	if bin == "" {
		target := os.Getenv("CARGO_TARGET_DIR")
		if target == "" {
			home, _ := os.UserHomeDir()
			target = filepath.Join(home, ".cache", "oncekey", "target")
		}
		bin = filepath.Join(target, "debug", "oncekey")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("the Go client tests need the oncekey server binary: %v "+
			"(build it with `cargo build --bins`, or set ONCEKEY_BIN)", err)
	}
	return bin, nil
}

type server struct {
	dir         string
	port, admin int
	cmd         *exec.Cmd
	extra       []string // more `oncekey serve` arguments (e.g. --tokens-file)
	env         []string // more environment variables, KEY=VALUE (e.g. ONCEKEY_TEST_CLOCK_SKEW_MS)
}

// newServer starts a server of the test's own, killed when the test ends.
func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{dir: t.TempDir(), port: freePort(), admin: freePort()}
	if err := s.start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// start runs the server on its port (or on listen, when given) and waits until it is ready.
func (s *server) start(listen string) error {
	bin, err := serverBinary()
	if err != nil {
		return err
	}
	if listen == "" {
		listen = s.addr()
	}
	s.cmd = exec.Command(bin, append([]string{"serve", "--listen", listen,
		"--admin-listen", fmt.Sprintf("127.0.0.1:%d", s.admin), "--data-dir", s.dir}, s.extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	s.cmd.Env = append(append(os.Environ(), "RUST_LOG=warn"), s.env...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", s.admin))
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("the oncekey server on %s did not become ready within 60 s", listen)
}

// kill SIGKILLs the server and waits for it to exit.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// freePort is a loopback port that was free a moment ago.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dial connects to s as a tenant of the test's own (records never collide between tests).
func dial(t *testing.T, s *server, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(s.addr(), append([]Option{WithTenant(fmt.Sprintf("go-test-%d", time.Now().UnixNano()))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
