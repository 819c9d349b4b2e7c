module github.com/steadfast-go/retry/benchmarks

go 1.26.0

require (
	github.com/avast/retry-go/v5 v5.1.1
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/cockroachdb/cockroach-go/v2 v2.4.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/jackc/pgx/v5 v5.13.0
	github.com/sethvargo/go-retry v0.5.0
	github.com/steadfast-go/retry v0.1.0
	github.com/steadfast-go/retry/pgdeadletter v0.1.0
	github.com/steadfast-go/retry/retrygrpc v0.1.0
	github.com/steadfast-go/retry/retrypgx v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.16.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/eapache/go-resiliency v1.7.0
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/steadfast-go/retry/pgstore v0.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
