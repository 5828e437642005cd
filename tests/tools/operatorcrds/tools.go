//go:build tools

// Package operatorcrds pins what generates the Prometheus Operator's CRDs for the tests:
// controller-gen (sigs.k8s.io/controller-tools) and the Operator's API types module. The
// build (tests/tools/operatorcrds.sh) runs controller-gen on the types as the Operator's
// Makefile target generate-crds does.
package operatorcrds

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
