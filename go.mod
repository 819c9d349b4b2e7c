module github.com/steadfast-go/retry

go 1.25

require github.com/benbjohnson/clock v1.3.5

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
