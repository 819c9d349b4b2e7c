package main

import (
	"encoding/json"
	"os"

	"github.com/stretchr/testify/require"
)

// childEnv, when set, makes the test binary run the command with the
// JSON-encoded arguments it holds, instead of the tests.
const childEnv = "NOTIFY_TEST_CHILD_ARGS"

func childArgs() []string {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &args); err != nil {
		os.Stderr.WriteString("bad " + childEnv + ": " + err.Error() + "\n")
		os.Exit(2)
	}
	return args
}

var _ = require.NoError
