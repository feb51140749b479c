// Package gpu runs GPT-2 on an NVIDIA GPU through the CUDA driver API, cuBLAS and cuBLASLt, all
// opened with dlopen at run time: building needs no CUDA headers or libraries, and one binary runs on machines
// with and without a GPU. The API is flat and low level (configuration ints, weights as float32
// slices, per-step metadata arrays) so that package engine can adapt its own types to it.
//
// Every CUDA call runs on one goroutine locked to its OS thread (see worker), on one non-blocking
// stream of a CUDA context of the Runner's own (runtime.go openRuntime says why not the primary one).
//
// It needs cgo (for dlopen); built with CGO_ENABLED=0 the package is empty and package engine
// reports that there is no CUDA backend in the binary.
package gpu
