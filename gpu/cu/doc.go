// Package cu is rosetop's binding to the CUDA driver, cuBLAS and cuBLASLt, all opened with dlopen
// at run time (building needs no CUDA headers or libraries): a device context with one
// non-blocking stream, device and pinned memory, modules and kernel launches, CUDA graphs,
// events, GEMMs, and the OS-thread-locked worker every call runs on. It knows nothing of GPT-2:
// package gpu builds the model's steps from it.
//
// It needs cgo (for dlopen); built with CGO_ENABLED=0 the package is empty.
package cu
