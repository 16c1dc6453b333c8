# scripts/lib/cassandra-cql.sh — the CQL readiness probe of scripts/cassandra (and of
# scripts/cassandra-cluster, which it sources): a native-protocol exchange over bash's /dev/tcp.
# Sourced by scripts/cassandra, never run on its own; uses its log/die and its settings.
# shellcheck shell=bash

# ---------------------------------------------------------------------------------------------
# CQL readiness: a genuine native-protocol (v4) exchange over bash's /dev/tcp — STARTUP, then
# QUERY "SELECT release_version FROM system.local" — no cqlsh or driver needed.
# Prints the release_version on success.
# ---------------------------------------------------------------------------------------------
hexbytes() { # reads stdin, prints lowercase hex with no separators
  od -An -v -tx1 | tr -d ' \n'
}

be32() { # prints a printf format producing $1 as a 4-byte big-endian int
  local h
  printf -v h '%08x' "$1"
  printf '\\x%s\\x%s\\x%s\\x%s' "${h:0:2}" "${h:2:2}" "${h:4:2}" "${h:6:2}"
}

# Reads one response frame from fd 3; sets FRAME_OPCODE (2 hex digits) and FRAME_BODY (hex).
read_frame() {
  local header len
  header=$(timeout 5 head -c 9 <&3 | hexbytes) || return 1
  [[ ${#header} -eq 18 ]] || return 1
  FRAME_OPCODE=${header:8:2}
  len=$((16#${header:10:8}))
  (( len < 1048576 )) || return 1
  FRAME_BODY=""
  if (( len > 0 )); then
    FRAME_BODY=$(timeout 5 head -c "$len" <&3 | hexbytes) || return 1
    [[ ${#FRAME_BODY} -eq $((len * 2)) ]] || return 1
  fi
}

cql_probe() { # $1 = port, $2 = host (default 127.0.0.1); frames are read from fd 3, written to fd 4
  (
    if [[ -n "$TLS" ]]; then
      # The same exchange inside TLS, with the client certificate the node requires.
      coproc PROBE { exec openssl s_client -quiet -connect "${2:-127.0.0.1}:$1" -CAfile "$TLS/ca.pem" \
                       -cert "$TLS/client.pem" -key "$TLS/client.key" -verify_return_error \
                       -verify_hostname localhost 2>/dev/null; }
      trap 'kill "$PROBE_PID" 2>/dev/null' EXIT
      exec 3<&"${PROBE[0]}" 4>&"${PROBE[1]}"
    else
      exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1" || exit 1
      exec 4>&3
    fi
    # STARTUP (opcode 0x01), stream 1, body = string map {"CQL_VERSION": "3.0.0"}.
    printf '\x04\x00\x00\x01\x01\x00\x00\x00\x16\x00\x01\x00\x0bCQL_VERSION\x00\x053.0.0' >&4
    read_frame || exit 1
    [[ "$FRAME_OPCODE" == 02 ]] || exit 1 # READY (authentication is off)
    # QUERY (opcode 0x07), stream 2, body = long string, consistency ONE, no flags.
    local q="SELECT release_version FROM system.local"
    # shellcheck disable=SC2059 # the format is built from escapes on purpose
    printf "\\x04\\x00\\x00\\x02\\x07$(be32 $(( 4 + ${#q} + 3 )))$(be32 ${#q})%s\\x00\\x01\\x00" "$q" >&4
    read_frame || exit 1
    [[ "$FRAME_OPCODE" == 08 && "${FRAME_BODY:0:8}" == 00000002 ]] || exit 1 # RESULT / Rows
    # The last cell of the single row: [int length][bytes] — the release_version text.
    local version
    # shellcheck disable=SC2001 # pairs of hex digits -> \xHH escapes
    version=$(printf '%b' "$(sed 's/../\\x&/g' <<<"$FRAME_BODY")" \
              | LC_ALL=C tr -c '[:print:]' '\n' | grep -E '^[0-9]+\.[0-9]+' | tail -n 1)
    [[ -n "$version" ]] || exit 1
    printf '%s\n' "$version"
  ) 2>/dev/null
}

port_open() { # $1 = port, $2 = host (default 127.0.0.1)
  (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null
}
