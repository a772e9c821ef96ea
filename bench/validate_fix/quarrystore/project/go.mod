module git.internal/storage/quarrystore

go 1.22

require (
	github.com/prometheus/client_golang v1.19.1
	golang.org/x/time v0.5.0
	gopkg.in/yaml.v3 v3.0.1
)
