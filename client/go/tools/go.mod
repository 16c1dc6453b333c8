// The code generators of client/go/gen, pinned: `go install tool` here installs them
// (scripts/polyglot-setup does). A module of its own, so that the `tool` directive (Go 1.24+) and
// the generators' requirements stay out of the client library's go.mod.
module github.com/oncekey/oncekey/client/go/tools

go 1.24.0

tool (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
