//go:build cgo

package cu

/*
#include <stdlib.h>
#include "api.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// ArgKind is the PTX type of a kernel parameter (.u64, .u32, .f32, or a tensor map's 128 bytes).
type ArgKind uint8

const (
	U64       ArgKind = iota // pointers, size_t, unsigned long long
	U32                      // int, unsigned
	F32                      // float
	TensorMap                // const __grid_constant__ CUtensorMap: one of the Context's (SetTensorMaps)
)

// MaxArgs is the most parameters a launch takes (the C argument block's slots).
const MaxArgs = 24

// Arg is one kernel parameter encoded in its 8-byte slot (4-byte parameters in the low half),
// with the PTX type it fills.
type Arg struct {
	bits uint64
	Kind ArgKind
}

// P is a pointer parameter.
func P(p Ptr) Arg { return Arg{uint64(p), U64} }

// I is an int parameter.
func I(v int) Arg { return Arg{uint64(uint32(int32(v))), U32} }

// F is a float parameter.
func F(v float32) Arg { return Arg{uint64(math.Float32bits(v)), F32} }

// U is a size_t or unsigned long long parameter.
func U(v uint64) Arg { return Arg{v, U64} }

// T is tensor map i of the Context's (SetTensorMaps), passed by value.
func T(i int) Arg { return Arg{uint64(i), TensorMap} }

// Kernel is one loaded function.
type Kernel struct {
	f    C.CUfunction
	name string
}

// Name is the kernel's name in its module.
func (k Kernel) Name() string { return k.name }

// Module is a loaded module; it is unloaded when its Context closes.
type Module struct{ m C.CUmodule }

// LoadModule loads an image: a fatbin, or NUL-free PTX text. what names it in an error.
func (c *Context) LoadModule(image, what string) (Module, error) {
	img := C.CString(image) // a NUL-terminated copy: PTX is read as a C string, a fatbin by its header
	defer C.free(unsafe.Pointer(img))
	var m C.CUmodule
	if err := c.a.check(C.w_moduleLoad(c.a.c, &m, unsafe.Pointer(img)), "cuModuleLoadData(%s)", what); err != nil {
		return Module{}, err
	}
	c.mods = append(c.mods, m)
	return Module{m}, nil
}

// Function looks up kernel name in m.
func (c *Context) Function(m Module, name string) (Kernel, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	k := Kernel{name: name}
	if err := c.a.check(C.w_moduleFunc(c.a.c, &k.f, m.m, cname), "cuModuleGetFunction(%s)", name); err != nil {
		return Kernel{}, err
	}
	return k, nil
}

// setArgs copies a launch's arguments into the context's C argument block.
func (c *Context) setArgs(k Kernel, args []Arg) error {
	if len(args) > MaxArgs {
		return fmt.Errorf("cu: %s: %d arguments, at most %d", k.name, len(args), MaxArgs)
	}
	used := C.uint(0)
	for i, v := range args {
		if v.Kind == TensorMap {
			if v.bits >= uint64(c.args.nmaps) {
				return fmt.Errorf("cu: %s: argument %d is tensor map %d of %d", k.name, i, v.bits, c.args.nmaps)
			}
			used |= 1 << i
		}
		c.args.vals[i] = C.ulonglong(v.bits)
	}
	c.args.maps_used = used
	return nil
}

// Launch runs k on the stream with grid (gx, gy), bx threads and shmem bytes of dynamic shared
// memory (cuLaunchKernel). The arguments are copied into the context's C argument block: no
// allocation.
func (c *Context) Launch(k Kernel, gx, gy, bx, shmem int, args []Arg) error {
	if err := c.setArgs(k, args); err != nil {
		return err
	}
	res := C.w_launch(c.a.c, k.f, C.uint(gx), C.uint(gy), C.uint(bx), C.uint(shmem), c.stream, c.args)
	if res != 0 {
		return c.a.check(res, "cuLaunchKernel(%s, grid %dx%d, block %d)", k.name, gx, gy, bx)
	}
	return nil
}

// LaunchEx is Launch through cuLaunchKernelEx (HasLaunchEx): with pdl, the kernel may start while
// the previous kernel on the stream is still running (programmatic dependent launch: such a
// kernel waits with griddepcontrol.wait before it reads anything an earlier kernel wrote); with
// clusterX * clusterY > 1, in thread block clusters of (clusterX, clusterY, 1).
func (c *Context) LaunchEx(k Kernel, gx, gy, bx, shmem int, pdl bool, clusterX, clusterY int, args []Arg) error {
	if err := c.setArgs(k, args); err != nil {
		return err
	}
	p := C.int(0)
	if pdl {
		p = 1
	}
	res := C.w_launchEx(c.a.c, k.f, C.uint(gx), C.uint(gy), C.uint(bx), C.uint(shmem), c.stream, c.args, p,
		C.uint(max(clusterX, 1)), C.uint(max(clusterY, 1)))
	if res != 0 {
		return c.a.check(res, "cuLaunchKernelEx(%s, grid %dx%d, block %d, cluster %dx%d, pdl %v)", k.name, gx, gy, bx, clusterX, clusterY, pdl)
	}
	return nil
}

// SetMaxShared lets k use up to bytes of dynamic shared memory
// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8).
func (c *Context) SetMaxShared(k Kernel, bytes int) error {
	return c.a.check(C.w_funcAttr(c.a.c, k.f, 8, C.int(bytes)), "cuFuncSetAttribute(%s, %d bytes of shared memory)", k.name, bytes)
}

// AllowBigClusters lets k run in clusters of more than 8 blocks
// (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14).
func (c *Context) AllowBigClusters(k Kernel) error {
	return c.a.check(C.w_funcAttr(c.a.c, k.f, 14, 1), "cuFuncSetAttribute(%s, non-portable cluster size)", k.name)
}

// Map2D is a row-major fp16 matrix of Rows x Cols at Base, for a tensor map that copies it in
// boxes of BoxCols x BoxRows with the 128-byte swizzle (BoxCols * 2 <= 128); rows past Rows land
// as zeros.
type Map2D struct {
	Base                         Ptr
	Cols, Rows, BoxCols, BoxRows int
}

// HasTensorMaps reports whether the driver encodes tensor maps (cuTensorMapEncodeTiled, CUDA 12+).
func (c *Context) HasTensorMaps() bool { return C.w_haveTensorMaps(c.a.c) != 0 }

// SetTensorMaps encodes the Context's tensor maps, replacing any before: T(i) is maps[i]. The
// maps live in C memory until the next call or Close; a launch or a captured graph takes a copy.
func (c *Context) SetTensorMaps(maps []Map2D) error {
	if !c.HasTensorMaps() {
		return fmt.Errorf("cu: the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or newer)")
	}
	for i, m := range maps {
		if m.Cols < 1 || m.Rows < 1 || m.BoxCols < 1 || m.BoxCols*2 > 128 || m.BoxRows < 1 || m.BoxRows > 256 {
			return fmt.Errorf("cu: tensor map %d: %d x %d in boxes of %d x %d, want boxes of at most 64 columns and 256 rows", i,
				m.Rows, m.Cols, m.BoxRows, m.BoxCols)
		}
	}
	if C.args_maps(c.args, C.int(len(maps))) == 0 {
		return fmt.Errorf("cu: out of host memory for %d tensor maps", len(maps))
	}
	for i, m := range maps {
		res := C.w_encodeMap(c.a.c, c.args, C.int(i), C.CUdeviceptr(m.Base), C.ulonglong(m.Cols), C.ulonglong(m.Rows),
			C.uint(m.BoxCols), C.uint(m.BoxRows))
		if err := c.a.check(res, "cuTensorMapEncodeTiled(map %d: %d x %d, boxes of %d x %d)", i, m.Rows, m.Cols, m.BoxRows, m.BoxCols); err != nil {
			return err
		}
	}
	return nil
}
