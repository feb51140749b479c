package engine

import "errors"

// Sentinel errors callers can test with errors.Is. ErrNoCUDA: --device cuda where no GPU can be used.
var (
	ErrNoCUDA = errors.New("no usable CUDA device")
)

// Sentinel errors of model loading (config.go, load.go, load_weights.go, random.go).
var (
	// ErrInvalidModel: config.json or the weights are missing, malformed or do not fit together.
	ErrInvalidModel = errors.New("invalid model")
	// ErrModelNotFound: the --model spec names no directory, cached model or hub repository.
	ErrModelNotFound = errors.New("model not found")
	// ErrNonFiniteWeights: a weight is NaN or infinite (always with ErrInvalidModel); the message
	// names the tensor.
	ErrNonFiniteWeights = errors.New("non-finite weights")
	// ErrModelTooLarge: the weights need more memory than the machine has.
	ErrModelTooLarge = errors.New("model too large for this machine")
	// ErrUnknownArch: random:NAME names an architecture rosetop does not know.
	ErrUnknownArch = errors.New("unknown architecture")
)
