# scripts/lib/helm-check-smoke.sh — step 4 of scripts/helm-check: the settings the chart renders
# given to the real `oncekey` binary (serve, the helm test pod's commands, SIGTERM drain, the
# migration Job for the CQL store). Sourced by scripts/helm-check from the repository root, never
# run on its own; uses its say, render, $CHART, $CACHE, $rendered and sets its $failed.
# shellcheck shell=bash

# ---- 4. the rendered settings against the real binary ----------------------------------------------
# The ConfigMap and Secret the chart renders, given to `oncekey serve` as the pod would get them
# (paths moved into a temp dir, ports 0): the variables must parse, the tokens file must load, a
# Ledger call must authenticate, `oncekey health` (the helm test) must see SERVING, /readyz must
# answer, and SIGTERM must drain and exit 0. The embedded scenarios always; a CQL one (migration
# Job first) when ONCEKEY_TEST_CQL_NODES names a node. Skipped when no binary is built
# (scripts/test builds it, and starts the Cassandra node, before this step).
# Against each of those servers, with console.enabled: the console Deployment's command (its
# args, with the session key the chart's Secret holds; HTTPS of its own for the embedded
# scenario) must get its readiness probe's path to answer 200 (the ledger answers SERVING) and
# its liveness probe's, then exit 0 on SIGTERM.
BIN="${ONCEKEY_BIN:-${CARGO_TARGET_DIR:-$CACHE/target}/debug/oncekey}"
say "-- rendered settings against the real binary"
if [ ! -x "$BIN" ]; then
  say "skip no oncekey binary at $BIN (set ONCEKEY_BIN, or run scripts/test)"
else
  # The console Deployment's command must exist in the binary the chart deploys.
  console_support=yes
  if ! "$BIN" console --help >/dev/null 2>&1; then
    say "FAIL console: $BIN has no console subcommand (\`oncekey console --help\` fails)"
    failed=1
    console_support=no
  fi
  # What the console Deployment is rendered with on top of each scenario.
  CONSOLE_SET=(--set console.enabled=true --set console.publicOrigin=https://oncekey-console.example.com)
  http_status() { # url → the HTTP status, or 000 when nothing answers (https: certificate not verified, as the kubelet's probes)
    python3 - "$1" <<'PY' 2>/dev/null || echo 000
import ssl, sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=2, context=ssl._create_unverified_context()).status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
  }
  # The console Deployment's command, its paths and ports moved as for serve, against the
  # server on 127.0.0.1:grpc-port; for the embedded scenario serving HTTPS itself
  # (console.tls.existingSecret) from a throwaway certificate when openssl is there. Sets
  # console (what passed), or why and returns 1.
  console_smoke() { # dir grpc-port scenario-name helm-args...
    local dir=$1 grpc=$2 name=$3; shift 3
    local set=("${CONSOLE_SET[@]}")
    if [ "$name" = embedded ] && command -v openssl >/dev/null; then
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
        -keyout "$dir/etc/console-tls.key" -out "$dir/etc/console-tls.crt" >/dev/null 2>&1 \
        || { why="console: openssl could not make a test certificate"; return 1; }
      set+=(--set console.tls.existingSecret=console-tls)
    fi
    if ! render -s templates/console-deployment.yaml "$@" "${set[@]}" >"$dir/console.yaml" 2>"$dir/console.render" \
        || ! render -s templates/console-secret.yaml "$@" "${set[@]}" >"$dir/console-secret.yaml" 2>>"$dir/console.render"; then
      why="console: helm template failed: $(cat "$dir/console.render")"; return 1
    fi
    # The key as the mounted Secret holds it: 64 hex digits, one line.
    local key
    key=$(sed -n 's/^  session-key: "\([0-9a-f]\{64\}\)"$/\1/p' "$dir/console-secret.yaml")
    [ -n "$key" ] || { why="console: the chart's session key Secret holds no 64-hex session-key"; return 1; }
    printf '%s' "$key" >"$dir/etc/session-key"
    local ready live scheme
    scheme=$(sed -n '/^          readinessProbe:/,/^          [a-z]/s/^ *scheme: //p' "$dir/console.yaml" | tr '[:upper:]' '[:lower:]')
    ready=$(sed -n '/^          readinessProbe:/,/^          [a-z]/s/^ *path: //p' "$dir/console.yaml")
    live=$(sed -n '/^          livenessProbe:/,/^          [a-z]/s/^ *path: //p' "$dir/console.yaml")
    [ -n "$ready" ] && [ -n "$live" ] && [ -n "$scheme" ] \
      || { why="console: the Deployment has no readiness or liveness probe path, or no scheme"; return 1; }
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    local args=() arg
    while IFS= read -r arg; do
      arg=$(unquote "$arg")
      case $arg in
        --server=*) arg="--server=http://127.0.0.1:$grpc" ;;
        --listen=*) arg=${arg#--listen=}; arg="--listen=${arg%:*}:$port" ;;   # the rendered host, a free port
        --session-key-file=*) arg="--session-key-file=$dir/etc/session-key" ;;
        --tls-cert=*) arg="--tls-cert=$dir/etc/console-tls.crt" ;;
        --tls-key=*) arg="--tls-key=$dir/etc/console-tls.key" ;;
      esac
      args+=("$arg")
    done < <(awk '/^          args:$/{a=1;next} a&&/^            - /{sub(/^            - /,"");print;next} a{exit}' "$dir/console.yaml")
    [ "${args[0]:-}" = console ] || { why="console: the Deployment does not run \`oncekey console\` (args: ${args[*]})"; return 1; }
    env -i PATH="$PATH" HOME="$dir" "$BIN" "${args[@]}" >"$dir/console.out" 2>"$dir/console.err" &
    local cpid=$! status=000 i deadline=$((SECONDS + 30))
    while [ "$SECONDS" -lt "$deadline" ]; do   # up to 30 s
      status=$(http_status "$scheme://127.0.0.1:$port$ready")
      [ "$status" = 200 ] && break
      kill -0 "$cpid" 2>/dev/null || break
      sleep 0.2
    done
    local rc=0 ok=1
    if [ "$status" != 200 ]; then
      ok=0 why="console (${args[*]}): $ready answered $status, not 200: $(tail -n 3 "$dir/console.err")"
    elif [ "$(http_status "$scheme://127.0.0.1:$port$live")" != 200 ]; then
      ok=0 why="console: $live did not answer 200"
    fi
    kill -TERM "$cpid" 2>/dev/null || true
    for i in $(seq 100); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done   # up to 10 s
    if kill -0 "$cpid" 2>/dev/null; then
      kill -KILL "$cpid" 2>/dev/null || true
      wait "$cpid" 2>/dev/null || true
      [ "$ok" = 1 ] && why="console: still running 10 s after SIGTERM"
      return 1
    fi
    wait "$cpid" || rc=$?
    [ "$ok" = 1 ] || return 1
    [ "$rc" = 0 ] || { why="console: SIGTERM: exit code $rc, expected 0: $(tail -n 3 "$dir/console.err")"; return 1; }
    console=", the console's $ready and $live 200 ($scheme) and it exits 0 on SIGTERM"
    return 0
  }
  # A file the pod would find mounted, as the test machine has it (the CQL TLS node's files).
  local_path() { # variable value → value
    case $1 in
      ONCEKEY_CQL_TLS_CA) printf '%s\n' "${ONCEKEY_TEST_CQL_TLS_DIR:-}/ca.pem" ;;
      ONCEKEY_CQL_TLS_CERT) printf '%s\n' "${ONCEKEY_TEST_CQL_TLS_DIR:-}/client.pem" ;;
      ONCEKEY_CQL_TLS_KEY) printf '%s\n' "${ONCEKEY_TEST_CQL_TLS_DIR:-}/client.key" ;;
      *) printf '%s\n' "$2" ;;
    esac
  }
  # A YAML scalar as helm renders a list item: "quoted \"text\"" or plain.
  unquote() { local v=$1; if [[ $v == \"*\" ]]; then v=${v:1:-1}; v=${v//\\\"/\"}; fi; printf '%s\n' "$v"; }
  smoke() { # scenario-name helm-args...
    local name=$1; shift
    local dir="$rendered/smoke-$name" token line
    mkdir -p "$dir/data" "$dir/etc"
    { read -r token; read -r line; } < <("$BIN" token new --tenant smoke)
    token=${token#token: } line=${line#tokens-file line: }
    render -s templates/configmap.yaml "$@" >"$dir/configmap.yaml"
    local env=() k v
    while IFS= read -r kv; do
      k=${kv%%: *} v=${kv#*: }
      v=${v#\"} v=${v%\"}
      case $k in
        ONCEKEY_LISTEN|ONCEKEY_ADMIN_LISTEN) v="${v%:*}:0" ;;          # any free port
        ONCEKEY_DATA_DIR) v="$dir/data" ;;
        ONCEKEY_TOKENS_FILE) v="$dir/etc/tokens" ;;
        ONCEKEY_ENCRYPTION_KEYS)   # what the key ring Secret would hold: a primary and an hmac key
          v="$dir/etc/keyring"
          python3 -c 'import base64, os; [print(k, base64.b64encode(os.urandom(32)).decode(), f) for k, f in (("k1", "primary"), ("names", "hmac"))]' >"$v" ;;
        *) v=$(local_path "$k" "$v") ;;
      esac
      env+=("$k=$v")
    done < <(sed -n 's/^  \(ONCEKEY_[A-Z_]*\|RUST_LOG\): /\1: /p' "$dir/configmap.yaml")
    if grep -q '^  ONCEKEY_STORE: "cql"' "$dir/configmap.yaml"; then
      # What the pre-install hook Job runs, with the Job's own environment.
      local job=()
      while IFS= read -r kv; do job+=("${kv%%=*}=$(local_path "${kv%%=*}" "${kv#*=}")"); done < <(render -s templates/migrate-job.yaml "$@" \
        | awk '/^ *- name: /{n=$3} /^ *value: /{v=$0; sub(/^ *value: /,"",v); gsub(/^"|"$/,"",v); print n"="v}')
      if ! env -i PATH="$PATH" "${job[@]}" "$BIN" migrate >"$dir/migrate" 2>&1; then
        say "FAIL $name: the migration Job's command failed: $(tail -n 3 "$dir/migrate")"; failed=1
        return
      fi
    fi
    local test_token=""
    if grep -q '^  ONCEKEY_TOKENS_FILE:' "$dir/configmap.yaml"; then
      render -s templates/secret.yaml "$@" --set "auth.tokens[0]=$line" >"$dir/secret.yaml"
      sed -n '/^  tokens: |/,/^  [a-z-]*:/{/^    /s/^    //p}' "$dir/secret.yaml" >"$dir/etc/tokens"
      test_token=$(sed -n 's/^  helm-test-token: "\(.*\)"$/\1/p' "$dir/secret.yaml")
    fi
    : >"$dir/out"   # there before the loop below reads it
    env -i PATH="$PATH" HOME="$dir" "${env[@]}" "$BIN" serve >"$dir/out" 2>"$dir/err" &
    local pid=$! grpc="" admin="" i
    for i in $(seq 300); do   # up to 30 s (the CQL store connects first)
      read -r grpc admin < <(sed -n 's/^listening grpc=[^:]*:\([0-9]*\) admin=[^:]*:\([0-9]*\)$/\1 \2/p' "$dir/out") || true
      [ -n "$grpc" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    local ok=1 why=""
    if [ -z "$grpc" ]; then
      ok=0 why="serve did not start: $(tail -n 3 "$dir/err")"
    elif ! env -i PATH="$PATH" "$BIN" health --server "http://127.0.0.1:$grpc" >/dev/null 2>"$dir/health"; then
      ok=0 why="oncekey health: $(cat "$dir/health")"
    elif ! python3 -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:$admin/readyz', timeout=5).status != 200)" 2>/dev/null; then
      ok=0 why="/readyz did not answer 200"
    else
      local auth=(--tenant smoke)
      grep -q '^  ONCEKEY_TOKENS_FILE:' "$dir/configmap.yaml" && auth=(--token "$token")
      env -i PATH="$PATH" "$BIN" claim helm.check smoke --payload '{"n":1}' \
        --server "http://127.0.0.1:$grpc" "${auth[@]}" >"$dir/claim" 2>&1 || true
      if ! grep -q ACQUIRED "$dir/claim"; then
        ok=0 why="claim was not ACQUIRED: $(cat "$dir/claim")"
      fi
    fi
    # The helm test pod's own commands and credentials, against this server.
    if [ "$ok" = 1 ]; then
      render -s templates/tests/test-connection.yaml "$@" >"$dir/test-pod.yaml"
      local test_env=(ONCEKEY_SERVER="http://127.0.0.1:$grpc") test_args=() arg
      grep -q 'key: helm-test-token' "$dir/test-pod.yaml" && test_env+=(ONCEKEY_TOKEN="$test_token")
      grep -q 'name: ONCEKEY_TENANT' "$dir/test-pod.yaml" && test_env+=(ONCEKEY_TENANT=helm-test)
      while IFS= read -r arg; do test_args+=("$(unquote "$arg")"); done < <(awk \
        '/^    - name: claim$/{c=1;next} c&&/^      args:$/{a=1;next} a&&/^        - /{sub(/^        - /,"");print;next} a{exit}' "$dir/test-pod.yaml")
      if [ "${#test_args[@]}" = 0 ]; then
        ok=0 why="the helm test pod makes no Claim"
      elif ! env -i PATH="$PATH" "${test_env[@]}" "$BIN" health >"$dir/test-health" 2>&1; then
        ok=0 why="helm test's oncekey health: $(cat "$dir/test-health")"
      elif ! env -i PATH="$PATH" "${test_env[@]}" "$BIN" "${test_args[@]}" >"$dir/test-claim" 2>&1 \
          || ! grep -q ACQUIRED "$dir/test-claim"; then
        ok=0 why="helm test's Claim (${test_args[*]}): $(cat "$dir/test-claim")"
      fi
    fi
    # The console Deployment's command against this server.
    local console=""
    if [ "$ok" = 1 ] && [ "$console_support" = yes ]; then
      console_smoke "$dir" "$grpc" "$name" "$@" || ok=0   # sets console (what passed) or why
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local rc=0
    wait "$pid" || rc=$?
    if [ "$ok" = 1 ] && [ "$rc" != 0 ]; then ok=0 why="SIGTERM: exit code $rc, expected 0"; fi
    if [ "$ok" = 1 ]; then
      say "ok   $name: $( [ -s "$dir/migrate" ] && echo "migrate ok, ")serve starts with the rendered settings, health SERVING, /readyz 200, claim ACQUIRED, helm test's health and Claim pass$console, SIGTERM exit 0"
    else
      say "FAIL $name: $why"; failed=1
    fi
  }
  smoke default
  smoke embedded -f "$CHART/ci/embedded-values.yaml"
  smoke dev -f "$CHART/ci/dev-values.yaml"
  smoke encryption -f "$CHART/ci/encryption-values.yaml"
  # The CQL store against the test node scripts/test starts: the migration Job creates a fresh
  # keyspace, then the Deployment's settings serve from it.
  if [ -n "${ONCEKEY_TEST_CQL_NODES:-}" ]; then
    smoke cql -f "$CHART/ci/cql-credentials-values.yaml" \
      --set cql.username= --set cql.password= \
      --set "cql.nodes={${ONCEKEY_TEST_CQL_NODES}}" \
      --set "cql.keyspace=helm_check_$(date +%s)_$$" --set cql.replication=SimpleStrategy:1
  else
    say "skip cql: no ONCEKEY_TEST_CQL_NODES (scripts/test sets it)"
  fi
  # The CQL store over TLS (a TLS-only node requiring client certificates): the server and the
  # migration Job with the rendered CQL TLS settings, the node's CA and client certificate in
  # place of the mounted ConfigMap and Secret, LOCAL_SERIAL as multi-dc chose it.
  if [ -n "${ONCEKEY_TEST_CQL_TLS_NODES:-}" ] && [ -n "${ONCEKEY_TEST_CQL_TLS_DIR:-}" ]; then
    smoke cql-tls -f "$CHART/ci/multi-dc-values.yaml" \
      --set "cql.nodes={${ONCEKEY_TEST_CQL_TLS_NODES}}" --set cql.localDc=datacenter1 \
      --set cql.tls.serverName=cassandra.oncekey.test --set cql.tls.clientCertSecret=client \
      --set "cql.keyspace=helm_check_tls_$(date +%s)_$$" --set cql.replication=SimpleStrategy:1
  else
    say "skip cql-tls: no ONCEKEY_TEST_CQL_TLS_NODES / ONCEKEY_TEST_CQL_TLS_DIR (scripts/test sets them)"
  fi
fi
