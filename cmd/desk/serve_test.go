package main

import (
	"strings"
	"testing"
	"time"
)

func TestAgentOptionsFromEnv(t *testing.T) {
	t.Setenv("DESK_MAX_STEPS", "7")
	t.Setenv("DESK_SEARCH_URL", "http://127.0.0.1:8888")
	t.Setenv("DESK_INPUT_WAIT", "90s")
	o, err := agentOptions()
	if err != nil || o.MaxSteps != 7 || o.Search == nil || o.InputWait != 90*time.Second {
		t.Fatalf("agentOptions = %+v, %v", o, err)
	}
	for env, bad := range map[string]string{"DESK_MAX_STEPS": "0", "DESK_SEARCH_URL": "ftp://x", "DESK_INPUT_WAIT": "soon"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("DESK_MAX_STEPS", "")
			t.Setenv("DESK_SEARCH_URL", "")
			t.Setenv("DESK_INPUT_WAIT", "")
			t.Setenv(env, bad)
			if _, err := agentOptions(); err == nil || !strings.Contains(err.Error(), env) {
				t.Fatalf("%s=%s: err = %v, want one naming %s", env, bad, err, env)
			}
		})
	}
}
