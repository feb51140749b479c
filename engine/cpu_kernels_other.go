//go:build !amd64

package engine

// pickKernels returns the portable kernels (assembly exists for amd64 only).
func pickKernels() kernels { return goKernels() }
