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

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	oncekey "oncekey.dev/oncekey/client/go"
	oncekeyv1 "oncekey.dev/oncekey/client/go/gen/oncekey/v1"
)

func args(order string) any {
	return []any{
		map[string]any{
			"currency": "EUR", "\u20ac": "euro", "\U0001F600": "emoji", "\u00e9": "e-acute", "\ufb01": "ligature",
			"text": "line\nbreak \"q\" \\ \u0001 </> \u2028",
		},
		map[string]any{"amount": 1250, "rate": 0.1, "big": 1e21, "tiny": 5e-324, "neg": -12.5, "small": 1e-7},
		[]bool{true, false},
		nil,
		order,
		uint64(18446744073709551615),
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

func resultJSON(r *oncekeyv1.OperationResult) map[string]any {
	md := r.GetMetadata()
	if md == nil {
		md = map[string]string{}
	}
	return map[string]any{
		"code": r.GetCode(), "body": hex.EncodeToString(r.GetBody()),
		"content_type": r.GetContentType(), "metadata": md,
	}
}

func codeName(err error) string {
	// codes.Code.String() is CamelCase; the conformance report uses the canonical upper-snake names.
	names := map[string]string{"FailedPrecondition": "FAILED_PRECONDITION", "InvalidArgument": "INVALID_ARGUMENT",
		"NotFound": "NOT_FOUND", "Unavailable": "UNAVAILABLE", "Unauthenticated": "UNAUTHENTICATED",
		"PermissionDenied": "PERMISSION_DENIED", "Internal": "INTERNAL", "Unknown": "UNKNOWN"}
	s := status.Code(err).String()
	if n, ok := names[s]; ok {
		return n
	}
	return strings.ToUpper(s)
}

func scenario(ctx context.Context, c *oncekey.Client, ns, key string, body []byte) map[string]any {
	out := map[string]any{}
	req := &oncekeyv1.ClaimRequest{
		Namespace: ns, Key: key, LeaseTtl: durationpb.New(time.Second),
		Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: must(oncekey.Fingerprint(sameArgs))},
	}
	got := must(c.Run(ctx, req, func(ctx context.Context, lease *oncekeyv1.Lease) (*oncekeyv1.OperationResult, error) {
		time.Sleep(2500 * time.Millisecond) // 2.5 lease lengths: only the keep-alive keeps the lease
		during := must(claim(ctx, c, ns, key, sameArgs, ""))
		out["during"] = during.GetOutcome().String()
		out["renewed"] = during.GetRecord().GetLeaseExpiresAt().AsTime().After(lease.GetExpiresAt().AsTime())
		out["token"] = lease.GetToken()
		return &oncekeyv1.OperationResult{Code: 201, Body: body, ContentType: "application/octet-stream",
			Metadata: map[string]string{"lang": "go"}}, nil
	}))
	out["first_replayed"] = got.Replayed

	called := false
	req.LeaseTtl = nil
	again := must(c.Run(ctx, req, func(context.Context, *oncekeyv1.Lease) (*oncekeyv1.OperationResult, error) {
		called = true
		return nil, nil
	}))
	out["replay_replayed"] = again.Replayed
	out["replay"] = resultJSON(again.Result)
	out["fn_called_on_replay"] = called

	if _, err := claim(ctx, c, ns, key, otherArgs, ""); err != nil {
		out["reuse"] = map[string]any{"code": codeName(err), "reason": oncekey.Reason(err)}
	} else {
		out["reuse"] = map[string]any{"code": "OK", "reason": nil}
	}
	return out
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
				errs = append(errs, codeName(err)+" "+oncekey.Reason(err))
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
	if argv[0] == "fingerprint" {
		out = map[string]any{"fingerprint": hex.EncodeToString(must(oncekey.Fingerprint(sameArgs)))}
	} else {
		target, tenant, ns, key := strings.TrimPrefix(argv[1], "http://"), argv[2], argv[3], argv[4]
		c := must(oncekey.Dial(target, oncekey.WithTenant(tenant)))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		switch argv[0] {
		case "scenario":
			out = scenario(ctx, c, ns, key, must(hex.DecodeString(argv[5])))
		case "complete":
			body := must(hex.DecodeString(argv[5]))
			got := must(c.Run(ctx, &oncekeyv1.ClaimRequest{Namespace: ns, Key: key,
				Arguments: &oncekeyv1.ClaimRequest_Fingerprint{Fingerprint: must(oncekey.Fingerprint(sameArgs))}},
				func(context.Context, *oncekeyv1.Lease) (*oncekeyv1.OperationResult, error) {
					return &oncekeyv1.OperationResult{Code: 200, Body: body}, nil
				}))
			out = map[string]any{"replayed": got.Replayed, "result": resultJSON(got.Result)}
		case "replay":
			r := must(claim(ctx, c, ns, key, sameArgs, ""))
			out = map[string]any{"outcome": r.GetOutcome().String(), "result": resultJSON(r.GetRecord().GetResult())}
		case "race":
			out = race(ctx, c, ns, key, must(strconv.Atoi(argv[5])))
		default:
			fmt.Fprintln(os.Stderr, "unknown command", argv[0])
			os.Exit(2)
		}
	}
	fmt.Println(string(must(json.Marshal(out))))
}
