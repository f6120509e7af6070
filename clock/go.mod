module github.com/leasehold/leasehold/clock

go 1.26.8
