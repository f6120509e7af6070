module github.com/leasehold/leasehold/queue

go 1.26.8

replace github.com/leasehold/leasehold/client => ../client

replace github.com/leasehold/leasehold/api => ../api

replace github.com/leasehold/leasehold/clock => ../clock

require (
	github.com/leasehold/leasehold/api v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/client v0.0.0-00010101000000-000000000000
)

require (
	connectrpc.com/connect v1.21.1 // indirect
	github.com/leasehold/leasehold/clock v0.0.0-00010101000000-000000000000 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
