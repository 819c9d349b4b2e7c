module github.com/steadfast-go/retry

go 1.25

require (
	github.com/benbjohnson/clock v1.3.5
	go.uber.org/goleak v1.3.0
)

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
