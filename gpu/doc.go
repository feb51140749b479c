// Package gpu runs GPT-2 on an NVIDIA GPU through package cu (the CUDA driver, cuBLAS and
// cuBLASLt, opened with dlopen at run time: building needs no CUDA headers or libraries, and one
// binary runs on machines with and without a GPU). The API is flat and low level (configuration
// ints, weights as float32 slices, per-step metadata arrays) so that package engine can adapt
// its own types to it.
//
// A step is planned once (plan.go: which GEMM path, which sampler, what its graph moves on; the
// paths: cuBLAS, small_gemm in mma.go, wg_gemm in wg.go, with folded norms in fold.go), then
// built as a program, a straight list of typed launcher calls (forward.go: embed, the layers,
// the head; one file per kernel family: layernorm.go, attention.go, matmul.go, sampler.go),
// which runs eagerly or is captured into a CUDA graph (graphs.go). Steps the caller announces
// (Step.Repeats) are queued ahead on the device (ahead.go).
//
// Every CUDA call runs on one goroutine locked to its OS thread (cu.Worker), on one non-blocking
// stream of a CUDA context of the Runner's own (cu.Context says why not the primary one).
//
// It needs cgo (for dlopen); built with CGO_ENABLED=0 the package is empty and package engine
// reports that there is no CUDA backend in the binary.
package gpu
