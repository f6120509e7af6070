module github.com/leasehold/leasehold/fence/pgfence

go 1.26.8

replace github.com/leasehold/leasehold/fence => ../../fence

replace github.com/leasehold/leasehold/api => ../../api

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/leasehold/leasehold/api v0.0.0-00010101000000-000000000000
	github.com/leasehold/leasehold/fence v0.0.0-00010101000000-000000000000
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.42.0 // indirect
)
