// Command driver is the conformance driver of the Go client (see ../README.md).
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	oncekeyv1 "github.com/oncekey/oncekey/client/go/gen/oncekey/v1"
	"github.com/oncekey/oncekey/client/go/oncekey"
)

func args(order string) any {
	return []any{
		map[string]any{
			"currency": "EUR", "\u20ac": "euro", "\U0001F600": "emoji", "\u00e9": "e-acute", "\ufb01": "ligature",
			"text": "line\nbreak \"q\" \\ \u0001 </> \u2028",
		},
		map[string]any{"amount": 1250, "rate": 0.1, "big": 9007199254740991, "tiny": 5e-324, "neg": -12.5, "small": 1e-7},
		[]bool{true, false},
		nil,
		order,
		"18446744073709551615",
	}
}

var sameArgs, otherArgs = args("order-481"), args("order-482")

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
	return v
}

func claim(ctx context.Context, c *oncekey.Client, ns, key string, a any, owner string) (*oncekeyv1.ClaimResponse, error) {
	fp := must(oncekey.Fingerprint(a))
	return c.Ledger.Claim(ctx, &oncekeyv1.ClaimRequest{
		Namespace: ns, Key: key, Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: fp}, Owner: owner,
	})
}

func resultJSON(r oncekey.Raw) map[string]any {
	md := r.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return map[string]any{
		"code": r.Code, "body": hex.EncodeToString(r.Body), "content_type": r.ContentType, "metadata": md,
	}
}

// codeName is the canonical upper-snake name of err's gRPC code.
func codeName(err error) string {
	if name := oncekey.CodeName(err); name != "" {
		return name
	}
	return "UNKNOWN"
}

func scenario(ctx context.Context, c *oncekey.Client, ns, key string, body []byte) map[string]any {
	out := map[string]any{}
	op := oncekey.RawKey(ns, key)
	got := must(oncekey.Run(ctx, c, op, sameArgs, func(ctx context.Context) (oncekey.Raw, error) {
		lease := oncekey.LeaseFrom(ctx)
		granted := lease.ExpiresAt()
		time.Sleep(2500 * time.Millisecond) // 2.5 lease lengths: only the keep-alive keeps the lease
		during := must(claim(ctx, c, ns, key, sameArgs, ""))
		out["during"] = during.GetOutcome().String()
		out["renewed"] = during.GetRecord().GetLeaseExpiresAt().AsTime().After(granted)
		out["token"] = lease.Token()
		return oncekey.Raw{Code: 201, Body: body, ContentType: "application/octet-stream",
			Metadata: map[string]string{"lang": "go"}}, nil
	}, oncekey.LeaseTTL(time.Second)))
	out["first_replayed"] = got.Replayed

	called := false
	again := must(oncekey.Run(ctx, c, op, sameArgs, func(context.Context) (oncekey.Raw, error) {
		called = true
		return oncekey.Raw{}, nil
	}))
	out["replay_replayed"] = again.Replayed
	out["replay"] = resultJSON(again.Value)
	out["fn_called_on_replay"] = called

	if _, err := claim(ctx, c, ns, key, otherArgs, ""); err != nil {
		out["reuse"] = map[string]any{"code": codeName(err), "reason": oncekey.Reason(err).String()}
	} else {
		out["reuse"] = map[string]any{"code": "OK", "reason": nil}
	}
	return out
}

// call sends send_email(to, subject) with the default key and arguments of a two-value call
// (oncekey.CallKey, oncekey.CallArguments), appending "go" to effectFile when it runs.
func call(ctx context.Context, c *oncekey.Client, ns, to, subject, effectFile string) map[string]any {
	key := must(oncekey.CallKey(to, subject))
	args := must(oncekey.CallArguments(to, subject))
	got := must(oncekey.Run(ctx, c, oncekey.RawKey(ns, key), args, func(context.Context) (map[string]string, error) {
		f, err := os.OpenFile(effectFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		_, err = f.WriteString("go\n")
		return map[string]string{"sent_by": "go"}, err
	}))
	return map[string]any{"replayed": got.Replayed, "value": got.Value, "key": key}
}

func race(ctx context.Context, c *oncekey.Client, ns, key string, n int) map[string]any {
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	var mu sync.Mutex
	var wg sync.WaitGroup
	outcomes, errs := []string{}, []string{}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := claim(ctx, c, ns, key, sameArgs, fmt.Sprintf("go-%d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, codeName(err)+" "+oncekey.Reason(err).String())
			} else {
				outcomes = append(outcomes, r.GetOutcome().String())
			}
		}()
	}
	wg.Wait()
	return map[string]any{"outcomes": outcomes, "errors": errs}
}

func main() {
	argv := os.Args[1:]
	var out any
	if len(argv) > 0 && argv[0] == "fault" {
		os.Exit(fault(argv[1:]))
	}
	if argv[0] == "fingerprint" {
		out = map[string]any{"fingerprint": hex.EncodeToString(must(oncekey.Fingerprint(sameArgs)))}
	} else {
		target, tenant, ns, key := strings.TrimPrefix(argv[1], "http://"), argv[2], argv[3], argv[4]
		c := must(oncekey.Dial(target, oncekey.WithTenant(tenant)))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		switch argv[0] {
		case "call":
			out = call(ctx, c, ns, argv[4], argv[5], argv[6])
		case "scenario":
			out = scenario(ctx, c, ns, key, must(hex.DecodeString(argv[5])))
		case "complete":
			body := must(hex.DecodeString(argv[5]))
			got := must(oncekey.Run(ctx, c, oncekey.RawKey(ns, key), sameArgs, func(context.Context) (oncekey.Raw, error) {
				return oncekey.Raw{Code: 200, Body: body}, nil
			}))
			out = map[string]any{"replayed": got.Replayed, "result": resultJSON(got.Value)}
		case "replay":
			r := must(claim(ctx, c, ns, key, sameArgs, ""))
			result := oncekey.Raw{}
			if res := r.GetRecord().GetResult(); res != nil {
				result = oncekey.Raw{Code: res.GetCode(), Body: res.GetBody(), ContentType: res.GetContentType(), Metadata: res.GetMetadata()}
			}
			out = map[string]any{"outcome": r.GetOutcome().String(), "result": resultJSON(result)}
		case "race":
			out = race(ctx, c, ns, key, must(strconv.Atoi(argv[5])))
		default:
			fmt.Fprintln(os.Stderr, "unknown command", argv[0])
			os.Exit(2)
		}
	}
	fmt.Println(string(must(json.Marshal(out))))
}
