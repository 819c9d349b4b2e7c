module github.com/steadfast-go/retry/scripts/tools

go 1.25.0

require golang.org/x/mod v0.40.0

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
