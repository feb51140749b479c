//go:build cgo

package gpu

import "rosetop/gpu/cu"

// A step's work is built as a program: the list of calls it enqueues (kernel launches, cuBLAS
// GEMMs, the cuBLASLt fc GEMM), each from a typed launcher that takes the kernel's parameters
// (attention.go, layernorm.go, matmul.go, sampler.go, meta.go). forward builds a step's program
// from its plan; run enqueues it, eagerly or inside a graph capture. Building touches no device
// and allocates nothing once the program's slices have grown, so the same program can be run,
// captured, timed op by op or checked against the kernels' PTX signatures (ptx_test.go).

// opKind is what an op enqueues.
type opKind uint8

const (
	opLaunch opKind = iota // a kernel: cuLaunchKernel, or cuLaunchKernelEx (op.ex)
	opGEMM                 // cublasGemmEx: y(m, out) fp32 = x(m, in) w
	opSplitK               // cublasGemmStridedBatchedEx: y's splits partial sums of x w
	opLtFC                 // cuBLASLt: y(m, out) fp16 = GELU(x w + bias), the fc GEMM's plan
)

// op is one enqueued call.
type op struct {
	name   string // what it computes, e.g. "gemm qkv": the unit of the profile tests
	kind   opKind
	k      kernelID // opLaunch
	gx, gy int      // grid
	block  int      // threads
	shmem  int      // dynamic shared memory, bytes
	// ex: through cuLaunchKernelEx, with programmatic dependent launch (pdl: the kernel may start
	// while the previous one ends; it waits for it before reading its output) and in clusters of
	// (clusterX, clusterY, 1) blocks (0 counts as 1); else cuLaunchKernel.
	ex, pdl            bool
	clusterX, clusterY int
	a0, a1             int // its arguments: program.args[a0:a1]
	// GEMMs: y(m, out) = x(m, in) w.
	y, x, w, bias      cu.Ptr
	m, in, out, splits int
	fc                 *ltPlan // opLtFC
}

// program is one step's ops, in order, and their kernel arguments.
type program struct {
	ops  []op
	args []cu.Arg
	err  error // the first launcher given arguments out of its kernel's range; run returns it
}

func (p *program) reset() { p.ops, p.args, p.err = p.ops[:0], p.args[:0], nil }

// fail records a launcher's error: run enqueues nothing and returns it.
func (p *program) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// launch appends kernel k on a grid (gx, gy) of block threads with shmem bytes of dynamic shared
// memory, with programmatic dependent launch when pdl (cuLaunchKernelEx), else plainly.
func (p *program) launch(name string, k kernelID, gx, gy, block, shmem int, pdl bool, args ...cu.Arg) {
	p.add(op{name: name, kind: opLaunch, k: k, gx: gx, gy: gy, block: block, shmem: shmem, ex: pdl, pdl: pdl, clusterY: 1}, args)
}

// launchCluster appends kernel k through cuLaunchKernelEx in clusters of (cx, cy, 1) blocks,
// with programmatic dependent launch when pdl.
func (p *program) launchCluster(name string, k kernelID, gx, gy, block, shmem int, pdl bool, cx, cy int, args ...cu.Arg) {
	p.add(op{name: name, kind: opLaunch, k: k, gx: gx, gy: gy, block: block, shmem: shmem, ex: true, pdl: pdl, clusterX: cx, clusterY: cy}, args)
}

// add appends o with its kernel arguments.
func (p *program) add(o op, args []cu.Arg) {
	o.a0 = len(p.args)
	p.args = append(p.args, args...)
	o.a1 = len(p.args)
	p.ops = append(p.ops, o)
}

// run enqueues p's ops on the stream.
func (s *state) run(p *program) error {
	if p.err != nil {
		return p.err
	}
	for i := range p.ops {
		if err := s.enqueue(&p.ops[i], p.args); err != nil {
			return err
		}
	}
	return nil
}

// enqueue enqueues one op; args are its program's arguments.
func (s *state) enqueue(o *op, args []cu.Arg) error {
	ctx := s.ctx
	switch o.kind {
	case opGEMM:
		return ctx.GEMM(o.y, o.x, o.w, o.m, o.in, o.out, true, false)
	case opSplitK:
		return ctx.GEMMSplitK(o.y, o.x, o.w, o.m, o.in, o.out, o.splits)
	case opLtFC:
		return ctx.LtMatmul(s.lt.lib, o.fc.p, o.fc.algo, o.w, o.x, o.y, o.bias)
	}
	if o.ex {
		return ctx.LaunchEx(s.k[o.k], o.gx, o.gy, o.block, o.shmem, o.pdl, o.clusterX, o.clusterY, args[o.a0:o.a1])
	}
	return ctx.Launch(s.k[o.k], o.gx, o.gy, o.block, o.shmem, args[o.a0:o.a1])
}
