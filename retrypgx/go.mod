module github.com/steadfast-go/retry/retrypgx

go 1.25.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/steadfast-go/retry v0.1.0
	github.com/steadfast-go/retry/pgdeadletter v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/steadfast-go/retry/pgstore v0.1.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
