//go:build cgo

package cu

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "api.h"

*/
import "C"

import (
	"errors"
	"fmt"
)

// ErrUnavailable is matched (errors.Is) by every reason the GPU cannot be used at all: no
// driver, no device, an init failure, a device too old.
var ErrUnavailable = errors.New("CUDA unavailable")

// unavailable is a one-line reason that matches ErrUnavailable (and the CUDA *Error, if any).
type unavailable struct {
	msg string
	err error // the failed call, or nil
}

func (u *unavailable) Error() string   { return u.msg }
func (u *unavailable) Unwrap() []error { return []error{ErrUnavailable, u.err} }

func unavailableErr(err error, format string, args ...any) error {
	return &unavailable{msg: fmt.Sprintf(format, args...), err: err}
}

// Error is a failed CUDA driver or cuBLAS call.
type Error struct {
	Call string // e.g. "cuMemAlloc(512 MiB)"
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Code int
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code) }

// api is the loaded driver (and, for a Context, cuBLAS). Owned by the worker goroutine after open.
type api struct {
	c          *C.rt_api
	cublasName string // which libcublas soname was found, "" when not loaded
}

// openAPI dlopens the driver and, when withBLAS, cuBLAS.
func openAPI(withBLAS bool) (*api, error) {
	var buf [256]C.char
	wb := C.int(0)
	if withBLAS {
		wb = 1
	}
	c := C.rt_open(&buf[0], C.int(len(buf)), wb)
	if c == nil {
		return nil, unavailableErr(nil, "%s", C.GoString(&buf[0]))
	}
	return &api{c: c, cublasName: C.GoString(&c.cublas_name[0])}, nil
}

func (a *api) close() {
	if a.c != nil {
		C.rt_close(a.c)
		a.c = nil
	}
}

// check turns a driver result into an *Error naming the call.
func (a *api) check(r C.CUresult, call string, args ...any) error {
	if r == 0 {
		return nil
	}
	if len(args) > 0 {
		call = fmt.Sprintf(call, args...)
	}
	return &Error{Call: call, Name: C.GoString(C.w_errName(a.c, r)), Code: int(r)}
}

func (a *api) checkBLAS(s C.cublasStatus_t, call string) error {
	if s == 0 {
		return nil
	}
	return &Error{Call: call, Name: C.GoString(C.w_blasStatusName(a.c, s)), Code: int(s)}
}

// DeviceInfo describes device 0.
type DeviceInfo struct {
	Name           string
	Driver         int // e.g. 13000
	CC             int // compute capability, e.g. 90
	SMs            int // multiprocessors
	MaxSharedOptin int // the most dynamic shared memory a block may opt in to, bytes
	dev            C.CUdevice
}

// initDevice runs cuInit and describes device 0.
func (a *api) initDevice() (DeviceInfo, error) {
	var info DeviceInfo
	if err := a.check(C.w_cuInit(a.c), "cuInit"); err != nil {
		if err.(*Error).Code == 100 { // CUDA_ERROR_NO_DEVICE
			return info, unavailableErr(err, "the CUDA driver found no device (%v)", err)
		}
		return info, unavailableErr(err, "the CUDA driver failed to initialize (%v)", err)
	}
	var n C.int
	if err := a.check(C.w_deviceCount(a.c, &n), "cuDeviceGetCount"); err != nil {
		return info, unavailableErr(err, "cannot count CUDA devices (%v)", err)
	}
	if n < 1 {
		return info, unavailableErr(nil, "the CUDA driver found no device")
	}
	if err := a.check(C.w_deviceGet(a.c, &info.dev, 0), "cuDeviceGet(0)"); err != nil {
		return info, err
	}
	var name [128]C.char
	if err := a.check(C.w_deviceName(a.c, &name[0], C.int(len(name)), info.dev), "cuDeviceGetName"); err != nil {
		return info, err
	}
	info.Name = C.GoString(&name[0])
	var v, major, minor, sms, shm C.int
	_ = a.check(C.w_driverVersion(a.c, &v), "cuDriverGetVersion")
	// CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76, MULTIPROCESSOR_COUNT = 16,
	// MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97.
	for _, q := range []struct {
		dst  *C.int
		attr C.int
	}{{&major, 75}, {&minor, 76}, {&sms, 16}, {&shm, 97}} {
		if err := a.check(C.w_deviceAttr(a.c, q.dst, q.attr, info.dev), "cuDeviceGetAttribute(%d)", int(q.attr)); err != nil {
			return info, err
		}
	}
	info.Driver, info.CC, info.SMs, info.MaxSharedOptin = int(v), int(major*10+minor), int(sms), int(shm)
	return info, nil
}

// Probe loads only the driver (not cuBLAS), creates no context, and describes device 0, or says
// why there is none (an error matching ErrUnavailable).
func Probe() (DeviceInfo, error) {
	a, err := openAPI(false)
	if err != nil {
		return DeviceInfo{}, err
	}
	defer a.close()
	return a.initDevice()
}
