module github.com/steadfast-go/retry/retrygobreaker

go 1.25.0

require (
	github.com/sony/gobreaker/v2 v2.4.0
	github.com/steadfast-go/retry v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
