// Command loadmodel replays the agent workload of docs/SCALING.md over 2, 8
// and 32 simulated modeld hosts, routed by the endpoint picker's scheduler
// with and without model affinity and at random, and prints the table:
//
//	cd scripts/gateway-test && go run ./cmd/loadmodel
package main

import (
	"context"
	"fmt"
	"os"

	gatewaytest "github.com/modeld/modeld/scripts/gateway-test"
)

func main() {
	if err := gatewaytest.LoadModel(context.Background(), os.Stdout, 2, 8, 32); err != nil {
		fmt.Fprintln(os.Stderr, "loadmodel:", err)
		os.Exit(1)
	}
}
