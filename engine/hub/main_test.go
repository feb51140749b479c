package hub

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: stall watches, transfers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
