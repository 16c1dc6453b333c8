package main

// The `fault` command (../README.md): runs KEY with ARGS through oncekey.Do while the Rust test
// kills and restarts the server around it, reporting each step as a JSON line on stdout.
//
//	driver fault TARGET TENANT NS KEY EFFECT_FILE [--lease-ms N] [--cancel-after-ms N]

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/oncekey/oncekey/client/go/oncekey"
)

var stdoutMu sync.Mutex

// emit prints one JSON line on stdout at once.
func emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

// fault runs the command and returns the exit code: 0 whatever the outcome, 2 for bad usage.
func fault(argv []string) int {
	if len(argv) < 5 {
		fmt.Fprintln(os.Stderr, "usage: driver fault TARGET TENANT NS KEY EFFECT_FILE [--lease-ms N] [--cancel-after-ms N]")
		return 2
	}
	target, tenant, ns, key, effectFile := strings.TrimPrefix(argv[0], "http://"), argv[1], argv[2], argv[3], argv[4]
	flags := flag.NewFlagSet("fault", flag.ContinueOnError)
	leaseMs := flags.Int("lease-ms", 2000, "lease length in milliseconds")
	cancelMs := flags.Int("cancel-after-ms", 0, "cancel the call after this many milliseconds (0: never)")
	if err := flags.Parse(argv[5:]); err != nil {
		return 2
	}
	c := must(oncekey.Dial(target, oncekey.WithTenant(tenant)))
	defer c.Close()

	lines := make(chan string)
	go func() {
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			lines <- strings.TrimSpace(scanner.Text())
		}
		close(lines)
	}()
	// expect waits for word on stdin, or for the function's cancellation.
	expect := func(ctx context.Context, word string) error {
		select {
		case line, ok := <-lines:
			if !ok || line != word {
				return fmt.Errorf("driver: expected %q on stdin, got %q", word, line)
			}
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}

	ctx := context.Background()
	if *cancelMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		time.AfterFunc(time.Duration(*cancelMs)*time.Millisecond, cancel)
	}
	called := false
	result, err := oncekey.Do(ctx, c, oncekey.RawKey(ns, key), sameArgs, func(ctx context.Context) (map[string]string, error) {
		called = true
		emit(map[string]any{"event": "started", "token": oncekey.LeaseFrom(ctx).Token()})
		if err := expect(ctx, "go"); err != nil {
			return nil, err
		}
		if err := appendEffect(effectFile, key); err != nil {
			return nil, err
		}
		emit(map[string]any{"event": "effect"})
		if err := expect(ctx, "finish"); err != nil {
			return nil, err
		}
		return map[string]string{"done": key}, nil
	}, oncekey.LeaseTTL(time.Duration(*leaseMs)*time.Millisecond))
	if err != nil {
		emit(map[string]any{"event": "done", "replayed": false, "result": nil, "error": describe(err)})
	} else {
		emit(map[string]any{"event": "done", "replayed": !called, "result": result, "error": nil})
	}
	return 0
}

// appendEffect appends "KEY\n" to the effect file and syncs it to disk.
func appendEffect(path, key string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// describe is the error object of the final line: the typed error's name, gRPC code and reason.
func describe(err error) map[string]any {
	kind := "Error"
	switch {
	case errors.Is(err, oncekey.ErrLeaseLost):
		kind = "LeaseLost"
	case errors.Is(err, oncekey.ErrKeyReused):
		kind = "KeyReused"
	case errors.Is(err, oncekey.ErrInProgress):
		kind = "InProgress"
	case errors.Is(err, oncekey.ErrNeedsReconciliation):
		kind = "NeedsReconciliation"
	case errors.Is(err, oncekey.ErrOperationFailed):
		kind = "OperationFailed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		kind = "Cancelled"
	case errors.Is(err, oncekey.ErrUnavailable):
		kind = "Unavailable"
	default:
		fmt.Fprintln(os.Stderr, "driver: untyped error:", err)
	}
	out := map[string]any{"type": kind, "code": nil, "reason": nil}
	if code := oncekey.CodeName(err); code != "" {
		out["code"] = code
	}
	if reason := oncekey.Reason(err); reason != oncekey.ReasonUnspecified {
		out["reason"] = reason.String()
	}
	return out
}
