module github.com/cuvmm/cuvmm

go 1.25.0

require (
	github.com/ebitengine/purego v0.11.3
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.67.5
	github.com/stretchr/testify v1.11.1
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/sys v0.47.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
