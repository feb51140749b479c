package sched

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, for errors.Is.
var (
	ErrClosed     = errors.New("scheduler closed")           // Submit after Close
	ErrBadRequest = errors.New("invalid request")            // Submit's validation
	ErrBadConfig  = errors.New("invalid scheduler settings") // New's and SetConfig's validation
)

// String returns the policy's flag spelling.
func (p Policy) String() string {
	switch p {
	case DecodeFirst:
		return "decode-first"
	case PrefillFirst:
		return "prefill-first"
	case Mixed:
		return "mixed"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Policies lists the policies' flag spellings.
func Policies() []string { return []string{"decode-first", "prefill-first", "mixed"} }

// ParsePolicy reads a policy's flag spelling ("decode-first", "prefill-first" or "mixed").
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "decode-first":
		return DecodeFirst, nil
	case "prefill-first":
		return PrefillFirst, nil
	case "mixed":
		return Mixed, nil
	}
	return 0, fmt.Errorf("%w: --policy %q, want decode-first, prefill-first or mixed", ErrBadConfig, s)
}

// MaxBurstQuiet is the longest Config.BurstQuiet accepted.
const MaxBurstQuiet = time.Millisecond

// Validate checks c; batchLimit > 0 is the most sequences the backend takes in one step.
// Errors name the flag that sets the bad value.
func (c Config) Validate(batchLimit int) error {
	switch {
	case c.MaxBatch < 1:
		return fmt.Errorf("%w: --max-batch-size %d, want >= 1", ErrBadConfig, c.MaxBatch)
	case batchLimit > 0 && c.MaxBatch > batchLimit:
		return fmt.Errorf("%w: --max-batch-size %d exceeds the engine's batch limit %d", ErrBadConfig, c.MaxBatch, batchLimit)
	case c.PrefillMaxBatch < 1:
		return fmt.Errorf("%w: --prefill-max-batch-size %d, want >= 1", ErrBadConfig, c.PrefillMaxBatch)
	case c.PrefillMaxBatch > c.MaxBatch:
		return fmt.Errorf("%w: --prefill-max-batch-size %d exceeds --max-batch-size %d", ErrBadConfig, c.PrefillMaxBatch, c.MaxBatch)
	case c.PrefillMaxTokens < 0:
		return fmt.Errorf("%w: --prefill-max-tokens %d, want >= 0 (0: no limit)", ErrBadConfig, c.PrefillMaxTokens)
	case c.Policy != DecodeFirst && c.Policy != PrefillFirst && c.Policy != Mixed:
		return fmt.Errorf("%w: --policy %v, want decode-first, prefill-first or mixed", ErrBadConfig, c.Policy)
	case c.BurstQuiet < 0 || c.BurstQuiet > MaxBurstQuiet:
		return fmt.Errorf("%w: --burst-quiet-us %g, want 0 to %g", ErrBadConfig, float64(c.BurstQuiet)/1e3, float64(MaxBurstQuiet)/1e3)
	}
	return nil
}
