module github.com/modeld/modeld/scripts/gateway-test

go 1.26.0

require sigs.k8s.io/gateway-api-inference-extension v1.5.0 // indirect
