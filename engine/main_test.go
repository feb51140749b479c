package engine

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: load and fill workers, CPU pools.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
