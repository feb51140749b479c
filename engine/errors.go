package engine

import "errors"

// Sentinel errors callers can test with errors.Is.
var (
	errNoCUDA = errors.New("no usable CUDA device")
)
