package testcluster

import "os"

// SessionsOn says the tests' Go clients should send their lease calls on
// session streams (LEASEHOLD_TEST_SESSION=on), so that the client and
// integration suites can be run once each way.
func SessionsOn() bool { return os.Getenv("LEASEHOLD_TEST_SESSION") == "on" }
