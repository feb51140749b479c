package engine

import "errors"

// Sentinel errors callers can test with errors.Is. ErrNoCUDA: --device cuda where no GPU can be used.
var (
	ErrNoCUDA = errors.New("no usable CUDA device")
)

// Sentinel errors of model loading (config.go, load.go, random.go).
var (
	// ErrInvalidModel: config.json or the weights are missing, malformed or do not fit together.
	ErrInvalidModel = errors.New("invalid model")
	// ErrModelNotFound: the --model spec names no directory, cached model or hub repository.
	ErrModelNotFound = errors.New("model not found")
	// ErrUnknownArch: random:NAME names an architecture rosetop does not know.
	ErrUnknownArch = errors.New("unknown architecture")
)
