//go:build !cgo

package engine

// Built without cgo (CGO_ENABLED=0, or a cross build without a C toolchain), the binary has no
// CUDA backend: package gpu needs cgo to dlopen the driver. --device auto uses the CPU and says why.

const noCgo = "this binary was built without cgo (CGO_ENABLED=0), so it has no CUDA backend"

func probeCUDA() (ok bool, why string) { return false, noCgo }

func newCUDABackend(m *Model, opts Options, ledger *Ledger) (Backend, KVLayout, error) {
	return nil, KVLayout{}, ErrNoCUDA
}
