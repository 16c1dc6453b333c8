module github.com/oncekey/oncekey/tests/conformance/go

go 1.23.0

require github.com/oncekey/oncekey/client/go v0.0.0

require (
	golang.org/x/net v0.34.0 // indirect
	golang.org/x/sys v0.29.0 // indirect
	golang.org/x/text v0.21.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250115164207-1a7da9e5054f // indirect
	google.golang.org/grpc v1.71.3 // indirect
	google.golang.org/protobuf v1.36.6 // indirect
)

replace github.com/oncekey/oncekey/client/go => ../../../client/go
