module github.com/leasehold/leasehold/fence

go 1.26.8

replace github.com/leasehold/leasehold/api => ../api

require github.com/leasehold/leasehold/api v0.0.0-00010101000000-000000000000
