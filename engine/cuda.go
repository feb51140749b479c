package engine

// The CUDA backend hooks. (Placeholder until the GPU work lands: it reports no CUDA backend.)

// probeCUDA reports whether a CUDA driver and device can be used, and if not, why.
func probeCUDA() (ok bool, why string) {
	return false, "this build has no CUDA backend yet"
}

// newCUDABackend builds the GPU backend for m; the KV layout is sized from free GPU memory.
func newCUDABackend(m *Model, opts Options, ledger *Ledger) (Backend, KVLayout, error) {
	return nil, KVLayout{}, errNoCUDA
}
