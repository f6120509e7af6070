module github.com/leasehold/leasehold

go 1.26.8

require (
	connectrpc.com/connect v1.21.1
	github.com/anishathalye/porcupine v1.3.1
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/dustin/go-humanize v1.1.0
	github.com/hashicorp/go-hclog v1.6.3
	github.com/hashicorp/raft v1.8.0
	github.com/hashicorp/raft-wal v0.4.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/leasehold/leasehold/api v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/client v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/client/clientotel v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/client/clientprom v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/clock v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/fence v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/fence/pgfence v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/groups v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/idempotency v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/queue v0.0.0-00010101000000-000000000000
	github.com/moby/patternmatcher v0.6.1
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.72.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	github.com/yuin/goldmark v1.8.7
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.opentelemetry.io/proto/otlp v1.11.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
	golang.org/x/time v0.16.0
	google.golang.org/protobuf v1.36.12
	pgregory.net/rapid v1.3.0
)

require (
	github.com/armon/go-metrics v0.4.1 // indirect
	github.com/benbjohnson/immutable v0.4.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/etcd v3.3.27+incompatible // indirect
	github.com/coreos/go-systemd v0.0.0-20191104093116-d3cd4ed1dbcf // indirect
	github.com/coreos/pkg v0.0.0-20220810130054-c7d1c02cb6cf // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.6 // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.30.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.7.0 // indirect
	github.com/hashicorp/go-msgpack/v2 v2.1.5 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	go.etcd.io/bbolt v1.3.6 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20220827204233-334a2380cb91 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/grpc v1.83.2 // indirect
)

// The client-side modules live in this repository, each tagged on its own
// (client/v0.x.y, queue/v0.x.y, ...): docs/go-client.md.
replace (
	github.com/leasehold/leasehold/api => ./api
	github.com/leasehold/leasehold/client => ./client
	github.com/leasehold/leasehold/client/clientotel => ./client/clientotel
	github.com/leasehold/leasehold/client/clientprom => ./client/clientprom
	github.com/leasehold/leasehold/clock => ./clock
	github.com/leasehold/leasehold/fence => ./fence
	github.com/leasehold/leasehold/fence/pgfence => ./fence/pgfence
	github.com/leasehold/leasehold/groups => ./groups
	github.com/leasehold/leasehold/idempotency => ./idempotency
	github.com/leasehold/leasehold/queue => ./queue
)
