package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/desk-runtime/desk/execution"
)

// executionOptions reads the lease timings of the execution service from
// the environment: DESK_OWNER_TTL (how long a desk process may miss
// heartbeats before a peer takes its executions over) and
// DESK_HEARTBEAT_TIMEOUT (how long before that it stops them itself).
// execution.Service.Open refuses timings without a safety margin.
func executionOptions() (execution.Options, error) {
	var o execution.Options
	for _, v := range []struct {
		d       *time.Duration
		env, eg string
	}{{&o.OwnerTTL, "DESK_OWNER_TTL", "15s"}, {&o.HeartbeatTimeout, "DESK_HEARTBEAT_TIMEOUT", "10s"}} {
		s := os.Getenv(v.env)
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("%s=%q must be a positive duration such as %s", v.env, s, v.eg)
		}
		*v.d = d
	}
	o.MaxExecutions = execution.DefaultMaxExecutions
	if s := os.Getenv("DESK_MAX_EXECUTIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return o, fmt.Errorf("DESK_MAX_EXECUTIONS=%q must be a positive integer such as %d", s, execution.DefaultMaxExecutions)
		}
		o.MaxExecutions = n
	}
	return o, nil
}
